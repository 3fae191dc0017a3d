// Brings the base into a job's work branch, for a turn the pull request watch queued because
// the pull request conflicts with its base: a merge of the base (or a rebase onto it, the
// project's conflictStrategy) under Errand's identity. What git cannot resolve is left in the
// tree with its conflict markers, for the agent, and concluded after it (concludeMerge).
import { constants } from 'node:fs';
import { open, realpath } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { identityEnv } from './commit.ts';
import { invalidInput } from './errors.ts';
import { type GitRunOptions, gitOut, runGit } from './git.ts';
import type { WorkspaceConfig } from './types.ts';

/** The most of the conflicting hunks handed on, in bytes. */
const MAX_HUNK_BYTES = 48 * 1024;

export interface Integration {
  /**
   * `up-to-date`: the branch had the base already; `merged`/`rebased`: done without conflicts
   * (a commit to push); `conflicted`: a merge stopped with conflicts left in the tree.
   */
  outcome: 'up-to-date' | 'merged' | 'rebased' | 'conflicted';
  /** The paths git could not merge. */
  paths: string[];
  /** Their conflicting hunks as `git diff` shows them, cut to MAX_HUNK_BYTES. */
  hunks: string;
  /** Said when the strategy was not followed: a rebase that stopped on a conflict, merged instead. */
  note: string | null;
  /** The branch's new commit, for `merged` and `rebased`; null otherwise. */
  head: string | null;
}

function repoOptions(dir: string, signal: AbortSignal | undefined): GitRunOptions {
  return { gitDir: join(dir, '.git'), workTree: dir, cwd: dir, signal };
}

/**
 * Merges `base` (a commit) into the checked-out branch, or rebases the branch onto it; a rebase
 * that stops on a conflict is undone and a merge done instead, so that the agent resolves the
 * conflicts once, in one tree. `baseName` names the base in what is said.
 */
export async function integrateBase(
  cfg: WorkspaceConfig,
  input: {
    dir: string;
    base: string;
    baseName: string;
    strategy: 'merge' | 'rebase';
    /** The merge commit's message (a clean merge is committed with it). */
    message: string;
    signal?: AbortSignal;
  },
): Promise<Integration> {
  const repo = repoOptions(input.dir, input.signal);
  const env = identityEnv(cfg.identity);
  const contained = await runGit(cfg, ['merge-base', '--is-ancestor', input.base, 'HEAD'], {
    ...repo,
    okCodes: [1],
  });
  if (contained.code === 0)
    return { outcome: 'up-to-date', paths: [], hunks: '', note: null, head: null };
  let note: string | null = null;
  if (input.strategy === 'rebase') {
    const rebased = await runGit(cfg, ['rebase', '--quiet', '--no-autostash', input.base], {
      ...repo,
      env,
      okCodes: [1],
    });
    if (rebased.code === 0)
      return { outcome: 'rebased', paths: [], hunks: '', note: null, head: await head(cfg, repo) };
    await runGit(cfg, ['rebase', '--abort'], repo);
    note = `the rebase onto ${input.baseName} stopped on a conflict: ${input.baseName} was merged instead`;
  }
  const merged = await runGit(
    cfg,
    [
      'merge',
      '--no-ff',
      '--no-verify',
      '--no-rerere-autoupdate',
      // Committed below, its message on stdin as every commit's (merge reads none from there).
      '--no-commit',
      input.base,
    ],
    { ...repo, env, okCodes: [1] },
  );
  if (merged.code === 0) {
    const sha = await concludeMerge(cfg, {
      dir: input.dir,
      message: input.message,
      ...(input.signal ? { signal: input.signal } : {}),
    });
    return { outcome: 'merged', paths: [], hunks: '', note, head: sha };
  }
  const paths = await unmergedPaths(cfg, repo);
  if (paths.length === 0)
    throw invalidInput(`the merge of ${input.baseName} failed: ${merged.stderr.trim()}`);
  const diff = await runGit(cfg, ['diff', '--no-ext-diff', '--no-color'], {
    ...repo,
    maxStdoutBytes: MAX_HUNK_BYTES,
  });
  return { outcome: 'conflicted', paths, hunks: diff.stdout, note, head: null };
}

function head(cfg: WorkspaceConfig, repo: GitRunOptions): Promise<string> {
  return gitOut(cfg, ['rev-parse', 'HEAD'], repo);
}

async function unmergedPaths(cfg: WorkspaceConfig, repo: GitRunOptions): Promise<string[]> {
  const out = await gitOut(cfg, ['diff', '--name-only', '-z', '--diff-filter=U'], repo);
  return out.split('\0').filter((path) => path !== '');
}

/** A line git writes to open or close a conflict. */
const MARKER = /^(<{7}|>{7})( |$)/m;

/**
 * Of `paths`, those that still hold a conflict marker (the agent left them unresolved). The
 * tree is the agent's: a path that leads out of it through a link is not read (the agent may
 * have made any file a link), nor one that is no regular file (a FIFO would block) or is gone; the commit that follows records them as
 * they are.
 */
export async function stillConflicted(dir: string, paths: readonly string[]): Promise<string[]> {
  const root = await realpath(dir);
  const left: string[] = [];
  for (const path of paths) {
    const text = await readInside(root, path);
    if (text !== undefined && MARKER.test(text)) left.push(path);
  }
  return left;
}

/** A file's text when it is a file inside `root` reached without a link; else undefined. */
async function readInside(root: string, path: string): Promise<string | undefined> {
  const full = join(root, path);
  const real = await realpath(full).catch(() => undefined);
  if (real !== full || !real.startsWith(`${root}${sep}`)) return undefined;
  // Non-blocking: a FIFO left in its place would hold the open until someone wrote to it.
  const file = await open(
    real,
    constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
  ).catch(() => undefined);
  if (!file) return undefined;
  try {
    return (await file.stat()).isFile() ? await file.readFile('utf8') : undefined;
  } finally {
    await file.close();
  }
}

/**
 * Commits the merge the agent resolved: everything staged, one commit with both parents (also
 * when the resolution kept the branch's tree as it was). Returns its sha.
 */
export async function concludeMerge(
  cfg: WorkspaceConfig,
  input: { dir: string; message: string; signal?: AbortSignal },
): Promise<string> {
  const repo = repoOptions(input.dir, input.signal);
  await runGit(cfg, ['add', '--all'], repo);
  await runGit(
    cfg,
    ['commit', '--quiet', '--no-verify', '--no-gpg-sign', '--cleanup=whitespace', '--file=-'],
    { ...repo, env: identityEnv(cfg.identity), input: input.message },
  );
  return gitOut(cfg, ['rev-parse', 'HEAD'], repo);
}
