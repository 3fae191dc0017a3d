// Walks the checkout the way git sees it, for list_files and search: .gitignore rules at every
// level (and .git/info/exclude) are honoured, ignored folders are never entered, .git/ is never
// listed and symlinked folders are not followed. Also the glob dialect both tools accept.

import type { Dirent } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import ignore, { type Ignore } from 'ignore';
import picomatch from 'picomatch';
import { isErrno, isGitDirName, quote, ToolError } from './paths.ts';

export interface WalkEntry {
  /** Repository-relative, `/`-separated. */
  rel: string;
  abs: string;
  symlink: boolean;
}

export interface Glob {
  matches(rel: string): boolean;
  /** False when no path under the folder `dirRel` can match, so the walk can skip it. */
  mayMatchUnder(dirRel: string): boolean;
}

interface IgnoreLevel {
  /** Folder the rules belong to, relative to the root; '' for the root. */
  base: string;
  rules: Ignore;
}

/** Regular files and symlinks under `realRoot`, in sorted order, honouring .gitignore. */
export async function* walkFiles(
  realRoot: string,
  glob: Glob,
  signal?: AbortSignal,
): AsyncGenerator<WalkEntry> {
  const rootLevels: IgnoreLevel[] = [];
  const exclude = await readRules(path.join(realRoot, '.git', 'info', 'exclude'));
  if (exclude !== undefined) rootLevels.push({ base: '', rules: exclude });
  yield* walkDir(realRoot, '', rootLevels, glob, signal);
}

async function* walkDir(
  realRoot: string,
  dirRel: string,
  parentLevels: readonly IgnoreLevel[],
  glob: Glob,
  signal: AbortSignal | undefined,
): AsyncGenerator<WalkEntry> {
  signal?.throwIfAborted();
  const dirAbs = dirRel === '' ? realRoot : path.join(realRoot, dirRel);
  let entries: Dirent[];
  try {
    entries = await fs.readdir(dirAbs, { withFileTypes: true });
  } catch (err) {
    // A folder that vanished or cannot be read is left out, as git would.
    if (isErrno(err, 'ENOENT', 'ENOTDIR', 'EACCES', 'EPERM')) return;
    throw err;
  }
  let levels = parentLevels;
  const own = await readRules(path.join(dirAbs, '.gitignore'));
  if (own !== undefined) levels = [...parentLevels, { base: dirRel, rules: own }];

  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    if (isGitDirName(entry.name)) continue;
    const rel = dirRel === '' ? entry.name : `${dirRel}/${entry.name}`;
    if (entry.isDirectory()) {
      if (!glob.mayMatchUnder(rel) || isIgnored(levels, rel, true)) continue;
      yield* walkDir(realRoot, rel, levels, glob, signal);
    } else if (entry.isFile() || entry.isSymbolicLink()) {
      if (!glob.matches(rel) || isIgnored(levels, rel, false)) continue;
      yield { rel, abs: path.join(dirAbs, entry.name), symlink: entry.isSymbolicLink() };
    }
  }
}

// Like git: the deepest .gitignore with an opinion wins, so a nested `!keep.txt` can re-include
// what a parent file excluded. Excluded folders are never entered, which covers git's rule that
// nothing inside an excluded folder can be re-included.
function isIgnored(levels: readonly IgnoreLevel[], rel: string, isDir: boolean): boolean {
  for (let i = levels.length - 1; i >= 0; i--) {
    const level = levels[i]!;
    const sub = level.base === '' ? rel : rel.slice(level.base.length + 1);
    let result: ReturnType<Ignore['test']>;
    try {
      result = level.rules.test(isDir ? `${sub}/` : sub);
    } catch {
      // The ignore package rejects a few odd names (e.g. "..."); git would list them.
      continue;
    }
    if (result.ignored) return true;
    if (result.unignored) return false;
  }
  return false;
}

async function readRules(file: string): Promise<Ignore | undefined> {
  try {
    // git refuses to follow a symlinked .gitignore; so do we, since it may point outside.
    const stat = await fs.lstat(file);
    if (!stat.isFile() || stat.size > 1024 * 1024) return undefined;
    return ignore().add(await fs.readFile(file, 'utf8'));
  } catch (err) {
    if (isErrno(err, 'ENOENT', 'ENOTDIR', 'EACCES', 'EPERM')) return undefined;
    throw err;
  }
}

/**
 * Compiles the glob dialect of list_files and search (picomatch: `*`, `?`, `**`, `[abc]`,
 * `{a,b}`), matched against repository-relative paths, dotfiles included. As in .gitignore, a
 * pattern without `/` matches a name at any depth, and a pattern naming a folder matches
 * everything in it.
 */
export function compileGlob(pattern: string): Glob {
  let source = pattern.trim();
  if (source.includes('\0')) throw new ToolError('glob contains a NUL byte');
  if (source.startsWith('./')) source = source.slice(2);
  const anchored = source.startsWith('/');
  source = source.replace(/^\/+/, '').replace(/\/+$/, '');
  if (source === '' || source === '.') source = '**';
  const anywhere = !anchored && !source.includes('/');
  // picomatch reads an unclosed brace as text; the model most likely made a typo.
  if (unclosedBrace(source)) throw new ToolError(`glob ${quote(source)} has an unclosed '{'`);

  let isMatch: (path: string) => boolean;
  try {
    // picomatch lets `src/**` match `src` itself; here it means what is inside `src`.
    const glob = source.endsWith('/**') ? `${source}/*` : source;
    isMatch = picomatch(anywhere ? `**/${glob}` : glob, {
      dot: true,
      // `[!ab]` is a negated set, as in git and the shell.
      posix: true,
      // The documented dialect only: a leading `!` or `+(…)` is text, as the model wrote it.
      nonegate: true,
      noextglob: true,
      windows: false,
    });
  } catch {
    throw new ToolError(`glob ${quote(pattern)} is not valid`);
  }

  // Folders before the first wildcard are fixed: the walk only needs to enter those.
  const fixed: string[] = [];
  if (!anywhere) {
    for (const segment of source.split('/')) {
      if (/[*?[{\\]/.test(segment)) break;
      fixed.push(segment);
    }
  }
  const prefix = fixed.join('/');
  return {
    // A path matches when it, or a folder it is in, matches.
    matches: (rel) => {
      for (let path = rel; ; path = path.slice(0, path.lastIndexOf('/'))) {
        if (isMatch(path)) return true;
        if (!path.includes('/')) return false;
      }
    },
    mayMatchUnder: (dirRel) =>
      prefix === '' ||
      prefix === dirRel ||
      prefix.startsWith(`${dirRel}/`) ||
      dirRel.startsWith(`${prefix}/`),
  };
}

function unclosedBrace(glob: string): boolean {
  let depth = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '\\') i++;
    else if (c === '{') depth++;
    else if (c === '}' && depth > 0) depth--;
  }
  return depth > 0;
}
