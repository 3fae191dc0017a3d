// GET /v2/agent/{projectId}/job/{id}/events?after=SEQ&limit=N: the job's progress log in order.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { listEvents, toEventRecord } from '../../jobs/events.ts';
import { getJob } from '../../jobs/service.ts';

export function registerListEvents(app: FastifyInstance, ctx: AppContext): void {
  app.get<{
    Params: { projectId: string; id: string };
    Querystring: { after?: string; limit?: string };
  }>('/v2/agent/:projectId/job/:id/events', async (request) => {
    const after = request.query.after === undefined ? 0 : Number(request.query.after);
    if (!Number.isSafeInteger(after) || after < 0) {
      throw new AppError('bad_request', '"after" must be a non-negative integer (an event seq)');
    }
    const limit = request.query.limit === undefined ? 500 : Number(request.query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      throw new AppError('bad_request', '"limit" must be an integer from 1 to 1000');
    }
    const job = await getJob(ctx, request.params.projectId, request.params.id);
    const events = (await listEvents(ctx.db, job.id, after, limit)).map(toEventRecord);
    return { events, nextAfter: events.at(-1)?.seq ?? after };
  });
}
