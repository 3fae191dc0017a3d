// The one lock file implementation, as the PGlite data directory uses it (no waiting) and as
// it reads lock files written before it existed. The workspace's waiting forms are tested in
// src/workspace/lock.test.ts.

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
  assert.ok(Date.now() - started < 500);
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

  const live = join(root, 'legacy-live.lock');
  await writeFile(live, `${process.pid}\n`);
  assert.equal(await acquireFileLock(live, {}, false), undefined);
  assert.equal(await readFile(live, 'utf8'), `${process.pid}\n`);
});

test('the PGlite data directory: refused while held, taken over from a dead process', async () => {
  const dataDir = join(root, 'data');
  const first = await openDatabase({ dataDir, databaseUrl: undefined });
  try {
    await assert.rejects(openDatabase({ dataDir, databaseUrl: undefined }), (err: unknown) => {
      assert.ok(err instanceof DatabaseLockedError);
      assert.match(err.message, /in use by another Errand process \(locked by this process\)/);
      return true;
    });
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
