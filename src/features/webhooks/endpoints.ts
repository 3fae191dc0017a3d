// Webhook endpoints of a project: what the admin API, the CLI and the dashboard change, and the
// delivery log they read. The one module that writes the webhooks table; deliveries are written
// by the outbox (outbox.ts), except a redeliver, which hands the delivery back to it. Signing
// secrets are stored sealed with ERRAND_SECRET_KEY and shown only by create and rotate.
import { randomBytes } from 'node:crypto';
import { sql, type Transaction } from 'kysely';
import type { AppContext } from '../../context.ts';
import type {
  Database,
  WebhookAttemptRow,
  WebhookDeliveryRow,
  WebhookRow,
} from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { isId, newId } from '../../ids.ts';
import { checkWebhookTarget } from '../../net/address.ts';
import { seal } from '../../secrets/box.ts';
import { requeueDelivery } from './outbox.ts';
import {
  type DeliveryAttempt,
  type DeliveryRecord,
  isWebhookEventType,
  WEBHOOK_EVENT_TYPES,
  type WebhookEventType,
  type WebhookRecord,
  type WebhookWithSecret,
} from './types.ts';

/**
 * Endpoints per project. Every event of a job is written once per endpoint in the event's own
 * transaction, so the count bounds the work a busy job adds to each of its transitions.
 */
export const MAX_WEBHOOKS_PER_PROJECT = 20;
export const MAX_URL_CHARS = 2048;
export const MAX_DESCRIPTION_CHARS = 500;
/** The longest overlap of a rotated secret: a week. */
export const MAX_OVERLAP_SECONDS = 7 * 24 * 3600;

