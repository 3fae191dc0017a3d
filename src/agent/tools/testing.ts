// Test fixture for the file tools: a real checkout in a temporary folder with a fake .git/ and,
// beside it, an "outside" folder holding a sentinel file that no tool may ever read or change.

import assert from 'node:assert/strict';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import type { z } from 'zod';
import type { RepoTool } from './tool.ts';
import type { ToolLimits, ToolRun } from './tool-run.ts';

export const sentinelText = 'SENTINEL secret outside the checkout\n';
export const gitConfigText = '[core]\n\trepositoryformatversion = 0\n';

export interface TestRepo {
  /** The temporary folder holding both `root` and `outside`. */
  base: string;
  root: string;
  outside: string;
  /** A file outside the checkout that must stay unread and unchanged. */
  sentinel: string;
  changed: string[];
  run: ToolRun;
}

export async function makeRepo(
  t: TestContext,
  files: Record<string, string | Buffer> = {},
  limits: Partial<ToolLimits> = {},
): Promise<TestRepo> {
  const base = await fs.mkdtemp(path.join(os.tmpdir(), 'errand-tools-'));
  t.after(() => fs.rm(base, { recursive: true, force: true }));
  const root = path.join(base, 'repo');
  const outside = path.join(base, 'outside');
  await fs.mkdir(path.join(root, '.git'), { recursive: true });
  await fs.writeFile(path.join(root, '.git', 'config'), gitConfigText);
  await fs.mkdir(outside);
  const sentinel = path.join(outside, 'secret.txt');
  await fs.writeFile(sentinel, sentinelText);
  for (const [rel, content] of Object.entries(files)) {
    await fs.mkdir(path.dirname(path.join(root, rel)), { recursive: true });
    await fs.writeFile(path.join(root, rel), content);
  }
  const changed: string[] = [];
  const run: ToolRun = { root, limits, onFileChanged: (p) => changed.push(p) };
  return { base, root, outside, sentinel, changed, run };
}

/** Every file under `dir` with its content, to prove a folder was left exactly as it was. */
export async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const entry of await fs.readdir(dir, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath, entry.name);
    const rel = path.relative(dir, full);
    if (entry.isSymbolicLink()) out[rel] = `-> ${await fs.readlink(full)}`;
    else if (entry.isFile()) out[rel] = await fs.readFile(full, 'utf8');
    else if (entry.isDirectory()) out[`${rel}/`] = '';
  }
  return out;
}

/**
 * A tool as the model reads it: the text of its result. Every call also checks that the
 * structured result agrees with its text (an error result, and only an error result, reads
 * "Error: …") and that its title is one line.
 */
export function modelText<S extends z.ZodType>(
  tool: RepoTool<S>,
): (run: ToolRun, input: z.output<S>) => Promise<string> {
  return async (run, input) => {
    const result = await tool.run(run, input);
    assert.equal(result.text.startsWith('Error: '), !result.ok, `${tool.name}: ${result.text}`);
    assert.ok(result.title !== '' && !result.title.includes('\n'), `${tool.name} title`);
    return result.text;
  };
}
