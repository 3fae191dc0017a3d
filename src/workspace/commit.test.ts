import assert from 'node:assert/strict';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  git,
  makeOrigin,
  makeTempDir,
  removeDir,
  testConfig,
  writeFiles,
} from '../../test/support/git.ts';
import { prepareCheckout } from './checkout.ts';
import { changedFiles, commitAll, diffAgainst } from './commit.ts';
import { GitError } from './errors.ts';

let root: string;
before(async () => {
  root = await makeTempDir('commit');
});
after(() => removeDir(root));

let counter = 0;
async function checkout() {
  const dir = join(root, `t${++counter}`);
  await mkdir(dir);
  const origin = await makeOrigin(dir, {
    'README.md': '# demo\n',
    'src/app.txt': 'hello\n',
    'src/old.txt': 'old\n',
    '.gitignore': 'build/\n',
  });
  const cfg = testConfig(join(dir, 'ws'));
  const co = await prepareCheckout(cfg, {
    projectId: 'p',
    jobId: 'j',
    repository: origin.url,
    ref: 'main',
    branch: 'errand/j',
  });
  return { cfg, co };
}

test('commitAll returns null and makes no commit when nothing changed', async () => {
  const { cfg, co } = await checkout();
  assert.equal(await commitAll(cfg, { dir: co.dir, message: 'nothing' }), null);
  assert.equal(git(co.dir, 'rev-parse', 'HEAD'), co.headCommit);
  // Only ignored files changed: still nothing to commit.
  await writeFiles(co.dir, { 'build/out.js': 'x' });
  assert.equal(await commitAll(cfg, { dir: co.dir, message: 'nothing' }), null);
  assert.ok(!cfg.spawns.some((s) => s.args.includes('commit')));
});

test('commitAll records additions, edits and deletions under the configured identity', async () => {
  const { cfg, co } = await checkout();
  await writeFiles(co.dir, {
    'src/app.txt': 'hello, world\n',
    'new/deep/file.txt': 'new\n',
    'build/ignored.txt': 'no\n',
  });
  await rm(join(co.dir, 'src/old.txt'));
  const message = 'Add greeting\n\n# This line starts with a hash and stays\n--not-an-option\n';
  const sha = await commitAll(cfg, { dir: co.dir, message });
  assert.match(sha ?? '', /^[0-9a-f]{40}$/);
  assert.equal(git(co.dir, 'rev-parse', 'HEAD'), sha);
  assert.equal(git(co.dir, 'rev-parse', 'HEAD^'), co.headCommit);
  assert.equal(git(co.dir, 'symbolic-ref', 'HEAD'), 'refs/heads/errand/j');
  assert.equal(
    git(co.dir, 'log', '-1', '--format=%an|%ae|%cn|%ce'),
    'Errand Bot|bot@errand.test|Errand Bot|bot@errand.test',
  );
  assert.equal(git(co.dir, 'log', '-1', '--format=%B'), message.trim());
  assert.equal(
    git(co.dir, 'diff-tree', '--no-commit-id', '--name-status', '-r', 'HEAD'),
    'A\tnew/deep/file.txt\nM\tsrc/app.txt\nD\tsrc/old.txt',
  );
  assert.equal(git(co.dir, 'status', '--porcelain'), '');
  const commitArgs = cfg.spawns.find((s) => s.args.includes('commit'))?.args ?? [];
  assert.ok(commitArgs.includes('--no-verify'));
  assert.ok(!commitArgs.some((a) => a.includes('Add greeting')), 'message belongs on stdin');
});

test('commitAll refuses an empty message and a broken identity', async () => {
  const { cfg, co } = await checkout();
  await writeFiles(co.dir, { 'x.txt': 'x' });
  await assert.rejects(commitAll(cfg, { dir: co.dir, message: '  \n' }), (err) => {
    return err instanceof GitError && err.code === 'invalid_input';
  });
  const bad = testConfig(cfg.rootDir, { identity: { name: 'Evil <x@y>', email: 'a@b' } });
  await assert.rejects(commitAll(bad, { dir: co.dir, message: 'm' }), /must not contain/);
  assert.equal(git(co.dir, 'rev-parse', 'HEAD'), co.headCommit);
});

test('changedFiles lists added, modified and deleted paths against HEAD', async () => {
  const { cfg, co } = await checkout();
  assert.deepEqual(await changedFiles(cfg, { dir: co.dir }), []);
  await writeFiles(co.dir, {
    'src/app.txt': 'changed\n',
    'a dir/with space.txt': 'x',
    'ünï/cødé.txt': 'x',
    'build/ignored.txt': 'x',
    'staged.txt': 'x',
  });
  git(co.dir, 'add', 'staged.txt');
  await writeFiles(co.dir, { 'gone-after-staging.txt': 'x' });
  git(co.dir, 'add', 'gone-after-staging.txt');
  await rm(join(co.dir, 'gone-after-staging.txt'));
  await rm(join(co.dir, 'src/old.txt'));
  await writeFile(join(co.dir, 'README.md'), '# demo\n'); // same content: not a change
  const files = await changedFiles(cfg, { dir: co.dir });
  files.sort((a, b) => a.path.localeCompare(b.path));
  assert.deepEqual(files, [
    { path: 'a dir/with space.txt', change: 'added' },
    { path: 'src/app.txt', change: 'modified' },
    { path: 'src/old.txt', change: 'deleted' },
    { path: 'staged.txt', change: 'added' },
    { path: 'ünï/cødé.txt', change: 'added' },
  ]);
});

test('diffAgainst shows every commit of the branch since the base, and can be cut short', async () => {
  const { cfg, co } = await checkout();
  await writeFiles(co.dir, { 'src/app.txt': 'hello, world\n' });
  await commitAll(cfg, { dir: co.dir, message: 'one' });
  await writeFiles(co.dir, { 'second.txt': 'two\n' });
  await commitAll(cfg, { dir: co.dir, message: 'two' });
  await writeFiles(co.dir, { 'uncommitted.txt': 'not in the diff\n' });

  const { diff, truncated } = await diffAgainst(cfg, { dir: co.dir, base: co.baseCommit });
  assert.equal(truncated, false);
  assert.match(diff, /^diff --git a\/second\.txt b\/second\.txt$/m);
  assert.match(diff, /^-hello$/m);
  assert.match(diff, /^\+hello, world$/m);
  assert.doesNotMatch(diff, /uncommitted/);

  const cut = await diffAgainst(cfg, { dir: co.dir, base: co.baseCommit, maxBytes: 40 });
  assert.equal(cut.truncated, true);
  assert.equal(cut.diff, diff.slice(0, 40));

  await assert.rejects(diffAgainst(cfg, { dir: co.dir, base: '--output=/tmp/x' }), GitError);
  await assert.rejects(diffAgainst(cfg, { dir: co.dir, base: 'f'.repeat(40) }), GitError);
});
