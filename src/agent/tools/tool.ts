// How a file tool is declared: its name, its description for the model, its input schema and
// its code in one object, one file per tool. createRepoTools (./index.ts) turns them into AI
// SDK tools; nothing else needs to know a tool exists.

import { z } from 'zod';
import type { ToolLimits, ToolResult, ToolRun } from './tool-run.ts';

export interface RepoTool<S extends z.ZodType = z.ZodType> {
  readonly name: string;
  /** Written for the model; may quote the limits the tool runs under. */
  description(limits: ToolLimits): string;
  readonly inputSchema: S;
  /** Never throws for a bad call: refusals come back as `ok: false` results. */
  run(run: ToolRun, input: z.output<S>): Promise<ToolResult>;
  /**
   * The call in a few words for progress events, from the arguments as the model sent them
   * (not yet validated); never file contents.
   */
  summarize(args: ToolArgs): string;
}

/** A tool call's arguments before validation, read field by field. */
export interface ToolArgs {
  str(key: string): string | undefined;
  int(key: string): number | undefined;
  flag(key: string): boolean;
}

export function toolArgs(args: unknown): ToolArgs {
  const a = typeof args === 'object' && args !== null ? (args as Record<string, unknown>) : {};
  return {
    str: (key) => {
      const value = a[key];
      return typeof value === 'string' ? value : undefined;
    },
    int: (key) => {
      const value = a[key];
      return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
    },
    flag: (key) => a[key] === true,
  };
}

export const repoPath = z
  .string()
  .describe("Path relative to the repository root, with '/' separators, e.g. 'src/index.ts'.");
