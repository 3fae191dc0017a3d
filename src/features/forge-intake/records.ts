// The record of each forge event Errand was sent (forge_events), by what the forge signed that
// names it (ForgeEvent.key), not by the delivery's id, which no signature covers: written in the
// transaction that queues the event, so that the event sent again under any delivery id is
// acknowledged and not queued twice; then what the worker made of it, with the reason, for the
// dashboard. Kept 30 days. The only writer of forge_events.
import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Database, ForgeEventOutcome } from '../../db/schema.ts';
import type { ForgeEvent } from '../../forges/events.ts';

/** How long an event is remembered: longer than forges offer to redeliver, as long as a refusal. */
const EVENT_MEMORY_DAYS = 30;

/** How a turn's trigger and the dashboard name the kind of event. */
export function eventKind(event: ForgeEvent): string {
  if (event.type === 'labeled') return 'label';
  return event.where === 'line' ? 'line comment' : event.where === 'review' ? 'review' : 'comment';
}

/** The page of the event: the comment's, or the for a label. */
function eventUrl(event: ForgeEvent): string {
  return event.type === 'comment' ? event.url : event.thread.url;
}

/**
 * Records a delivery's events for `projectId` inside the caller's transaction; returns those
 * recorded now, to be queued. Those recorded before are counted as delivered again.
 */
export async function recordReceived(
  trx: Transaction<Database>,
  projectId: string,
  deliveryId: string,
  events: readonly ForgeEvent[],
): Promise<ForgeEvent[]> {
  const byKey = new Map<string, ForgeEvent>();
  for (const event of events) if (!byKey.has(event.key)) byKey.set(event.key, event);
  if (byKey.size === 0) return [];
  const recorded = await trx
    .insertInto('forge_events')
    .values(
      [...byKey.values()].map((event) => ({
        project_id: projectId,
        key: event.key,
        delivery_id: deliveryId,
        forge: event.forge,
        kind: eventKind(event),
        thread_kind: event.thread.kind,
        thread_number: event.thread.number,
        author: event.author.login,
        url: eventUrl(event),
      })),
    )
    .onConflict((oc) => oc.columns(['project_id', 'key']).doNothing())
    .returning('key')
    .execute();
  const fresh = new Set(recorded.map((row) => row.key));
  const again = [...byKey.keys()].filter((key) => !fresh.has(key));
  if (again.length > 0)
    await trx
      .updateTable('forge_events')
      .set((eb) => ({ repeats: eb('repeats', '+', 1), last_delivery_id: deliveryId }))
      .where('project_id', '=', projectId)
      .where('key', 'in', again)
      .execute();
  return [...byKey.values()].filter((event) => fresh.has(event.key));
}

/** What the worker made of an event. */
export type EventDecision =
  | { outcome: 'accepted'; reason: string; jobId: string; turn: number }
  | { outcome: Exclude<ForgeEventOutcome, 'accepted' | 'queued'>; reason: string };

/** Writes what became of the event `key` (nothing when its record is gone). */
export async function recordDecision(
  db: Db,
  projectId: string,
  key: string,
  decision: EventDecision,
  at: Date,
): Promise<void> {
  await db
    .updateTable('forge_events')
    .set({
      outcome: decision.outcome,
      reason: decision.reason,
      job_id: decision.outcome === 'accepted' ? decision.jobId : null,
      turn: decision.outcome === 'accepted' ? decision.turn : null,
      decided_at: at,
    })
    .where('project_id', '=', projectId)
    .where('key', '=', key)
    .execute();
}

/** A recorded forge event as the dashboard shows it. */
export interface ForgeEventRecord {
  key: string;
  deliveryId: string;
  forge: string;
  kind: string;
  thread: { kind: 'issue' | 'pull-request'; number: number };
  author: string;
  url: string;
  receivedAt: string;
  /** How many deliveries brought it again after the first (redeliveries, replays). */
  repeats: number;
  lastDeliveryId: string | null;
  outcome: ForgeEventOutcome;
  reason: string | null;
  jobId: string | null;
  turn: number | null;
}

/** The project's most recent events, newest first; only those of `outcome` when given. */
export async function recentEvents(
  db: Db,
  projectId: string,
  limit: number,
  outcome?: ForgeEventOutcome,
): Promise<ForgeEventRecord[]> {
  let query = db.selectFrom('forge_events').selectAll().where('project_id', '=', projectId);
  if (outcome) query = query.where('outcome', '=', outcome);
  const rows = await query.orderBy('received_at', 'desc').orderBy('key').limit(limit).execute();
  return rows.map((row) => ({
    key: row.key,
    deliveryId: row.delivery_id,
    forge: row.forge,
    kind: row.kind,
    thread: { kind: row.thread_kind, number: row.thread_number },
    author: row.author,
    url: row.url,
    receivedAt: row.received_at.toISOString(),
    repeats: row.repeats,
    lastDeliveryId: row.last_delivery_id,
    outcome: row.outcome,
    reason: row.reason,
    jobId: row.job_id,
    turn: row.turn,
  }));
}

/**
 * Forgets the events received more than EVENT_MEMORY_DAYS ago; returns how many. The processes
 * that run workers call it periodically (service.ts). An event that comes again later still
 * finds the turn it started (its trigger names the key), so it starts no other.
 */
export async function forgetForgeEvents(ctx: { db: Db }): Promise<number> {
  const result = await ctx.db
    .deleteFrom('forge_events')
    .where('received_at', '<', sql<Date>`now() - make_interval(days => ${EVENT_MEMORY_DAYS})`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