/** An endpoint's row as the admin API shows it (types.ts): never its secrets. */
export function toWebhookRecord(row: WebhookRow): WebhookRecord {
  return {
    id: row.id,
    projectId: row.project_id,
    url: row.url,
    events: row.events.filter(isWebhookEventType),
    description: row.description,
    enabled: row.enabled,
    // An overlap that has run out is no longer one, though the column keeps it until a rotate.
    previousSecretExpiresAt:
      row.previous_secret !== null &&
      row.previous_secret_expires_at !== null &&
      row.previous_secret_expires_at.getTime() > Date.now()
        ? row.previous_secret_expires_at.toISOString()
        : null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** A delivery's row and its attempts as the admin API shows them (types.ts). */
export function toDeliveryRecord(
  row: WebhookDeliveryRow,
  attempts: WebhookAttemptRow[],
): DeliveryRecord {
  return {
    id: row.id,
    webhookId: row.webhook_id,
    jobId: row.job_id,
    eventSeq: Number(row.event_seq),
    // The outbox writes deliveries only for the types an endpoint subscribed to, all of them
    // WEBHOOK_EVENT_TYPES.
    type: row.type as WebhookEventType,
    state: row.state,
    attempts: attempts.map(
      (a): DeliveryAttempt => ({
        attempt: a.attempt,
        at: a.at.toISOString(),
        status: a.status,
        error: a.error,
        latencyMs: a.latency_ms,
      }),
    ),
    createdAt: row.created_at.toISOString(),
    deliveredAt: row.delivered_at?.toISOString() ?? null,
    failedAt: row.failed_at?.toISOString() ?? null,
  };
}

/** The key secrets are sealed with; without it no secret can be stored or used. */
function secretKey(ctx: AppContext): string {
  if (!ctx.config.secretKey) {
    throw new AppError(
      'bad_request',
      'webhooks need ERRAND_SECRET_KEY set on the server (their signing secrets are encrypted with it)',
    );
  }
  return ctx.config.secretKey;
}

/** A signing secret in the Standard Webhooks format: `whsec_` and 32 random bytes in base64. */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function webhookNotFound(webhookId: string): AppError {
  return new AppError('not_found', `webhook ${webhookId} not found`);
}

async function requireProject(
  db: AppContext['db'] | Transaction<Database>,
  projectId: string,
  lock = false,
): Promise<void> {
  if (isId('prj', projectId)) {
    let query = db.selectFrom('projects').select('id').where('id', '=', projectId);
    if (lock) query = query.forUpdate();
    if (await query.executeTakeFirst()) return;
  }
  throw new AppError('not_found', `project ${projectId} not found`);
}

/** The webhook, or not_found for an unknown project, an unknown webhook or another project's. */
async function findWebhook(
  db: AppContext['db'] | Transaction<Database>,
  projectId: string,
  webhookId: string,
  lock = false,
): Promise<WebhookRow> {
  await requireProject(db, projectId);
  if (!isId('whk', webhookId)) throw webhookNotFound(webhookId);
  let query = db
    .selectFrom('webhooks')
    .selectAll()
    .where('id', '=', webhookId)
    .where('project_id', '=', projectId);
  if (lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw webhookNotFound(webhookId);
  return row;
}

// The checks below repeat the route's schema on purpose: the CLI and the dashboard call these
// functions with what a person typed, not through the HTTP schema.

async function checkUrl(ctx: AppContext, url: unknown): Promise<string> {
  if (typeof url !== 'string' || url.length === 0 || url.length > MAX_URL_CHARS) {
    throw new AppError('bad_request', `"url" must be 1 to ${MAX_URL_CHARS} characters`);
  }
  const target = await checkWebhookTarget(url, ctx.config.webhooks.allowPrivate);
  return target.href;
}

/** The subscribed types, without repeats and in the order of WEBHOOK_EVENT_TYPES. */
function checkEvents(events: readonly unknown[] | undefined): WebhookEventType[] {
  if (events === undefined) return [...WEBHOOK_EVENT_TYPES];
  if (!Array.isArray(events) || events.length === 0) {
    throw new AppError(
      'bad_request',
      `"events" must list at least one of ${WEBHOOK_EVENT_TYPES.join(', ')}`,
    );
  }
  for (const type of events) {
    if (typeof type !== 'string' || !isWebhookEventType(type)) {
      throw new AppError(
        'bad_request',
        `"events": ${JSON.stringify(type)} is not an event type; use ${WEBHOOK_EVENT_TYPES.join(', ')}`,
      );
    }
  }
  return WEBHOOK_EVENT_TYPES.filter((type) => events.includes(type));
}

/** Spaces around are dropped; an empty description is none. */
function checkDescription(description: string | null | undefined): string | null {
  if (description === undefined || description === null) return null;
  if (typeof description !== 'string') {
    throw new AppError('bad_request', '"description" must be a string or null');
  }
  const trimmed = description.trim();
  if (trimmed.length > MAX_DESCRIPTION_CHARS) {
    throw new AppError(
      'bad_request',
      `"description" is ${trimmed.length} characters; the maximum is ${MAX_DESCRIPTION_CHARS}`,
    );
  }
  if (trimmed.includes('\u0000')) {
    throw new AppError('bad_request', '"description" contains a NUL character (\\u0000)');
  }
  return trimmed === '' ? null : trimmed;
}

function checkEnabled(enabled: unknown): boolean {
  if (typeof enabled !== 'boolean')
    throw new AppError('bad_request', '"enabled" must be a boolean');
  return enabled;
}

export async function createWebhook(
  ctx: AppContext,
  projectId: string,
  input: {
    url: string;
    events?: WebhookEventType[] | undefined;
    description?: string | null | undefined;
    enabled?: boolean | undefined;
  },
): Promise<WebhookWithSecret> {
  const key = secretKey(ctx);
  await requireProject(ctx.db, projectId);
  const url = await checkUrl(ctx, input.url);
  const events = checkEvents(input.events);
  const description = checkDescription(input.description);
  const enabled = input.enabled === undefined ? true : checkEnabled(input.enabled);
  const secret = newSecret();
  const row = await ctx.db.transaction().execute(async (trx) => {
    // The project's row lock makes the count and the insert one step for concurrent creates.
    await requireProject(trx, projectId, true);
    const { n } = await trx
      .selectFrom('webhooks')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('project_id', '=', projectId)
      .executeTakeFirstOrThrow();
    if (Number(n) >= MAX_WEBHOOKS_PER_PROJECT) {
      throw new AppError(
        'conflict',
        `project ${projectId} has ${MAX_WEBHOOKS_PER_PROJECT} webhooks, the most a project may have; delete one first`,
      );
    }
    return trx
      .insertInto('webhooks')
      .values({
        id: newId('whk'),
        project_id: projectId,
        url,
        events,
        description,
        enabled,
        secret: seal(key, secret),
        updated_at: sql`now()`,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  });
  ctx.log.info({ webhookId: row.id, projectId }, 'webhook created');
  return { ...toWebhookRecord(row), secret };
}

/** The project's endpoints, oldest first. */
export async function listWebhooks(ctx: AppContext, projectId: string): Promise<WebhookRecord[]> {
  await requireProject(ctx.db, projectId);
  const rows = await ctx.db
    .selectFrom('webhooks')
    .selectAll()
    .where('project_id', '=', projectId)
    .orderBy('created_at', 'asc')
    .orderBy('id')
    .execute();
  return rows.map(toWebhookRecord);
}

export async function getWebhook(
  ctx: AppContext,
  projectId: string,
  webhookId: string,
): Promise<WebhookRecord> {
  return toWebhookRecord(await findWebhook(ctx.db, projectId, webhookId));
}

/** Changes the given fields; deliveries already written keep going to the URL they were for. */
export async function updateWebhook(
  ctx: AppContext,
  projectId: string,
  webhookId: string,
  changes: {
    url?: string;
    events?: WebhookEventType[];
    description?: string | null;
    enabled?: boolean;
  },
): Promise<WebhookRecord> {
  const given = Object.entries(changes).filter(([, value]) => value !== undefined);
  if (given.length === 0) {
    throw new AppError(
      'bad_request',
      'give at least one of "url", "events", "description", "enabled"',
    );
  }
  await findWebhook(ctx.db, projectId, webhookId);
  const set: { url?: string; events?: string[]; description?: string | null; enabled?: boolean } =
    {};
  if (changes.url !== undefined) set.url = await checkUrl(ctx, changes.url);
  if (changes.events !== undefined) set.events = checkEvents(changes.events);
  if (changes.description !== undefined) set.description = checkDescription(changes.description);
  if (changes.enabled !== undefined) set.enabled = checkEnabled(changes.enabled);
  const row = await ctx.db
    .updateTable('webhooks')
    .set({ ...set, updated_at: sql`now()` })
    .where('id', '=', webhookId)
    .where('project_id', '=', projectId)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw webhookNotFound(webhookId);
  ctx.log.info({ webhookId, projectId, fields: Object.keys(set) }, 'webhook updated');
  return toWebhookRecord(row);
}

/** Deletes the endpoint with its delivery log; its pending deliveries are not sent. */
export async function deleteWebhook(
  ctx: AppContext,
  projectId: string,
  webhookId: string,
): Promise<void> {
  await requireProject(ctx.db, projectId);
  if (!isId('whk', webhookId)) throw webhookNotFound(webhookId);
  const deleted = await ctx.db
    .deleteFrom('webhooks')
    .where('id', '=', webhookId)
    .where('project_id', '=', projectId)
    .executeTakeFirst();
  if (deleted.numDeletedRows === 0n) throw webhookNotFound(webhookId);
  ctx.log.info({ webhookId, projectId }, 'webhook deleted');
}

/**
 * A new signing secret. For `overlapSeconds` the current one keeps signing beside it, so that
 * receivers can switch without refusing a delivery; 0 drops it at once.
 */
export async function rotateWebhookSecret(
  ctx: AppContext,
  projectId: string,
  webhookId: string,
  overlapSeconds: number,
): Promise<WebhookWithSecret> {
  const key = secretKey(ctx);
  if (
    !Number.isInteger(overlapSeconds) ||
    overlapSeconds < 0 ||
    overlapSeconds > MAX_OVERLAP_SECONDS
  ) {
    throw new AppError(
      'bad_request',
      `"overlapSeconds" must be an integer from 0 to ${MAX_OVERLAP_SECONDS}`,
    );
  }
  const secret = newSecret();
  const row = await ctx.db.transaction().execute(async (trx) => {
    // The lock keeps two rotations from both demoting the same secret.
    const current = await findWebhook(trx, projectId, webhookId, true);
    const overlap = overlapSeconds > 0;
    return trx
      .updateTable('webhooks')
      .set({
        secret: seal(key, secret),
        // Still sealed: the stored value moves over as it is.
        previous_secret: overlap ? current.secret : null,
        previous_secret_expires_at: overlap
          ? sql<Date>`now() + make_interval(secs => ${overlapSeconds})`
          : null,
        updated_at: sql`now()`,
      })
      .where('id', '=', webhookId)
      .returningAll()
      .executeTakeFirstOrThrow();
  });
  ctx.log.info({ webhookId, projectId, overlapSeconds }, 'webhook secret rotated');
  return { ...toWebhookRecord(row), secret };
}

// A cursor names the last delivery of the page; the next page is the deliveries ordered after
// it, compared in SQL on the stored timestamp (as listJobs does, for the same reason).
function encodeCursor(deliveryId: string): string {
  return Buffer.from(deliveryId).toString('base64url');
}

function decodeCursor(value: string): string {
  const id = Buffer.from(value, 'base64url').toString('utf8');
  if (!isId('msg', id)) {
    throw new AppError('bad_request', '"cursor" is not a cursor this API returned');
  }
  return id;
}

async function withAttempts(
  db: AppContext['db'] | Transaction<Database>,
  rows: WebhookDeliveryRow[],
): Promise<DeliveryRecord[]> {
  if (rows.length === 0) return [];
  const attempts = await db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where(
      'delivery_id',
      'in',
      rows.map((r) => r.id),
    )
    .orderBy('delivery_id')
    .orderBy('attempt')
    .execute();
  return rows.map((row) =>
    toDeliveryRecord(
      row,
      attempts.filter((a) => a.delivery_id === row.id),
    ),
  );
}

/** The endpoint's delivery log, newest first, each delivery with its attempts in order. */
export async function listDeliveries(
  ctx: AppContext,
  projectId: string,
  webhookId: string,
  opts: { limit: number; cursor?: string | undefined },
): Promise<{ deliveries: DeliveryRecord[]; nextCursor: string | null }> {
  if (!Number.isInteger(opts.limit) || opts.limit < 1 || opts.limit > 100) {
    throw new AppError('bad_request', '"limit" must be an integer from 1 to 100');
  }
  const after = opts.cursor ? decodeCursor(opts.cursor) : undefined;
  await findWebhook(ctx.db, projectId, webhookId);
  let query = ctx.db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('webhook_id', '=', webhookId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(opts.limit + 1);
  if (after) {
    query = query.where(
      sql<boolean>`(created_at, id) < (SELECT c.created_at, c.id FROM webhook_deliveries c WHERE c.id = ${after} AND c.webhook_id = ${webhookId})`,
    );
  }
  const rows = await query.execute();
  const page = rows.slice(0, opts.limit);
  const last = page.at(-1);
  return {
    deliveries: await withAttempts(ctx.db, page),
    nextCursor: rows.length > opts.limit && last ? encodeCursor(last.id) : null,
  };
}

/**
 * Sends a delivered or failed delivery again: the same webhook-id and payload, its attempts
 * log continued. Back to pending and into the queue in one transaction, so that it is either
 * queued or untouched.
 */
export async function redeliver(
  ctx: AppContext,
  projectId: string,
  webhookId: string,
  deliveryId: string,
): Promise<DeliveryRecord> {
  const notFound = new AppError('not_found', `delivery ${deliveryId} not found`);
  const record = await ctx.db.transaction().execute(async (trx) => {
    const webhook = await findWebhook(trx, projectId, webhookId);
    if (!isId('msg', deliveryId)) throw notFound;
    const current = await trx
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('id', '=', deliveryId)
      .where('webhook_id', '=', webhookId)
      .forUpdate()
      .executeTakeFirst();
    if (!current) throw notFound;
    if (current.state === 'pending') {
      throw new AppError(
        'conflict',
        `delivery ${deliveryId} is pending: it is queued and will be attempted`,
      );
    }
    if (!webhook.enabled) {
      throw new AppError(
        'conflict',
        `webhook ${webhookId} is disabled; enable it before redelivering`,
      );
    }
    const row = await trx
      .updateTable('webhook_deliveries')
      .set({ state: 'pending', delivered_at: null, failed_at: null })
      .where('id', '=', deliveryId)
      .returningAll()
      .executeTakeFirstOrThrow();
    await requeueDelivery(ctx, trx, { id: row.id, webhookId, jobId: row.job_id });
    const [out] = await withAttempts(trx, [row]);
    if (!out) throw notFound;
    return out;
  });
  ctx.log.info({ deliveryId, webhookId, projectId }, 'webhook delivery requeued');
  return record;
}
