// get_job: the job record as it is now, without waiting.
import { attempt, describeJob, result } from '../results.ts';
import { jobIdField, projectIdField, projectOf, type RegisterTool, STATUS_GUIDE } from '../tool.ts';

const DESCRIPTION = `Get an Errand job's current record, at once and without waiting: its status, prLink (the pull request's URL), pr (what the forge last said of the pull request: open, merged or closed, its checks, and whether Errand still fixes its failing checks and conflicts), error (why it failed), turns (messages worked on), branch and dates.

Use it to check on a job; to wait until a job finishes, use wait_for_job instead of calling this repeatedly.

${STATUS_GUIDE}`;

export const registerGetJob: RegisterTool = (server, deps) => {
  server.registerTool(
    'get_job',
    {
      title: 'Get an Errand job',
      description: DESCRIPTION,
      inputSchema: { jobId: jobIdField, projectId: projectIdField(deps) },
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    ({ jobId, projectId }, extra) =>
      attempt(async () => {
        const job = await deps.client.getJob(jobId, {
          projectId: projectOf(deps, projectId),
          signal: extra.signal,
        });
        return result(describeJob(job), job);
      }),
  );
};
