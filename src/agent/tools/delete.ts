// delete_file: removes one file; a symlink is removed itself, never what it points to.

import * as fs from 'node:fs/promises';
import { z } from 'zod';
import { quote, resolvePath, ToolError } from './paths.ts';
import { type RepoTool, repoPath } from './tool.ts';
import { runTool, type ToolResult, type ToolRun } from './tool-run.ts';

const inputSchema = z.object({ path: repoPath });

type DeleteFileInput = z.output<typeof inputSchema>;

export const deleteFileTool: RepoTool<typeof inputSchema> = {
  name: 'delete_file',
  description: () => 'Delete one file (not a folder).',
  inputSchema,
  run: deleteFile,
  summarize: (a) => `delete_file ${a.str('path') ?? '?'}`,
};

async function deleteFile(run: ToolRun, input: DeleteFileInput): Promise<ToolResult> {
  return runTool(run, async () => {
    const target = await resolvePath(run.root, input.path);
    // A symlink is removed itself, never the file it points to.
    const stat = await fs.lstat(target.entry);
    if (stat.isDirectory() || target.entryRel === '') {
      throw new ToolError(
        `${quote(target.display)} is a directory; delete_file only removes files`,
      );
    }
    await fs.unlink(target.entry);
    run.onFileChanged?.(target.entryRel);
    return {
      title: `Deleted ${quote(target.entryRel)}`,
      text: `Deleted ${quote(target.entryRel)}.`,
    };
  });
}
