// The webhook outbox: a job's event becomes one delivery per endpoint that wants it, written
// with its queue entry in the transaction that records the event. A delivery therefore exists
// exactly when its event committed, and no worker can send it before. The one writer of new
// webhook_deliveries rows (deliver.ts records their attempts).
import type { Transaction } from 'kysely';
import { sql } from 'kysely';
import type { AppContext } from '../../context.ts';
import type { Database } from '../../db/schema.ts';
import { newId } from '../../ids.ts';
import { JOB_VIEW_COLUMNS, type JobRecord, toJobRecord } from '../../jobs/record.ts';
import { isWebhookEventType, type WebhookEventType } from './types.ts';

/** An event as its insert returned it, in the transaction that recorded it. */
export interface CommittingEvent {
  jobId: string;
  seq: string | number;
  turn: number | null;
  type: string;
  data: Record<string, unknown>;
  at: Date;
}

/**
 * What a receiver gets, as the README documents: the event, and the job's record as the event
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

/**
 * SQL that is true when an enabled endpoint of the project wants events of the type: what
 * queueDeliveries looks up, for a statement that writes an event without it (see
 * createJobAtOnce in jobs/lifecycle.ts), given the placeholders of the project id and the type.
 */
export function endpointsWantSql(projectId: string, type: string): string {
  return `EXISTS (SELECT 1 FROM webhooks w WHERE w.project_id = ${projectId} AND w.enabled AND ${type} = ANY (w.events))`;
}

/**
 * Writes a delivery, and its queue entry, for each enabled endpoint of the job's project that
 * wants this event's type, in `trx`. Events of other types return at once, asking nothing.
 * Returns how many deliveries were written.
 */
export async function queueDeliveries(
  ctx: Pick<AppContext, 'queue'>,
  trx: Transaction<Database>,
  event: CommittingEvent,
): Promise<number> {
  const { type } = event;
  if (!isWebhookEventType(type)) return 0;
  const targets = await trx
    .selectFrom('jobs as j')
    .innerJoin('webhooks as w', 'w.project_id', 'j.project_id')
    .select(['w.id as webhookId', 'j.project_id as projectId'])
    .where('j.id', '=', event.jobId)
    .where('w.enabled', '=', true)
    .where(sql<boolean>`${type} = ANY(w.events)`)
    .orderBy('w.id')
    .execute();
  const first = targets[0];
  if (!first) return 0;
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
  const payload: WebhookPayload = {
    type,
    timestamp: event.at.toISOString(),
    data: {
      projectId: first.projectId,
      jobId: event.jobId,
      event: { seq, turn: event.turn, type, data: event.data, at: event.at.toISOString() },
      job,
    },
  };
  const body = JSON.stringify(payload);
  const rows = targets.map((t) => ({
    id: newId('msg'),
    webhook_id: t.webhookId,
    job_id: event.jobId,
    event_seq: seq,
    type,
    payload: body,
    state: 'pending' as const,
  }));
  await trx.insertInto('webhook_deliveries').values(rows).execute();
  for (const row of rows) {
    await ctx.queue.deliveries.enqueue(trx, {
      deliveryId: row.id,
      webhookId: row.webhook_id,
      jobId: row.job_id,
    });
  }
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
  await ctx.queue.deliveries.enqueue(trx, {
    deliveryId: delivery.id,
    webhookId: delivery.webhookId,
    jobId: delivery.jobId,
  });
}
