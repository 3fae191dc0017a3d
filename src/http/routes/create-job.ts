// POST /v2/agent/{projectId}/job: creates a job and queues its first turn → 201 + job record.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { toJobRecord } from '../../jobs/record.ts';
import { checkPrompt, createJob } from '../../jobs/service.ts';
import { setRateLimitHeaders } from '../ratelimit-headers.ts';

export function registerCreateJob(app: FastifyInstance, ctx: AppContext): void {
  app.post<{ Params: { projectId: string } }>(
    '/v2/agent/:projectId/job',
    async (request, reply) => {
      const prompt = checkPrompt(ctx, request.body);
      const { job, rateLimit } = await createJob(ctx, request.project!, prompt);
      setRateLimitHeaders(reply, rateLimit);
      return reply.code(201).send(toJobRecord(job));
    },
  );
}
