// What the webhook modules share: the event types an endpoint may subscribe to, and the records
// the admin API, the CLI and the dashboard show of endpoints and deliveries, each declared once
// as a schema: the server's types, the OpenAPI components and the typed client's types come from
// it. They live with the webhooks, which own them.
import { z } from 'zod';
import type { DeliveryState } from '../../db/schema.ts';
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../../events/catalog.ts';

// The job events a webhook endpoint can ask for: the event catalog says which types.
export { WEBHOOK_EVENT_TYPES, type WebhookEventType };

export function isWebhookEventType(type: string): type is WebhookEventType {
  return (WEBHOOK_EVENT_TYPES as readonly string[]).includes(type);
}

const isoTime = z.iso.datetime();

const webhookFields = z.object({
  id: z.string().describe('The webhook id (whk_ and 20 characters).'),
  projectId: z.string(),
  url: z.string(),
  events: z.array(z.enum(WEBHOOK_EVENT_TYPES)),
  description: z.string().nullable(),
  enabled: z.boolean(),
  previousSecretExpiresAt: isoTime
    .nullable()
    .describe('While a rotated secret overlaps, the previous secret signs too, until then.'),
  createdAt: isoTime,
  updatedAt: isoTime,
});

/** An endpoint as the admin API returns it (a component of the OpenAPI document): no secret. */
export const webhookRecord = webhookFields.meta({
  id: 'Webhook',
  description: 'A webhook endpoint, without its secret.',
});

export type WebhookRecord = z.infer<typeof webhookRecord>;

/** Returned once, at creation and at rotation: the signing secret, `whsec_` + base64. */
export const webhookWithSecret = webhookFields.extend({
  secret: z
    .string()
    .describe('The signing secret, whsec_ and base64: shown in this response only.'),
});

export type WebhookWithSecret = z.infer<typeof webhookWithSecret>;

const DELIVERY_STATES = ['pending', 'delivered', 'failed'] as const;

// The database's column says the same three (src/db/schema.ts); a state the column has and
// the list has not fails to compile where a row becomes a record (endpoints.ts).
DELIVERY_STATES satisfies readonly DeliveryState[];

const deliveryAttempt = z.object({
  attempt: z.number().int(),
  at: isoTime,
  status: z.number().int().nullable().describe("The receiver's status; null without one."),
  error: z.string().nullable(),
  latencyMs: z.number().int(),
});

export type DeliveryAttempt = z.infer<typeof deliveryAttempt>;

/** One delivery of an event to an endpoint, with its attempts. */
export const deliveryRecord = z.object({
  id: z.string().describe('The webhook-id header: the same on every attempt.'),
  webhookId: z.string(),
  jobId: z.string(),
  eventSeq: z.number().int().describe("The event's seq in the job's event log."),
  type: z.enum(WEBHOOK_EVENT_TYPES),
  state: z.enum(DELIVERY_STATES),
  attempts: z.array(deliveryAttempt),
  createdAt: isoTime,
  deliveredAt: isoTime.nullable(),
  failedAt: isoTime.nullable(),
});

export type DeliveryRecord = z.infer<typeof deliveryRecord>;
