// search: a JavaScript regular expression over the text files of the checkout, reported as
// `path:line: text`. The expression comes from the model and may backtrack catastrophically, so
// it runs in a vm context with a timeout: V8 interrupts it instead of freezing the worker.

import * as fs from 'node:fs/promises';
import * as vm from 'node:vm';
import { z } from 'zod';
import { quote, realRootOf, ToolError } from './paths.ts';
import { formatBytes, looksBinary, plural } from './text.ts';
import type { RepoTool } from './tool.ts';
import { limitsOf, runTool, type ToolResult, type ToolRun } from './tool-run.ts';
import { compileGlob, walkFiles } from './walk.ts';

const inputSchema = z.object({
  pattern: z
    .string()
    .min(1)
    .describe("Regular expression source without slashes, e.g. 'function\\s+load' or 'TODO'."),
  flags: z.string().optional().describe("Regular expression flags, e.g. 'i' for case-insensitive."),
  glob: z
    .string()
    .optional()
    .describe("Only search files matching this glob, e.g. '*.ts' or 'src/**'."),
});

type SearchInput = z.output<typeof inputSchema>;

export const searchTool: RepoTool<typeof inputSchema> = {
  name: 'search',
  description: (limits) =>
    'Search the text files of the repository for a JavaScript regular expression, line by line. ' +
    `Returns 'path:line: text' for each matching line, at most ${limits.searchMaxMatches} matches. ` +
    'Files ignored by .gitignore, binary files and very large files are skipped. ' +
    'A match cannot span lines.',
  inputSchema,
  run: searchFiles,
  summarize: (a) => {
    const glob = a.str('glob');
    return `search /${a.str('pattern') ?? ''}/${a.str('flags') ?? ''}${glob ? ` in ${glob}` : ''}`;
  },
};

// Files are matched in batches: one vm call per file would cost more than the matching.
const batchChars = 1024 * 1024;
const batchFiles = 256;

const readAhead = 16;

/** A file ready for matching; `text` is undefined when it is over the size cap. */
type Loaded = { rel: string; text: string | undefined } | undefined;

interface Batch {
  paths: string[];
  texts: string[];
  chars: number;
}

// Runs inside the vm context; returns JSON so that nothing from the other realm leaks out.
const matcher = new vm.Script(`(() => {
  const re = new RegExp(source, flags);
  const found = [];
  for (let f = 0; f < texts.length; f++) {
    const lines = texts[f].split('\\n');
    for (let i = 0; i < lines.length; i++) {
      let line = lines[i];
      if (line.endsWith('\\r')) line = line.slice(0, -1);
      const m = re.exec(line);
      if (m === null) continue;
      let text = line;
      if (line.length > maxLength) {
        const from = Math.max(0, Math.min(m.index - 40, line.length - maxLength));
        text = (from > 0 ? '…' : '') + line.slice(from, from + maxLength) +
          (from + maxLength < line.length ? '…' : '');
      }
      found.push([f, i + 1, text]);
      if (found.length >= remaining) return JSON.stringify(found);
    }
  }
  return JSON.stringify(found);
})()`);

