// The workspace module: per-project git mirror, per-job clone, commit and push, with git
// hardened against hostile repositories and credentials kept out of argv, URLs and disk, and
// the janitor that deletes what jobs no longer need.

export { checkRemote, prepareCheckout } from './checkout.ts';
export { changedFiles, commitAll, type Diff, diffAgainst } from './commit.ts';
export { removeCheckout } from './discard.ts';
export { GitError, type GitErrorCode, isAbortError } from './errors.ts';
export { tryJobLock, withJobLock } from './lock.ts';
export { pushBranch } from './push.ts';
export {
  type Janitor,
  type RetentionSettings,
  startJanitor,
  type WorkspaceUsage,
  workspaceUsage,
} from './retention.ts';
export type {
  ChangedFile,
  Checkout,
  FileChange,
  GitIdentity,
  JobLease,
  PrepareInput,
  SpawnInfo,
  WorkspaceConfig,
} from './types.ts';
