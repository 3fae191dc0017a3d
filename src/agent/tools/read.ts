// read_file: a window of a text file with line numbers, so the model can cite lines and come
// back for the next window; capped in lines and bytes, refusing binary files.

import { constants } from 'node:fs';
import * as fs from 'node:fs/promises';
import { z } from 'zod';
import { quote, resolvePath, ToolError } from './paths.ts';
import { binarySniffBytes, looksBinary, scanLines } from './text.ts';
import { type RepoTool, repoPath } from './tool.ts';
import { limitsOf, runTool, type ToolResult, type ToolRun } from './tool-run.ts';

const inputSchema = z.object({
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
});

type ReadFileInput = z.output<typeof inputSchema>;

export const readFileTool: RepoTool<typeof inputSchema> = {
  name: 'read_file',
  description: (limits) =>
    'Read a text file of the repository. Each line is prefixed with its line number and a tab; ' +
    'the prefix is not part of the file. Long files come back in windows ' +
    `(at most ${limits.readMaxLines} lines) with a note saying how to read on. Binary files are refused.`,
  inputSchema,
  run: readFile,
  summarize: (a) => {
    const start = a.int('startLine');
    const end = a.int('endLine');
    const range = start !== undefined || end !== undefined ? `:${start ?? 1}-${end ?? ''}` : '';
    return `read_file ${a.str('path') ?? '?'}${range}`;
  },
};

async function readFile(run: ToolRun, input: ReadFileInput): Promise<ToolResult> {
  return runTool(run, async () => {
    const limits = limitsOf(run);
    const start = input.startLine ?? 1;
    const end = input.endLine ?? Number.POSITIVE_INFINITY;
    if (!Number.isInteger(start) || start < 1) {
      throw new ToolError('startLine must be a whole number of at least 1');
    }
    if (end !== Number.POSITIVE_INFINITY && (!Number.isInteger(end) || end < start)) {
      throw new ToolError(`endLine must be a whole number no smaller than startLine (${start})`);
    }

    const target = await resolvePath(run.root, input.path);
    const shown = quote(target.display);
    const stat = await fs.stat(target.real);
    if (stat.isDirectory()) {
      throw new ToolError(`${shown} is a directory; use list_files to see what it contains`);
    }
    // A FIFO or device would block or never end.
    if (!stat.isFile()) throw new ToolError(`${shown} is not a regular file`);

    const file = await fs.open(target.real, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0));
    try {
      const head = Buffer.alloc(binarySniffBytes);
      const { bytesRead } = await file.read(head, 0, head.length, 0);
      if (looksBinary(head.subarray(0, bytesRead))) {
        throw new ToolError(`${shown} looks like a binary file (it contains NUL bytes)`);
      }
      if (bytesRead === 0) return { title: `${shown} is empty`, text: `${shown} is empty.` };

      const lines: [number, string][] = [];
      let bytes = 0;
      let lastShown = 0;
      let cutLine: number | undefined;
      let stopped: 'lines' | 'bytes' | undefined;
      let crlf = false;
      const decoder = new TextDecoder();
      const total = await scanLines(file, {
        maxLineBytes: limits.readMaxBytes,
        signal: run.signal,
        wants: (n) => n >= start && n <= end && stopped === undefined,
        onLine: (n, line) => {
          if (lines.length >= limits.readMaxLines) {
            stopped = 'lines';
            return;
          }
          let text = decoder.decode(line.bytes);
          if (text.endsWith('\r')) {
            text = text.slice(0, -1);
            crlf = true;
          }
          const size = Buffer.byteLength(text) + 8;
          if (bytes + size > limits.readMaxBytes && lines.length > 0) {
            stopped = 'bytes';
            return;
          }
          if (line.cut) cutLine = n;
          bytes += size;
          lines.push([n, text]);
          lastShown = n;
        },
      });
      if (start > total) {
        throw new ToolError(
          `startLine ${start} is past the end of ${shown}, which has ${total} lines`,
        );
      }

      const width = String(lastShown).length;
      const out = lines.map(([n, text]) => `${String(n).padStart(width)}\t${text}`);
      const notes: string[] = [];
      if (cutLine !== undefined) {
        notes.push(`Line ${cutLine} is longer than ${limits.readMaxBytes} bytes and was cut.`);
      }
      if (lastShown < Math.min(end, total)) {
        const why =
          stopped === 'bytes' ? `${limits.readMaxBytes} bytes` : `${limits.readMaxLines} lines`;
        notes.push(
          `Showing lines ${start}-${lastShown} of ${total} (a read returns at most ${why}). ` +
            `Call read_file with startLine ${lastShown + 1} to continue.`,
        );
      } else if (start > 1 || lastShown < total) {
        notes.push(`Showing lines ${start}-${lastShown} of ${total}.`);
      }
      if (crlf) notes.push('The file uses CRLF line endings; they are not shown.');
      for (const note of notes) out.push(`[${note}]`);
      return { title: `${shown} lines ${start}-${lastShown} of ${total}`, text: out.join('\n') };
    } finally {
      await file.close();
    }
  });
}
