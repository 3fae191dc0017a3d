import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import {
  git,
  makeOrigin,
  makeTempDir,
  type Origin,
  removeDir,
  testConfig,
  writeFiles,
} from '../../test/support/git.ts';
import { prepareCheckout } from './checkout.ts';
import { commitAll } from './commit.ts';
import { removeCheckout } from './discard.ts';
import { GitError } from './errors.ts';
import { jobDir, mirrorDir } from './layout.ts';
import { localLockQueue, withLocalLock } from './lock.ts';
import { pushBranch } from './push.ts';
import type { PrepareInput, WorkspaceConfig } from './types.ts';

const run = promisify(execFile);

let root: string;
before(async () => {
  root = await makeTempDir('checkout');
});
after(() => removeDir(root));

let counter = 0;
/** A fresh origin and workspace root per test, so tests never share state. */
async function setup(files?: Record<string, string>) {
  const dir = join(root, `t${++counter}`);
  await mkdir(dir);
  const origin = await makeOrigin(dir, files);
  const cfg = testConfig(join(dir, 'ws'));
  return { dir, origin, cfg };
}

function input(origin: Origin, jobId = 'job1', extra: Partial<PrepareInput> = {}): PrepareInput {
  return {
    projectId: 'proj',
    jobId,
    repository: origin.url,
    ref: 'main',
    branch: `errand/${jobId}`,
    ...extra,
  };
}

async function turn(
  cfg: WorkspaceConfig,
  origin: Origin,
  dir: string,
  files: Record<string, string>,
) {
  await writeFiles(dir, files);
  const sha = await commitAll(cfg, { dir, message: 'agent turn' });
  assert.ok(sha);
  await pushBranch(cfg, { dir, repository: origin.url, branch: 'errand/job1' });
  return sha;
}

const exists = async (path: string) => (await stat(path).catch(() => null)) !== null;

