// What the webhook modules share: the event types an endpoint may subscribe to, and the records
// the admin API, the CLI and the dashboard show of endpoints and deliveries.
import type { DeliveryState } from '../../db/schema.ts';
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../catalog.ts';

// The job events a webhook endpoint can ask for: the event catalog's, which says which types.
export { WEBHOOK_EVENT_TYPES, type WebhookEventType };

export function isWebhookEventType(type: string): type is WebhookEventType {
  return (WEBHOOK_EVENT_TYPES as readonly string[]).includes(type);
}

/** An endpoint as the admin API returns it: never its secrets. */
export interface WebhookRecord {
  id: string;
  projectId: string;
  url: string;
  events: WebhookEventType[];
  description: string | null;
  enabled: boolean;
  /** While a rotated secret's overlap lasts, the previous secret signs too, until then. */
  previousSecretExpiresAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** Returned once, at creation and at rotation: the signing secret, `whsec_` + base64. */
export interface WebhookWithSecret extends WebhookRecord {
  secret: string;
}

export interface DeliveryAttempt {
  attempt: number;
  at: string;
  /** The receiver's HTTP status; null when no answer came. */
  status: number | null;
  error: string | null;
  latencyMs: number;
}

export interface DeliveryRecord {
  /** The `webhook-id` header: the same on every attempt. */
  id: string;
  webhookId: string;
  jobId: string;
  eventSeq: number;
  type: WebhookEventType;
  state: DeliveryState;
  attempts: DeliveryAttempt[];
  createdAt: string;
  deliveredAt: string | null;
  failedAt: string | null;
}
