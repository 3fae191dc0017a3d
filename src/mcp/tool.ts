// What every MCP tool shares: the client it calls Errand with, the default project
// (ERRAND_PROJECT) and the input fields that name a project and a job. The projectId field is
// required in the schema the model sees unless a default project is set, so that the schema
// tells the model the truth.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { Clock, ErrandClient } from '../client/index.ts';
import { ToolInputError } from './results.ts';

export interface ToolDeps {
  client: ErrandClient;
  /** The project a call works in when it names none. */
  defaultProject: string | undefined;
  /** Time as the tools wait on it (wait_for_job's heartbeat): the real clock unless a test gives one. */
  clock?: Clock;
}

/** One tool: its schema, its description for the model and its code, in one file each. */
export type RegisterTool = (server: McpServer, deps: ToolDeps) => void;

export function projectIdField(deps: ToolDeps): z.ZodString | z.ZodOptional<z.ZodString> {
  const id = z.string().min(1);
  return deps.defaultProject
    ? id
        .optional()
        .describe(
          `The project's id (prj_…). Optional: defaults to ${deps.defaultProject}, the project this server is configured for.`,
        )
    : id.describe(
        "The project's id (prj_…): the project whose repository the agent works on. Ask the user for it if you do not know it.",
      );
}

export const jobIdField = z
  .string()
  .min(1)
  .describe('The job id (job_…), as create_job or list_jobs returned it.');

/** A turn's output schema (docs/structured-output.md), on create_job and send_message. */
export const outputSchemaField = z
  .record(z.string(), z.unknown())
  .optional()
  .describe(
    "A JSON Schema (2020-12, at most 16 KB, only references inside itself) the agent's answer must satisfy: the job's `output` holds the value once the turn completes. Give it when you need a result you can parse (a verdict, a list, numbers); omit it otherwise.",
  );

export function projectOf(deps: ToolDeps, projectId: string | undefined): string {
  const id = projectId ?? deps.defaultProject;
  if (!id) {
    throw new ToolInputError(
      'No project: pass projectId, or set ERRAND_PROJECT in the MCP server configuration.',
    );
  }
  return id;
}

/** What the statuses mean, for the descriptions of the tools that return jobs. */
export const STATUS_GUIDE = `Statuses: "active": the agent is working on the job (or a message waits its turn); "completed": the agent finished its latest message, and prLink holds the pull request's URL (null if it changed no files); "failed": the latest message's work failed, the record's error says why, and send_message makes the job active again; "archived": closed for good, it takes no more messages.`;
