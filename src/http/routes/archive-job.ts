// POST /v2/agent/{projectId}/job/{id}/archive: terminal; cancels queued turns and aborts the
// running one → 200 + job record. Archiving an archived job returns it unchanged.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { toJobRecord } from '../../jobs/record.ts';
import { archiveJob } from '../../jobs/service.ts';

export function registerArchiveJob(app: FastifyInstance, ctx: AppContext): void {
  app.post<{ Params: { projectId: string; id: string } }>(
    '/v2/agent/:projectId/job/:id/archive',
    async (request) =>
      toJobRecord(await archiveJob(ctx, request.params.projectId, request.params.id)),
  );
}
