// The workspace janitor on real git repositories and a real database: which clones it
// deletes, that it never deletes one under its job's lock, what a crash leaves, and that its
// gc and eviction of mirrors never break a clone that borrows their objects.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import {
  git,
  makeOrigin,
  makeTempDir,
  type Origin,
  removeDir,
  testConfig,
  writeFiles,
} from '../../test/support/git.ts';
import { type DatabaseHandle, openDatabase } from '../db/database.ts';
import { migrate } from '../db/migrate.ts';
import type { JobStatus } from '../db/schema.ts';
import { newId } from '../ids.ts';
import { createLogger } from '../log.ts';
import { prepareCheckout } from './checkout.ts';
import { commitAll } from './commit.ts';
import { removeCheckout } from './discard.ts';
import {
  attemptWorkspaceId,
  engineStateDir,
  jobDir,
  MIRROR_USED_STAMP,
  mirrorDir,
} from './layout.ts';
import { withJobLock, withLocalLock } from './lock.ts';
import { pushBranch } from './push.ts';
import { type RetentionSettings, startJanitor, workspaceUsage } from './retention.ts';
import type { WorkspaceConfig } from './types.ts';

const exists = async (path: string) => (await stat(path).catch(() => null)) !== null;
const log = createLogger('silent');

describe('workspace janitor', () => {
  let database: TestDatabase;
  let handle: DatabaseHandle;
  let root: string;
  let counter = 0;
  const projectId = newId('prj');

  before(async () => {
    root = await makeTempDir('retention');
    database = await createTestDatabase();
    handle = await openDatabase({ dataDir: database.dataDir, databaseUrl: database.databaseUrl });
    await migrate(handle);
    await handle.db
      .insertInto('projects')
      .values({ id: projectId, name: 'p', repository: '/tmp', ref: 'main', model: null })
      .execute();
  });
  after(async () => {
    await handle?.close();
    await database?.drop();
    await removeDir(root);
  });

  /** A fresh origin and workspace root per test. */
  async function setup() {
    const dir = join(root, `t${++counter}`);
    await mkdir(dir);
    const origin = await makeOrigin(dir);
    return { dir, origin, cfg: testConfig(join(dir, 'ws')) };
  }

  function janitor(cfg: WorkspaceConfig, settings: Partial<RetentionSettings> = {}) {
    return startJanitor({
      workspace: cfg,
      db: handle.db,
      log,
      settings: {
        idleSeconds: 3600,
        maxMirrors: 50,
        gcIntervalSeconds: 86_400,
        // Passes run when the test asks (runOnce), besides the one at start.
        janitorIntervalMs: 3_600_000,
        ...settings,
      },
    });
  }

  /** A job row: `ageSeconds` since its last change, optionally with an open turn. */
  async function addJob(
    status: JobStatus,
    opts: { ageSeconds?: number; openTurn?: 'queued' | 'running' } = {},
  ): Promise<string> {
    const id = newId('job');
    await handle.db
      .insertInto('jobs')
      .values({
        id,
        project_id: projectId,
        status,
        repository: '/tmp',
        ref: 'main',
        branch: `errand/${id}`,
        model: 'openai:test',
        pr_link: null,
        pr_number: null,
        error: null,
        turn_count: opts.openTurn ? 1 : 0,
        review_diff: null,
        archived_at: status === 'archived' ? new Date() : null,
        updated_at: new Date(Date.now() - (opts.ageSeconds ?? 0) * 1000),
      })
      .execute();
    if (opts.openTurn) {
      await handle.db
        .insertInto('turns')
        .values({ job_id: id, seq: 1, prompt: 'p', state: opts.openTurn })
        .execute();
    }
    return id;
  }

  const prepare = (cfg: WorkspaceConfig, origin: Origin, jobId: string, project = 'proj') =>
    prepareCheckout(cfg, {
      projectId: project,
      jobId,
      repository: origin.url,
      ref: 'main',
      branch: `errand/${jobId}`,
    });

  test('deletes the clones of archived, deleted and idle jobs; keeps busy and recent ones', async () => {
    const { origin, cfg } = await setup();
    const archived = await addJob('archived');
    const deleted = newId('job');
    const idle = await addJob('completed', { ageSeconds: 7200 });
    const idleFailed = await addJob('failed', { ageSeconds: 7200 });
    const recent = await addJob('completed', { ageSeconds: 60 });
    const queued = await addJob('active', { ageSeconds: 7200, openTurn: 'queued' });
    const running = await addJob('active', { ageSeconds: 7200, openTurn: 'running' });
    const all = [archived, deleted, idle, idleFailed, recent, queued, running];
    for (const id of all) await prepare(cfg, origin, id);
    // An engine's state beside each clone (its HOME and sessions) goes with the clone.
    for (const id of all) {
      await mkdir(join(engineStateDir(cfg, id), '.claude'), { recursive: true });
      await writeFile(join(engineStateDir(cfg, id), 'errand-session.json'), '{}\n');
    }

    const j = janitor(cfg);
    try {
      await j.runOnce();
    } finally {
      await j.stop();
    }
    const left = (await readdir(join(cfg.rootDir, 'jobs'))).sort();
    assert.deepEqual(left, [recent, queued, running].sort(), 'no clone, lock or trash left over');
    const states = (await readdir(join(cfg.rootDir, 'engine-state'))).sort();
    assert.deepEqual(states, [recent, queued, running].sort(), 'an engine state was left over');
    assert.ok(await exists(mirrorDir(cfg, 'proj')));
  });

  test('a clone whose job lock is held (a turn uses it) is kept, and deleted once free', async () => {
    const { origin, cfg } = await setup();
    const gone = newId('job');
    await prepare(cfg, origin, gone);
    const j = janitor(cfg);
    try {
      // Held in this process, as the agent holds it from prepare to push.
      await withJobLock(cfg, gone, async () => {
        await j.runOnce();
        assert.ok(await exists(jobDir(cfg, gone)), 'deleted under a running turn');
      });
      // Held by another live process on this machine (our parent): its lock file. Not this
      // process's pid, since a lock naming it with a token this process does not hold is stale.
      const lockFile = `${jobDir(cfg, gone)}.lock`;
      await writeFile(
        lockFile,
        JSON.stringify({ pid: process.ppid, host: hostname(), token: randomUUID() }),
      );
      await j.runOnce();
      assert.ok(await exists(jobDir(cfg, gone)), 'deleted under another process’s turn');
      await removeDir(lockFile);
      await j.runOnce();
      assert.equal(await exists(jobDir(cfg, gone)), false);
    } finally {
      await j.stop();
    }
  });

  test("a best-of-N attempt's clone lives and goes with its job, and is kept while its lock is held", async () => {
    const { origin, cfg } = await setup();
    const going = await addJob('completed', { ageSeconds: 60 });
    const archived = await addJob('archived');
    const ids = [going, archived].flatMap((job) => [1, 2].map((n) => attemptWorkspaceId(job, n)));
    for (const id of ids) {
      await prepare(cfg, origin, id);
      await mkdir(engineStateDir(cfg, id), { recursive: true });
    }
    const j = janitor(cfg);
    try {
      // Attempt 1 of the archived job is still running: its lock is held.
      await withJobLock(cfg, attemptWorkspaceId(archived, 1), async () => {
        await j.runOnce();
        const left = (await readdir(join(cfg.rootDir, 'jobs'))).filter((e) => !e.endsWith('.lock'));
        assert.deepEqual(
          left.sort(),
          [
            attemptWorkspaceId(going, 1),
            attemptWorkspaceId(going, 2),
            attemptWorkspaceId(archived, 1),
          ].sort(),
        );
      });
      // Archived now: reclaim takes the job's attempts' clones at once, engine state too.
      await handle.db
        .updateTable('jobs')
        .set({ status: 'archived', archived_at: new Date() })
        .where('id', 'in', [going, archived])
        .execute();
      j.reclaim(going);
      j.reclaim(archived);
    } finally {
      await j.stop();
    }
    assert.deepEqual(await readdir(join(cfg.rootDir, 'jobs')), []);
    assert.deepEqual(await readdir(join(cfg.rootDir, 'engine-state')), []);
  });

  test('what a crash left is removed, and a half-deleted clone does not break the next turn', async () => {
    const { origin, cfg } = await setup();
    const jobId = await addJob('completed');
    const first = await prepare(cfg, origin, jobId);
    await writeFiles(first.dir, { 'work.txt': 'turn 1\n' });
    const pushed = await commitAll(cfg, { dir: first.dir, message: 'turn 1' });
    await pushBranch(cfg, { dir: first.dir, repository: origin.url, branch: `errand/${jobId}` });

    // A delete killed half-way (renamed aside, partly removed), and a clone never finished.
    const jobs = join(cfg.rootDir, 'jobs');
    const trash = join(jobs, `.trash-${jobId}-${randomUUID()}`);
    await writeFiles(trash, { '.git/HEAD': 'ref: refs/heads/x\n', 'a.txt': 'a' });
    const staging = join(jobs, `.staging-${jobId}-${randomUUID()}`);
    await writeFiles(staging, { '.git/HEAD': 'ref: refs/heads/y\n' });
    const mirrorTrash = join(cfg.rootDir, 'mirrors', `.trash-old.git-${randomUUID()}`);
    await writeFiles(mirrorTrash, { HEAD: 'ref: refs/heads/main\n' });
    // And a clone removed in place by something else, killed with half of .git gone.
    await removeDir(join(first.dir, '.git', 'refs'));
    await removeDir(join(first.dir, '.git', 'index'));
    await removeDir(join(first.dir, '.git', 'objects', 'info'));
    await removeDir(join(first.dir, 'work.txt'));

    const j = janitor(cfg);
    try {
      await j.runOnce();
    } finally {
      await j.stop();
    }
    for (const left of [trash, staging, mirrorTrash]) assert.equal(await exists(left), false);

    const next = await prepare(cfg, origin, jobId);
    assert.equal(next.headCommit, pushed);
    assert.equal(next.branchExisted, true);
    assert.equal(git(next.dir, 'status', '--porcelain'), '');
    git(next.dir, 'fsck', '--connectivity-only', '--no-dangling', '--no-progress');
  });

  test('gc packs a mirror without losing objects a clone borrows, then prunes when none does', async () => {
    const { origin, cfg } = await setup();
    const keep = await addJob('active', { openTurn: 'running' });
    const first = await prepare(cfg, origin, keep);
    const oldMain = first.headCommit;
    const mirror = mirrorDir(cfg, 'proj');
    const packs = async () =>
      (await readdir(join(mirror, 'objects', 'pack'))).filter((f) => f.endsWith('.pack'));
    const loose = async () =>
      (await readdir(join(mirror, 'objects'))).filter((d) => /^[0-9a-f]{2}$/.test(d));

    const j = janitor(cfg, { gcIntervalSeconds: 0 });
    try {
      await j.runOnce();
      assert.equal((await packs()).length, 1);
      assert.deepEqual(await loose(), []);

      // main is rewritten upstream: the clone's commit is no longer reachable in the mirror.
      git(origin.work, 'checkout', '--quiet', '--orphan', 'rewrite');
      git(origin.work, 'rm', '-r', '--quiet', '--cached', '.');
      git(origin.work, 'commit', '--quiet', '--allow-empty', '-m', 'rewritten history');
      git(origin.work, 'push', '--quiet', '--force', origin.bare, 'HEAD:refs/heads/main');
      const other = await addJob('active', { openTurn: 'running' });
      await prepare(cfg, origin, other);
      assert.throws(() => git(mirror, 'merge-base', '--is-ancestor', oldMain, 'refs/heads/main'));

      await j.runOnce();
      assert.equal((await packs()).length, 1);
      assert.deepEqual(await loose(), []);
      // The clone still has every object of its commit, through the mirror.
      git(first.dir, 'fsck', '--connectivity-only', '--no-dangling', '--no-progress');
      git(first.dir, 'rev-list', '--objects', 'HEAD');
      assert.equal(git(first.dir, 'status', '--porcelain'), '');
      assert.equal(git(first.dir, 'show', 'HEAD:README.md'), '# demo');

      // With no clone borrowing from it, the mirror is pruned of what nothing reaches.
      await removeCheckout(cfg, { jobId: keep });
      await removeCheckout(cfg, { jobId: other });
      await origin.commit({ 'new.txt': 'new\n' }, 'new work');
      const third = newId('job');
      await prepare(cfg, origin, third);
      await removeCheckout(cfg, { jobId: third });
      await j.runOnce();
      assert.throws(() => git(mirror, 'cat-file', '-e', oldMain));
      git(mirror, 'fsck', '--connectivity-only', '--no-progress');
    } finally {
      await j.stop();
    }
  });

  test('mirrors are bounded: the least recently used that no clone borrows go, and come back', async () => {
    const { origin, cfg } = await setup();
    const projects = ['p1', 'p2', 'p3', 'p4'];
    const jobs = new Map<string, string>();
    for (const project of projects) {
      const jobId = await addJob('active', { openTurn: 'running' });
      jobs.set(project, jobId);
      await prepare(cfg, origin, jobId, project);
    }
    // p4 is the least recently used, but its job's clone borrows from it.
    const now = Date.now() / 1000;
    for (const [i, project] of ['p4', 'p1', 'p2', 'p3'].entries()) {
      const at = now - 4000 + i * 1000;
      await utimes(join(mirrorDir(cfg, project), MIRROR_USED_STAMP), at, at);
    }
    for (const project of ['p1', 'p2', 'p3']) {
      await removeCheckout(cfg, { jobId: jobs.get(project) ?? '' });
    }
    const mirrors = async () =>
      (await readdir(join(cfg.rootDir, 'mirrors'))).filter((name) => name.endsWith('.git')).sort();

    const two = janitor(cfg, { maxMirrors: 2 });
    try {
      await two.runOnce();
    } finally {
      await two.stop();
    }
    assert.deepEqual(await mirrors(), ['p3.git', 'p4.git']);

    // Over the limit with one mirror in use by a syncing turn and one borrowed: both stay.
    let one: ReturnType<typeof janitor> | undefined;
    try {
      await withLocalLock(mirrorDir(cfg, 'p3'), async () => {
        one = janitor(cfg, { maxMirrors: 1 });
        await one.runOnce();
      });
      assert.deepEqual(await mirrors(), ['p3.git', 'p4.git']);
      await one?.runOnce();
      assert.deepEqual(await mirrors(), ['p4.git']);
    } finally {
      await one?.stop();
    }
    const p4 = jobDir(cfg, jobs.get('p4') ?? '');
    git(p4, 'fsck', '--connectivity-only', '--no-dangling', '--no-progress');

    // A later turn of an evicted project makes its mirror again.
    const again = await prepare(cfg, origin, newId('job'), 'p1');
    assert.equal(again.headCommit, origin.head('main'));
    assert.equal(git(again.dir, 'status', '--porcelain'), '');
  });

  test('workspaceUsage reports the bytes and numbers of clones and mirrors of the last pass', async () => {
    const { origin, cfg } = await setup();
    const a = await addJob('active', { openTurn: 'running' });
    const b = await addJob('archived');
    await prepare(cfg, origin, a, 'u1');
    await prepare(cfg, origin, b, 'u2');
    await writeFile(join(jobDir(cfg, a), 'big.bin'), Buffer.alloc(256 * 1024, 1));
    const j = janitor(cfg);
    try {
      const before = Date.now();
      await j.runOnce();
      const usage = workspaceUsage();
      assert.ok(usage.measuredAt && usage.measuredAt.getTime() >= before);
      assert.equal(usage.jobsCount, 1, 'the archived job’s clone was deleted first');
      assert.equal(usage.mirrorsCount, 2);
      assert.ok(usage.jobsBytes >= 256 * 1024, `jobsBytes ${usage.jobsBytes}`);
      assert.ok(usage.mirrorsBytes > 0);

      await removeCheckout(cfg, { jobId: a });
      await j.runOnce();
      const after = workspaceUsage();
      assert.equal(after.jobsCount, 0);
      assert.ok(after.jobsBytes < 256 * 1024, `jobsBytes ${after.jobsBytes}`);
    } finally {
      await j.stop();
    }
  });
});
