// The OpenAPI description of the job's events, from the event catalog: one schema per type of
// the events endpoint (and the live stream, which sends the same JSON), and the body of a
// webhook delivery of each type an endpoint can ask for (http/openapi.ts documents them).
import { z } from 'zod';
import {
  EVENTS,
  type EventType,
  LOGGED_EVENT_TYPES,
  WEBHOOK_EVENT_TYPES,
  type WebhookEventType,
} from './catalog.ts';

/** The schema of one logged event as the events endpoint and the stream give it. */
function eventRecord<T extends EventType>(type: T) {
  return z
    .object({
      seq: z.number().int().describe('Increases with every event of the job.'),
      turn: z
        .number()
        .int()
        .nullable()
        .describe('The turn it belongs to; null for the job itself.'),
      type: z.literal(type),
      data: EVENTS[type].data,
      at: z.iso.datetime(),
    })
    .describe(EVENTS[type].description);
}

/** An event of the job's log, one schema per type: the events endpoint's OpenAPI. */
export function eventRecordSchema() {
  const [first, ...rest] = LOGGED_EVENT_TYPES.map((type) => eventRecord(type));
  if (!first) throw new Error('the event catalog declares no logged type');
  return z.discriminatedUnion('type', [first, ...rest]);
}

/** An event of the job's log as the catalog types it. */
export type LoggedEvent = z.output<ReturnType<typeof eventRecordSchema>>;

/**
 * The body of a webhook delivery of each type an endpoint can ask for (events/webhooks/
 * outbox.ts writes it): the event as the events endpoint gives it, with the job's record.
 */
export function webhookPayloadSchemas(job: z.ZodType): Record<WebhookEventType, z.ZodType> {
  const entries = WEBHOOK_EVENT_TYPES.map((type) => [
    type,
    z
      .object({
        type: z.literal(type),
        timestamp: z.iso.datetime().describe('When the event was recorded.'),
        data: z.object({
          projectId: z.string(),
          jobId: z.string(),
          event: eventRecord(type),
          job: job.describe('The job record when the event was recorded.'),
        }),
      })
      .describe(EVENTS[type].description),
  ]);
  return Object.fromEntries(entries) as Record<WebhookEventType, z.ZodType>;
}
