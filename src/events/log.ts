// The progress log of a job: what happened, in order, readable through the events API. It is
// written by the job lifecycle's transitions and a running turn's progress (jobs/lifecycle.ts).
import type { Db } from '../db/database.ts';
import type { EventRow } from '../db/schema.ts';
import type { LoggedEvent } from './openapi.ts';

export interface EventRecord {
  seq: number;
  turn: number | null;
  type: string;
  data: unknown;
  at: string;
}

export function toEventRecord(row: EventRow): EventRecord {
  return {
    seq: Number(row.seq),
    turn: row.turn,
    type: row.type,
    data: row.data,
    at: row.at.toISOString(),
  };
}

/**
 * A row as the catalog types its event. Every write of the log checks the event against the
 * catalog first (transaction.ts insertEvents, lifecycle.ts recordProgress), so a row holds what
 * its type declares.
 */
export function toLoggedEvent(row: EventRow): LoggedEvent {
  return toEventRecord(row) as LoggedEvent;
}

export async function listEvents(
  db: Db,
  jobId: string,
  after: number,
  limit: number,
): Promise<EventRow[]> {
  return db
    .selectFrom('events')
    .selectAll()
    .where('job_id', '=', jobId)
    .where('seq', '>', String(after))
    .orderBy('seq', 'asc')
    .limit(limit)
    .execute();
}
