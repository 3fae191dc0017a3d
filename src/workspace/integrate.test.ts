import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { git, makeOrigin, makeTempDir, removeDir, testConfig } from '../../test/support/git.ts';
import { prepareCheckout } from './checkout.ts';
import { concludeMerge, integrateBase, stillConflicted } from './integrate.ts';
import { pushBranch } from './push.ts';

let root: string;
before(async () => {
  root = await makeTempDir('integrate');
});
after(() => removeDir(root));

let counter = 0;
/**
 * A job's branch with one commit of its own on `src/app.txt`, and the base moved since by
 * someone else with `baseChange`; the checkout of a next turn, which sees the new base.
 */
async function moved(baseChange: Record<string, string>) {
  const dir = join(root, `t${++counter}`);
  await mkdir(dir);
  const origin = await makeOrigin(dir, { 'src/app.txt': 'one\ntwo\nthree\n', 'README.md': '#\n' });
  const cfg = testConfig(join(dir, 'ws'));
  const input = {
    projectId: 'p',
    jobId: 'j',
    repository: origin.url,
    ref: 'main',
    branch: 'errand/j',
  };
  const first = await prepareCheckout(cfg, input);
  await writeFile(join(first.dir, 'src/app.txt'), 'one\nTWO by the job\nthree\n');
  git(first.dir, 'commit', '--quiet', '-am', 'the job');
  await pushBranch(cfg, { dir: first.dir, repository: origin.url, branch: 'errand/j' });
  await origin.commit(baseChange, 'the base moved');
  const co = await prepareCheckout(cfg, input);
  return { cfg, co, origin };
}

const message = 'Merge main into errand/j\n\nErrand-Turn: j/2\n';

test('a base that touched other files is merged in one commit with both parents', async () => {
  const { cfg, co, origin } = await moved({ 'docs/new.md': 'new\n' });
  const result = await integrateBase(cfg, {
    dir: co.dir,
    base: co.baseCommit,
    baseName: 'main',
    strategy: 'merge',
    message,
  });
  assert.equal(result.outcome, 'merged');
  assert.equal(result.head, git(co.dir, 'rev-parse', 'HEAD'));
  assert.equal(git(co.dir, 'rev-parse', 'HEAD^1'), co.headCommit);
  assert.equal(git(co.dir, 'rev-parse', 'HEAD^2'), origin.head('main'));
  assert.equal(git(co.dir, 'log', '-1', '--format=%B'), message.trim());
  assert.equal(git(co.dir, 'log', '-1', '--format=%an <%ae>'), 'Errand Bot <bot@errand.test>');
  // Asked again, the branch has the base: nothing to do.
  const again = await integrateBase(cfg, {
    dir: co.dir,
    base: co.baseCommit,
    baseName: 'main',
    strategy: 'merge',
    message,
  });
  assert.equal(again.outcome, 'up-to-date');
});

test('a conflict is left in the tree with its hunks, and concluded once resolved', async () => {
  const { cfg, co } = await moved({ 'src/app.txt': 'one\nTWO by a person\nthree\n' });
  const result = await integrateBase(cfg, {
    dir: co.dir,
    base: co.baseCommit,
    baseName: 'main',
    strategy: 'merge',
    message,
  });
  assert.equal(result.outcome, 'conflicted');
  assert.deepEqual(result.paths, ['src/app.txt']);
  assert.match(result.hunks, /<<<<<<< HEAD/);
  assert.match(result.hunks, /TWO by a person/);
  assert.deepEqual(await stillConflicted(co.dir, result.paths), ['src/app.txt']);
  await writeFile(join(co.dir, 'src/app.txt'), 'one\nTWO by both\nthree\n');
  assert.deepEqual(await stillConflicted(co.dir, result.paths), []);
  const sha = await concludeMerge(cfg, { dir: co.dir, message });
  assert.equal(git(co.dir, 'rev-parse', `${sha}^2`), co.baseCommit);
  assert.equal(await readFile(join(co.dir, 'src/app.txt'), 'utf8'), 'one\nTWO by both\nthree\n');
});

test('a clean rebase replaces the remote branch only while it is where the turn found it', async () => {
  const { cfg, co, origin } = await moved({ 'docs/new.md': 'new\n' });
  const result = await integrateBase(cfg, {
    dir: co.dir,
    base: co.baseCommit,
    baseName: 'main',
    strategy: 'rebase',
    message,
  });
  assert.equal(result.outcome, 'rebased');
  assert.equal(git(co.dir, 'rev-parse', 'HEAD^'), origin.head('main'));
  const push = {
    dir: co.dir,
    repository: origin.url,
    branch: 'errand/j',
  };
  // Someone pushed meanwhile: the lease refuses, nothing is overwritten.
  const theirs = await origin.commit({ 'other.txt': 'x\n' }, 'a person', 'errand/j');
  await assert.rejects(pushBranch(cfg, { ...push, replaces: co.headCommit }));
  assert.equal(origin.head('errand/j'), theirs);
  // Where the turn found it, the rebased branch replaces it.
  git(origin.bare, 'update-ref', 'refs/heads/errand/j', co.headCommit);
  await pushBranch(cfg, { ...push, replaces: co.headCommit });
  assert.equal(origin.head('errand/j'), result.head);
});

test('a rebase that stops on a conflict is undone and the base merged instead', async () => {
  const { cfg, co } = await moved({ 'src/app.txt': 'one\nTWO by a person\nthree\n' });
  const result = await integrateBase(cfg, {
    dir: co.dir,
    base: co.baseCommit,
    baseName: 'main',
    strategy: 'rebase',
    message,
  });
  assert.equal(result.outcome, 'conflicted');
  assert.match(result.note ?? '', /rebase onto main stopped on a conflict/);
  assert.equal(git(co.dir, 'rev-parse', 'HEAD'), co.headCommit);
  assert.equal(git(co.dir, 'rev-parse', 'MERGE_HEAD'), co.baseCommit);
});

test('a conflicted file the agent made a link out of the tree is not read', async () => {
  const { cfg, co } = await moved({ 'src/app.txt': 'one\nTWO by a person\nthree\n' });
  const result = await integrateBase(cfg, {
    dir: co.dir,
    base: co.baseCommit,
    baseName: 'main',
    strategy: 'merge',
    message,
  });
  assert.deepEqual(result.paths, ['src/app.txt']);
  // A file outside with a marker in it: through the link, it would read as unresolved.
  const outside = join(root, `outside-${counter}.txt`);
  await writeFile(outside, '<<<<<<< HEAD\nsecret\n');
  await rm(join(co.dir, 'src/app.txt'));
  await symlink(outside, join(co.dir, 'src/app.txt'));
  assert.deepEqual(await stillConflicted(co.dir, result.paths), []);
});

test('a conflicted file the agent replaced with a FIFO is not waited on', async () => {
  const { cfg, co } = await moved({ 'src/app.txt': 'one\nTWO by a person\nthree\n' });
  const result = await integrateBase(cfg, {
    dir: co.dir,
    base: co.baseCommit,
    baseName: 'main',
    strategy: 'merge',
    message,
  });
  await rm(join(co.dir, 'src/app.txt'));
  execFileSync('mkfifo', [join(co.dir, 'src/app.txt')]);
  // A blocking open would never return: no writer ever comes.
  assert.deepEqual(await stillConflicted(co.dir, result.paths), []);
});
