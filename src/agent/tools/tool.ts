// How a file tool is declared: its name, its description for the model, its input schema and
// its code in one object, one file per tool. createRepoTools (./index.ts) turns them into AI
// SDK tools; nothing else needs to know a tool exists.

import { z } from 'zod';
import type { ToolContext, ToolLimits, ToolResult } from './context.ts';

export interface RepoTool<S extends z.ZodType = z.ZodType> {
  readonly name: string;
  /** Written for the model; may quote the limits the tool runs under. */
  description(limits: ToolLimits): string;
  readonly inputSchema: S;
  /** Never throws for a bad call: refusals come back as `ok: false` results. */
  run(ctx: ToolContext, input: z.output<S>): Promise<ToolResult>;
}

export const repoPath = z
  .string()
  .describe("Path relative to the repository root, with '/' separators, e.g. 'src/index.ts'.");
