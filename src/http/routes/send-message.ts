// POST /v2/agent/{projectId}/job/{id}/message: queues a follow-up turn → 200 + job record.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { toJobRecord } from '../../jobs/record.ts';
import { checkPrompt, sendMessage } from '../../jobs/service.ts';
import { setRateLimitHeaders } from '../ratelimit-headers.ts';

export function registerSendMessage(app: FastifyInstance, ctx: AppContext): void {
  app.post<{ Params: { projectId: string; id: string } }>(
    '/v2/agent/:projectId/job/:id/message',
    async (request, reply) => {
      const prompt = checkPrompt(ctx, request.body);
      const { job, rateLimit } = await sendMessage(
        ctx,
        request.project!,
        request.params.id,
        prompt,
      );
      setRateLimitHeaders(reply, rateLimit);
      return reply.code(200).send(toJobRecord(job));
    },
  );
}