describe('first turn', () => {
  test('clones the job from the mirror onto a new work branch at the source ref', async () => {
    const { origin, cfg } = await setup();
    const main = origin.head('main');
    const co = await prepareCheckout(cfg, input(origin));
    assert.deepEqual(co, {
      dir: jobDir(cfg, 'job1'),
      baseCommit: main,
      headCommit: main,
      branchExisted: false,
      discardedHead: null,
    });
    assert.equal(co.dir, join(cfg.rootDir, 'jobs', 'job1'));
    assert.equal(git(co.dir, 'symbolic-ref', 'HEAD'), 'refs/heads/errand/job1');
    assert.equal(await readFile(join(co.dir, 'src/app.txt'), 'utf8'), 'hello\n');
    assert.equal(git(co.dir, 'status', '--porcelain'), '');
    // The mirror is bare, holds every branch and tag, and lends its objects (no copy).
    const mirror = mirrorDir(cfg, 'proj');
    assert.equal(mirror, join(cfg.rootDir, 'mirrors', 'proj.git'));
    assert.equal(git(mirror, 'rev-parse', '--is-bare-repository'), 'true');
    assert.equal(
      (await readFile(join(co.dir, '.git/objects/info/alternates'), 'utf8')).trim(),
      join(mirror, 'objects'),
    );
    // No staging clone is left behind.
    assert.deepEqual(await readdir(join(cfg.rootDir, 'jobs')), ['job1']);
  });

  test('starts from a tag, a full ref, a commit id, or a commit only a non-branch ref reaches', async () => {
    const { origin, cfg } = await setup();
    const first = origin.head('main') ?? '';
    git(origin.work, 'tag', '-a', '-m', 'release', 'v1.0');
    git(origin.work, 'push', '--quiet', origin.bare, 'v1.0');
    const feature = await origin.commit({ 'feature.txt': 'f\n' }, 'feature', 'feature/x');
    const hidden = await origin.commit({ 'pr.txt': 'pr\n' }, 'pull request', 'tmp-pr');
    git(origin.bare, 'update-ref', 'refs/pull/7/head', hidden);
    git(origin.bare, 'update-ref', '-d', 'refs/heads/tmp-pr');

    const cases: Array<readonly [string, string]> = [
      ['v1.0', first],
      ['refs/tags/v1.0', first],
      ['feature/x', feature],
      ['refs/heads/feature/x', feature],
      [first, first],
      [feature.slice(0, 10), feature],
      [hidden, hidden],
    ];
    let n = 0;
    for (const [ref, expected] of cases) {
      const co = await prepareCheckout(cfg, input(origin, `j${++n}`, { ref }));
      assert.equal(co.baseCommit, expected, ref);
      assert.equal(co.headCommit, expected, ref);
    }
  });

  test('a missing ref is a clear, permanent error naming the repository', async () => {
    const { origin, cfg } = await setup();
    for (const ref of ['nope', 'b'.repeat(40)]) {
      await assert.rejects(prepareCheckout(cfg, input(origin, 'job1', { ref })), (err) => {
        assert.ok(err instanceof GitError);
        assert.equal(err.code, 'ref_not_found');
        assert.equal(err.transient, false);
        assert.equal(err.message, `ref "${ref}" was not found in ${origin.url}`);
        return true;
      });
    }
  });

  test('a missing repository is a permanent not_found error', async () => {
    const { dir, cfg } = await setup();
    const missing = `file://${join(dir, 'nowhere.git')}`;
    await assert.rejects(
      prepareCheckout(cfg, { ...input({ url: missing } as Origin), repository: missing }),
      (err) => {
        assert.ok(err instanceof GitError);
        assert.equal(err.code, 'not_found');
        assert.equal(err.transient, false);
        assert.match(
          err.message,
          new RegExp(`^fetch from ${missing} failed: repository not found`),
        );
        return true;
      },
    );
  });

  test('invalid ids, URLs and names are refused before git touches anything', async () => {
    const { origin, cfg } = await setup();
    const refusals: Array<readonly [Partial<PrepareInput>, RegExp]> = [
      [{ jobId: '../escape' }, /jobId/],
      [{ projectId: '../../etc' }, /projectId/],
      [{ repository: 'ext::sh -c id' }, /whitespace|remote helper/],
      [{ repository: '--upload-pack=id' }, /must not start with "-"/],
      [{ branch: '-b' }, /must not start with "-"/],
      [{ ref: '--orphan' }, /must not start with "-"/],
      [{ auth: { urlPrefix: 'https://h/', header: 'X: a\nY: b' } }, /one "Name: value" line/],
    ];
    for (const [change, pattern] of refusals) {
      await assert.rejects(prepareCheckout(cfg, input(origin, 'job1', change)), (err) => {
        assert.ok(err instanceof GitError && err.code === 'invalid_input', String(err));
        assert.match(err.message, pattern);
        return true;
      });
    }
    assert.ok(!cfg.spawns.some((s) => s.args.includes('fetch') || s.args.includes('clone')));
  });
});

