// What a checkout holds beside its tracked files (a setup's `node_modules`, `.venv`, `target`,
// and whatever a turn left): listed by git, moved aside in one rename each, and put in place
// only under parents that are real directories. The checkout is written by the sandbox, so
// no path in it is followed: a tracked directory may be a symlink at another commit.
import { randomUUID } from 'node:crypto';
import { lstat, mkdir, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { discardLater } from './discard.ts';
import { runGit } from './git.ts';
import { TRASH_PREFIX } from './layout.ts';
import type { WorkspaceConfig } from './types.ts';

/**
 * The untracked and ignored entries of a checkout, relative to it: a directory that holds no
 * tracked file is one entry (`node_modules`), not its 30,000 files. Never `.git`.
 */
export async function listUntracked(
  cfg: WorkspaceConfig,
  dir: string,
  signal?: AbortSignal,
): Promise<string[]> {
  // Without --exclude-standard every untracked path is listed, ignored or not; --directory
  // stops at a directory git tracks nothing in.
  const { stdout } = await runGit(cfg, ['ls-files', '-z', '--others', '--directory'], {
    gitDir: join(dir, '.git'),
    workTree: dir,
    cwd: dir,
    ...(signal ? { signal } : {}),
    action: 'listing the untracked files',
  });
  return stdout
    .split('\0')
    .map((path) => (path.endsWith('/') ? path.slice(0, -1) : path))
    .filter((path) => path !== '' && isPlainRelative(path));
}

/** A relative path of normal components: no `..`, `.`, empty part, or `.git` anywhere in it. */
export function isPlainRelative(path: string): boolean {
  if (path.startsWith('/') || path.includes('\0')) return false;
  return path
    .split('/')
    .every((part) => part !== '' && part !== '.' && part !== '..' && part !== '.git');
}

/**
 * Whether every directory above `rel` inside `root` is a real directory (not a symlink, not
 * missing): then a rename to `root/rel` lands inside `root`. lstat, component by component.
 */
export async function parentsAreDirectories(root: string, rel: string): Promise<boolean> {
  const parts = rel.split('/');
  let at = root;
  for (const part of parts.slice(0, -1)) {
    at = join(at, part);
    const info = await lstat(at).catch(() => null);
    if (!info?.isDirectory()) return false;
  }
  return true;
}

/**
 * Moves the checkout's untracked entries into a trash folder beside the clones, and deletes it
 * in the background: a restored `node_modules` of 30,000 files costs git's clean ~3 s, a
 * rename nothing. Entries whose parents are not real directories stay for git's clean.
 */
export async function moveUntrackedAside(
  cfg: WorkspaceConfig,
  dir: string,
  signal?: AbortSignal,
): Promise<number> {
  const entries = await listUntracked(cfg, dir, signal);
  if (entries.length === 0) return 0;
  const trash = join(cfg.rootDir, 'jobs', `${TRASH_PREFIX}untracked-${randomUUID()}`);
  await mkdir(trash);
  let moved = 0;
  for (const entry of entries) {
    if (!(await parentsAreDirectories(dir, entry))) continue;
    try {
      await rename(join(dir, ...entry.split('/')), join(trash, String(moved)));
      moved += 1;
    } catch (err) {
      // Gone meanwhile, or on another file system (a mount): git's clean removes it.
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'EXDEV') throw err;
    }
  }
  discardLater(trash);
  return moved;
}
