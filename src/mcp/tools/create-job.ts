// create_job: hands a coding task to Errand's agent; answers at once with the new job.
import { z } from 'zod';
import { attachmentsField } from '../../jobs/attachments.ts';
import { attemptsField, checkCommandField } from '../../jobs/best-of.ts';
import { jobMcpServersField } from '../../projects/mcp-servers.ts';
import { JOB_MODES } from '../../records/job.ts';
import { attempt, result } from '../results.ts';
import { outputSchemaField, projectIdField, projectOf, type RegisterTool } from '../tool.ts';

const DESCRIPTION = `Start a background job in which Errand's AI coding agent works on a project's git repository and opens a pull request with its changes.

Use it to hand off a self-contained coding task (fix a bug, add a feature, write tests, update docs). Write the prompt as you would brief a colleague: the agent does not see this conversation, only the repository and your prompt.

Returns at once with the job record, status "active": the job runs asynchronously and usually takes minutes. Follow it with wait_for_job (or poll get_job). When the status is "completed", prLink holds the URL of the pull request (null if the agent changed no files); "failed" means the work failed and the record's error says why.

With mode "ask" the agent answers a question about the repository instead (read-only: no commit, no pull request; the answer is the job's summary). With mode "plan" it writes a plan without changing files: the job completes with the plan as its summary and awaitingApproval true, and send_message with the prompt "approve" (or any follow-up in code mode) carries it out.

With outputSchema (a JSON Schema) the turn also ends with a value valid against it, the job record's output: use it when you need an answer you can parse.
To show the agent screenshots or diagrams, give them as attachments (at most 5 PNG, JPEG, WebP or GIF images of up to 5 MB, each base64 or an https URL); the job's model must take images.

With attempts (best-of-N) the agent makes up to 4 attempts at once, optionally with different engines or models; the project's check command (or checkCommand) judges them, and the first that passes becomes the pull request. The record's attempts list each one's outcome, cost and branch. Use it only when the user asks for several attempts or a comparison: each attempt costs as much as a job.

To give further instructions on the same work (same branch, same pull request), use send_message on this job instead of creating another one.`;

export const registerCreateJob: RegisterTool = (server, deps) => {
  server.registerTool(
    'create_job',
    {
      title: 'Create an Errand job',
      description: DESCRIPTION,
      inputSchema: {
        prompt: z
          .string()
          .min(1)
          .describe('The instruction for the agent: what to change in the repository, and why.'),
        projectId: projectIdField(deps),
        model: z
          .string()
          .min(1)
          .optional()
          .describe(
            "The model for this job as provider:model (e.g. anthropic:claude-sonnet-4-5). Omit to use the project's model; only set it when the user asks for one.",
          ),
        baseRef: z
          .string()
          .min(1)
          .optional()
          .describe(
            "The branch, tag or commit the work starts from. Omit to use the project's ref.",
          ),
        mode: z
          .enum(JOB_MODES)
          .optional()
          .describe(
            'code (the default): change the repository and open a pull request; ask: answer a question, read-only; plan: write a plan and wait for approval.',
          ),
        outputSchema: outputSchemaField,
        attachments: attachmentsField,
        mcpServers: jobMcpServersField
          .optional()
          .describe(
            'MCP servers for this job besides the project\'s, by name: {"command", "args", "env"} (run in the job\'s sandbox) or {"url", "headers"}. Only when the user gives them; project secrets cannot be named here.',
          ),
        attempts: attemptsField,
        checkCommand: checkCommandField,
      },
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    (
      {
        prompt,
        projectId,
        model,
        baseRef,
        mode,
        outputSchema,
        attachments,
        mcpServers,
        attempts,
        checkCommand,
      },
      extra,
    ) =>
      attempt(async () => {
        const project = projectOf(deps, projectId);
        const job = await deps.client.createJob(
          {
            prompt,
            ...(model !== undefined ? { model } : {}),
            ...(baseRef !== undefined ? { baseRef } : {}),
            ...(mode !== undefined ? { mode } : {}),
            ...(outputSchema !== undefined ? { outputSchema } : {}),
            ...(attachments !== undefined ? { attachments } : {}),
            ...(mcpServers !== undefined ? { mcpServers } : {}),
            ...(attempts !== undefined ? { attempts } : {}),
            ...(checkCommand !== undefined ? { checkCommand } : {}),
          },
          { projectId: project, signal: extra.signal },
        );
        return result(
          `Created job ${job.id} in project ${job.projectId}; it runs in the background. Call wait_for_job with jobId ${job.id} to wait for it to finish.`,
          job,
        );
      }),
  );
};
