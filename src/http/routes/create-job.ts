// POST /v2/agent/{projectId}/job: creates a job and queues its first turn → 201 + job record.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { idempotentRequest, sendReplay } from '../../idempotency/http.ts';
import { turnBodyLimit } from '../../jobs/attachments.ts';
import { createJobBody } from '../../jobs/input.ts';
import { toJobRecord } from '../../jobs/record.ts';
import { createJob } from '../../jobs/service.ts';
import { access } from '../../keys/route-access.ts';
import { jobRecord } from '../../records/job.ts';
import { errors, json } from '../../responses.ts';
import { setRateLimitHeaders } from '../ratelimit-headers.ts';
import { idempotencyHeaders, projectParams } from '../schemas.ts';

export function registerCreateJob(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().post(
    '/v2/agent/:projectId/job',
    {
      // Room for five images as base64 (docs/images.md).
      bodyLimit: turnBodyLimit(ctx.config.maxPromptChars),
      config: { ...access('member'), audit: { action: 'job.create', target: 'project' } },
      schema: {
        summary: 'Create agent job',
        description:
          "Creates a job and queues its first turn. The agent works in the background: poll the job until its status is completed, failed or archived. Optional: the model (else the project's), the ref to start from (else the project's) and the mode (code, the default; ask: an answer, read-only; plan: a plan that waits for approval). With an Idempotency-Key, a retry gets the first response instead of a second job.",
        tags: ['jobs'],
        security: [{ bearerAuth: [] }],
        params: projectParams,
        headers: idempotencyHeaders,
        body: createJobBody(ctx.config.maxPromptChars),
        response: {
          201: json('The job was created and its prompt is stored.', jobRecord),
          ...errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const project = request.project!;
      const idempotency = idempotentRequest(
        request.headers['idempotency-key'],
        project.id,
        'POST',
        `/v2/agent/${project.id}/job`,
        request.body,
      );
      const attachments = await ctx.attachments.read(request.body.attachments);
      const result = await createJob(
        ctx,
        project,
        { ...request.body, attachments, by: whoOf(request, request.principal) },
        idempotency,
      );
      if ('replayed' in result) return sendReplay(reply, result.replayed);
      setRateLimitHeaders(reply, result.rateLimit);
      return reply.code(201).send(toJobRecord(result.job));
    },
  );
}
