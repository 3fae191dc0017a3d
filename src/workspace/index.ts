// The workspace module: per-project git mirror, per-job clone, commit and push, with git
// hardened against hostile repositories and credentials kept out of argv, URLs and disk, and
// the janitor that deletes what jobs no longer need.

export { prepareCheckout } from './checkout.ts';
export { changedFiles, commitAll, diffAgainst } from './commit.ts';
export { removeCheckout } from './discard.ts';
export {
  concludeMerge,
  type Integration,
  integrateBase,
  stillConflicted,
} from './integrate.ts';
export { attemptWorkspaceId, engineStateDir } from './layout.ts';
export { withJobLock } from './lock.ts';
export { pushBranch } from './push.ts';
export { type Janitor, startJanitor, workspaceUsage } from './retention.ts';
export { secretInNewObjects } from './secret-scan.ts';
export type { Checkout, JobLease, WorkspaceConfig } from './types.ts';