describe('follow-up turns', () => {
  test('reuse the clone and continue from the pushed branch', async () => {
    const { origin, cfg } = await setup();
    const first = await prepareCheckout(cfg, input(origin));
    await writeFile(join(first.dir, '.git', 'reuse-marker'), 'x');
    const pushed = await turn(cfg, origin, first.dir, { 'a.txt': 'turn 1\n' });
    assert.equal(origin.head('errand/job1'), pushed);

    const second = await prepareCheckout(cfg, input(origin));
    assert.equal(second.dir, first.dir);
    assert.ok(await exists(join(second.dir, '.git', 'reuse-marker')), 'clone was recreated');
    assert.equal(second.headCommit, pushed);
    assert.equal(second.baseCommit, first.baseCommit);
    assert.equal(second.branchExisted, true);
    assert.equal(second.discardedHead, null);
    assert.equal(await readFile(join(second.dir, 'a.txt'), 'utf8'), 'turn 1\n');
  });

  test('follow the remote branch when someone else pushed to it, and refresh the base', async () => {
    const { origin, cfg } = await setup();
    const first = await prepareCheckout(cfg, input(origin));
    await turn(cfg, origin, first.dir, { 'a.txt': 'turn 1\n' });
    const theirs = await origin.commit({ 'b.txt': 'by a person\n' }, 'review fix', 'errand/job1');
    const newMain = await origin.commit({ 'main.txt': 'new\n' }, 'main moved', 'main');

    const next = await prepareCheckout(cfg, input(origin));
    assert.equal(next.headCommit, theirs);
    assert.equal(next.baseCommit, newMain);
    assert.equal(next.discardedHead, null);
    assert.equal(await readFile(join(next.dir, 'b.txt'), 'utf8'), 'by a person\n');
  });

  test('continue on another machine: no local clone, branch fetched from the remote', async () => {
    const { dir, origin, cfg } = await setup();
    const first = await prepareCheckout(cfg, input(origin));
    const pushed = await turn(cfg, origin, first.dir, { 'a.txt': 'turn 1\n' });

    const otherMachine = testConfig(join(dir, 'ws-other'));
    const co = await prepareCheckout(otherMachine, input(origin));
    assert.notEqual(co.dir, first.dir);
    assert.equal(co.headCommit, pushed);
    assert.equal(co.branchExisted, true);
    assert.equal(await readFile(join(co.dir, 'a.txt'), 'utf8'), 'turn 1\n');
    assert.equal(git(co.dir, 'symbolic-ref', 'HEAD'), 'refs/heads/errand/job1');
  });

  test('a retried turn discards a crashed attempt, keeps pushed commits, saves the unpushed one', async () => {
    const { origin, cfg } = await setup({
      'keep.txt': 'v1\n',
      'gone.txt': 'x\n',
      '.gitignore': 'build/\n',
    });
    const first = await prepareCheckout(cfg, input(origin));
    const pushed = await turn(cfg, origin, first.dir, { 'a.txt': 'turn 1\n' });

    // The crashed attempt: a commit that never got pushed, then more edits, and a git
    // process killed while it held the index lock.
    await writeFiles(first.dir, { 'crash.txt': 'committed, never pushed\n' });
    const unpushed = await commitAll(cfg, { dir: first.dir, message: 'lost attempt' });
    await writeFiles(first.dir, {
      'keep.txt': 'half-edited\n',
      'untracked/deep/file.txt': 'junk\n',
      'build/out.bin': 'ignored junk\n',
    });
    await rm(join(first.dir, 'gone.txt'));
    await writeFile(join(first.dir, '.git', 'index.lock'), '');

    const retry = await prepareCheckout(cfg, input(origin));
    assert.equal(retry.headCommit, pushed);
    assert.equal(retry.discardedHead, unpushed);
    assert.equal(git(retry.dir, 'rev-parse', 'HEAD'), pushed);
    assert.equal(git(retry.dir, 'status', '--porcelain', '--ignored', '--untracked-files=all'), '');
    assert.equal(await readFile(join(retry.dir, 'keep.txt'), 'utf8'), 'v1\n');
    assert.equal(await readFile(join(retry.dir, 'gone.txt'), 'utf8'), 'x\n');
    assert.equal(await exists(join(retry.dir, 'crash.txt')), false);
    assert.equal(await exists(join(retry.dir, 'build')), false);
    const saved = git(
      retry.dir,
      'for-each-ref',
      '--format=%(objectname)',
      'refs/errand/discarded/',
    );
    assert.equal(saved, unpushed);
  });

  test('a first turn retried after a push-less crash starts again from the base', async () => {
    const { origin, cfg } = await setup();
    const first = await prepareCheckout(cfg, input(origin));
    await writeFiles(first.dir, { 'a.txt': 'x\n' });
    const unpushed = await commitAll(cfg, { dir: first.dir, message: 'never pushed' });
    const retry = await prepareCheckout(cfg, input(origin));
    assert.equal(retry.headCommit, first.baseCommit);
    assert.equal(retry.branchExisted, false);
    assert.equal(retry.discardedHead, unpushed);
  });

  test('the mirror follows branch deletions and additions on the remote', async () => {
    const { origin, cfg } = await setup();
    await origin.commit({ 'x.txt': 'x\n' }, 'x', 'old-branch');
    await prepareCheckout(cfg, input(origin));
    const mirror = mirrorDir(cfg, 'proj');
    assert.ok(git(mirror, 'branch', '--list', 'old-branch'));
    git(origin.bare, 'branch', '-D', 'old-branch');
    await origin.commit({ 'y.txt': 'y\n' }, 'y', 'new-branch');
    await prepareCheckout(cfg, input(origin));
    assert.equal(git(mirror, 'branch', '--list', 'old-branch'), '');
    assert.ok(git(mirror, 'branch', '--list', 'new-branch'));
  });

  test('a clone git cannot use any more is made again', async () => {
    const { origin, cfg } = await setup();
    const first = await prepareCheckout(cfg, input(origin));
    const pushed = await turn(cfg, origin, first.dir, { 'a.txt': 'turn 1\n' });
    // Without its alternates the clone has lost most objects.
    await rm(join(first.dir, '.git/objects/info/alternates'));
    await writeFile(join(first.dir, 'leftover.txt'), 'x');
    const co = await prepareCheckout(cfg, input(origin));
    assert.equal(co.headCommit, pushed);
    assert.equal(git(co.dir, 'status', '--porcelain'), '');
    assert.equal(await exists(join(co.dir, 'leftover.txt')), false);
    git(co.dir, 'fsck', '--connectivity-only', '--no-dangling', '--no-progress');
  });

  test('a clone that borrows objects from anything but the project mirror is made again', async () => {
    const { dir, origin, cfg } = await setup();
    const first = await prepareCheckout(cfg, input(origin));
    const pushed = await turn(cfg, origin, first.dir, { 'a.txt': 'turn 1\n' });
    // Another repository that has every object too (a copied data folder's old mirror).
    const elsewhere = join(dir, 'elsewhere.git');
    git(dir, 'clone', '--quiet', '--mirror', origin.bare, elsewhere);
    const alternates = join(first.dir, '.git/objects/info/alternates');
    await writeFile(alternates, `${join(elsewhere, 'objects')}\n`);
    await writeFile(join(first.dir, '.git', 'reuse-marker'), 'x');

    const co = await prepareCheckout(cfg, input(origin));
    assert.equal(co.headCommit, pushed);
    assert.equal(await exists(join(co.dir, '.git', 'reuse-marker')), false);
    assert.equal(
      (await readFile(alternates, 'utf8')).trim(),
      join(mirrorDir(cfg, 'proj'), 'objects'),
    );
    assert.equal(git(co.dir, 'status', '--porcelain'), '');
  });

  test('a mirror made again under a reused clone lends it every object of the turn', async () => {
    const { origin, cfg } = await setup();
    const first = await prepareCheckout(cfg, input(origin));
    const pushed = await turn(cfg, origin, first.dir, { 'a.txt': 'turn 1\n' });
    const newMain = await origin.commit({ 'main.txt': 'new\n' }, 'main moved', 'main');
    await writeFile(join(first.dir, '.git', 'reuse-marker'), 'x');
    await rm(mirrorDir(cfg, 'proj'), { recursive: true, force: true });

    const co = await prepareCheckout(cfg, input(origin));
    assert.ok(await exists(join(co.dir, '.git', 'reuse-marker')), 'clone was recreated');
    assert.equal(co.headCommit, pushed);
    assert.equal(co.baseCommit, newMain);
    assert.equal(git(co.dir, 'status', '--porcelain', '--ignored', '--untracked-files=all'), '');
    git(co.dir, 'rev-list', '--objects', '--quiet', 'HEAD', newMain);
  });

  test('a reused clone with no work branch, or one git cannot read, discards nothing', async () => {
    const { origin, cfg } = await setup();
    const main = origin.head('main');
    const first = await prepareCheckout(cfg, input(origin));
    // A crash between making the clone and checking out the branch.
    git(first.dir, 'checkout', '--quiet', '--detach');
    git(first.dir, 'update-ref', '-d', 'refs/heads/errand/job1');
    let co = await prepareCheckout(cfg, input(origin));
    assert.equal(co.discardedHead, null);
    assert.equal(co.headCommit, main);
    assert.equal(git(co.dir, 'symbolic-ref', 'HEAD'), 'refs/heads/errand/job1');
    assert.equal(git(co.dir, 'rev-parse', 'HEAD'), main);

    // A branch naming a commit the clone does not have.
    await writeFile(join(co.dir, '.git/refs/heads/errand/job1'), `${'1'.repeat(40)}\n`);
    co = await prepareCheckout(cfg, input(origin));
    assert.equal(co.discardedHead, null);
    assert.equal(git(co.dir, 'rev-parse', 'HEAD'), main);
    assert.equal(git(co.dir, 'for-each-ref', 'refs/errand/'), '');
    assert.equal(git(co.dir, 'status', '--porcelain', '--ignored', '--untracked-files=all'), '');
  });

  test('removeCheckout deletes the job clone but keeps the mirror', async () => {
    const { origin, cfg } = await setup();
    const co = await prepareCheckout(cfg, input(origin));
    await removeCheckout(cfg, { jobId: 'job1' });
    assert.equal(await exists(co.dir), false);
    assert.ok(await exists(mirrorDir(cfg, 'proj')));
    await assert.rejects(removeCheckout(cfg, { jobId: '../x' }), GitError);
  });
});

