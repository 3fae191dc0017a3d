// delete_file: removes one file; a symlink is removed itself, never what it points to.

import * as fs from 'node:fs/promises';
import { z } from 'zod';
import { runTool, type ToolContext, type ToolResult } from './context.ts';
import { quote, resolvePath, ToolError } from './paths.ts';
import { type RepoTool, repoPath } from './tool.ts';

const inputSchema = z.object({ path: repoPath });

type DeleteFileInput = z.output<typeof inputSchema>;

export const deleteFileTool: RepoTool<typeof inputSchema> = {
  name: 'delete_file',
  description: () => 'Delete one file (not a folder).',
  inputSchema,
  run: deleteFile,
  summarize: (a) => `delete_file ${a.str('path') ?? '?'}`,
};

async function deleteFile(ctx: ToolContext, input: DeleteFileInput): Promise<ToolResult> {
  return runTool(ctx, async () => {
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
    return {
      title: `Deleted ${quote(target.entryRel)}`,
      text: `Deleted ${quote(target.entryRel)}.`,
    };
  });
}
