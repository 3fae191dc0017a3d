// archive_job: closes a job for good, stopping the agent if it is working.
import { attempt, result } from '../results.ts';
import { jobIdField, projectIdField, projectOf, type RegisterTool } from '../tool.ts';

const DESCRIPTION = `Archive an Errand job: close it for good. If the agent is working on it, that work is stopped and queued messages are cancelled; an archived job takes no more messages. Its pull request, if any, is left as it is (it is not closed or merged).

Use it only when the user wants the job stopped or cleaned up; it cannot be undone. Archiving an archived job changes nothing.

Returns the job record with status "archived" and archivedAt set.`;

export const registerArchiveJob: RegisterTool = (server, deps) => {
  server.registerTool(
    'archive_job',
    {
      title: 'Archive an Errand job',
      description: DESCRIPTION,
      inputSchema: { jobId: jobIdField, projectId: projectIdField(deps) },
      annotations: {
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: true,
        openWorldHint: true,
      },
    },
    ({ jobId, projectId }, extra) =>
      attempt(async () => {
        const job = await deps.client.archiveJob(jobId, {
          projectId: projectOf(deps, projectId),
          signal: extra.signal,
        });
        return result(`Archived job ${job.id}.`, job);
      }),
  );
};
