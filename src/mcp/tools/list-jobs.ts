// list_jobs: a project's recent jobs, newest first, so a model can find a job it lost track of.
import { z } from 'zod';
import type { Job } from '../../client/index.ts';
import { JOB_STATUSES } from '../../records/job.ts';
import { attempt, result } from '../results.ts';
import { projectIdField, projectOf, type RegisterTool, STATUS_GUIDE } from '../tool.ts';

const MAX = 100;

const DESCRIPTION = `List a project's Errand jobs, newest first: one line per job (id, status, turns, pull request or error), then the job records as JSON.

Use it to find a job whose id you do not have (e.g. the user says "the job from this morning"), or to see which jobs are still running. Filter by status to see, e.g., only active ones.

${STATUS_GUIDE}`;

function line(job: Job): string {
  const outcome = job.prLink ? `  ${job.prLink}` : job.error ? `  error: ${job.error}` : '';
  return `${job.id}  ${job.status}  ${job.turns} turn${job.turns === 1 ? '' : 's'}  created ${job.createdAt}${outcome}`;
}

export const registerListJobs: RegisterTool = (server, deps) => {
  server.registerTool(
    'list_jobs',
    {
      title: "List a project's Errand jobs",
      description: DESCRIPTION,
      inputSchema: {
        projectId: projectIdField(deps),
        status: z
          .enum(JOB_STATUSES)
          .optional()
          .describe('Only jobs with this status. Omit for all.'),
        limit: z
          .number()
          .int()
          .min(1)
          .max(MAX)
          .default(20)
          .describe(`How many jobs at most (1–${MAX}, default 20), the newest first.`),
      },
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    ({ projectId, status, limit }, extra) =>
      attempt(async () => {
        const project = projectOf(deps, projectId);
        const jobs: Job[] = [];
        // One more than asked for says whether older jobs exist, without a second request
        // unless the limit is the page's maximum.
        for await (const job of deps.client.listJobs({
          projectId: project,
          signal: extra.signal,
          pageSize: Math.min(limit + 1, MAX),
          ...(status !== undefined ? { status } : {}),
        })) {
          jobs.push(job);
          if (jobs.length > limit) break;
        }
        const more = jobs.length > limit;
        const shown = jobs.slice(0, limit);
        const what = `${status ? `${status} ` : ''}job${shown.length === 1 ? '' : 's'}`;
        const head =
          shown.length === 0
            ? `No ${status ? `${status} ` : ''}jobs in project ${project}.`
            : `${more ? `The ${shown.length} newest` : shown.length} ${what} in project ${project}, newest first${more ? ' (older ones exist: raise limit to see them)' : ''}:`;
        return result([head, ...shown.map(line)].join('\n'), shown);
      }),
  );
};
