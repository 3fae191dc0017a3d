// POST /v2/agent/{projectId}/job/{id}/message: queues a follow-up turn → 200 + job record.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { AppContext } from '../../context.ts';
import { toJobRecord } from '../../jobs/record.ts';
import { sendMessage } from '../../jobs/service.ts';
import { setRateLimitHeaders } from '../ratelimit-headers.ts';
import { errors, jobParams, jobRecord, json, promptBody } from '../schemas.ts';

export function registerSendMessage(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().post(
    '/v2/agent/:projectId/job/:id/message',
    {
      schema: {
        summary: 'Send follow-up message',
        description:
          'Queues a follow-up prompt on the same job, branch and pull request. A job that is active runs it after the current turn; a completed or failed job becomes active again.',
        tags: ['jobs'],
        security: [{ bearerAuth: [] }],
        params: jobParams,
        body: promptBody(ctx.config.maxPromptChars),
        response: {
          200: json('The prompt is stored and will be worked on.', jobRecord),
          ...errors(400, 401, 403, 404, 409, 413, 415, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const { job, rateLimit } = await sendMessage(
        ctx,
        request.project!,
        request.params.id,
        request.body.prompt,
      );
      setRateLimitHeaders(reply, rateLimit);
      return reply.code(200).send(toJobRecord(job));
    },
  );
}
