// What a turn changed in a job's clone: the list of changed files, the commit that records
// them under Errand's identity, and the diff of the work branch for review.

import { join } from 'node:path';
import { invalidInput } from './errors.ts';
import { type GitRunOptions, gitOut, runGit } from './git.ts';
import type { ChangedFile, GitIdentity, WorkspaceConfig } from './types.ts';

function repoOptions(dir: string, signal: AbortSignal | undefined): GitRunOptions {
  return { gitDir: join(dir, '.git'), workTree: dir, cwd: dir, signal };
}

export function identityEnv(identity: GitIdentity): Record<string, string> {
  const bad = /[<>\n\r\0]/;
  if (!identity.name.trim() || !identity.email.trim()) {
    throw invalidInput('git identity needs a name and an email');
  }
  if (bad.test(identity.name) || bad.test(identity.email)) {
    throw invalidInput('git identity must not contain "<", ">" or line breaks');
  }
  return {
    GIT_AUTHOR_NAME: identity.name,
    GIT_AUTHOR_EMAIL: identity.email,
    GIT_COMMITTER_NAME: identity.name,
    GIT_COMMITTER_EMAIL: identity.email,
  };
}

/** Stages everything and commits it; null when the tree has no changes (and no commit). */
export async function commitAll(
  cfg: WorkspaceConfig,
  input: { dir: string; message: string; signal?: AbortSignal },
): Promise<string | null> {
  if (input.message.trim() === '') throw invalidInput('commit message is empty');
  const env = identityEnv(cfg.identity);
  const repo = repoOptions(input.dir, input.signal);
  await runGit(cfg, ['add', '--all'], repo);
  const { code } = await runGit(cfg, ['diff', '--cached', '--quiet', '--no-ext-diff'], {
    ...repo,
    okCodes: [1],
  });
  if (code === 0) return null;
  // The message comes on stdin: no size limit of argv, no option parsing of its text;
  // "whitespace" keeps lines starting with "#", which the default cleanup would drop.
  await runGit(
    cfg,
    ['commit', '--quiet', '--no-verify', '--no-gpg-sign', '--cleanup=whitespace', '--file=-'],
    {
      ...repo,
      env,
      input: input.message,
    },
  );
  return gitOut(cfg, ['rev-parse', 'HEAD'], repo);
}

/** Files that differ between the working tree and HEAD, untracked ones included. */
export async function changedFiles(
  cfg: WorkspaceConfig,
  input: { dir: string; signal?: AbortSignal },
): Promise<ChangedFile[]> {
  const { stdout } = await runGit(
    cfg,
    ['status', '--porcelain=v1', '-z', '--untracked-files=all', '--no-renames'],
    { ...repoOptions(input.dir, input.signal), env: { GIT_OPTIONAL_LOCKS: '0' } },
  );
  const files: ChangedFile[] = [];
  for (const entry of stdout.split('\0')) {
    if (entry.length < 4) continue;
    const x = entry[0];
    const y = entry[1];
    const path = entry.slice(3);
    if (x === '?' && y === '?') files.push({ path, change: 'added' });
    else if (x === 'A' && y === 'D')
      continue; // staged, then deleted: HEAD never had it
    else if (x === 'D' || y === 'D') files.push({ path, change: 'deleted' });
    else if (x === 'A') files.push({ path, change: 'added' });
    else files.push({ path, change: 'modified' });
  }
  return files;
}

export interface Diff {
  diff: string;
  /** The diff was longer than `maxBytes` and was cut there. */
  truncated: boolean;
}

/** Unified diff from `base` (a commit id, e.g. Checkout.baseCommit) to the branch's HEAD. */
export async function diffAgainst(
  cfg: WorkspaceConfig,
  input: { dir: string; base: string; maxBytes?: number; signal?: AbortSignal },
): Promise<Diff> {
  if (!/^[0-9a-f]{7,64}$/.test(input.base)) throw invalidInput('base must be a commit id');
  const { stdout, stdoutTruncated } = await runGit(
    cfg,
    [
      'diff',
      '--no-ext-diff',
      '--no-textconv',
      '--no-color',
      '--find-renames',
      `${input.base}^{commit}`,
      'HEAD',
      '--',
    ],
    { ...repoOptions(input.dir, input.signal), maxStdoutBytes: input.maxBytes ?? 10 * 1024 * 1024 },
  );
  return { diff: stdout, truncated: stdoutTruncated };
}
