// What the MCP tools answer with: a line a model reads first, then the record as JSON, and
// failures as tool errors (isError) rather than protocol errors, so that the model sees the
// service's message and code and can correct itself.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ErrandError, type Job } from '../client/index.ts';

/** A tool's input the model got wrong in a way the schema cannot express (no project). */
export class ToolInputError extends Error {
  override name = 'ToolInputError';
}

export function result(summary: string, value: unknown): CallToolResult {
  return {
    content: [
      { type: 'text', text: summary },
      { type: 'text', text: JSON.stringify(value, null, 2) },
    ],
  };
}

export function errorResult(err: unknown): CallToolResult {
  let text: string;
  if (err instanceof ErrandError) {
    const details = [
      `code ${err.code}`,
      ...(err.status ? [`HTTP ${err.status}`] : []),
      ...(err.retryAfterSeconds !== undefined ? [`retry after ${err.retryAfterSeconds} s`] : []),
      ...(err.requestId ? [`request ${err.requestId}`] : []),
    ];
    text = `Errand: ${err.message} (${details.join(', ')})`;
  } else if (err instanceof ToolInputError) {
    text = err.message;
  } else {
    text = `errand mcp failed: ${err instanceof Error ? err.message : String(err)}`;
  }
  return { content: [{ type: 'text', text }], isError: true };
}

/** Runs a tool's body; whatever it throws becomes a tool error the model can read. */
export async function attempt(body: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await body();
  } catch (err) {
    return errorResult(err);
  }
}

/** One sentence on where the job stands and what the model can do next. */
export function describeJob(job: Job): string {
  switch (job.status) {
    case 'active':
      return `Job ${job.id} is active: the agent is working on turn ${job.turns} (or it is queued). Call wait_for_job to wait for it to finish.`;
    case 'completed':
      return job.prLink
        ? `Job ${job.id} is completed; its pull request is ${job.prLink}`
        : `Job ${job.id} is completed without a pull request (the agent changed no files).`;
    case 'failed':
      return `Job ${job.id} failed: ${job.error ?? 'no reason recorded'}. A send_message makes it active again to retry or change course.`;
    case 'archived':
      return `Job ${job.id} is archived: it is closed for good and takes no more messages.${job.prLink ? ` Its pull request was ${job.prLink}` : ''}`;
  }
}
