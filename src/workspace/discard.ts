// Deleting a clone or a mirror: renamed aside first (atomic), then removed, so a crash leaves a
// `.trash-` folder for the janitor and never a half-deleted repository at its path.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { jobDir, TRASH_PREFIX } from './layout.ts';
import { withJobLock } from './lock.ts';
import { checkId } from './refs.ts';
import type { WorkspaceConfig } from './types.ts';

/**
 * Deletes a clone or mirror: first renamed aside (atomic), then removed. A crash mid-way
 * leaves a `.trash-` folder for the janitor, never a half-deleted repository at its path.
 */
export async function discardDir(path: string): Promise<boolean> {
  const aside = join(dirname(path), `${TRASH_PREFIX}${basename(path)}-${randomUUID()}`);
  try {
    await rename(path, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  discarding.add(aside);
  try {
    await rm(aside, { recursive: true, force: true, maxRetries: 3 });
  } finally {
    discarding.delete(aside);
  }
  return true;
}

// Folders this process is removing right now: a sweep of leftovers leaves them alone.
const discarding = new Set<string>();
const background = new Set<Promise<void>>();

/**
 * Removes a `.trash-` folder in the background (the caller renamed it aside already), with `rm`
 * in a process of its own: Node's recursive rm would queue an unlink per file on libuv's four
 * threads, and every other file operation of the service (a turn's restore) waited behind
 * 30,000 of them (3 s measured). One that cannot be removed now stays for the janitor's sweep
 * of leftovers, which tries again.
 */
export function discardLater(aside: string): void {
  if (!basename(aside).startsWith(TRASH_PREFIX)) throw new Error(`not a trash folder: ${aside}`);
  discarding.add(aside);
  const done = new Promise<void>((resolve) => {
    execFile('/usr/bin/rm', ['-rf', '--', aside], { cwd: '/', env: {} }, () => resolve());
  }).finally(() => {
    discarding.delete(aside);
    background.delete(done);
  });
  background.add(done);
}

/** Resolves when the background removals started so far have ended (tests, benchmarks). */
export async function discardsSettled(): Promise<void> {
  await Promise.all([...background]);
}

/** Removes a `.trash-` folder a crash left behind, unless this process is removing it now. */
export async function removeTrash(path: string): Promise<void> {
  if (!basename(path).startsWith(TRASH_PREFIX) || discarding.has(path)) return;
  await rm(path, { recursive: true, force: true, maxRetries: 3 });
}

/** Deletes a job's clone (waiting for a turn that uses it); the mirror stays. */
export async function removeCheckout(
  cfg: WorkspaceConfig,
  input: { jobId: string; signal?: AbortSignal },
): Promise<void> {
  checkId('jobId', input.jobId);
  await withJobLock(cfg, input.jobId, () => discardDir(jobDir(cfg, input.jobId)), input.signal);
}
