// The guard that keeps src/jobs/ the only writer of the jobs, turns and events tables: a module
// elsewhere that writes them fails this test (reads are anyone's).
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

// --- Only src/jobs/ writes jobs, turns and events -------------------------------------------

const OWNED = '(?:jobs|turns|events)';
const WRITES: readonly RegExp[] = [
  // Kysely, with or without an alias: insertInto('jobs'), updateTable('turns as t'), …
  new RegExp(
    String.raw`\b(?:insertInto|updateTable|deleteFrom|replaceInto|mergeInto)\(\s*['"\x60]${OWNED}(?:\s+as\s+\w+)?['"\x60]`,
  ),
  // Raw SQL, in upper case as Errand writes it (lower case would match English prose).
  new RegExp(
    String.raw`\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(?:ONLY\s+)?(?:public\.)?"?${OWNED}"?\b`,
  ),
];

/** `file:line: text` of every write to the lifecycle's tables in `root`, outside `jobs/`. */
async function writesOutsideJobs(root: string): Promise<string[]> {
  const found: string[] = [];
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  for (const entry of entries) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    // Tests set up states with their own writes; they are not modules of the service.
    if (entry.name.endsWith('.test.ts')) continue;
    const file = path.relative(root, path.join(entry.parentPath, entry.name));
    if (file.split(path.sep)[0] === 'jobs') continue;
    const lines = (await readFile(path.join(root, file), 'utf8')).split('\n');
    lines.forEach((line, i) => {
      if (WRITES.some((pattern) => pattern.test(line)))
        found.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  return found;
}

describe('the owner of jobs, turns and events', () => {
  test('no module outside src/jobs/ writes them', async () => {
    const src = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
    assert.deepEqual(await writesOutsideJobs(src), []);
  });

  test('the check finds every kind of write, and leaves reads, other tables and src/jobs/ alone', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'errand-owner-'));
    try {
      await mkdir(path.join(root, 'queue'));
      await mkdir(path.join(root, 'jobs'));
      const writes = [
        "await trx.insertInto('events').values(row).execute();",
        "db.updateTable('jobs').set({ status: 'failed' })",
        'db.deleteFrom("turns").where(x)',
        "db.updateTable('turns as t').set(x)",
        "sql`UPDATE turns SET state = 'running'`",
        'sql`INSERT INTO events (job_id) VALUES (1)`',
        'sql`DELETE FROM public.jobs WHERE id = 1`',
      ];
      const harmless = [
        "db.selectFrom('jobs').selectAll()",
        "db.updateTable('projects').set(x)",
        "sql`UPDATE pgboss.job SET state = 'failed'`",
        '// the worker will update jobs through lifecycle.ts',
      ];
      await writeFile(path.join(root, 'queue', 'writer.ts'), [...writes, ...harmless].join('\n'));
      await writeFile(path.join(root, 'queue', 'writer.test.ts'), writes.join('\n'));
      await writeFile(path.join(root, 'jobs', 'owner.ts'), writes.join('\n'));
      const found = await writesOutsideJobs(root);
      assert.deepEqual(
        found,
        writes.map((w, i) => `${path.join('queue', 'writer.ts')}:${i + 1}: ${w}`),
      );
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
