// move_file: moves or renames one file inside the checkout; a moved symlink is checked again
// from its new folder, where a relative target means something else.

import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { z } from 'zod';
import { lstatOrUndefined } from './files.ts';
import { quote, type ResolvedPath, realRootOf, resolvePath, ToolError } from './paths.ts';
import { type RepoTool, repoPath } from './tool.ts';
import { runTool, type ToolResult, type ToolRun } from './tool-run.ts';

const inputSchema = z.object({
  from: repoPath.describe('Current path of the file, relative to the repository root.'),
  to: repoPath.describe('New path of the file, relative to the repository root.'),
  overwrite: z
    .boolean()
    .optional()
    .describe('Replace the destination if it exists. Defaults to false.'),
});

type MoveFileInput = z.output<typeof inputSchema>;

export const moveFileTool: RepoTool<typeof inputSchema> = {
  name: 'move_file',
  description: () =>
    'Move or rename one file. Missing parent folders of the destination are created. ' +
    'Refuses to replace an existing file unless overwrite is true.',
  inputSchema,
  run: moveFile,
  summarize: (a) =>
    `move_file ${a.str('from') ?? '?'} -> ${a.str('to') ?? '?'}${a.flag('overwrite') ? ' (overwrite)' : ''}`,
};

async function moveFile(run: ToolRun, input: MoveFileInput): Promise<ToolResult> {
  return runTool(run, async () => {
    const from = await resolvePath(run.root, input.from);
    const to = await resolvePath(run.root, input.to);
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
    if (source.isSymbolicLink()) await checkMovedLink(run, from, to);
    await fs.mkdir(path.dirname(to.entry), { recursive: true });
    await fs.rename(from.entry, to.entry);
    run.onFileChanged?.(from.entryRel);
    run.onFileChanged?.(to.entryRel);
    const text = `Moved ${quote(from.entryRel)} to ${quote(to.entryRel)}.`;
    return { title: text.slice(0, -1), text };
  });
}

// A relative symlink means something else in another folder: `a/l -> ../x` moved to the root
// would point outside the checkout, so check where it will point from its new place.
async function checkMovedLink(run: ToolRun, from: ResolvedPath, to: ResolvedPath): Promise<void> {
  const linkText = await fs.readlink(from.entry);
  if (path.isAbsolute(linkText)) return;
  const realRoot = await realRootOf(run.root);
  const pointsTo = path.relative(realRoot, path.resolve(path.dirname(to.entry), linkText));
  try {
    await resolvePath(run.root, pointsTo.split(path.sep).join('/') || '.');
  } catch (err) {
    if (!(err instanceof ToolError)) throw err;
    throw new ToolError(
      `moving the symlink ${quote(from.display)} to ${quote(to.display)} would make it point outside the repository or into .git/`,
    );
  }
}
