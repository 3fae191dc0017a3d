// The file tools as the agent loop sees them: AI SDK tools built from the tool files beside
// this one (each holds its schema, its description for the model, its code and how a call is
// summarized for progress events).

import { type Tool, tool } from 'ai';
import { deleteFileTool } from './delete.ts';
import { editFileTool } from './edit.ts';
import { listFilesTool } from './list.ts';
import { moveFileTool } from './move.ts';
import { readFileTool } from './read.ts';
import { RUN_COMMAND, summarizeRunCommand } from './run-command.ts';
import { searchTool } from './search.ts';
import { type RepoTool, toolArgs } from './tool.ts';
import { limitsOf, type ToolResult, type ToolRun } from './tool-run.ts';
import { writeFileTool } from './write.ts';

export { createRunCommandTool, RUN_COMMAND } from './run-command.ts';
export type { ToolResult, ToolRun } from './tool-run.ts';

/** Every file tool, in the order the model sees them. */
const repoTools = [
  listFilesTool,
  readFileTool,
  searchTool,
  writeFileTool,
  editFileTool,
  deleteFileTool,
  moveFileTool,
] as const;

/** The file tools that change nothing: an ask or a plan turn gets these alone. */
const READ_ONLY = new Set<string>([listFilesTool.name, readFileTool.name, searchTool.name]);

/** The file tools of a turn; `readOnly`: those that change nothing (ask and plan modes). */
export function createRepoTools(
  run: ToolRun,
  { readOnly = false }: { readOnly?: boolean } = {},
): Record<string, Tool> {
  const limits = limitsOf(run);
  return Object.fromEntries(
    repoTools
      .filter((t) => !readOnly || READ_ONLY.has(t.name))
      .map((t) => [t.name, toSdkTool(t as RepoTool, run, limits)]),
  );
}

function toSdkTool(repoTool: RepoTool, run: ToolRun, limits: ReturnType<typeof limitsOf>): Tool {
  return tool({
    description: repoTool.description(limits),
    inputSchema: repoTool.inputSchema,
    // The loop's abort signal and the job's signal both cancel a running tool.
    execute: (input, { abortSignal }): Promise<ToolResult> => {
      const signals = [run.signal, abortSignal].filter((s) => s !== undefined);
      const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
      return repoTool.run({ ...run, signal }, input);
    },
    // The model reads the text alone; an error is flagged as one where the provider can say so.
    toModelOutput: ({ output }) => ({
      type: output.ok ? 'text' : 'error-text',
      value: output.text,
    }),
  });
}

const summaryMax = 120;

/** One line describing a tool call for progress events; never includes file contents. */
export function summarizeToolArgs(name: string, args: unknown): string {
  const known = repoTools.find((t) => t.name === name);
  let summary = known
    ? known.summarize(toolArgs(args))
    : name === RUN_COMMAND
      ? summarizeRunCommand(toolArgs(args))
      : `${name} ${safeJson(args)}`;
  // Control characters from the model would break one-line logs and event views.
  summary = summary.replace(/\p{Cc}+/gu, ' ');
  return summary.length > summaryMax ? `${summary.slice(0, summaryMax - 1)}…` : summary;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '';
  }
}
