// edit_file: replaces one exact piece of text that occurs exactly once, so the model changes
// what it read and nothing else; when the text is missing it says why it probably is.

import * as fs from 'node:fs/promises';
import { z } from 'zod';
import { describeTarget, readNoFollow, writeNoFollow } from './files.ts';
import { quote, resolvePath, ToolError } from './paths.ts';
import { countNewlines, formatBytes, looksBinary } from './text.ts';
import { type RepoTool, repoPath } from './tool.ts';
import { limitsOf, runTool, type ToolResult, type ToolRun } from './tool-run.ts';

const inputSchema = z.object({
  path: repoPath,
  old: z.string().min(1).describe('The exact text to replace.'),
  new: z.string().describe('The text to put in its place (may be empty to delete it).'),
});

type EditFileInput = z.output<typeof inputSchema>;

export const editFileTool: RepoTool<typeof inputSchema> = {
  name: 'edit_file',
  description: () =>
    'Replace one exact piece of text in a file. `old` must occur in the file exactly once, ' +
    'character for character including indentation and line breaks (without the line-number ' +
    'prefixes read_file shows); include a few surrounding lines to make it unique. ' +
    'Fails without changing anything when `old` is missing or occurs more than once.',
  inputSchema,
  run: editFile,
  summarize: (a) => `edit_file ${a.str('path') ?? '?'}`,
};

async function editFile(run: ToolRun, input: EditFileInput): Promise<ToolResult> {
  return runTool(run, async () => {
    const { writeMaxBytes } = limitsOf(run);
    if (input.old === '') {
      throw new ToolError('old is empty; to create a file or replace all of it use write_file');
    }
    if (input.old === input.new) {
      throw new ToolError('old and new are identical; nothing to change');
    }
    const target = await resolvePath(run.root, input.path);
    const shown = quote(target.display);
    const stat = await fs.stat(target.real);
    if (stat.isDirectory()) throw new ToolError(`${shown} is a directory`);
    if (!stat.isFile()) throw new ToolError(`${shown} is not a regular file`);
    if (stat.size > writeMaxBytes) {
      throw new ToolError(
        `${shown} is ${formatBytes(stat.size)}; edit_file handles files up to ${formatBytes(writeMaxBytes)}`,
      );
    }
    const bytes = await readNoFollow(target.real);
    if (looksBinary(bytes)) throw new ToolError(`${shown} looks like a binary file`);
    const text = bytes.toString('utf8');
    // Decoding replaces invalid sequences; writing that back would corrupt the rest of the file.
    if (!Buffer.from(text).equals(bytes)) {
      throw new ToolError(`${shown} is not valid UTF-8; edit_file cannot change it safely`);
    }

    let old = input.old;
    let replacement = input.new;
    let at = occurrences(text, old);
    // read_file hides CRLF endings, so the model's text has bare \n; match what it saw.
    if (at.length === 0 && text.includes('\r\n') && old.includes('\n') && !old.includes('\r')) {
      old = old.replace(/\n/g, '\r\n');
      replacement = replacement.replace(/\r?\n/g, '\r\n');
      at = occurrences(text, old);
    }
    const first = at[0];
    if (first === undefined) {
      throw new ToolError(`old text not found in ${shown}. ${notFoundHint(text, input.old)}`);
    }
    if (at.length > 1) {
      const lines = at.slice(0, 10).map((i) => lineAt(text, i));
      throw new ToolError(
        `old text matches ${at.length} times in ${shown} (at lines ${lines.join(', ')}${at.length > 10 ? ', …' : ''}); ` +
          'include more surrounding lines in old so that it matches exactly once',
      );
    }
    const result = text.slice(0, first) + replacement + text.slice(first + old.length);
    const size = Buffer.byteLength(result);
    if (size > writeMaxBytes) {
      throw new ToolError(
        `the edit would make ${shown} ${formatBytes(size)}, over the limit of ${formatBytes(writeMaxBytes)}`,
      );
    }
    await writeNoFollow(target.real, result, 0);
    run.onFileChanged?.(target.rel);
    const from = lineAt(result, first);
    const title = `Edited ${describeTarget(target)}`;
    if (replacement === '') return { title, text: `${title}: removed the text at line ${from}.` };
    const to = from + countNewlines(replacement.replace(/\r?\n$/, ''));
    return { title, text: `${title}: the new text is at lines ${from}-${to}.` };
  });
}

/** Start offsets of every occurrence, overlapping ones included: "aa" in "aaa" is ambiguous. */
function occurrences(text: string, needle: string): number[] {
  const found: number[] = [];
  for (let i = text.indexOf(needle); i !== -1; i = text.indexOf(needle, i + 1)) found.push(i);
  return found;
}

function notFoundHint(text: string, old: string): string {
  if (/^\s*\d+\t/m.test(old) && !/^\s*\d+\t/m.test(text)) {
    return 'old seems to include the line numbers shown by read_file; leave them out.';
  }
  const squash = (s: string) => s.replace(/\s+/g, ' ').trim();
  if (squash(old) !== '' && squash(text).includes(squash(old))) {
    return 'It matches when whitespace is ignored: copy the indentation and line breaks exactly.';
  }
  return 'old must match the current file exactly, including whitespace; read the file again with read_file and copy the text.';
}

function lineAt(text: string, offset: number): number {
  return countNewlines(text.slice(0, offset)) + 1;
}
