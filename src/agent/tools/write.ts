// The tools that change the checkout: write_file, edit_file, delete_file, move_file. Each goes
// through resolvePath, opens without following a final symlink, and reports the changed
// repository path to onFileChanged so the turn knows what to commit.

import { constants } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { limitsOf, type ToolContext, toolResult } from './context.ts';
import { isErrno, quote, type ResolvedPath, realRootOf, resolvePath, ToolError } from './paths.ts';
import { formatBytes, looksBinary, plural } from './text.ts';

const noFollow = constants.O_NOFOLLOW ?? 0;

export interface WriteFileInput {
  path: string;
  content: string;
}

export async function writeFile(ctx: ToolContext, input: WriteFileInput): Promise<string> {
  return toolResult(ctx, async () => {
    const { writeMaxBytes } = limitsOf(ctx);
    if (typeof input.content !== 'string') throw new ToolError('content must be a string');
    const size = Buffer.byteLength(input.content);
    if (size > writeMaxBytes) {
      throw new ToolError(
        `content is ${formatBytes(size)}; write_file accepts at most ${formatBytes(writeMaxBytes)}`,
      );
    }
    const target = await resolvePath(ctx.root, input.path);
    const existing = await statOrUndefined(target.real);
    if (existing?.isDirectory() || target.rel === '') {
      throw new ToolError(`${quote(target.display)} is a directory`);
    }
    if (existing !== undefined && !existing.isFile()) {
      throw new ToolError(`${quote(target.display)} is not a regular file`);
    }
    await fs.mkdir(path.dirname(target.real), { recursive: true });
    await writeNoFollow(target.real, input.content, constants.O_CREAT);
    ctx.onFileChanged?.(target.rel);
    const verb = existing === undefined ? 'Created' : 'Wrote';
    return `${verb} ${describeTarget(target)} (${formatBytes(size)}, ${plural(countLines(input.content), 'line')}).`;
  });
}

export interface EditFileInput {
  path: string;
  /** Text to replace; must occur exactly once. */
  old: string;
  /** Replacement text. */
  new: string;
}

export async function editFile(ctx: ToolContext, input: EditFileInput): Promise<string> {
  return toolResult(ctx, async () => {
    const { writeMaxBytes } = limitsOf(ctx);
    if (input.old === '') {
      throw new ToolError('old is empty; to create a file or replace all of it use write_file');
    }
    if (input.old === input.new) {
      throw new ToolError('old and new are identical; nothing to change');
    }
    const target = await resolvePath(ctx.root, input.path);
    const shown = quote(target.display);
    const stat = await fs.stat(target.real);
    if (stat.isDirectory()) throw new ToolError(`${shown} is a directory`);
    if (!stat.isFile()) throw new ToolError(`${shown} is not a regular file`);
    if (stat.size > writeMaxBytes) {
      throw new ToolError(
        `${shown} is ${formatBytes(stat.size)}; edit_file handles files up to ${formatBytes(writeMaxBytes)}`,
      );
    }
    const bytes = await readNoFollow(target.real);
    if (looksBinary(bytes)) throw new ToolError(`${shown} looks like a binary file`);
    const text = bytes.toString('utf8');
    // Decoding replaces invalid sequences; writing that back would corrupt the rest of the file.
    if (!Buffer.from(text).equals(bytes)) {
      throw new ToolError(`${shown} is not valid UTF-8; edit_file cannot change it safely`);
    }

    let old = input.old;
    let replacement = input.new;
    let at = occurrences(text, old);
    // read_file hides CRLF endings, so the model's text has bare \n; match what it saw.
    if (at.length === 0 && text.includes('\r\n') && old.includes('\n') && !old.includes('\r')) {
      old = old.replace(/\n/g, '\r\n');
      replacement = replacement.replace(/\r?\n/g, '\r\n');
      at = occurrences(text, old);
    }
    const first = at[0];
    if (first === undefined) {
      throw new ToolError(`old text not found in ${shown}. ${notFoundHint(text, input.old)}`);
    }
    if (at.length > 1) {
      const lines = at.slice(0, 10).map((i) => lineAt(text, i));
      throw new ToolError(
        `old text matches ${at.length} times in ${shown} (at lines ${lines.join(', ')}${at.length > 10 ? ', …' : ''}); ` +
          'include more surrounding lines in old so that it matches exactly once',
      );
    }
    const result = text.slice(0, first) + replacement + text.slice(first + old.length);
    const size = Buffer.byteLength(result);
    if (size > writeMaxBytes) {
      throw new ToolError(
        `the edit would make ${shown} ${formatBytes(size)}, over the limit of ${formatBytes(writeMaxBytes)}`,
      );
    }
    await writeNoFollow(target.real, result, 0);
    ctx.onFileChanged?.(target.rel);
    const from = lineAt(result, first);
    if (replacement === '')
      return `Edited ${describeTarget(target)}: removed the text at line ${from}.`;
    const to = from + countNewlines(replacement.replace(/\r?\n$/, ''));
    return `Edited ${describeTarget(target)}: the new text is at lines ${from}-${to}.`;
  });
}

export interface DeleteFileInput {
  path: string;
}

