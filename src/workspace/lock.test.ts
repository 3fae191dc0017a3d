import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { makeTempDir, removeDir } from '../../test/support/git.ts';
import { GitError } from './errors.ts';
import { withFileLock, withLocalLock } from './lock.ts';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let root: string;
before(async () => {
  root = await makeTempDir('lock');
});
after(() => removeDir(root));

/** Runs `count` overlapping critical sections and returns the peak number inside at once. */
async function peakConcurrency(count: number, enter: (body: () => Promise<void>) => Promise<void>) {
  let inside = 0;
  let peak = 0;
  await Promise.all(
    Array.from({ length: count }, () =>
      enter(async () => {
        inside++;
        peak = Math.max(peak, inside);
        await sleep(5);
        inside--;
      }),
    ),
  );
  return peak;
}

test('withLocalLock runs callers with one key one at a time, in order', async () => {
  const order: number[] = [];
  const peak = await peakConcurrency(5, (body) => withLocalLock('k', body));
  assert.equal(peak, 1);
  await Promise.all([1, 2, 3].map((n) => withLocalLock('k', async () => void order.push(n))));
  assert.deepEqual(order, [1, 2, 3]);
  const otherKeys = await peakConcurrency(3, (body) => withLocalLock(`k-${Math.random()}`, body));
  assert.equal(otherKeys, 3);
});

test('withLocalLock: an aborted waiter leaves the queue without breaking it', async () => {
  let releaseFirst = () => {};
  const first = withLocalLock(
    'q',
    () =>
      new Promise<void>((resolve) => {
        releaseFirst = resolve;
      }),
  );
  const controller = new AbortController();
  const second = withLocalLock('q', async () => 'second ran', controller.signal);
  const third = withLocalLock('q', async () => 'third ran');
  controller.abort();
  await assert.rejects(second, { name: 'AbortError' });
  releaseFirst();
  await first;
  assert.equal(await third, 'third ran');
});

test('withFileLock excludes holders of one path, even within one process', async () => {
  const path = join(root, 'a.lock');
  // Many rounds: a holder letting go while another judges its lock is a narrow window.
  for (let round = 0; round < 60; round++) {
    const peak = await peakConcurrency(6, (body) => withFileLock(path, body));
    assert.equal(peak, 1, `round ${round}`);
  }
  await assert.rejects(stat(path), { code: 'ENOENT' });
});

test('withFileLock takes over a lock left by a dead process on this host', async () => {
  const path = join(root, 'dead.lock');
  // A pid far above pid_max is never alive.
  await writeFile(path, JSON.stringify({ pid: 2 ** 30, host: hostname(), token: 'old' }));
  const started = Date.now();
  const result = await withFileLock(path, async () => 'got it', { timeoutMs: 5000 });
  assert.equal(result, 'got it');
  assert.ok(Date.now() - started < 1000);
});

test('withFileLock takes over a lock whose heartbeat stopped, and waits on a live one', async () => {
  const path = join(root, 'silent.lock');
  await writeFile(path, JSON.stringify({ pid: 1, host: 'another-machine', token: 'x' }));
  const old = new Date(Date.now() - 10 * 60_000);
  await utimes(path, old, old);
  assert.equal(await withFileLock(path, async () => 'taken', { staleMs: 60_000 }), 'taken');

  // Held by another live process on this host (the test runner).
  const live = join(root, 'live.lock');
  await writeFile(live, JSON.stringify({ pid: process.ppid, host: hostname(), token: 'y' }));
  await assert.rejects(
    withFileLock(live, async () => 'never', { timeoutMs: 300, staleMs: 60_000 }),
    (err) => err instanceof GitError && err.transient && /timed out waiting/.test(err.message),
  );
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 50);
  await assert.rejects(
    withFileLock(live, async () => 'never', { signal: controller.signal }),
    { name: 'AbortError' },
  );
});

test('withFileLock keeps its heartbeat and does not delete a lock that is no longer its own', async () => {
  const path = join(root, 'beat.lock');
  await withFileLock(
    path,
    async () => {
      // The fact: the lock's time moves on while it is held (a beat is due every 30 ms).
      const before = (await stat(path)).mtimeMs;
      const deadline = Date.now() + 10_000;
      while ((await stat(path)).mtimeMs <= before) {
        assert.ok(Date.now() < deadline, 'heartbeat should touch the lock');
        await sleep(10);
      }
      // Someone judged us stale and took over.
      await writeFile(path, JSON.stringify({ pid: 1, host: 'elsewhere', token: 'theirs' }));
    },
    { staleMs: 300, heartbeatMs: 30 },
  );
  const owner = JSON.parse(await readFile(path, 'utf8')) as { token: string };
  assert.equal(owner.token, 'theirs');
});

test('withFileLock excludes other processes (counter incremented by 3 processes)', async () => {
  const counter = join(root, 'counter.txt');
  await writeFile(counter, '0');
  const script = join(root, 'incr.ts');
  const lockModule = pathToFileURL(join(import.meta.dirname, 'lock.ts')).href;
  await writeFile(
    script,
    `import { readFile, writeFile } from 'node:fs/promises';
import { withFileLock } from '${lockModule}';
for (let i = 0; i < 15; i++) {
  await withFileLock(process.argv[2] + '.lock', async () => {
    const n = Number(await readFile(process.argv[2], 'utf8'));
    await new Promise((r) => setTimeout(r, 2));
    await writeFile(process.argv[2], String(n + 1));
  });
}
`,
  );
  await Promise.all([1, 2, 3].map(() => run(process.execPath, [script, counter])));
  assert.equal(await readFile(counter, 'utf8'), '45');
});
