// The webhook outbox: a job's event becomes one delivery per endpoint that wants it, written
// with its queue entry in the transaction that records the event (a hook of the job core's
// transitions, registered where the service is assembled). A delivery therefore exists
// exactly when its event committed, and no worker can send it before. The one writer of new
// webhook_deliveries rows (deliver.ts records their attempts).
import type { Insertable, Transaction } from 'kysely';
import { sql } from 'kysely';
import type { AppContext } from '../../context.ts';
import { preparedMarker } from '../../db/prepared.ts';
import type { Database } from '../../db/schema.ts';
import { newId } from '../../ids.ts';
import { JOB_VIEW_COLUMNS, toJobRecord } from '../../jobs/record.ts';
import type { RecordedEvent, TransitionHook } from '../../jobs/transitions.ts';
import type { JobRecord } from '../../records/job.ts';
import { isWebhookEventType, type WebhookEventType } from './types.ts';

/**
 * The outbox as a hook of the job core's transitions: each event a transition records, and
 * each progress event of a type an endpoint can ask for, gets its deliveries in the event's
 * own transaction.
 */
export function webhookOutbox(ctx: Pick<AppContext, 'queue'>): TransitionHook {
  return {
    wants: isWebhookEventType,
    // A project with no enabled endpoint has no delivery to write (a create then saves the
    // statement that looks for them).
    concerns: (projectIds) =>
      sql<boolean>`EXISTS (SELECT 1 FROM webhooks WHERE project_id = ANY(${projectIds}::text[]) AND enabled)`,
    run: async (trx, events) => {
      await queueDeliveries(ctx, trx, events);
    },
  };
}

/**
 * What a receiver gets, as docs/api.md (Webhooks) documents: the event, and the job's record as the event
 * left it. Nothing of the service's own secrets: events are scrubbed when recorded and the
 * record holds none.
 */
export interface WebhookPayload {
  type: WebhookEventType;
  timestamp: string;
  data: {
    projectId: string;
    jobId: string;
    event: { seq: number; turn: number | null; type: string; data: unknown; at: string };
    job: JobRecord;
  };
}

/** The job's record a status event carries (recordStatus), if this is one. */
function recordOf(data: Record<string, unknown>): JobRecord | undefined {
  const job = data.job;
  return typeof job === 'object' && job !== null && 'id' in job ? (job as JobRecord) : undefined;
}

const TARGETS_MARKER = sql.raw(preparedMarker('webhook_targets'));

/**
 * Writes a delivery, and its queue entry, for each enabled endpoint of each event's project
 * that wants the event's type, in `trx`. Events of other types ask nothing; otherwise one query
 * finds the endpoints of all the events' jobs. Returns how many deliveries were written.
 */
async function queueDeliveries(
  ctx: Pick<AppContext, 'queue'>,
  trx: Transaction<Database>,
  events: readonly RecordedEvent[],
): Promise<number> {
  const wanted = events.filter((e) => isWebhookEventType(e.type));
  if (wanted.length === 0) return 0;
  // One text whatever the number of events, prepared once per connection (db/prepared.ts):
  // every create and every transition asks it.
  const { rows: targets } = await sql<{
    jobId: string;
    webhookId: string;
    projectId: string;
    events: string[];
  }>`${TARGETS_MARKER}
    SELECT j.id AS "jobId", w.id AS "webhookId", j.project_id AS "projectId", w.events
    FROM jobs j JOIN webhooks w ON w.project_id = j.project_id
    WHERE j.id = ANY(${[...new Set(wanted.map((e) => e.jobId))]}::text[]) AND w.enabled
      AND w.events && ${[...new Set(wanted.map((e) => e.type))]}::text[]
    ORDER BY w.id`.execute(trx);
  if (targets.length === 0) return 0;
  const rows: Insertable<Database['webhook_deliveries']>[] = [];
  for (const event of wanted) {
    const mine = targets.filter((t) => t.jobId === event.jobId && t.events.includes(event.type));
    const first = mine[0];
    if (!first || !isWebhookEventType(event.type)) continue;
    const job =
      recordOf(event.data) ??
      toJobRecord(
        await trx
          .selectFrom('jobs')
          .select(JOB_VIEW_COLUMNS)
          .where('id', '=', event.jobId)
          .executeTakeFirstOrThrow(),
      );
    const seq = Number(event.seq);
    const at = event.at.toISOString();
    const payload: WebhookPayload = {
      type: event.type,
      timestamp: at,
      data: {
        projectId: first.projectId,
        jobId: event.jobId,
        event: { seq, turn: event.turn, type: event.type, data: event.data, at },
        job,
      },
    };
    const body = JSON.stringify(payload);
    for (const target of mine) {
      rows.push({
        id: newId('msg'),
        webhook_id: target.webhookId,
        job_id: event.jobId,
        event_seq: seq,
        type: event.type,
        payload: body,
        state: 'pending',
      });
    }
  }
  if (rows.length === 0) return 0;
  await trx.insertInto('webhook_deliveries').values(rows).execute();
  await ctx.queue.deliveries.enqueueAll(
    trx,
    rows.map((row) => ({ deliveryId: row.id, webhookId: row.webhook_id, jobId: row.job_id })),
  );
  return rows.length;
}

/**
 * Queues a delivery again in the caller's transaction (a redeliver, which has set it back to
 * pending): it is sent once more, after the job's earlier deliveries to that endpoint.
 */
export async function requeueDelivery(
  ctx: Pick<AppContext, 'queue'>,
  trx: Transaction<Database>,
  delivery: { id: string; webhookId: string; jobId: string },
): Promise<void> {
  await ctx.queue.deliveries.enqueueAll(trx, [
    { deliveryId: delivery.id, webhookId: delivery.webhookId, jobId: delivery.jobId },
  ]);
}

/**
 * After a restore (errand import), queues every pending delivery again in the caller's
 * transaction, each endpoint's in the order of their events. Returns how many were queued.
 */
export async function requeuePendingDeliveries(
  ctx: Pick<AppContext, 'queue'>,
  trx: Transaction<Database>,
): Promise<number> {
  const pending = await trx
    .selectFrom('webhook_deliveries')
    .select(['id', 'webhook_id', 'job_id'])
    .where('state', '=', 'pending')
    .orderBy('webhook_id')
    .orderBy('job_id')
    .orderBy('event_seq')
    .orderBy('created_at')
    .execute();
  if (pending.length > 0)
    await ctx.queue.deliveries.enqueueAll(
      trx,
      pending.map((d) => ({ deliveryId: d.id, webhookId: d.webhook_id, jobId: d.job_id })),
    );
  return pending.length;
}
