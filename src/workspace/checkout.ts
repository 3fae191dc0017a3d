// Prepares a job's working copy for a turn: refreshes the project's bare mirror (mirror.ts),
// then brings the job's own clone (clone.ts) to the remote state of its work branch, or to the
// source ref on the first turn. The remote is the truth. Nothing reaches git before the
// repository URL, its credentials and the refs are checked here.
import { mkdir, rm } from 'node:fs/promises';
import { checkAuth, type GitAuth } from '../repository/auth.ts';
import { displayUrl, validateRepositoryUrl } from '../repository/url.ts';
import { ensureJobClone, resetJobClone } from './clone.ts';
import { GitError, invalidInput } from './errors.ts';
import { jobDir, mirrorDir } from './layout.ts';
import { isHeld, withJobLock } from './lock.ts';
import { syncMirror } from './mirror.ts';
import { checkBranchName, checkId, checkSourceRef } from './refs.ts';
import type { Checkout, PrepareInput, WorkspaceConfig } from './types.ts';

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
  if (lease.jobId !== input.jobId || !isHeld(lease)) {
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
