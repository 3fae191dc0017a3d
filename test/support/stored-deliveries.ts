// Writes webhook deliveries and their attempts straight into the database, for the tests of
// what shows them (CLI, dashboard): a log with known states, statuses and errors, without
// waiting on a receiver and the retry schedule that the delivery tests cover.
import { newId } from '../../src/ids.ts';
import type { TestService } from './service.ts';

export interface StoredAttempt {
  status: number | null;
  error?: string | null;
  latencyMs: number;
}

export async function storeDelivery(
  svc: TestService,
  fields: {
    webhookId: string;
    jobId: string;
    type: string;
    state: 'pending' | 'delivered' | 'failed';
    attempts: StoredAttempt[];
    createdAt: Date;
  },
): Promise<string> {
  const { db } = svc.service.ctx;
  const id = newId('msg');
  const lastAt = new Date(fields.createdAt.getTime() + 1000 * fields.attempts.length);
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('webhook_deliveries')
      .values({
        id,
        webhook_id: fields.webhookId,
        job_id: fields.jobId,
        event_seq: 1,
        type: fields.type,
        payload: JSON.stringify({ type: fields.type }),
        state: fields.state,
        attempts: fields.attempts.length,
        created_at: fields.createdAt,
        delivered_at: fields.state === 'delivered' ? lastAt : null,
        failed_at: fields.state === 'failed' ? lastAt : null,
      })
      .execute();
    for (const [i, attempt] of fields.attempts.entries()) {
      await trx
        .insertInto('webhook_attempts')
        .values({
          delivery_id: id,
          attempt: i + 1,
          at: new Date(fields.createdAt.getTime() + 1000 * (i + 1)),
          status: attempt.status,
          error: attempt.error ?? null,
          latency_ms: attempt.latencyMs,
        })
        .execute();
    }
  });
  return id;
}
