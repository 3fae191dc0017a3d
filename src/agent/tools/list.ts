// list_files: the paths of the checkout matching a glob, as git would show them (ignored files
// and .git/ left out), capped so that a huge tree cannot flood the model's context.

import { limitsOf, type ToolContext, toolResult } from './context.ts';
import { quote, realRootOf } from './paths.ts';
import { compileGlob, walkFiles } from './walk.ts';

export interface ListFilesInput {
  pattern?: string | undefined;
}

export async function listFiles(ctx: ToolContext, input: ListFilesInput): Promise<string> {
  return toolResult(ctx, async () => {
    const { listMaxEntries } = limitsOf(ctx);
    const pattern = input.pattern?.trim() || '**/*';
    const glob = compileGlob(pattern);
    const realRoot = await realRootOf(ctx.root);

    const shown: string[] = [];
    let total = 0;
    for await (const entry of walkFiles(realRoot, glob, ctx.signal)) {
      total++;
      if (shown.length < listMaxEntries) {
        shown.push(entry.symlink ? `${entry.rel} (symlink)` : entry.rel);
      }
    }
    if (total === 0) {
      return `No files match ${quote(pattern)} (files ignored by .gitignore are not listed).`;
    }
    if (total > shown.length) {
      shown.push(
        `[Showing ${shown.length} of ${total} matching files. Use a narrower pattern, e.g. 'src/**/*.ts'.]`,
      );
    }
    return shown.join('\n');
  });
}
