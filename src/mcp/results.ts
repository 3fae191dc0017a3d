// What the MCP tools answer with: a line a model reads first, then the record as JSON, and
// failures as tool errors (isError) rather than protocol errors, so that the model sees the
// service's message and code and can correct itself.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ErrandError, type Job } from '../client/index.ts';
import { prLine, statusSentence, usageSentence } from '../words.ts';

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

function errorResult(err: unknown): CallToolResult {
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

/** Where the job stands (the client's words), what it used, and what the model can do next. */
export function describeJob(job: Job): string {
  const spent = usageSentence(job.usage);
  // What the forge last said of the pull request, and whether Errand still looks after it.
  const pr = job.pr ? `Its pull request: ${prLine(job.pr)}.` : '';
  const where = [statusSentence(job), spent, pr].filter(Boolean).join(' ');
  switch (job.status) {
    case 'active':
      return `${where} Call wait_for_job to wait for it to finish.`;
    case 'failed':
      return `${where} A send_message makes it active again to retry or change course.`;
    case 'completed':
    case 'archived':
      return where;
  }
}
