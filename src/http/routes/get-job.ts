// GET /v2/agent/{projectId}/job/{id}: the polling hot path. The ETag is a hash of the body,
// so `If-None-Match` answers 304 without sending the record again.
import { hash } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import { type JobView, toJobRecord } from '../../jobs/record.ts';
import { access, enforceAccess } from '../../keys/route-access.ts';
import type { Principal } from '../../keys/service.ts';
import { jobRecord } from '../../records/job.ts';
import { errors, json } from '../../responses.ts';
import type { AuthorizedJobReader, VersionedJob } from '../auth.ts';
import { jobParams } from '../schemas.ts';

function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t === etag || t === `W/${etag}`;
  });
}

interface Rendered {
  version: string;
  updatedAt: number;
  body: string;
  etag: string;
}

/**
 * The bodies and ETags of recently polled jobs, by row version. The job's version is still
 * checked on every request (on the embedded database, possibly against a held answer: see
 * AuthorizedJobReader); only rendering it again is saved when its row has not changed.
 * The update time is compared too, so a row version number reused after transaction id
 * wraparound cannot bring back an old body.
 */
export class RenderedJobs {
  readonly #entries: LRUCache<string, Rendered>;

  /**
   * Keeps at most `maxChars` characters of bodies (8 Mi by default), dropping the least recently
   * used; a body larger than that is not kept.
   */
  constructor(maxChars = 8 * 1024 * 1024) {
    this.#entries = new LRUCache({ maxSize: maxChars, sizeCalculation: (r) => r.body.length });
  }

  /** The version of the job's kept body, if one is kept. */
  versionOf(jobId: string): string | undefined {
    return this.#entries.get(jobId)?.version;
  }

  /** The kept body of this version of the job, if it is still kept. */
  kept(jobId: string, version: string): Rendered | undefined {
    const cached = this.#entries.get(jobId);
    return cached?.version === version ? cached : undefined;
  }

  render({ job, version }: VersionedJob & { job: JobView }): Rendered {
    const updatedAt = job.updated_at.getTime();
    const cached = this.#entries.get(job.id);
    if (cached && cached.version === version && cached.updatedAt === updatedAt) return cached;
    const body = JSON.stringify(toJobRecord(job));
    const rendered = { version, updatedAt, body, etag: `"${hash('sha1', body, 'base64url')}"` };
    // A body over the whole limit is not kept (and the job's older one goes).
    this.#entries.set(job.id, rendered);
    return rendered;
  }
}

/**
 * The read with the job's columns: a read answered "unchanged" whose body was dropped from the
 * cache in the meantime (other jobs rendered while it ran) is read again, in full.
 */
async function complete(
  read: VersionedJob,
  readAgain: () => Promise<VersionedJob>,
): Promise<VersionedJob & { job: JobView }> {
  if (read.job !== undefined) return { job: read.job, version: read.version };
  const again = await readAgain();
  if (again.job === undefined) throw new Error('a read without a known version answered no job');
  return { job: again.job, version: again.version };
}

/** Registered outside the project scope: it authenticates itself in the same query as the read. */
export function registerGetJob(app: FastifyInstance, jobs: AuthorizedJobReader): void {
  const rendered = new RenderedJobs();
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v2/agent/:projectId/job/:id',
    {
      schema: {
        summary: 'Get agent job',
        description:
          'The job as it is now: poll it until its status is completed, failed or archived. The ETag lets a poll with If-None-Match get a 304 while nothing changed.',
        tags: ['jobs'],
        security: [{ bearerAuth: [] }],
        params: jobParams,
        response: {
          200: json('The job.', jobRecord),
          304: z.null().describe('Not modified since the ETag in If-None-Match.'),
          ...errors(401, 403, 404, 503),
        },
      },
      // The reader checks both ids itself (in the query that reads the job): parsing the
      // params again would only add work to the polling hot path. The schema documents them.
      validatorCompiler: () => (params) => ({ value: params }),
      // Checked by the reader, in the query that reads the job (enforceAccess, as allow).
      config: access('viewer'),
    },
    async (request, typedReply) => {
      // The body is sent already rendered (a string of the record), which the response
      // schema's types do not describe.
      const reply: FastifyReply = typedReply;
      const { projectId, id } = request.params;
      const { authorization } = request.headers;
      // A job whose body is kept is read as its version alone while it has not changed.
      const allow = (principal: Principal) => enforceAccess(request, principal);
      const read = await jobs.read(authorization, projectId, id, rendered.versionOf(id), allow);
      const { body, etag } =
        (read.job === undefined ? rendered.kept(id, read.version) : undefined) ??
        rendered.render(
          await complete(read, () => jobs.read(authorization, projectId, id, undefined, allow)),
        );
      reply.header('ETag', etag).header('Cache-Control', 'no-cache');
      if (matches(request.headers['if-none-match'], etag)) return reply.code(304).send();
      return reply.code(200).type('application/json; charset=utf-8').send(body);
    },
  );
}
