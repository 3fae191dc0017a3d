// POST /v2/agent/{projectId}/job/{id}/message: queues a follow-up turn → 200 + job record.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { idempotentRequest, sendReplay } from '../../idempotency/http.ts';
import { turnBodyLimit } from '../../jobs/attachments.ts';
import { promptBody } from '../../jobs/input.ts';
import { toJobRecord } from '../../jobs/record.ts';
import { sendMessage } from '../../jobs/service.ts';
import { access } from '../../keys/route-access.ts';
import { jobRecord } from '../../records/job.ts';
import { errors, json } from '../../responses.ts';
import { setRateLimitHeaders } from '../ratelimit-headers.ts';
import { idempotencyHeaders, jobParams } from '../schemas.ts';

export function registerSendMessage(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().post(
    '/v2/agent/:projectId/job/:id/message',
    {
      // Room for five images as base64 (docs/images.md).
      bodyLimit: turnBodyLimit(ctx.config.maxPromptChars),
      config: { ...access('member'), audit: { action: 'job.message', target: 'job' } },
      schema: {
        summary: 'Send follow-up message',
        description:
          'Queues a follow-up prompt on the same job, branch and pull request. A job that is active runs it after the current turn; a completed or failed job becomes active again. `mode` says what the turn may do (code, ask, plan); after a plan, the prompt `approve` or any code turn carries the plan out. With an Idempotency-Key, a retry gets the first response instead of a second turn.',
        tags: ['jobs'],
        security: [{ bearerAuth: [] }],
        params: jobParams,
        headers: idempotencyHeaders,
        body: promptBody(ctx.config.maxPromptChars),
        response: {
          200: json('The prompt is stored and will be worked on.', jobRecord),
          ...errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const project = request.project!;
      const { id } = request.params;
      const idempotency = idempotentRequest(
        request.headers['idempotency-key'],
        project.id,
        'POST',
        `/v2/agent/${project.id}/job/${id}/message`,
        request.body,
      );
      const attachments = await ctx.attachments.read(request.body.attachments);
      const result = await sendMessage(ctx, project, id, request.body.prompt, {
        attachments,
        idempotency,
        by: whoOf(request, request.principal),
        mode: request.body.mode,
        outputSchema: request.body.outputSchema,
      });
      if ('replayed' in result) return sendReplay(reply, result.replayed);
      setRateLimitHeaders(reply, result.rateLimit);
      return reply.code(200).send(toJobRecord(result.job));
    },
  );
}
