// The one gate between a path chosen by the model and the filesystem. Everything the file
// tools touch passes through resolvePath: the checkout is the only part of the disk the model
// may reach, and .git/ is off limits because config and hooks there run on the next git call.

import * as fs from 'node:fs/promises';
import * as path from 'node:path';

/** A refusal or failure the model caused and can fix; its message is written for the model. */
export class ToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ToolError';
  }
}

export interface ResolvedPath {
  /** The path as the model gave it, normalised (`./a//b` → `a/b`, the root is `.`). */
  display: string;
  /** Absolute path with every existing symlink resolved; what reads and writes use. */
  real: string;
  /** `real` relative to the real root, `/`-separated, `''` for the root itself. */
  rel: string;
  /** Like `real`, except a final symlink is not followed: what delete and move act on. */
  entry: string;
  /** `entry` relative to the real root. */
  entryRel: string;
}

/** Real absolute path of `requested` inside `root`; throws ToolError when it is refused. */
export async function resolveInside(root: string, requested: string): Promise<string> {
  return (await resolvePath(root, requested)).real;
}

export async function resolvePath(root: string, requested: string): Promise<ResolvedPath> {
  const segments = parseRequested(requested);
  const display = segments.length === 0 ? '.' : segments.join('/');
  const realRoot = await realRootOf(root);

  // Walk one component at a time so that a symlink anywhere on the way, including one whose
  // target does not exist yet, is seen before anything is opened through it. `cur` stays a
  // real path throughout: the real root plus components that are not symlinks, or a symlink's
  // resolved target.
  let cur = realRoot;
  let entry = realRoot;
  let exists = true;
  for (const [i, segment] of segments.entries()) {
    const next = path.join(cur, segment);
    entry = next;
    if (!exists) {
      cur = next;
      continue;
    }
    const stat = await lstatOrUndefined(next);
    if (stat === undefined) {
      exists = false;
      cur = next;
      continue;
    }
    if (!stat.isSymbolicLink()) {
      cur = next;
      continue;
    }
    const through = quote(segments.slice(0, i + 1).join('/'));
    let target: string;
    try {
      target = await fs.realpath(next);
    } catch (err) {
      if (isErrno(err, 'ENOENT', 'ENOTDIR', 'ELOOP')) {
        throw new ToolError(
          `path ${quote(display)} goes through symlink ${through}, whose target does not exist`,
        );
      }
      throw err;
    }
    if (relativeInside(realRoot, target) === undefined) {
      throw new ToolError(
        `path ${quote(display)} goes through symlink ${through}, which points outside the repository`,
      );
    }
    cur = target;
  }

  const rel = relativeInside(realRoot, cur);
  const entryRel = relativeInside(realRoot, entry);
  if (rel === undefined || entryRel === undefined) {
    throw new ToolError(`path ${quote(display)} is outside the repository`);
  }
  // A symlink inside the checkout may point into .git/; the real path is what counts.
  if (hasGitSegment(rel.split('/')) || hasGitSegment(entryRel.split('/'))) {
    throw new ToolError(`path ${quote(display)} leads into .git/, which the tools may not touch`);
  }
  return { display, real: cur, rel, entry, entryRel };
}

/** The real path of the checkout itself; a missing root is a setup bug, not the model's. */
export async function realRootOf(root: string): Promise<string> {
  return fs.realpath(root);
}

/** True for a name git treats as its own directory, including spellings that alias it. */
export function isGitDirName(name: string): boolean {
  // Case-insensitive filesystems, NTFS short names and trailing dots/spaces (Windows), and
  // zero-width characters (HFS+) all alias ".git"; git itself refuses the same spellings.
  const folded = name
    .replace(/[\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]/g, '')
    .replace(/[. ]+$/, '')
    .toLowerCase();
  return folded === '.git' || folded === 'git~1';
}

/** Quote a model-supplied string for an error message, cut so a huge value stays readable. */
export function quote(value: string): string {
  const cut = value.length > 200 ? `${value.slice(0, 200)}…` : value;
  return `'${cut}'`;
}

export function isErrno(err: unknown, ...codes: string[]): err is NodeJS.ErrnoException {
  return (
    err instanceof Error &&
    typeof (err as NodeJS.ErrnoException).code === 'string' &&
    codes.includes((err as NodeJS.ErrnoException).code as string)
  );
}

function parseRequested(requested: string): string[] {
  if (typeof requested !== 'string' || requested.trim() === '') {
    throw new ToolError('path is empty; give a path relative to the repository root');
  }
  if (requested.includes('\0')) {
    throw new ToolError('path contains a NUL byte');
  }
  if (requested.startsWith('/') || path.isAbsolute(requested) || /^[A-Za-z]:\//.test(requested)) {
    throw new ToolError(
      `path ${quote(requested)} is absolute; give a path relative to the repository root, e.g. 'src/index.ts'`,
    );
  }
  // On POSIX a backslash is an ordinary character, elsewhere a separator: refusing it keeps
  // one meaning everywhere.
  if (requested.includes('\\')) {
    throw new ToolError(`path ${quote(requested)} contains a backslash; use '/' between folders`);
  }
  const segments: string[] = [];
  for (const segment of requested.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (segments.pop() === undefined) {
        throw new ToolError(`path ${quote(requested)} is outside the repository`);
      }
      continue;
    }
    segments.push(segment);
  }
  if (hasGitSegment(segments)) {
    throw new ToolError(`path ${quote(requested)} is inside .git/, which the tools may not touch`);
  }
  return segments;
}

function hasGitSegment(segments: readonly string[]): boolean {
  return segments.some(isGitDirName);
}

/** `target` relative to `root` with `/` separators, or undefined when it is not inside. */
function relativeInside(root: string, target: string): string | undefined {
  const rel = path.relative(root, target);
  if (rel === '') return '';
  if (rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel)) return undefined;
  return rel.split(path.sep).join('/');
}

async function lstatOrUndefined(p: string) {
  try {
    return await fs.lstat(p);
  } catch (err) {
    // ENOTDIR: an earlier component is a file; the later operation reports it properly.
    if (isErrno(err, 'ENOENT', 'ENOTDIR')) return undefined;
    throw err;
  }
}
