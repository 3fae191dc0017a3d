// Publishes a job's work branch. Never forced: a remote branch with commits we lack is a
// conflict for a person to look at, and pushing a commit the remote already has is a no-op.
// The one exception is a branch rebased onto its base (the pull request watch's conflict turn,
// with the project's conflictStrategy "rebase"): it replaces the remote branch only if that is
// still at the commit the turn started from (`replaces`), so nobody's push is overwritten.

import { join } from 'node:path';
import type { GitAuth } from '../repository/auth.ts';
import { displayUrl } from '../repository/url.ts';
import { checkRemote } from './checkout.ts';
import { GitError } from './errors.ts';
import { runGit } from './git.ts';
import { checkBranchName } from './refs.ts';
import type { WorkspaceConfig } from './types.ts';

export async function pushBranch(
  cfg: WorkspaceConfig,
  input: {
    dir: string;
    repository: string;
    branch: string;
    auth?: GitAuth;
    signal?: AbortSignal;
    /** The commit the remote branch must still be at for a rebased branch to replace it. */
    replaces?: string;
  },
): Promise<void> {
  checkRemote(cfg, input.repository, input.auth);
  checkBranchName(input.branch);
  if (input.replaces !== undefined && !/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(input.replaces))
    throw new Error(`push of ${input.branch}: "${input.replaces}" is not a commit id`);
  const shown = displayUrl(input.repository);
  try {
    await runGit(
      cfg,
      [
        'push',
        '--quiet',
        '--no-verify',
        '--porcelain',
        ...(input.replaces !== undefined
          ? [`--force-with-lease=refs/heads/${input.branch}:${input.replaces}`]
          : []),
        '--',
        input.repository,
        `HEAD:refs/heads/${input.branch}`,
      ],
      {
        gitDir: join(input.dir, '.git'),
        workTree: input.dir,
        cwd: input.dir,
        auth: input.auth,
        signal: input.signal,
        action: `push of ${input.branch} to ${shown}`,
        classifyStdout: true,
      },
    );
  } catch (err) {
    if (err instanceof GitError && err.code === 'diverged') {
      throw new GitError(
        'diverged',
        `push of ${input.branch} to ${shown} was refused: the remote branch has commits that ` +
          'are not in this workspace (someone else pushed to it); nothing was overwritten',
        { transient: false, stderr: err.stderr, exitCode: err.exitCode },
      );
    }
    throw err;
  }
}
