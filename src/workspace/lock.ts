// Mutual exclusion for a mirror or a job's clone: a promise chain within this process, and the
// shared lock file (src/lock.ts: O_EXCL create, heartbeat, stale detection) between processes
// that share the data dir. The `try` forms never wait: the janitor skips whatever a turn is using.

import { acquireFileLock, type FileLockOptions, LockWaitError } from '../lock.ts';
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

export type { FileLockOptions } from '../lock.ts';

/** The shared lock file, with the workspace's errors: AbortError, or a transient GitError. */
async function acquire(
  path: string,
  opts: FileLockOptions,
  wait: boolean,
): Promise<(() => Promise<void>) | undefined> {
  try {
    const held = await acquireFileLock(path, opts, wait);
    return held && (() => held.release());
  } catch (err) {
    if (!(err instanceof LockWaitError)) throw err;
    if (err.reason === 'aborted') throw abortError('waiting for the workspace lock', err.cause);
    throw new GitError('failed', err.message, { transient: true });
  }
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
