// POST /v2/agent/{projectId}/job/{id}/archive: terminal; cancels queued turns and aborts the
// running one → 200 + job record. Archiving an archived job returns it unchanged.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { requireMayArchive } from '../../jobs/creator.ts';
import { toJobRecord } from '../../jobs/record.ts';
import { archiveJob } from '../../jobs/service.ts';
import { access } from '../../keys/route-access.ts';
import { jobRecord } from '../../records/job.ts';
import { errors, json } from '../../responses.ts';
import { jobParams } from '../schemas.ts';

export function registerArchiveJob(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().post(
    '/v2/agent/:projectId/job/:id/archive',
    {
      config: { ...access('member'), audit: { action: 'job.archive', target: 'job' } },
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
    async (request) => {
      const { projectId, id } = request.params;
      // The route's rule lets a member in; which jobs a member may archive is the job's.
      if (!request.principal) throw new AppError('unauthorized', 'send an API key first');
      await requireMayArchive(ctx, request.principal, projectId, id);
      return toJobRecord(await archiveJob(ctx, projectId, id, whoOf(request, request.principal)));
    },
  );
}