describe('concurrency', () => {
  test('jobs of one project prepare at once; waiting prepares share one fetch', async () => {
    const { origin, cfg } = await setup();
    await prepareCheckout(cfg, input(origin, 'warm'));
    const fetches = () => cfg.spawns.filter((s) => s.args.includes('fetch')).length;
    const before = fetches();

    // Hold the mirror so that every prepare below is waiting before any fetch starts.
    let release = () => {};
    const held = withLocalLock(
      mirrorDir(cfg, 'proj'),
      () =>
        new Promise<void>((resolve) => {
          release = resolve;
        }),
    );
    const newMain = await origin.commit({ 'late.txt': 'late\n' }, 'late', 'main');
    const jobs = ['c1', 'c2', 'c3', 'c4'];
    const running = Promise.all(jobs.map((id) => prepareCheckout(cfg, input(origin, id))));
    // Every prepare waits behind the holder: each asked for the mirror before any fetch began.
    while (localLockQueue(mirrorDir(cfg, 'proj')) < 1 + jobs.length) {
      await Promise.race([running, new Promise((resolve) => setTimeout(resolve, 5))]);
    }
    release();
    await held;
    const checkouts = await running;
    assert.equal(fetches() - before, 1);
    for (const [i, co] of checkouts.entries()) {
      assert.equal(co.baseCommit, newMain);
      assert.equal(git(co.dir, 'symbolic-ref', 'HEAD'), `refs/heads/errand/${jobs[i]}`);
    }

    // A prepare that starts after a fetch finished always fetches again.
    const newer = await origin.commit({ 'later.txt': 'later\n' }, 'later', 'main');
    const co = await prepareCheckout(cfg, input(origin, 'c5'));
    assert.equal(co.baseCommit, newer);
    assert.equal(fetches() - before, 2);
  });

  test('several processes preparing jobs of one project at once all succeed', async () => {
    const { dir, origin } = await setup();
    const rootDir = join(dir, 'ws-shared');
    const script = join(dir, 'prepare.ts');
    const module = pathToFileURL(join(import.meta.dirname, 'index.ts')).href;
    await writeFile(
      script,
      `import { prepareCheckout, commitAll, pushBranch } from '${module}';
const [rootDir, repository, jobId] = process.argv.slice(2);
const cfg = {
  rootDir,
  allowLocalRepos: true,
  identity: { name: 'E', email: 'e@x.test' },
  inheritedEnv: { PATH: process.env.PATH },
};
for (let turn = 0; turn < 3; turn++) {
  const co = await prepareCheckout(cfg, { projectId: 'shared', jobId, repository, ref: 'main', branch: 'errand/' + jobId });
  const { writeFile } = await import('node:fs/promises');
  await writeFile(co.dir + '/' + jobId + '.txt', String(turn));
  await commitAll(cfg, { dir: co.dir, message: 'turn ' + turn });
  await pushBranch(cfg, { dir: co.dir, repository, branch: 'errand/' + jobId });
}
`,
    );
    const jobs = ['p1', 'p2', 'p3', 'p4'];
    await Promise.all(jobs.map((id) => run(process.execPath, [script, rootDir, origin.url, id])));
    for (const id of jobs) {
      assert.equal(git(origin.bare, 'rev-list', '--count', `errand/${id}`), '4', id);
    }
    const mirror = join(rootDir, 'mirrors', 'shared.git');
    git(mirror, 'fsck', '--connectivity-only', '--no-progress');
    assert.equal(await exists(`${mirror}.lock`), false);
  });

  test('an aborted prepare rejects with an AbortError', async () => {
    const { origin, cfg } = await setup();
    await assert.rejects(
      prepareCheckout(cfg, input(origin, 'job1', { signal: AbortSignal.abort() })),
      { name: 'AbortError' },
    );
  });
});
