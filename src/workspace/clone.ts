// The job's own clone: made from the project's mirror (objects borrowed, never copied), and
// put on the work branch at the remote's commit with a pristine tree before each turn; a
// local commit no push ever reached is kept aside under `refs/errand/discarded/`.
import { randomUUID } from 'node:crypto';
import { mkdir, readFile, realpath, rename, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { GitError } from './errors.ts';
import { type GitRunOptions, gitOut, runGit } from './git.ts';
import { exists, STAGING_PREFIX } from './layout.ts';
import type { WorkspaceConfig } from './types.ts';
import { moveUntrackedAside } from './untracked.ts';

export async function ensureJobClone(
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
export async function resetJobClone(
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
    // The last turn's restored environment (node_modules…) goes in a rename per entry and is
    // deleted in the background: git's clean would take seconds over its many files.
    await moveUntrackedAside(cfg, dir, signal);
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
