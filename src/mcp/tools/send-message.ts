// send_message: a follow-up instruction on an existing job (same branch, same pull request).
import { z } from 'zod';
import { attachmentsField } from '../../jobs/attachments.ts';
import { JOB_MODES } from '../../records/job.ts';
import { attempt, result } from '../results.ts';
import {
  jobIdField,
  outputSchemaField,
  projectIdField,
  projectOf,
  type RegisterTool,
} from '../tool.ts';

const DESCRIPTION = `Send a follow-up instruction to an existing Errand job: the agent continues the same work on the same branch and updates the same pull request.

Use it to ask for changes to what a job did (review feedback, a missed case, a failing check), or to retry a failed job with more guidance. The agent sees the job's earlier work in the repository, not this conversation: say what to change.

A job whose record says awaitingApproval has a plan waiting: the prompt "approve" (or any follow-up in code mode) carries it out. mode "ask" asks a question (read-only, the answer is the job's summary); mode "plan" asks for a new plan.

A message to an active job waits until the current turn ends; a completed or failed job becomes active again. An archived job refuses messages (code conflict).

Returns at once with the job record (status "active"); the work runs asynchronously. Follow it with wait_for_job.`;

export const registerSendMessage: RegisterTool = (server, deps) => {
  server.registerTool(
    'send_message',
    {
      title: 'Send a follow-up to an Errand job',
      description: DESCRIPTION,
      inputSchema: {
        jobId: jobIdField,
        prompt: z
          .string()
          .min(1)
          .describe('The follow-up instruction for the agent; "approve" approves its plan.'),
        projectId: projectIdField(deps),
        mode: z
          .enum(JOB_MODES)
          .optional()
          .describe(
            'code (the default): change the repository; ask: answer, read-only; plan: write a plan and wait for approval.',
          ),
        outputSchema: outputSchemaField,
        attachments: attachmentsField,
      },
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    ({ jobId, prompt, projectId, mode, outputSchema, attachments }, extra) =>
      attempt(async () => {
        const job = await deps.client.sendMessage(jobId, prompt, {
          projectId: projectOf(deps, projectId),
          signal: extra.signal,
          ...(mode !== undefined ? { mode } : {}),
          ...(outputSchema !== undefined ? { outputSchema } : {}),
          ...(attachments !== undefined ? { attachments } : {}),
        });
        return result(
          `Sent the message to job ${job.id}; it is ${job.status} with ${job.turns} turns. Call wait_for_job with jobId ${job.id} to wait for the agent to finish it.`,
          job,
        );
      }),
  );
};
