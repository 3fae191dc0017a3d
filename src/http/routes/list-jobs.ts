// GET /v2/agent/{projectId}/jobs: newest first, `limit` (1–100, default 20), opaque `cursor`
// from the previous page's `nextCursor`, optional `status` filter.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import type { JobStatus } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { toJobRecord } from '../../jobs/record.ts';
import { JOB_STATUSES, listJobs } from '../../jobs/service.ts';

interface Query {
  limit?: string;
  cursor?: string;
  status?: string;
}

export function registerListJobs(app: FastifyInstance, ctx: AppContext): void {
  app.get<{ Params: { projectId: string }; Querystring: Query }>(
    '/v2/agent/:projectId/jobs',
    async (request) => {
      const q = request.query;
      const limit = q.limit === undefined ? 20 : Number(q.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
        throw new AppError('bad_request', '"limit" must be an integer from 1 to 100');
      }
      if (q.status !== undefined && !JOB_STATUSES.includes(q.status as JobStatus)) {
        throw new AppError('bad_request', `"status" must be one of ${JOB_STATUSES.join(', ')}`);
      }
      if (q.cursor !== undefined && typeof q.cursor !== 'string') {
        throw new AppError('bad_request', '"cursor" must be given once');
      }
      const page = await listJobs(ctx, request.params.projectId, {
        limit,
        cursor: q.cursor,
        status: q.status as JobStatus | undefined,
      });
      return { jobs: page.jobs.map(toJobRecord), nextCursor: page.nextCursor };
    },
  );
}
