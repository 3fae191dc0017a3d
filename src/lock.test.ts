// The one lock file implementation, as the embedded database's data directory uses it (no
// waiting), as it reads lock files written before it existed, and how it tells a dead owner
// from a live one. The workspace's waiting forms are tested in src/workspace/lock.test.ts.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DatabaseLockedError, openDatabase } from './db/database.ts';
import { acquireFileLock, readLockOwner } from './lock.ts';

let root: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'errand-lock-'));
});
after(() => rm(root, { recursive: true, force: true }));

// A pid far above pid_max is never alive.
const deadPid = 2 ** 30;

test('without waiting: a held lock answers undefined at once, a released one is free again', async () => {
  const path = join(root, 'nowait.lock');
  const held = await acquireFileLock(path, {}, true);
  assert.ok(held);
  const owner = await readLockOwner(path);
  assert.equal(owner?.pid, process.pid);
  assert.equal(owner?.host, hostname());
  const started = Date.now();
  assert.equal(await acquireFileLock(path, {}, false), undefined);
  // At once: the waiting form would wait up to its timeout, 15 minutes by default.
  assert.ok(Date.now() - started < 2_000);
  await held.release();
  await held.release();
  await assert.rejects(stat(path), { code: 'ENOENT' });
  const again = await acquireFileLock(path, {}, false);
  assert.ok(again);
  await again.release();
});

test('a lock file holding only a pid (written before this module) is read as this host', async () => {
  const dead = join(root, 'legacy-dead.lock');
  await writeFile(dead, `${deadPid}\n`);
  assert.deepEqual(await readLockOwner(dead), { pid: deadPid, host: hostname(), token: '' });
  const taken = await acquireFileLock(dead, {}, false);
  assert.ok(taken, 'a dead legacy owner is taken over');
  assert.equal((await readLockOwner(dead))?.pid, process.pid);
  await taken.release();

  // A live process (the test runner) as the legacy owner.
  const live = join(root, 'legacy-live.lock');
  await writeFile(live, `${process.ppid}\n`);
  assert.equal(await acquireFileLock(live, {}, false), undefined);
  assert.equal(await readFile(live, 'utf8'), `${process.ppid}\n`);
});

test('an owner is dead once the machine booted again, its pid names another process, or it is this pid without the lock', async () => {
  const boot = (await readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim();
  const owner = (fields: Record<string, unknown>) =>
    JSON.stringify({ pid: process.pid, host: hostname(), token: 'earlier', ...fields });
  // After a restart in a container, the new process often has the pid its predecessor had.
  const samePid = join(root, 'same-pid.lock');
  await writeFile(samePid, owner({ boot }));
  const taken = await acquireFileLock(samePid, {}, false);
  assert.ok(taken, 'a lock naming this pid that this process does not hold is stale');
  // One this process does hold is not.
  assert.equal(await acquireFileLock(samePid, {}, false), undefined);
  await taken.release();

  // The parent process is alive, but not the one that took these.
  const parent = process.ppid;
  const rebooted = join(root, 'rebooted.lock');
  await writeFile(rebooted, owner({ pid: parent, boot: 'another-boot' }));
  const afterBoot = await acquireFileLock(rebooted, {}, false);
  assert.ok(afterBoot, 'a lock taken before the machine booted again is stale');
  await afterBoot.release();

  const reused = join(root, 'reused.lock');
  await writeFile(reused, owner({ pid: parent, boot, started: '1' }));
  const pidReused = await acquireFileLock(reused, {}, false);
  assert.ok(pidReused, 'a lock whose pid now names a process started later is stale');
  await pidReused.release();

  // The same live process, as its start time says: the lock holds.
  const stat = await readFile(`/proc/${parent}/stat`, 'utf8');
  const started = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  const live = join(root, 'live-parent.lock');
  await writeFile(live, owner({ pid: parent, boot, started }));
  assert.equal(await acquireFileLock(live, {}, false), undefined);
});

test("the embedded database's data directory: refused while held, shared when asked, taken over from a dead process", async () => {
  const dataDir = join(root, 'data');
  const first = await openDatabase({ dataDir, databaseUrl: undefined });
  try {
    await assert.rejects(openDatabase({ dataDir, databaseUrl: undefined }), (err: unknown) => {
      assert.ok(err instanceof DatabaseLockedError);
      assert.match(err.message, /in use by another Errand process \(locked by this process\)/);
      return true;
    });
    // A command that may run beside serve (export) reaches the same server instead.
    const beside = await openDatabase({ dataDir, databaseUrl: undefined, shareRunning: true });
    try {
      await first.db.schema.createTable('shared_check').addColumn('n', 'integer').execute();
      const tables = await beside.db.introspection.getTables();
      assert.ok(tables.some((t) => t.name === 'shared_check'));
    } finally {
      await beside.close();
    }
  } finally {
    await first.close();
  }
  await assert.rejects(stat(join(dataDir, 'errand.lock')), { code: 'ENOENT' });

  await writeFile(
    join(dataDir, 'errand.lock'),
    JSON.stringify({ pid: deadPid, host: hostname(), token: 'crashed' }),
  );
  const second = await openDatabase({ dataDir, databaseUrl: undefined });
  await second.close();
});
