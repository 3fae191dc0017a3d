// Security: every tool, called the way the model calls it, against every way out of the
// checkout we know of. Each attempt must come back as an error result reading "Error: …", and
// the folder outside the checkout and .git/ must be byte for byte as they were.

import assert from 'node:assert/strict';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { test } from 'node:test';
import { createRepoTools, type ToolResult } from './index.ts';
import { gitConfigText, makeRepo, sentinelText, snapshot, type TestRepo } from './testing.ts';

async function hostileRepo(t: Parameters<typeof makeRepo>[0]): Promise<TestRepo> {
  const repo = await makeRepo(t, { 'src/a.ts': 'export const a = 1;\n' });
  await fs.symlink(repo.sentinel, path.join(repo.root, 'leak.txt'));
  await fs.symlink('../outside/secret.txt', path.join(repo.root, 'leak-relative.txt'));
  await fs.symlink(repo.outside, path.join(repo.root, 'ext'));
  await fs.symlink(path.join(repo.outside, 'planted.txt'), path.join(repo.root, 'dangling.txt'));
  await fs.symlink('.git', path.join(repo.root, 'meta'));
  return repo;
}

function escapingPaths(repo: TestRepo): string[] {
  return [
    '../outside/secret.txt',
    'src/../../outside/secret.txt',
    '/etc/passwd',
    repo.sentinel,
    `/${path.relative('/', repo.sentinel)}`,
    '..\\outside\\secret.txt',
    'leak.txt',
    'leak-relative.txt',
    'ext/secret.txt',
    'ext/planted.txt',
    'dangling.txt',
    '.git/config',
    './.git/config',
    '.GIT/config',
    '.git/hooks/pre-commit',
    'meta/config',
    'src/a.ts\0../../outside/secret.txt',
  ];
}

// Tools return a structured result since issue 9; `call` gives the text the model reads and
// checks that the result's ok flag agrees with it.
async function call(
  tools: ReturnType<typeof createRepoTools>,
  name: string,
  input: Record<string, unknown>,
): Promise<string> {
  const execute = tools[name]?.execute;
  assert.ok(execute, `tool ${name} has no execute`);
  const out = (await execute(input, {
    toolCallId: 'call-1',
    messages: [],
    context: {},
  })) as ToolResult;
  assert.equal(typeof out.text, 'string');
  assert.equal(out.ok, !out.text.startsWith('Error: '), `${name}: ${out.text}`);
  return out.text;
}

function assertRefused(repo: TestRepo, label: string, out: string): void {
  assert.match(out, /^Error: /, `${label} should be refused, got: ${out}`);
  assert.ok(!out.includes('SENTINEL'), `${label} leaked the sentinel: ${out}`);
  assert.ok(!out.includes('repositoryformatversion'), `${label} leaked .git/config: ${out}`);
  // Quoting back an absolute path the model itself sent is not a leak.
  if (!label.includes(repo.base)) {
    assert.ok(!out.includes(repo.base), `${label} leaked a host path: ${out}`);
  }
}

test('no tool reads, writes, moves or deletes anything outside the checkout or in .git', async (t) => {
  const repo = await hostileRepo(t);
  const tools = createRepoTools(repo.run);
  const outsideBefore = await snapshot(repo.outside);
  const gitBefore = await snapshot(path.join(repo.root, '.git'));

  for (const p of escapingPaths(repo)) {
    const label = JSON.stringify(p);
    assertRefused(repo, `read_file ${label}`, await call(tools, 'read_file', { path: p }));
    assertRefused(
      repo,
      `write_file ${label}`,
      await call(tools, 'write_file', { path: p, content: 'PWNED' }),
    );
    assertRefused(
      repo,
      `edit_file ${label}`,
      await call(tools, 'edit_file', { path: p, old: 'SENTINEL', new: 'PWNED' }),
    );
    assertRefused(repo, `delete_file ${label}`, await call(tools, 'delete_file', { path: p }));
    assertRefused(
      repo,
      `move_file from ${label}`,
      await call(tools, 'move_file', { from: p, to: 'stolen.txt', overwrite: true }),
    );
    assertRefused(
      repo,
      `move_file to ${label}`,
      await call(tools, 'move_file', { from: 'src/a.ts', to: p, overwrite: true }),
    );
  }
  // Writes into new files under escaping folders, which exist nowhere yet.
  for (const p of ['ext/new/file.txt', '../outside/new.txt', '.git/info/attributes', 'meta/x']) {
    assertRefused(
      repo,
      `write_file ${p}`,
      await call(tools, 'write_file', { path: p, content: 'x' }),
    );
  }

  assert.deepEqual(await snapshot(repo.outside), outsideBefore);
  assert.deepEqual(await snapshot(path.join(repo.root, '.git')), gitBefore);
  assert.equal(await fs.readFile(repo.sentinel, 'utf8'), sentinelText);
  assert.equal(await fs.readFile(path.join(repo.root, '.git', 'config'), 'utf8'), gitConfigText);
  assert.equal(
    await fs.readFile(path.join(repo.root, 'src/a.ts'), 'utf8'),
    'export const a = 1;\n',
  );
  await assert.rejects(fs.lstat(path.join(repo.root, 'stolen.txt')), { code: 'ENOENT' });
  await assert.rejects(fs.lstat(path.join(repo.outside, 'planted.txt')), { code: 'ENOENT' });
  assert.deepEqual(repo.changed, []);
});

test('list_files and search never show what is outside the checkout or in .git', async (t) => {
  const repo = await hostileRepo(t);
  await fs.appendFile(path.join(repo.root, '.git', 'config'), '# SENTINEL in git config\n');
  const tools = createRepoTools(repo.run);

  const listing = await call(tools, 'list_files', {});
  assert.deepEqual(listing.split('\n'), [
    'dangling.txt (symlink)',
    'ext (symlink)',
    'leak-relative.txt (symlink)',
    'leak.txt (symlink)',
    'meta (symlink)',
    'src/a.ts',
  ]);
  for (const pattern of [
    '../outside/**',
    'ext/**',
    '.git/**',
    'meta/**',
    '**/secret.txt',
    '**/config',
  ]) {
    assert.match(await call(tools, 'list_files', { pattern }), /^No files match/, pattern);
  }

  for (const glob of [undefined, 'ext/**', '../**', '.git/**', 'meta/**', 'leak.txt']) {
    const out = await call(
      tools,
      'search',
      glob === undefined ? { pattern: 'SENTINEL' } : { pattern: 'SENTINEL', glob },
    );
    assert.match(out, /^No matches/, String(glob));
  }
  assert.match(await call(tools, 'search', { pattern: 'repositoryformatversion' }), /^No matches/);
});

test('error results never carry host paths, even for plain filesystem errors', async (t) => {
  const repo = await hostileRepo(t);
  const tools = createRepoTools(repo.run);
  const results = {
    'read missing': await call(tools, 'read_file', { path: 'missing/file.ts' }),
    'write under a file': await call(tools, 'write_file', { path: 'src/a.ts/child', content: 'x' }),
    'delete a folder': await call(tools, 'delete_file', { path: 'src' }),
    'edit missing': await call(tools, 'edit_file', { path: 'nope.ts', old: 'a', new: 'b' }),
    'move missing': await call(tools, 'move_file', { from: 'nope.ts', to: 'b.ts' }),
  };
  for (const [label, out] of Object.entries(results)) assertRefused(repo, label, out);
});
