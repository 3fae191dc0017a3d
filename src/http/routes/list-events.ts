// GET /v2/agent/{projectId}/job/{id}/events?after=SEQ&limit=N: the job's progress log in order.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { listEvents, toEventRecord } from '../../jobs/events.ts';
import { getJob } from '../../jobs/service.ts';
import { errors, jobParams } from '../schemas.ts';

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

const eventRecord = z.object({
  seq: z.number().int().describe('Increases with every event of the job.'),
  turn: z.number().int().nullable().describe('The turn it belongs to; null for the job itself.'),
  type: z.string().describe('job.created, turn.started, agent.step, turn.completed, …'),
  data: z.unknown().describe('What happened, by type.'),
  at: z.iso.datetime(),
});

export function registerListEvents(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v2/agent/:projectId/job/:id/events',
    {
      schema: {
        summary: 'List job events',
        description: "The job's progress log in order: turns, agent steps, commits, pull requests.",
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
    async (request) => {
      const { after, limit } = request.query;
      const job = await getJob(ctx, request.params.projectId, request.params.id);
      const events = (await listEvents(ctx.db, job.id, after, limit)).map(toEventRecord);
      return { events, nextAfter: events.at(-1)?.seq ?? after };
    },
  );
}
