// POST /v2/agent/{projectId}/job: creates a job and queues its first turn → 201 + job record.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { AppContext } from '../../context.ts';
import { toJobRecord } from '../../jobs/record.ts';
import { createJob } from '../../jobs/service.ts';
import { setRateLimitHeaders } from '../ratelimit-headers.ts';
import { createJobBody, errors, jobRecord, json, projectParams } from '../schemas.ts';

export function registerCreateJob(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().post(
    '/v2/agent/:projectId/job',
    {
      schema: {
        summary: 'Create agent job',
        description:
          "Creates a job and queues its first turn. The agent works in the background: poll the job until its status is completed, failed or archived. Optional: the model (else the project's) and the ref to start from (else the project's).",
        tags: ['jobs'],
        security: [{ bearerAuth: [] }],
        params: projectParams,
        body: createJobBody(ctx.config.maxPromptChars),
        response: {
          201: json('The job was created and its prompt is stored.', jobRecord),
          ...errors(400, 401, 403, 404, 413, 415, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const { job, rateLimit } = await createJob(ctx, request.project!, request.body);
      setRateLimitHeaders(reply, rateLimit);
      return reply.code(201).send(toJobRecord(job));
    },
  );
}
