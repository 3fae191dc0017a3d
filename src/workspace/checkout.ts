// Prepares a job's working copy for a turn: refreshes the project's bare mirror, then
// brings the job's own clone (objects borrowed from the mirror) to the remote state of
// its work branch, or to the source ref on the first turn. The remote is the truth.

import { randomUUID } from 'node:crypto';
import { mkdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { GitError, invalidInput } from './errors.ts';
import { type GitRunOptions, gitOut, runGit } from './git.ts';
import { type BUSY, tryFileLock, tryLocalLock, withFileLock, withLocalLock } from './lock.ts';
import { COMMIT_ID, checkBranchName, checkId, checkSourceRef, refCandidates } from './refs.ts';
import type { Checkout, GitAuth, JobLease, PrepareInput, WorkspaceConfig } from './types.ts';
import { checkAuth, displayUrl, validateRepositoryUrl } from './url.ts';

/** A clone being made; renamed to the job's path when complete. */
export const STAGING_PREFIX = '.staging-';
/** A clone or mirror being deleted; renamed out of the way first, so a crash leaves no half. */
export const TRASH_PREFIX = '.trash-';
/** In a mirror: touched by every turn that uses it (least-recently-used eviction). */
export const MIRROR_USED_STAMP = 'errand-used';

export function mirrorDir(cfg: WorkspaceConfig, projectId: string): string {
  return join(cfg.rootDir, 'mirrors', `${projectId}.git`);
}

export function jobDir(cfg: WorkspaceConfig, jobId: string): string {
  return join(cfg.rootDir, 'jobs', jobId);
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
function withMirrorLock<T>(mirror: string, fn: () => Promise<T>, signal?: AbortSignal) {
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

/** Removes a `.trash-` folder a crash left behind, unless this process is removing it now. */
export async function removeTrash(path: string): Promise<void> {
  if (!basename(path).startsWith(TRASH_PREFIX) || discarding.has(path)) return;
  await rm(path, { recursive: true, force: true, maxRetries: 3 });
}

/** Checks a repository URL and its credentials before anything reaches git. */
export function checkRemote(cfg: WorkspaceConfig, repository: string, auth?: GitAuth): void {
  const check = validateRepositoryUrl(repository, cfg.allowLocalRepos);
  if (!check.ok) throw invalidInput(`repository ${displayUrl(repository)}: ${check.reason}`);
  if (auth) {
    const problem = checkAuth(auth, cfg.allowLocalRepos);
    if (problem) throw invalidInput(problem);
  }
}

export async function prepareCheckout(
  cfg: WorkspaceConfig,
  input: PrepareInput,
): Promise<Checkout> {
  checkId('projectId', input.projectId);
  checkId('jobId', input.jobId);
  checkRemote(cfg, input.repository, input.auth);
  checkBranchName(input.branch);
  checkSourceRef(input.ref);
  await mkdir(cfg.rootDir, { recursive: true });
  const { lease } = input;
  if (lease === undefined) {
    return withJobLock(cfg, input.jobId, () => prepareHeld(cfg, input), input.signal);
  }
  if (lease.jobId !== input.jobId || !heldLeases.has(lease)) {
    throw new Error(`prepareCheckout was given a lease that does not hold job ${input.jobId}`);
  }
  return prepareHeld(cfg, input);
}

/** prepareCheckout, with the job's lock held by the caller. */
async function prepareHeld(cfg: WorkspaceConfig, input: PrepareInput): Promise<Checkout> {
  const mirror = mirrorDir(cfg, input.projectId);
  const dir = jobDir(cfg, input.jobId);
  const { signal } = input;
  const clone = () => ensureJobClone(cfg, mirror, dir, input.jobId, signal);
  let synced = await syncMirror(cfg, mirror, input, clone);

  let discardedHead: string | null;
  try {
    const target = synced.remoteHead ?? synced.baseCommit;
    discardedHead = await resetJobClone(
      cfg,
      mirror,
      dir,
      input.branch,
      target,
      synced.reused,
      signal,
    );
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
    // A clone git cannot work with (objects lost with a rebuilt mirror, a stale ref lock
    // of a killed git, a clone half deleted): the reset would drop its unpushed work anyway,
    // so make it again, from a mirror synced again in case that is what lost the objects.
    synced = await syncMirror(cfg, mirror, input, async () => {
      await rm(dir, { recursive: true, force: true });
      return clone();
    });
    const target = synced.remoteHead ?? synced.baseCommit;
    discardedHead = await resetJobClone(cfg, mirror, dir, input.branch, target, false, signal);
  }

  const { baseCommit, remoteHead } = synced;
  return {
    dir,
    baseCommit,
    headCommit: remoteHead ?? baseCommit,
    branchExisted: remoteHead !== null,
    discardedHead,
  };
}

/** Deletes a job's clone (waiting for a turn that uses it); the mirror stays. */
export async function removeCheckout(
  cfg: WorkspaceConfig,
  input: { jobId: string; signal?: AbortSignal },
): Promise<void> {
  checkId('jobId', input.jobId);
  await withJobLock(cfg, input.jobId, () => discardDir(jobDir(cfg, input.jobId)), input.signal);
}

interface MirrorState {
  /** performance.now() when the last successful fetch started, per repository URL. */
  fetchedAt: Map<string, number>;
}

const mirrors = new Map<string, MirrorState>();

async function exists(path: string): Promise<boolean> {
  return (await stat(path).catch(() => null)) !== null;
}

const LOCK_CONTENTION =
  /Unable to create '[^']*\.lock'|cannot lock ref|could not lock|is at [0-9a-f]+ but expected/i;

interface Synced {
  baseCommit: string;
  remoteHead: string | null;
  /** Whether the job's clone existed already (false: made now from the mirror). */
  reused: boolean;
}

async function syncMirror(
  cfg: WorkspaceConfig,
  mirror: string,
  input: PrepareInput,
  ensureClone: () => Promise<boolean>,
): Promise<Synced> {
  const requestedAt = performance.now();
  const { signal, repository, auth } = input;
  await mkdir(join(cfg.rootDir, 'mirrors'), { recursive: true });

  return withMirrorLock(
    mirror,
    async () => {
      const state = mirrors.get(mirror) ?? { fetchedAt: new Map<string, number>() };
      mirrors.set(mirror, state);
      if (!(await exists(join(mirror, 'HEAD')))) {
        await rm(mirror, { recursive: true, force: true });
        await runGit(cfg, ['init', '--quiet', '--bare', '--', mirror], {
          cwd: cfg.rootDir,
          signal,
        });
        // A new mirror (the first, or one the janitor evicted) has fetched nothing yet.
        state.fetchedAt.clear();
      }
      // A fetch that started after this call was made saw the remote at least as new
      // as this one would: concurrent turns of one project share it.
      const last = state.fetchedAt.get(repository);
      if (last === undefined || last < requestedAt) {
        const startedAt = performance.now();
        await fetchMirror(cfg, mirror, repository, auth, signal);
        state.fetchedAt.set(repository, startedAt);
      }
      const { baseCommit, remoteHead } = await resolveRefs(cfg, mirror, input);
      await writeFile(join(mirror, MIRROR_USED_STAMP), '');
      // Under the mirror's lock: once the clone exists it names the mirror in its alternates,
      // which is how the janitor knows the mirror is in use.
      const reused = await ensureClone();
      return { baseCommit, remoteHead, reused };
    },
    signal,
  );
}

async function fetchMirror(
  cfg: WorkspaceConfig,
  mirror: string,
  repository: string,
  auth: GitAuth | undefined,
  signal: AbortSignal | undefined,
): Promise<void> {
  const args = [
    // --no-show-forced-updates would print a warning after every update without this.
    '-c',
    'advice.fetchShowForcedUpdates=false',
    'fetch',
    '--quiet',
    '--prune',
    '--no-tags',
    '--no-write-fetch-head',
    '--no-recurse-submodules',
    // What a forced update is only matters to messages --quiet drops; finding out costs a
    // merge-base walk per updated ref (1.7 s → 0.1 s when two 50k-commit branches swap).
    '--no-show-forced-updates',
    '--',
    repository,
    '+refs/heads/*:refs/heads/*',
    '+refs/tags/*:refs/tags/*',
  ];
  const action = `fetch from ${displayUrl(repository)}`;
  // Another program may be writing the mirror (an operator's manual fetch): git's own ref
  // locks turn that into a failure, which passes once the other side is done.
  for (let attempt = 0; ; attempt++) {
    try {
      await runGit(cfg, args, { gitDir: mirror, cwd: mirror, auth, signal, action });
      return;
    } catch (err) {
      if (!(err instanceof GitError) || !LOCK_CONTENTION.test(err.stderr) || attempt >= 5) {
        throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
    }
  }
}

/** The commit each name peels to (null: none), all in one git call. */
async function resolveCommits(
  cfg: WorkspaceConfig,
  gitDir: string,
  names: readonly string[],
  signal: AbortSignal | undefined,
): Promise<Array<string | null>> {
  // Names were checked (no whitespace or control characters): one per line, never options.
  // A name that resolves to no commit prints "<name> missing" (or "ambiguous") instead.
  const { stdout } = await runGit(cfg, ['cat-file', '--batch-check=%(objectname) %(objecttype)'], {
    gitDir,
    cwd: gitDir,
    input: names.map((name) => `${name}^{commit}\n`).join(''),
    signal,
  });
  const lines = stdout.split('\n');
  return names.map(
    (_, i) => /^([0-9a-f]{40}|[0-9a-f]{64}) commit$/.exec(lines[i] ?? '')?.[1] ?? null,
  );
}

/** The source ref's commit and the work branch's on the remote, as the mirror has them. */
async function resolveRefs(
  cfg: WorkspaceConfig,
  mirror: string,
  input: PrepareInput,
): Promise<{ baseCommit: string; remoteHead: string | null }> {
  const candidates = refCandidates(input.ref);
  const found = await resolveCommits(
    cfg,
    mirror,
    [`refs/heads/${input.branch}`, ...candidates],
    input.signal,
  );
  const remoteHead = found[0] ?? null;
  const baseCommit =
    found.slice(1).find((sha) => sha !== null) ?? (await fetchPinned(cfg, mirror, input));
  return { baseCommit, remoteHead };
}

/** A commit no branch or tag reaches (a pull request's head): asked for by id, and pinned. */
async function fetchPinned(
  cfg: WorkspaceConfig,
  mirror: string,
  input: PrepareInput,
): Promise<string> {
  if (COMMIT_ID.test(input.ref)) {
    const fetched = await runGit(
      cfg,
      ['fetch', '--quiet', '--no-tags', '--no-write-fetch-head', '--', input.repository, input.ref],
      {
        gitDir: mirror,
        cwd: mirror,
        auth: input.auth,
        signal: input.signal,
        action: `fetch of ${input.ref} from ${displayUrl(input.repository)}`,
      },
    ).catch((err: unknown) => {
      if (err instanceof GitError && !err.transient) return null;
      throw err;
    });
    if (fetched) {
      await runGit(cfg, ['update-ref', `refs/errand/pinned/${input.ref}`, input.ref], {
        gitDir: mirror,
        cwd: mirror,
      });
      const [sha] = await resolveCommits(cfg, mirror, [input.ref], input.signal);
      if (sha) return sha;
    }
  }
  throw new GitError(
    'ref_not_found',
    `ref "${input.ref}" was not found in ${displayUrl(input.repository)}`,
    { transient: false },
  );
}

async function ensureJobClone(
  cfg: WorkspaceConfig,
  mirror: string,
  dir: string,
  jobId: string,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  if (await exists(join(dir, '.git', 'HEAD'))) return true;
  await rm(dir, { recursive: true, force: true });
  const jobs = join(cfg.rootDir, 'jobs');
  await mkdir(jobs, { recursive: true });
  // Cloned aside and renamed, so a crash never leaves a half clone at the job's path.
  const staging = join(jobs, `${STAGING_PREFIX}${jobId}-${randomUUID()}`);
  try {
    // --shared is --reference for a local source: objects stay in the mirror.
    await runGit(
      cfg,
      [
        'clone',
        '--quiet',
        '--shared',
        '--no-checkout',
        '--origin',
        'mirror',
        '--',
        mirror,
        staging,
      ],
      { cwd: jobs, allowFile: true, signal, action: 'clone of the project mirror' },
    );
    await rename(staging, dir);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  return false;
}

/**
 * Puts the clone on `branch` at `target` with a pristine tree; returns a dropped local head.
 * A clone made just now is pristine already and has no work of its own to save.
 */
async function resetJobClone(
  cfg: WorkspaceConfig,
  mirror: string,
  dir: string,
  branch: string,
  target: string,
  reused: boolean,
  signal: AbortSignal | undefined,
): Promise<string | null> {
  const repo = { gitDir: join(dir, '.git'), workTree: dir, cwd: dir, signal };
  let discarded: string | null = null;
  if (reused) {
    // Left by a git process that was killed with its turn; nothing else uses this clone.
    await rm(join(dir, '.git', 'index.lock'), { force: true });
    await checkBorrows(dir, mirror);
    discarded = await saveUnpushed(cfg, repo, branch, target);
  }
  await runGit(
    cfg,
    ['checkout', '--quiet', '--force', '--no-recurse-submodules', '-B', branch, target, '--'],
    repo,
  );
  if (reused) await runGit(cfg, ['clean', '-ffdxq'], repo);
  return discarded;
}

/**
 * Fails unless the clone borrows its objects from `mirror`. The target was resolved in the
 * mirror after a fetch, which leaves everything it reaches there, and the mirror drops no
 * object while a clone borrows from it (retention.ts gcMirror): so with this link intact the
 * clone has every object of the target, which checkout (trusting the index for unchanged
 * paths) would not notice missing until commit or push. Reading the link replaces a walk of
 * all the target's objects (`rev-list --objects`, ~50 ms for 20k files).
 */
async function checkBorrows(dir: string, mirror: string): Promise<void> {
  const objects = join(dir, '.git', 'objects');
  const text = await readFile(join(objects, 'info', 'alternates'), 'utf8').catch(() => '');
  const links = text.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#'));
  const wanted = await realPath(join(mirror, 'objects'));
  if (
    links.length !== 1 ||
    (await realPath(resolve(objects, (links[0] ?? '').trim()))) !== wanted
  ) {
    throw new GitError('failed', `the clone in ${dir} does not borrow from the project mirror`, {
      transient: false,
    });
  }
}

const realPath = (path: string): Promise<string> => realpath(path).catch(() => path);

/**
 * A local head of `branch` that `target` does not contain (a crashed attempt committed but
 * never pushed) is kept under `refs/errand/discarded/` and returned; null when there is none.
 */
async function saveUnpushed(
  cfg: WorkspaceConfig,
  repo: GitRunOptions,
  branch: string,
  target: string,
): Promise<string | null> {
  // 0: the branch is at the target or behind it; 1: it has commits the target lacks;
  // 128: no such branch (or its commit is unreadable: nothing there to save).
  const { code } = await runGit(
    cfg,
    ['merge-base', '--is-ancestor', `refs/heads/${branch}`, target],
    { ...repo, okCodes: [1, 128] },
  );
  if (code !== 1) return null;
  const local = await gitOut(cfg, ['rev-parse', '--verify', `refs/heads/${branch}^{commit}`], repo);
  await runGit(cfg, ['update-ref', `refs/errand/discarded/${Date.now()}`, local], repo);
  return local;
}
