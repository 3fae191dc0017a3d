// The file tools as the agent loop sees them: AI SDK tool definitions with input schemas and
// descriptions written for the model, plus a one-line summary of a call for progress events.
// The tools themselves live beside this file as plain async functions.

import { type Tool, tool } from 'ai';
import { z } from 'zod';
import { limitsOf, type ToolContext } from './context.ts';
import { listFiles } from './list.ts';
import { readFile } from './read.ts';
import { searchFiles } from './search.ts';
import { deleteFile, editFile, moveFile, writeFile } from './write.ts';

export type { ToolContext, ToolLimits } from './context.ts';
export { defaultToolLimits } from './context.ts';
export { listFiles } from './list.ts';
export { resolveInside, ToolError } from './paths.ts';
export { readFile } from './read.ts';
export { searchFiles } from './search.ts';
export { deleteFile, editFile, moveFile, writeFile } from './write.ts';

const repoPath = z
  .string()
  .describe("Path relative to the repository root, with '/' separators, e.g. 'src/index.ts'.");

export function createRepoTools(ctx: ToolContext): Record<string, Tool> {
  // The loop's abort signal and the job's signal both cancel a running tool.
  const withSignal = (abortSignal: AbortSignal | undefined): ToolContext => {
    const signals = [ctx.signal, abortSignal].filter((s) => s !== undefined);
    return { ...ctx, signal: signals.length > 1 ? AbortSignal.any(signals) : signals[0] };
  };

  const limits = limitsOf(ctx);
  return {
    list_files: tool({
      description:
        'List the files of the repository whose paths match a glob, one per line, sorted. ' +
        'Files ignored by .gitignore and the .git folder are not listed. ' +
        "Glob syntax: '*' and '?' within a name, '**' across folders, '{a,b}' alternatives, '[abc]' sets. " +
        "A pattern without '/' matches names at any depth ('*.ts' finds every .ts file); " +
        "a folder path lists everything in it ('src/agent').",
      inputSchema: z.object({
        pattern: z
          .string()
          .optional()
          .describe("Glob to match, e.g. 'src/**/*.ts'. Defaults to '**/*' (every file)."),
      }),
      execute: (input, { abortSignal }) => listFiles(withSignal(abortSignal), input),
    }),

    read_file: tool({
      description:
        'Read a text file of the repository. Each line is prefixed with its line number and a tab; ' +
        'the prefix is not part of the file. Long files come back in windows ' +
        `(at most ${limits.readMaxLines} lines) with a note saying how to read on. Binary files are refused.`,
      inputSchema: z.object({
        path: repoPath,
        startLine: z
          .number()
          .int()
          .min(1)
          .optional()
          .describe('First line to read, 1-based. Defaults to 1.'),
        endLine: z
          .number()
          .int()
          .min(1)
          .optional()
          .describe('Last line to read, inclusive. Defaults to the end of the file.'),
      }),
      execute: (input, { abortSignal }) => readFile(withSignal(abortSignal), input),
    }),

    search: tool({
      description:
        'Search the text files of the repository for a JavaScript regular expression, line by line. ' +
        `Returns 'path:line: text' for each matching line, at most ${limits.searchMaxMatches} matches. ` +
        'Files ignored by .gitignore, binary files and very large files are skipped. ' +
        'A match cannot span lines.',
      inputSchema: z.object({
        pattern: z
          .string()
          .min(1)
          .describe(
            "Regular expression source without slashes, e.g. 'function\\s+load' or 'TODO'.",
          ),
        flags: z
          .string()
          .optional()
          .describe("Regular expression flags, e.g. 'i' for case-insensitive."),
        glob: z
          .string()
          .optional()
          .describe("Only search files matching this glob, e.g. '*.ts' or 'src/**'."),
      }),
      execute: (input, { abortSignal }) => searchFiles(withSignal(abortSignal), input),
    }),

    write_file: tool({
      description:
        'Create a file or replace its whole content. Missing parent folders are created. ' +
        'To change part of an existing file prefer edit_file.',
      inputSchema: z.object({
        path: repoPath,
        content: z.string().describe('The complete new content of the file.'),
      }),
      execute: (input, { abortSignal }) => writeFile(withSignal(abortSignal), input),
    }),

    edit_file: tool({
      description:
        'Replace one exact piece of text in a file. `old` must occur in the file exactly once, ' +
        'character for character including indentation and line breaks (without the line-number ' +
        'prefixes read_file shows); include a few surrounding lines to make it unique. ' +
        'Fails without changing anything when `old` is missing or occurs more than once.',
      inputSchema: z.object({
        path: repoPath,
        old: z.string().min(1).describe('The exact text to replace.'),
        new: z.string().describe('The text to put in its place (may be empty to delete it).'),
      }),
      execute: (input, { abortSignal }) => editFile(withSignal(abortSignal), input),
    }),

    delete_file: tool({
      description: 'Delete one file (not a folder).',
      inputSchema: z.object({ path: repoPath }),
      execute: (input, { abortSignal }) => deleteFile(withSignal(abortSignal), input),
    }),

    move_file: tool({
      description:
        'Move or rename one file. Missing parent folders of the destination are created. ' +
        'Refuses to replace an existing file unless overwrite is true.',
      inputSchema: z.object({
        from: repoPath.describe('Current path of the file, relative to the repository root.'),
        to: repoPath.describe('New path of the file, relative to the repository root.'),
        overwrite: z
          .boolean()
          .optional()
          .describe('Replace the destination if it exists. Defaults to false.'),
      }),
      execute: (input, { abortSignal }) => moveFile(withSignal(abortSignal), input),
    }),
  };
}

const summaryMax = 120;

/** One line describing a tool call for progress events; never includes file contents. */
export function summarizeToolArgs(name: string, args: unknown): string {
  const a = typeof args === 'object' && args !== null ? (args as Record<string, unknown>) : {};
  const str = (key: string): string | undefined => {
    const value = a[key];
    return typeof value === 'string' ? value : undefined;
  };
  const int = (key: string): number | undefined => {
    const value = a[key];
    return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
  };

  let summary: string;
  switch (name) {
    case 'list_files':
      summary = `list_files ${str('pattern') ?? '**/*'}`;
      break;
    case 'read_file': {
      const start = int('startLine');
      const end = int('endLine');
      const range = start !== undefined || end !== undefined ? `:${start ?? 1}-${end ?? ''}` : '';
      summary = `read_file ${str('path') ?? '?'}${range}`;
      break;
    }
    case 'search': {
      const glob = str('glob');
      summary = `search /${str('pattern') ?? ''}/${str('flags') ?? ''}${glob ? ` in ${glob}` : ''}`;
      break;
    }
    case 'write_file': {
      const content = str('content');
      const size = content === undefined ? '' : ` (${Buffer.byteLength(content)} bytes)`;
      summary = `write_file ${str('path') ?? '?'}${size}`;
      break;
    }
    case 'edit_file':
    case 'delete_file':
      summary = `${name} ${str('path') ?? '?'}`;
      break;
    case 'move_file':
      summary = `move_file ${str('from') ?? '?'} -> ${str('to') ?? '?'}${a.overwrite === true ? ' (overwrite)' : ''}`;
      break;
    default:
      summary = `${name} ${safeJson(args)}`;
  }
  // Control characters from the model would break one-line logs and event views.
  summary = summary.replace(/\p{Cc}+/gu, ' ');
  return summary.length > summaryMax ? `${summary.slice(0, summaryMax - 1)}…` : summary;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '';
  }
}
