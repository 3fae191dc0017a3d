// Sends the deliveries the queue hands to this process. Each queue entry stands for one
// delivery; its handler first sends the job's earlier deliveries to the same endpoint that are
// still pending, oldest event first, so a receiver gets a job's events in the order of their
// seqs even where two transactions' queue entries were ordered otherwise. Every attempt is
// logged in webhook_attempts; a failure is retried by the queue with backoff until the retry
// window has passed, then the delivery is marked failed and its entry completed.
import { sql } from 'kysely';
import type { AppContext } from '../../context.ts';
import type { WebhookRow } from '../../db/schema.ts';
import { errorMessage } from '../../errors.ts';
import type { DeliveryEntry } from '../../queue/deliveries.ts';
import { open } from '../../secrets/box.ts';
import { errandVersion } from '../../version.ts';
import { type AttemptResult, postWebhook } from './deliver.ts';
import { signHeaders } from './sign.ts';

const USER_AGENT = `Errand-Webhooks/${errandVersion()}`;

export interface DeliveryWorker {
  stop(): Promise<void>;
}

/** Thrown to hand an entry back to the queue: pg-boss retries it after its backoff. */
class DeliveryRetry extends Error {
  override name = 'DeliveryRetry';
}

export async function startDeliveryWorker(ctx: AppContext): Promise<DeliveryWorker> {
  await ctx.queue.deliveries.work(ctx.config.webhooks.concurrency, (entry) =>
    handleDelivery(ctx, entry),
  );
  return { stop: () => ctx.queue.deliveries.stopWork() };
}

/**
 * The secrets that sign now: the current one, and the previous one while the rotation's
 * overlap lasts. Throws a readable error, without the secrets, when they cannot be opened.
 */
function signingSecrets(ctx: AppContext, webhook: WebhookRow): string[] {
  const key = ctx.config.secretKey;
  if (!key)
    throw new Error('ERRAND_SECRET_KEY is not set on this worker: the request cannot be signed');
  const secrets = [open(key, webhook.secret)];
  if (
    webhook.previous_secret !== null &&
    webhook.previous_secret_expires_at !== null &&
    webhook.previous_secret_expires_at.getTime() > Date.now()
  )
    secrets.push(open(key, webhook.previous_secret));
  return secrets;
}

async function handleDelivery(ctx: AppContext, entry: DeliveryEntry): Promise<void> {
  const { deliveryId, webhookId, jobId } = entry.data;
  const log = ctx.log.child({ deliveryId, webhookId, jobId, retry: entry.retryCount });
  const webhook = await ctx.db
    .selectFrom('webhooks')
    .selectAll()
    .where('id', '=', webhookId)
    .executeTakeFirst();
  const own = await ctx.db
    .selectFrom('webhook_deliveries')
    .select(['event_seq', 'state'])
    .where('id', '=', deliveryId)
    .executeTakeFirst();
  // Deleted with its endpoint or job, or delivered already (a repeat of this entry, or an
  // earlier entry of the job sent it first): nothing to send.
  if (!webhook || !own || own.state !== 'pending') {
    ctx.metrics.webhookDeliveries.inc({ outcome: 'skipped' });
    return;
  }
  if (!webhook.enabled) {
    // A disabled endpoint is sent nothing; its delivery fails at once and can be redelivered
    // once the endpoint is enabled again.
    await record(ctx, deliveryId, new Date(), unsent('not sent: the webhook is disabled'), true);
    ctx.metrics.webhookDeliveries.inc({ outcome: 'failed' });
    log.info('webhook delivery not sent: its webhook is disabled');
    return;
  }
  const pending = await ctx.db
    .selectFrom('webhook_deliveries')
    .select(['id', 'payload', 'created_at', 'event_seq'])
    .where('webhook_id', '=', webhookId)
    .where('job_id', '=', jobId)
    .where('state', '=', 'pending')
    .where('event_seq', '<=', own.event_seq)
    .orderBy('event_seq')
    .orderBy('created_at')
    .execute();
  let secrets: string[] | undefined;
  let secretError: string | undefined;
  try {
    secrets = signingSecrets(ctx, webhook);
  } catch (err) {
    secretError = errorMessage(err);
  }
  const lastChance = entry.retryCount >= entry.retryLimit;
  for (const delivery of pending) {
    const at = new Date();
    // The payload as stored is what is signed and sent, byte for byte.
    const body = JSON.stringify(delivery.payload);
    const result = secrets
      ? await postWebhook(
          webhook.url,
          body,
          signHeaders(secrets, delivery.id, Math.floor(at.getTime() / 1000), body),
          {
            timeoutMs: ctx.config.webhooks.timeoutMs,
            allowPrivate: ctx.config.webhooks.allowPrivate,
            userAgent: USER_AGENT,
          },
        )
      : unsent(secretError ?? 'no signing secret');
    ctx.metrics.webhookAttemptDuration.observe(
      { result: result.ok ? 'ok' : 'error' },
      result.latencyMs / 1000,
    );
    // The window runs from the event, or from a redeliver that queued the delivery again.
    const since = Math.max(delivery.created_at.getTime(), entry.createdOn.getTime());
    const givenUp =
      !result.ok && (lastChance || Date.now() - since > ctx.config.webhooks.retryWindowMs);
    const attempt = await record(ctx, delivery.id, at, result, givenUp);
    const fields = {
      delivery: delivery.id,
      attempt,
      status: result.status,
      error: result.error,
      latencyMs: result.latencyMs,
    };
    if (result.ok) {
      ctx.metrics.webhookDeliveries.inc({ outcome: 'delivered' });
      log.debug(fields, 'webhook delivered');
    } else if (givenUp) {
      ctx.metrics.webhookDeliveries.inc({ outcome: 'failed' });
      log.warn(fields, 'webhook delivery failed for good');
    } else {
      ctx.metrics.webhookDeliveries.inc({ outcome: 'retried' });
      log.info(fields, 'webhook delivery attempt failed; it will be retried');
      throw new DeliveryRetry(result.error ?? 'the attempt failed');
    }
  }
}

function unsent(error: string): AttemptResult {
  return { ok: false, status: null, error, latencyMs: 0 };
}

/**
 * Logs an attempt and settles the delivery: delivered, failed for good, or still pending.
 * Returns the attempt's number, or undefined when the delivery was no longer pending (deleted,
 * or settled by another worker meanwhile), which records nothing.
 */
async function record(
  ctx: AppContext,
  deliveryId: string,
  at: Date,
  result: AttemptResult,
  givenUp: boolean,
): Promise<number | undefined> {
  return ctx.db.transaction().execute(async (trx) => {
    const settled = await trx
      .updateTable('webhook_deliveries')
      .set({
        attempts: sql`attempts + 1`,
        ...(result.ok
          ? { state: 'delivered' as const, delivered_at: sql`now()` }
          : givenUp
            ? { state: 'failed' as const, failed_at: sql`now()` }
            : {}),
      })
      .where('id', '=', deliveryId)
      .where('state', '=', 'pending')
      .returning('attempts')
      .executeTakeFirst();
    if (!settled) return undefined;
    await trx
      .insertInto('webhook_attempts')
      .values({
        delivery_id: deliveryId,
        attempt: settled.attempts,
        at,
        status: result.status,
        error: result.error,
        latency_ms: result.latencyMs,
      })
      .execute();
    return settled.attempts;
  });
}
