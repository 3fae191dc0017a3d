// The files of a snapshot: copied out of a checkout entry by entry, measured, searched for
// secret values, and copied again for a restore. Copies are `cp -a --reflink=auto`: the same
// files, modes, times and symlinks (never followed), sharing blocks where the file system can
// (btrfs, XFS); on ext4 a full copy. Every walk here uses lstat and reads regular files only.
import { execFile } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { lstat, mkdir, readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { SANDBOX_PATH } from '../sandbox/args.ts';
import { NeedleFinder, type SecretNeedles } from '../workspace/secret-scan.ts';
import { parentsAreDirectories } from '../workspace/untracked.ts';

const run = promisify(execFile);

/** Copies `from` (a file, link or directory) to `to`, which must not exist; its parent must. */
export async function copyTree(from: string, to: string, signal?: AbortSignal): Promise<void> {
  await run('/usr/bin/cp', ['-a', '--reflink=auto', '--no-target-directory', '--', from, to], {
    env: { PATH: SANDBOX_PATH, LC_ALL: 'C' },
    cwd: '/',
    maxBuffer: 1024 * 1024,
    ...(signal ? { signal } : {}),
  });
}

/**
 * Copies the checkout's `entries` (relative paths) into `tree`, keeping their places. An entry
 * under a parent that is not a real directory (a symlink the setup made) is left out: a copy
 * through it would read outside the checkout. Returns the entries copied.
 */
export async function copyEntries(
  checkout: string,
  entries: readonly string[],
  tree: string,
  signal?: AbortSignal,
): Promise<string[]> {
  const copied: string[] = [];
  await mkdir(tree, { recursive: true });
  for (const entry of entries) {
    if (!(await parentsAreDirectories(checkout, entry))) continue;
    const target = join(tree, ...entry.split('/'));
    await mkdir(dirname(target), { recursive: true });
    await copyTree(join(checkout, ...entry.split('/')), target, signal);
    copied.push(entry);
  }
  return copied;
}

export interface TreeFacts {
  /** Everything but directories: files, symlinks, and the rest. */
  files: number;
  /** Allocated bytes (blocks), what the tree takes on disk. */
  bytes: number;
}

/**
 * Counts and measures a tree; with `secrets`, also finds the first whose value (in any of its
 * forms) is in a regular file of it, and stops there.
 */
export async function inspectTree(
  root: string,
  secrets: readonly SecretNeedles[] = [],
): Promise<TreeFacts & { secret: string | undefined }> {
  const facts = { files: 0, bytes: 0, secret: undefined as string | undefined };
  const searched = secrets.filter((s) => s.forms.length > 0);
  const finder = searched.length > 0 ? new NeedleFinder(searched) : undefined;
  const pending = [root];
  while (pending.length > 0) {
    const dir = pending.pop() as string;
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const info = await lstat(path);
      facts.bytes += info.blocks * 512;
      if (info.isDirectory()) {
        pending.push(path);
        continue;
      }
      facts.files += 1;
      if (finder && info.isFile() && info.size > 0 && facts.secret === undefined) {
        finder.start();
        for await (const chunk of createReadStream(path)) {
          finder.push(chunk as Buffer);
          if (finder.found !== undefined) break;
        }
        facts.secret = finder.found;
      }
    }
  }
  return facts;
}
