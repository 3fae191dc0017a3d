// write_file: creates a file or replaces all of it, through resolvePath and without following a
// final symlink, and reports the changed repository path so the turn knows what to commit.

import { constants } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { z } from 'zod';
import { describeTarget, statOrUndefined, writeNoFollow } from './files.ts';
import { quote, resolvePath, ToolError } from './paths.ts';
import { countNewlines, formatBytes, plural } from './text.ts';
import { type RepoTool, repoPath } from './tool.ts';
import { limitsOf, runTool, type ToolResult, type ToolRun } from './tool-run.ts';

const inputSchema = z.object({
  path: repoPath,
  content: z.string().describe('The complete new content of the file.'),
});

type WriteFileInput = z.output<typeof inputSchema>;

export const writeFileTool: RepoTool<typeof inputSchema> = {
  name: 'write_file',
  description: () =>
    'Create a file or replace its whole content. Missing parent folders are created. ' +
    'To change part of an existing file prefer edit_file.',
  inputSchema,
  run: writeFile,
  summarize: (a) => {
    const content = a.str('content');
    const size = content === undefined ? '' : ` (${Buffer.byteLength(content)} bytes)`;
    return `write_file ${a.str('path') ?? '?'}${size}`;
  },
};

async function writeFile(run: ToolRun, input: WriteFileInput): Promise<ToolResult> {
  return runTool(run, async () => {
    const { writeMaxBytes } = limitsOf(run);
    if (typeof input.content !== 'string') throw new ToolError('content must be a string');
    const size = Buffer.byteLength(input.content);
    if (size > writeMaxBytes) {
      throw new ToolError(
        `content is ${formatBytes(size)}; write_file accepts at most ${formatBytes(writeMaxBytes)}`,
      );
    }
    const target = await resolvePath(run.root, input.path);
    const existing = await statOrUndefined(target.real);
    if (existing?.isDirectory() || target.rel === '') {
      throw new ToolError(`${quote(target.display)} is a directory`);
    }
    if (existing !== undefined && !existing.isFile()) {
      throw new ToolError(`${quote(target.display)} is not a regular file`);
    }
    await fs.mkdir(path.dirname(target.real), { recursive: true });
    await writeNoFollow(target.real, input.content, constants.O_CREAT);
    run.onFileChanged?.(target.rel);
    const verb = existing === undefined ? 'Created' : 'Wrote';
    const text = `${verb} ${describeTarget(target)} (${formatBytes(size)}, ${plural(countLines(input.content), 'line')}).`;
    return { title: text.slice(0, -1), text };
  });
}

function countLines(text: string): number {
  if (text === '') return 0;
  return countNewlines(text) + (text.endsWith('\n') ? 0 : 1);
}
