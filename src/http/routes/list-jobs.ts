// GET /v2/agent/{projectId}/jobs: newest first, `limit` (1–100, default 20), opaque `cursor`
// from the previous page's `nextCursor`, optional `status` and `createdBy` filters. The jobs of
// eval runs are left out unless `evalRun` names the run.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { toJobRecord } from '../../jobs/record.ts';
import { listJobs } from '../../jobs/service.ts';
import { access } from '../../keys/route-access.ts';
import { JOB_STATUSES, jobRecord } from '../../records/job.ts';
import { errors } from '../../responses.ts';
import { pageQuery, projectParams } from '../schemas.ts';

const query = pageQuery('jobs').extend({
  status: z
    .enum(JOB_STATUSES, {
      error: `"status" must be one of ${JOB_STATUSES.join(', ')}`,
    })
    .optional()
    .describe('Only jobs with this status.'),
  createdBy: z
    .string({ error: '"createdBy" must be given once' })
    .min(1)
    .max(300)
    .optional()
    .describe(
      "Only jobs this actor created: a user's id (usr_…), an API key's id (key_…), or a forge user as <forge>:<login> (github:octocat).",
    ),
  evalRun: z
    .string({ error: '"evalRun" must be given once' })
    .min(1)
    .max(100)
    .optional()
    .describe(
      "The jobs of this eval run (evr_…) instead of the project's own work, which leaves out every run's jobs.",
    ),
});

export function registerListJobs(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v2/agent/:projectId/jobs',
    {
      config: access('viewer'),
      schema: {
        summary: 'List agent jobs',
        description:
          "The project's jobs, newest first, a page at a time; the jobs of eval runs only with `evalRun`.",
        tags: ['jobs'],
        security: [{ bearerAuth: [] }],
        params: projectParams,
        querystring: query,
        response: {
          200: z
            .object({
              jobs: z.array(jobRecord),
              nextCursor: z
                .string()
                .nullable()
                .describe('Pass as cursor for the next page; null on the last page.'),
            })
            .describe('A page of jobs.'),
          ...errors(400, 401, 403, 503),
        },
      },
    },
    async (request) => {
      const page = await listJobs(ctx, request.params.projectId, request.query);
      return { jobs: page.jobs.map(toJobRecord), nextCursor: page.nextCursor };
    },
  );
}
