// Mutual exclusion for a mirror or a job's clone: a promise chain within this process, and the
// shared lock file (src/lock.ts: O_EXCL create, heartbeat, stale detection) between processes
// that share the data dir. The `try` forms never wait: the janitor skips whatever a turn is using.

import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { acquireFileLock, type FileLockOptions, LockWaitError } from '../lock.ts';
import { abortError, GitError } from './errors.ts';
import { jobDir } from './layout.ts';
import { checkId } from './refs.ts';
import type { JobLease, WorkspaceConfig } from './types.ts';

const tails = new Map<string, Promise<void>>();
/** Callers holding or waiting for each key in this process. */
const queued = new Map<string, number>();

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
  queued.set(key, (queued.get(key) ?? 0) + 1);
  try {
    await waitFor(previous, signal, 'waiting for the workspace lock');
    return await fn();
  } finally {
    release();
    if (tails.get(key) === tail) tails.delete(key);
    const left = (queued.get(key) ?? 1) - 1;
    if (left === 0) queued.delete(key);
    else queued.set(key, left);
  }
}

/** How many callers in this process hold or wait for `key`: what a test waits on. */
export function localLockQueue(key: string): number {
  return queued.get(key) ?? 0;
}

/** Runs `fn` if no caller in this process holds or waits for `key`; otherwise returns BUSY. */
function tryLocalLock<T>(key: string, fn: () => Promise<T>): Promise<T | typeof BUSY> {
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
async function tryFileLock<T>(
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

// Leases handed out by withJobLock and not yet released: prepareCheckout trusts only these.
const heldLeases = new WeakSet<JobLease>();

/**
 * Holds a job's clone while `fn` runs: the turn holds it from prepare to push, the janitor
 * deletes a clone only while holding it. Pass the lease to prepareCheckout.
 */
export async function withJobLock<T>(
  cfg: WorkspaceConfig,
  jobId: string,
  fn: (lease: JobLease) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  checkId('jobId', jobId);
  const dir = jobDir(cfg, jobId);
  await mkdir(dirname(dir), { recursive: true });
  return withLocalLock(
    dir,
    () => withFileLock(`${dir}.lock`, () => withLease(jobId, fn), signal ? { signal } : {}),
    signal,
  );
}

/** Runs `fn` under the job's lock if nobody holds it; otherwise returns BUSY. */
export async function tryJobLock<T>(
  cfg: WorkspaceConfig,
  jobId: string,
  fn: (lease: JobLease) => Promise<T>,
): Promise<T | typeof BUSY> {
  checkId('jobId', jobId);
  const dir = jobDir(cfg, jobId);
  await mkdir(dirname(dir), { recursive: true });
  return tryLocalLock(dir, async () => tryFileLock(`${dir}.lock`, () => withLease(jobId, fn)));
}

/** Whether `lease` is one withJobLock or tryJobLock handed out and has not released yet. */
export function isHeld(lease: JobLease): boolean {
  return heldLeases.has(lease);
}

async function withLease<T>(jobId: string, fn: (lease: JobLease) => Promise<T>): Promise<T> {
  const lease: JobLease = { jobId };
  heldLeases.add(lease);
  try {
    return await fn(lease);
  } finally {
    heldLeases.delete(lease);
  }
}

/**
 * Holds a project's mirror while `fn` runs: fetches, new clones that borrow its objects, gc
 * and eviction each take it, so the janitor never removes a mirror a clone is being made from.
 */
export function withMirrorLock<T>(mirror: string, fn: () => Promise<T>, signal?: AbortSignal) {
  return withLocalLock(
    mirror,
    () => withFileLock(`${mirror}.lock`, fn, signal ? { signal } : {}),
    signal,
  );
}

/** Runs `fn` under a mirror's lock if nobody holds it; otherwise returns BUSY. */
export function tryMirrorLock<T>(mirror: string, fn: () => Promise<T>): Promise<T | typeof BUSY> {
  return tryLocalLock(mirror, () => tryFileLock(`${mirror}.lock`, fn));
}
