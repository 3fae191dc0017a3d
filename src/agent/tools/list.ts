// list_files: the paths of the checkout matching a glob, as git would show them (ignored files
// and .git/ left out), capped so that a huge tree cannot flood the model's context.

import { z } from 'zod';
import { quote, realRootOf } from './paths.ts';
import type { RepoTool } from './tool.ts';
import { limitsOf, runTool, type ToolResult, type ToolRun } from './tool-run.ts';
import { compileGlob, walkFiles } from './walk.ts';

const inputSchema = z.object({
  pattern: z
    .string()
    .optional()
    .describe("Glob to match, e.g. 'src/**/*.ts'. Defaults to '**/*' (every file)."),
});

type ListFilesInput = z.output<typeof inputSchema>;

export const listFilesTool: RepoTool<typeof inputSchema> = {
  name: 'list_files',
  description: () =>
    'List the files of the repository whose paths match a glob, one per line, sorted. ' +
    'Files ignored by .gitignore and the .git folder are not listed. ' +
    "Glob syntax: '*' and '?' within a name, '**' across folders, '{a,b}' alternatives, '[abc]' sets. " +
    "A pattern without '/' matches names at any depth ('*.ts' finds every .ts file); " +
    "a folder path lists everything in it ('src/agent').",
  inputSchema,
  run: listFiles,
  summarize: (a) => `list_files ${a.str('pattern') ?? '**/*'}`,
};

async function listFiles(run: ToolRun, input: ListFilesInput): Promise<ToolResult> {
  return runTool(run, async () => {
    const { listMaxEntries } = limitsOf(run);
    const pattern = input.pattern?.trim() || '**/*';
    const glob = compileGlob(pattern);
    const realRoot = await realRootOf(run.root);

    const shown: string[] = [];
    let total = 0;
    for await (const entry of walkFiles(realRoot, glob, run.signal)) {
      total++;
      if (shown.length < listMaxEntries) {
        shown.push(entry.symlink ? `${entry.rel} (symlink)` : entry.rel);
      }
    }
    if (total === 0) {
      return {
        title: `no files match ${quote(pattern)}`,
        text: `No files match ${quote(pattern)} (files ignored by .gitignore are not listed).`,
      };
    }
    if (total > shown.length) {
      shown.push(
        `[Showing ${shown.length} of ${total} matching files. Use a narrower pattern, e.g. 'src/**/*.ts'.]`,
      );
    }
    return { title: `${total} files match ${quote(pattern)}`, text: shown.join('\n') };
  });
}
