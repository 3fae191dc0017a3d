// The guard that keeps Errand on pg-boss's public API: a module of the service or a benchmark
// that queries pg-boss's schema (`pgboss.job`, `pgboss.job_now()`…) fails this test. pg-boss
// changes its tables between versions; its methods are what it promises to keep.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

/** A name in pg-boss's schema, or one of its SQL functions called without the schema. */
const INTERNALS: readonly RegExp[] = [/\bpgboss\s*\.\s*"?\w/i, /\bjob_now\s*\(/i];

/** `file:line: text` of every line in `root`'s modules that names pg-boss's internals. */
async function internalsUsed(root: string): Promise<string[]> {
  const found: string[] = [];
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  for (const entry of entries) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    // Tests may look at the queue's rows to check what the service did; they are not modules
    // of the service.
    if (entry.name.endsWith('.test.ts')) continue;
    const file = path.relative(root, path.join(entry.parentPath, entry.name));
    const lines = (await readFile(path.join(root, file), 'utf8')).split('\n');
    lines.forEach((line, i) => {
      if (INTERNALS.some((pattern) => pattern.test(line)))
        found.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  return found;
}

describe("pg-boss's public API", () => {
  test('no module of the service or of the benchmarks queries its tables or functions', async () => {
    const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
    assert.deepEqual(await internalsUsed(path.join(repo, 'src')), []);
    assert.deepEqual(await internalsUsed(path.join(repo, 'bench')), []);
  });

  test('the guard finds a query of the schema or of job_now(), and only in modules', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'errand-pgboss-'));
    try {
      await mkdir(path.join(root, 'queue'));
      const queries = [
        'sql`SELECT id FROM pgboss.job WHERE id = 1`',
        'sql`UPDATE PgBoss."job" SET state = 1`',
        "AND heartbeat_on < job_now() - interval '1 second'",
      ];
      const harmless = [
        "import { PgBoss } from 'pg-boss';",
        'await this.#boss.findJobs(TURN_QUEUE, { id });',
        '// pg-boss fails the entry in its monitoring pass',
      ];
      await writeFile(path.join(root, 'queue', 'reaper.ts'), [...queries, ...harmless].join('\n'));
      await writeFile(path.join(root, 'queue', 'reaper.test.ts'), queries.join('\n'));
      assert.deepEqual(
        await internalsUsed(root),
        queries.map((q, i) => `${path.join('queue', 'reaper.ts')}:${i + 1}: ${q}`),
      );
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