async function searchFiles(run: ToolRun, input: SearchInput): Promise<ToolResult> {
  return runTool(run, async () => {
    const limits = limitsOf(run);
    const flags = checkFlags(input.flags ?? '');
    if (input.pattern === '') throw new ToolError('pattern is empty');
    try {
      new RegExp(input.pattern, flags);
    } catch (err) {
      throw new ToolError(`invalid regular expression: ${(err as Error).message}`);
    }
    const shownPattern = `/${input.pattern}/${flags}`;
    const glob = compileGlob(input.glob?.trim() || '**');
    const realRoot = await realRootOf(run.root);

    const context = vm.createContext({
      source: input.pattern,
      flags,
      maxLength: limits.searchMaxLineLength,
      texts: [] as string[],
      remaining: limits.searchMaxMatches,
    });
    const results: string[] = [];
    const tooLarge: string[] = [];
    let searched = 0;
    let batch: Batch = { paths: [], texts: [], chars: 0 };

    const flush = () => {
      run.signal?.throwIfAborted();
      if (batch.texts.length === 0) return;
      context.texts = batch.texts;
      context.remaining = limits.searchMaxMatches - results.length;
      let found: [number, number, string][];
      try {
        found = JSON.parse(matcher.runInContext(context, { timeout: limits.searchRegexTimeoutMs }));
      } catch (err) {
        if ((err as { code?: unknown }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') {
          throw new ToolError(
            `the regular expression ran for over ${limits.searchRegexTimeoutMs} ms on ${batch.paths.length} files ` +
              `starting at ${quote(batch.paths[0] ?? '')}; it probably backtracks catastrophically ` +
              `(nested quantifiers like (a+)+). Simplify it or narrow the glob`,
          );
        }
        throw err;
      }
      for (const [f, line, text] of found) results.push(`${batch.paths[f]}:${line}: ${text}`);
      batch = { paths: [], texts: [], chars: 0 };
    };

    const consume = async (pending: Promise<Loaded>) => {
      const loaded = await pending;
      if (loaded === undefined) return;
      if (loaded.text === undefined) {
        tooLarge.push(loaded.rel);
        return;
      }
      searched++;
      batch.paths.push(loaded.rel);
      batch.texts.push(loaded.text);
      batch.chars += loaded.text.length;
      if (batch.chars >= batchChars || batch.texts.length >= batchFiles) flush();
    };
    const full = () => results.length >= limits.searchMaxMatches;

    // Reads run a few at a time, ahead of the matching, which still sees files in walk order.
    const ahead: Promise<Loaded>[] = [];
    for await (const entry of walkFiles(realRoot, glob, run.signal)) {
      // A symlink is either outside the checkout or a second name for a file searched anyway.
      if (entry.symlink) continue;
      ahead.push(load(entry.abs, entry.rel, limits.searchMaxFileBytes));
      if (ahead.length >= readAhead) await consume(ahead.shift()!);
      if (full()) break;
    }
    for (const pending of ahead) {
      if (full()) break;
      await consume(pending);
    }
    if (!full()) flush();

    const notes: string[] = [];
    if (results.length >= limits.searchMaxMatches) {
      notes.push(
        `Stopped at ${limits.searchMaxMatches} matches; there may be more. Narrow the pattern or the glob.`,
      );
    }
    if (tooLarge.length > 0) {
      const some = tooLarge.slice(0, 5).join(', ');
      const more = tooLarge.length > 5 ? ` and ${tooLarge.length - 5} more` : '';
      notes.push(
        `Skipped ${plural(tooLarge.length, 'file')} larger than ${formatBytes(limits.searchMaxFileBytes)}: ${some}${more}.`,
      );
    }
    const matches = results.length;
    if (matches === 0) {
      const where = input.glob ? ` matching ${quote(input.glob)}` : '';
      results.push(`No matches for ${shownPattern} in ${plural(searched, 'text file')}${where}.`);
    }
    for (const note of notes) results.push(`[${note}]`);
    return {
      title: `${matches} ${matches === 1 ? 'match' : 'matches'} for ${shownPattern} in ${plural(searched, 'file')}`,
      text: results.join('\n'),
    };
  });
}

async function load(abs: string, rel: string, maxBytes: number): Promise<Loaded> {
  try {
    const stat = await fs.lstat(abs);
    if (!stat.isFile()) return undefined;
    if (stat.size > maxBytes) return { rel, text: undefined };
    const bytes = await fs.readFile(abs);
    // Binary files are skipped silently, as grep -I does.
    return looksBinary(bytes) ? undefined : { rel, text: bytes.toString('utf8') };
  } catch {
    // Vanished or unreadable since the walk listed it: nothing to search.
    return undefined;
  }
}

function checkFlags(flags: string): string {
  if (!/^[dgimsuvy]*$/.test(flags)) {
    throw new ToolError(
      `invalid regular expression flags ${quote(flags)}; use any of i, m, s, u, v`,
    );
  }
  // Lines are matched one at a time from the start: g and y would only carry state between them.
  return [...new Set(flags.replace(/[dgy]/g, ''))].join('');
}
