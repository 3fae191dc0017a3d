// GET /v2/agent/{projectId}/job/{id}: the polling hot path. The ETag is a hash of the body,
// so `If-None-Match` answers 304 without sending the record again.
import { hash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { toJobRecord } from '../../jobs/record.ts';
import type { AuthorizedJobReader } from '../auth.ts';

function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t === etag || t === `W/${etag}`;
  });
}

/** Registered outside the project scope: it authenticates itself in the same query as the read. */
export function registerGetJob(app: FastifyInstance, jobs: AuthorizedJobReader): void {
  app.get<{ Params: { projectId: string; id: string } }>(
    '/v2/agent/:projectId/job/:id',
    async (request, reply) => {
      const { projectId, id } = request.params;
      const job = await jobs.read(request.headers.authorization, projectId, id);
      const body = JSON.stringify(toJobRecord(job));
      const etag = `"${hash('sha1', body, 'base64url')}"`;
      reply.header('ETag', etag).header('Cache-Control', 'no-cache');
      if (matches(request.headers['if-none-match'], etag)) return reply.code(304).send();
      return reply.code(200).type('application/json; charset=utf-8').send(body);
    },
  );
}