export async function deleteFile(ctx: ToolContext, input: DeleteFileInput): Promise<string> {
  return toolResult(ctx, async () => {
    const target = await resolvePath(ctx.root, input.path);
    // A symlink is removed itself, never the file it points to.
    const stat = await fs.lstat(target.entry);
    if (stat.isDirectory() || target.entryRel === '') {
      throw new ToolError(
        `${quote(target.display)} is a directory; delete_file only removes files`,
      );
    }
    await fs.unlink(target.entry);
    ctx.onFileChanged?.(target.entryRel);
    return `Deleted ${quote(target.entryRel)}.`;
  });
}

export interface MoveFileInput {
  from: string;
  to: string;
  /** Replace `to` if it exists. */
  overwrite?: boolean | undefined;
}

export async function moveFile(ctx: ToolContext, input: MoveFileInput): Promise<string> {
  return toolResult(ctx, async () => {
    const from = await resolvePath(ctx.root, input.from);
    const to = await resolvePath(ctx.root, input.to);
    const source = await fs.lstat(from.entry);
    if (source.isDirectory() || from.entryRel === '') {
      throw new ToolError(
        `${quote(from.display)} is a directory; move_file moves one file at a time`,
      );
    }
    if (from.entry === to.entry) throw new ToolError('from and to are the same file');
    const dest = await lstatOrUndefined(to.entry);
    // On a case-insensitive filesystem `a.ts` → `A.ts` finds the source itself at `to`.
    const sameFile = dest !== undefined && dest.ino === source.ino && dest.dev === source.dev;
    if (dest !== undefined && !sameFile) {
      if (dest.isDirectory()) {
        throw new ToolError(
          `${quote(to.display)} is a directory; give the full destination path including the file name`,
        );
      }
      if (input.overwrite !== true) {
        throw new ToolError(
          `${quote(to.display)} already exists; pass overwrite: true to replace it`,
        );
      }
    }
    if (source.isSymbolicLink()) await checkMovedLink(ctx, from, to);
    await fs.mkdir(path.dirname(to.entry), { recursive: true });
    await fs.rename(from.entry, to.entry);
    ctx.onFileChanged?.(from.entryRel);
    ctx.onFileChanged?.(to.entryRel);
    return `Moved ${quote(from.entryRel)} to ${quote(to.entryRel)}.`;
  });
}

// A relative symlink means something else in another folder: `a/l -> ../x` moved to the root
// would point outside the checkout, so check where it will point from its new place.
async function checkMovedLink(
  ctx: ToolContext,
  from: ResolvedPath,
  to: ResolvedPath,
): Promise<void> {
  const linkText = await fs.readlink(from.entry);
  if (path.isAbsolute(linkText)) return;
  const realRoot = await realRootOf(ctx.root);
  const pointsTo = path.relative(realRoot, path.resolve(path.dirname(to.entry), linkText));
  try {
    await resolvePath(ctx.root, pointsTo.split(path.sep).join('/') || '.');
  } catch (err) {
    if (!(err instanceof ToolError)) throw err;
    throw new ToolError(
      `moving the symlink ${quote(from.display)} to ${quote(to.display)} would make it point outside the repository or into .git/`,
    );
  }
}

function describeTarget(target: ResolvedPath): string {
  return target.display === target.rel
    ? quote(target.rel)
    : `${quote(target.rel)} (through the symlink ${quote(target.display)})`;
}

async function writeNoFollow(file: string, content: string, extraFlags: number): Promise<void> {
  const handle = await fs.open(
    file,
    constants.O_WRONLY | constants.O_TRUNC | noFollow | extraFlags,
    0o666,
  );
  try {
    await handle.writeFile(content);
  } finally {
    await handle.close();
  }
}

async function readNoFollow(file: string): Promise<Buffer> {
  const handle = await fs.open(file, constants.O_RDONLY | noFollow);
  try {
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

/** Start offsets of every occurrence, overlapping ones included: "aa" in "aaa" is ambiguous. */
function occurrences(text: string, needle: string): number[] {
  const found: number[] = [];
  for (let i = text.indexOf(needle); i !== -1; i = text.indexOf(needle, i + 1)) found.push(i);
  return found;
}

function notFoundHint(text: string, old: string): string {
  if (/^\s*\d+\t/m.test(old) && !/^\s*\d+\t/m.test(text)) {
    return 'old seems to include the line numbers shown by read_file; leave them out.';
  }
  const squash = (s: string) => s.replace(/\s+/g, ' ').trim();
  if (squash(old) !== '' && squash(text).includes(squash(old))) {
    return 'It matches when whitespace is ignored: copy the indentation and line breaks exactly.';
  }
  return 'old must match the current file exactly, including whitespace; read the file again with read_file and copy the text.';
}

function lineAt(text: string, offset: number): number {
  return countNewlines(text.slice(0, offset)) + 1;
}

function countNewlines(text: string): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

function countLines(text: string): number {
  if (text === '') return 0;
  return countNewlines(text) + (text.endsWith('\n') ? 0 : 1);
}

async function statOrUndefined(file: string) {
  try {
    return await fs.stat(file);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  }
}

async function lstatOrUndefined(file: string) {
  try {
    return await fs.lstat(file);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return undefined;
    throw err;
  }
}
