// GET /v2/agent/{projectId}/job/{id}/events?after=SEQ&limit=N: the job's progress log in order;
// with `Accept: text/event-stream`, the live stream of it (hub.ts): one path, so one route.

import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { listEvents, toLoggedEvent } from '../../events/log.ts';
import { eventRecordSchema } from '../../events/openapi.ts';
import { jobParams } from '../../http/schemas.ts';
import { getJob } from '../../jobs/service.ts';
import { access } from '../../keys/route-access.ts';
import { principalId } from '../../keys/service.ts';
import { errors } from '../../responses.ts';
import { type EventStreams, resumeAfter, wantsStream } from './hub.ts';

const AFTER = '"after" must be a non-negative integer (an event seq)';
const LIMIT = '"limit" must be an integer from 1 to 1000';

const query = z.object({
  // z.coerce.number is Number(): a repeated parameter (an array) is NaN and refused.
  after: z.coerce
    .number({ error: AFTER })
    .int({ error: AFTER })
    .min(0, { error: AFTER })
    .default(0)
    .describe("Only events after this seq (the previous page's nextAfter)."),
  limit: z.coerce
    .number({ error: LIMIT })
    .int({ error: LIMIT })
    .min(1, { error: LIMIT })
    .max(1000, { error: LIMIT })
    .default(500)
    .describe('How many events, 1 to 1000.'),
});

// One schema per event type, from the event catalog.
const eventRecord = eventRecordSchema();

export function registerEventsRoute(
  app: FastifyInstance,
  ctx: AppContext,
  streams: EventStreams,
): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v2/agent/:projectId/job/:id/events',
    {
      config: access('viewer'),
      schema: {
        summary: 'List job events',
        description:
          "The job's progress log in order: turns, agent steps, commits, pull requests, and the job's status changes (job.created, job.reactivated, job.completed, job.failed, job.archived, each with the job's record as data.job).\n\n" +
          'With `Accept: text/event-stream` the answer is a live stream (Server-Sent Events): each event as `id:` (its seq), `event:` (its type) and `data:` (the event as JSON), from the events after `Last-Event-ID` (or `after`), then each new one as it is written, by any process. A comment every 15 s keeps proxies from closing it. The stream ends after the event that leaves the job completed, failed or archived; opening one on such a job with nothing left to send answers 204. Too many open streams for one key: 429.',
        tags: ['jobs'],
        security: [{ bearerAuth: [] }],
        params: jobParams,
        querystring: query,
        response: {
          200: z
            .object({
              events: z.array(eventRecord),
              nextAfter: z.number().int().describe('Pass as after to read on.'),
            })
            .describe('Events in order.'),
          ...errors(400, 401, 403, 404, 503),
        },
      },
    },
    async (request, reply) => {
      const { after, limit } = request.query;
      const job = await getJob(ctx, request.params.projectId, request.params.id);
      if (wantsStream(request.headers.accept)) {
        const from = resumeAfter(request.headers['last-event-id'], after);
        const principal = request.principal;
        if (!principal) throw new AppError('unauthorized', 'missing API key');
        // Errors before the stream starts are answered as any other; once it has started, the
        // response is the stream's own.
        await streams.open(
          { jobId: job.id, keyId: principalId(principal), after: from, requestId: request.id },
          reply.raw,
        );
        reply.hijack();
        return reply;
      }
      const events = (await listEvents(ctx.db, job.id, after, limit)).map(toLoggedEvent);
      return { events, nextAfter: events.at(-1)?.seq ?? after };
    },
  );
}
