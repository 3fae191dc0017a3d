// The dashboard job page's live lines: the page's script follows the job's live event stream, as
// lines of HTML the server renders and escapes; asked for JSON, what happened since the last
// event the page shows. The page itself is the dashboard's (dashboard/job-routes.ts).

import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { eventItem, eventView } from '../../dashboard/job-pages.ts';
import { EVENTS_ON_PAGE } from '../../dashboard/job-routes.ts';
import { visibleProject } from '../../dashboard/requests.ts';
import { AppError } from '../../errors.ts';
import type { EventType } from '../../events/catalog.ts';
import { listEvents, toEventRecord } from '../../events/log.ts';
import { getJob } from '../../jobs/service.ts';
import { access } from '../../keys/route-access.ts';
import { principalId } from '../../keys/service.ts';
import { type EventStreams, resumeAfter, wantsStream } from './hub.ts';

/** The events after which a job is no longer active: the page reloads to show the outcome. */
const SETTLING_EVENTS: ReadonlySet<string> = new Set<EventType>([
  'job.completed',
  'job.failed',
  'job.archived',
]);

export function registerLiveLines(
  pages: FastifyInstance,
  ctx: AppContext,
  streams: EventStreams,
): void {
  pages.get<{ Params: { id: string; jobId: string }; Querystring: { after?: string } }>(
    '/projects/:id/jobs/:jobId/events',
    { config: access('viewer') },
    async (request, reply) => {
      const { principal, row } = await visibleProject(ctx, request, request.params.id);
      const job = await getJob(ctx, row.id, request.params.jobId);
      const after = Number(request.query.after ?? 0);
      if (!Number.isSafeInteger(after) || after < 0) {
        throw new AppError('bad_request', '"after" must be an event number');
      }
      if (wantsStream(request.headers.accept)) {
        await streams.open(
          {
            jobId: job.id,
            keyId: principalId(principal),
            after: resumeAfter(request.headers['last-event-id'], after),
            requestId: request.id,
          },
          reply.raw,
          (event) => ({
            name: 'line',
            data: JSON.stringify({
              seq: event.seq,
              html: eventItem(eventView(event)),
              settled: SETTLING_EVENTS.has(event.type),
            }),
          }),
        );
        reply.hijack();
        return reply;
      }
      const events = await listEvents(ctx.db, job.id, after, EVENTS_ON_PAGE);
      return {
        status: job.status,
        events: events.map((event) => {
          const view = eventView(toEventRecord(event));
          return { seq: view.seq, html: eventItem(view) };
        }),
      };
    },
  );
}
