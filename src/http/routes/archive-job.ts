// POST /v2/agent/{projectId}/job/{id}/archive: terminal; cancels queued turns and aborts the
// running one → 200 + job record. Archiving an archived job returns it unchanged.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { toJobRecord } from '../../jobs/record.ts';
import { archiveJob } from '../../jobs/service.ts';
import { jobRecord } from '../../records/job.ts';
import { errors, json } from '../../responses.ts';
import { jobParams } from '../schemas.ts';

export function registerArchiveJob(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().post(
    '/v2/agent/:projectId/job/:id/archive',
    {
      config: { audit: { action: 'job.archive', target: 'job' } },
      schema: {
        summary: 'Archive agent job',
        description:
          'Archives the job: queued turns are cancelled and the running one is stopped. Archiving an archived job returns it unchanged.',
        tags: ['jobs'],
        security: [{ bearerAuth: [] }],
        params: jobParams,
        response: { 200: json('The archived job.', jobRecord), ...errors(401, 403, 404, 503) },
      },
    },
    async (request) =>
      toJobRecord(
        await archiveJob(
          ctx,
          request.params.projectId,
          request.params.id,
          whoOf(request, request.principal),
        ),
      ),
  );
}
