// What every file tool receives (the checkout, limits, cancellation, change notifications), what
// it gives back (a structured result), and how a failure becomes a result for the model: a bad
// call must end as an error result the model can act on, never as an exception that ends the turn.

import * as path from 'node:path';
import { isErrno, quote, realRootOf, ToolError } from './paths.ts';

export interface ToolLimits {
  /** Paths listed by list_files before the rest is summarised. */
  listMaxEntries: number;
  /** Bytes of file text read_file returns in one call. */
  readMaxBytes: number;
  /** Lines read_file returns in one call. */
  readMaxLines: number;
  /** Matches search reports before stopping. */
  searchMaxMatches: number;
  /** Characters of a matching line search shows. */
  searchMaxLineLength: number;
  /** Files larger than this are skipped by search. */
  searchMaxFileBytes: number;
  /** Time a regular expression may run on one batch of files before search gives up. */
  searchRegexTimeoutMs: number;
  /** Largest file write_file and edit_file will produce. */
  writeMaxBytes: number;
}

const defaultToolLimits: Readonly<ToolLimits> = {
  listMaxEntries: 500,
  readMaxBytes: 256 * 1024,
  readMaxLines: 2000,
  searchMaxMatches: 200,
  searchMaxLineLength: 300,
  searchMaxFileBytes: 1024 * 1024,
  searchRegexTimeoutMs: 1000,
  writeMaxBytes: 1024 * 1024,
};

/** Where and how a file tool runs: the one thing every tool is given besides its input. */
export interface ToolRun {
  /** The job's checkout; nothing outside it is read or written. */
  root: string;
  /** Cancels the tool (the turn was cancelled); it then throws rather than returning. */
  signal?: AbortSignal;
  /** Overrides of defaultToolLimits. */
  limits?: Partial<ToolLimits>;
  /** Called with the repository-relative path of every file created, changed or removed. */
  onFileChanged?: (path: string) => void;
}

export function limitsOf(run: ToolRun): ToolLimits {
  return { ...defaultToolLimits, ...run.limits };
}

/**
 * What a tool call gives back. `text` is what the model reads: for an error, "Error: " and the
 * reason, as the model has always seen it. `title` is one line for events and logs, never file
 * contents.
 */
export interface ToolResult {
  ok: boolean;
  title: string;
  text: string;
}

/** What a tool's code returns when it succeeds: a title for events and the text for the model. */
export interface ToolOutput {
  title: string;
  text: string;
}

/**
 * Runs one tool call and turns refusals and filesystem errors into an error result. Anything
 * else (a bug, a cancellation) is rethrown: the model cannot fix those.
 */
export async function runTool(run: ToolRun, work: () => Promise<ToolOutput>): Promise<ToolResult> {
  run.signal?.throwIfAborted();
  try {
    return { ok: true, ...(await work()) };
  } catch (err) {
    if (err instanceof ToolError) return failed(err.message);
    if (isErrno(err, ...Object.keys(errnoMessages)) || isFsError(err)) {
      return failed(await describeFsError(run, err));
    }
    throw err;
  }
}

function failed(reason: string): ToolResult {
  return { ok: false, title: reason, text: `Error: ${reason}` };
}

const errnoMessages: Record<string, (p: string) => string> = {
  ENOENT: (p) => `${p} does not exist`,
  EISDIR: (p) => `${p} is a directory`,
  ENOTDIR: (p) => `a parent folder of ${p} is a file, not a directory`,
  EEXIST: (p) => `${p} already exists`,
  ENOTEMPTY: (p) => `${p} is not empty`,
  EACCES: (p) => `permission denied for ${p}`,
  EPERM: (p) => `operation not permitted on ${p}`,
  ENAMETOOLONG: () => 'the path is too long',
  ELOOP: (p) => `${p} is a symlink or has too many levels of symlinks`,
  ENOSPC: () => 'no space left on the device',
  EROFS: () => 'the checkout is read-only',
};

function isFsError(err: unknown): err is NodeJS.ErrnoException {
  return (
    err instanceof Error &&
    typeof (err as NodeJS.ErrnoException).code === 'string' &&
    typeof (err as NodeJS.ErrnoException).syscall === 'string'
  );
}

// Node's own messages carry absolute host paths; the model only ever sees repository paths.
async function describeFsError(run: ToolRun, err: NodeJS.ErrnoException): Promise<string> {
  let shown = 'the file';
  if (typeof err.path === 'string') {
    const realRoot = await realRootOf(run.root).catch(() => path.resolve(run.root));
    const rel = path.relative(realRoot, err.path);
    const inside = rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel);
    shown = quote(inside ? rel.split(path.sep).join('/') || '.' : path.basename(err.path));
  }
  const code = err.code ?? 'EIO';
  const describe = errnoMessages[code];
  return describe ? describe(shown) : `${code} (${err.syscall ?? 'fs'}) on ${shown}`;
}
