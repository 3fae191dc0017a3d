// Mutual exclusion for a mirror or a job's clone: a promise chain within this process, and a
// lock file (O_EXCL create, heartbeat, stale detection) between processes that share the data
// dir. The `try` forms never wait: the janitor skips whatever a turn is using.

import { randomUUID } from 'node:crypto';
import { link, open, readFile, rename, stat, unlink, utimes } from 'node:fs/promises';
import { hostname } from 'node:os';
import { abortError, GitError } from './errors.ts';

const tails = new Map<string, Promise<void>>();

/** What the `try` forms return when someone else holds (or waits for) the lock. */
export const BUSY: unique symbol = Symbol('busy');

/** Runs `fn` after every earlier caller with the same key in this process has finished. */
export async function withLocalLock<T>(
  key: string,
  fn: () => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  const previous = tails.get(key) ?? Promise.resolve();
  let release = () => {};
  const mine = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tail = previous.then(() => mine);
  tails.set(key, tail);
  try {
    await waitFor(previous, signal, 'waiting for the workspace lock');
    return await fn();
  } finally {
    release();
    if (tails.get(key) === tail) tails.delete(key);
  }
}

/** Runs `fn` if no caller in this process holds or waits for `key`; otherwise returns BUSY. */
export function tryLocalLock<T>(key: string, fn: () => Promise<T>): Promise<T | typeof BUSY> {
  // withLocalLock claims the key synchronously, so nothing can slip in after this check.
  if (tails.has(key)) return Promise.resolve(BUSY);
  return withLocalLock(key, fn);
}

function waitFor(promise: Promise<void>, signal: AbortSignal | undefined, what: string) {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortError(what, signal.reason));
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(abortError(what, signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

export interface FileLockOptions {
  signal?: AbortSignal;
  /** A lock whose heartbeat is older than this is taken over. */
  staleMs?: number;
  heartbeatMs?: number;
  /** Give up waiting after this long. */
  timeoutMs?: number;
}

interface LockOwner {
  pid: number;
  host: string;
  token: string;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function readOwner(path: string): Promise<LockOwner | null> {
  try {
    const data: unknown = JSON.parse(await readFile(path, 'utf8'));
    if (typeof data !== 'object' || data === null) return null;
    const { pid, host, token } = data as Record<string, unknown>;
    if (typeof pid !== 'number' || typeof host !== 'string' || typeof token !== 'string') {
      return null;
    }
    return { pid, host, token };
  } catch {
    return null;
  }
}

function isErrno(err: unknown, code: string): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === code;
}

/**
 * Moves a stale lock aside. Two waiters may both judge it stale; rename lets only one move
 * a given file, and the inode check puts back a fresh lock moved by mistake.
 */
async function takeOver(path: string, staleIno: number): Promise<void> {
  const aside = `${path}.stale-${randomUUID()}`;
  try {
    await rename(path, aside);
  } catch {
    return;
  }
  const moved = await stat(aside).catch(() => null);
  if (moved && moved.ino !== staleIno) await link(aside, path).catch(() => {});
  await unlink(aside).catch(() => {});
}

async function isStale(path: string, staleMs: number): Promise<number | null> {
  const info = await stat(path).catch(() => null);
  if (!info) return null;
  const owner = await readOwner(path);
  const deadOwner = owner !== null && owner.host === hostname() && !pidAlive(owner.pid);
  const silent = Date.now() - info.mtimeMs > staleMs;
  // A half-written lock (no owner yet) is only stale once it stops being fresh.
  return deadOwner || silent ? info.ino : null;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortError('waiting for the workspace lock', signal.reason));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError('waiting for the workspace lock', signal?.reason));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Creates the lock file; undefined when `wait` is false and a live owner holds it. */
async function acquire(
  path: string,
  opts: FileLockOptions,
  wait: boolean,
): Promise<(() => Promise<void>) | undefined> {
  const staleMs = opts.staleMs ?? 60_000;
  const heartbeatMs = opts.heartbeatMs ?? Math.max(10, Math.floor(staleMs / 6));
  const deadline = Date.now() + (opts.timeoutMs ?? 15 * 60_000);
  const owner: LockOwner = { pid: process.pid, host: hostname(), token: randomUUID() };

  for (let attempt = 0; ; attempt++) {
    try {
      const handle = await open(path, 'wx', 0o600);
      try {
        await handle.writeFile(JSON.stringify(owner));
      } finally {
        await handle.close();
      }
      break;
    } catch (err) {
      if (!isErrno(err, 'EEXIST')) throw err;
    }
    const staleIno = await isStale(path, staleMs);
    if (staleIno !== null) {
      await takeOver(path, staleIno);
      continue;
    }
    if (!wait) return undefined;
    if (Date.now() > deadline) {
      throw new GitError('failed', `timed out waiting for the lock ${path}`, { transient: true });
    }
    await sleep(Math.min(500, 20 * 2 ** Math.min(attempt, 5)) * (0.5 + Math.random()), opts.signal);
  }

  const heartbeat = setInterval(() => {
    const now = new Date();
    utimes(path, now, now).catch(() => {});
  }, heartbeatMs);
  heartbeat.unref();
  return async () => {
    clearInterval(heartbeat);
    const current = await readOwner(path);
    if (current?.token === owner.token) await unlink(path).catch(() => {});
  };
}

/** Holds the lock file at `path` while `fn` runs. */
export async function withFileLock<T>(
  path: string,
  fn: () => Promise<T>,
  opts: FileLockOptions = {},
): Promise<T> {
  const release = await acquire(path, opts, true);
  if (!release) throw new Error(`the lock ${path} was not taken`);
  try {
    return await fn();
  } finally {
    await release();
  }
}

/** Runs `fn` holding the lock file at `path` if it is free (or stale); otherwise returns BUSY. */
export async function tryFileLock<T>(
  path: string,
  fn: () => Promise<T>,
  opts: FileLockOptions = {},
): Promise<T | typeof BUSY> {
  const release = await acquire(path, opts, false);
  if (!release) return BUSY;
  try {
    return await fn();
  } finally {
    await release();
  }
}
