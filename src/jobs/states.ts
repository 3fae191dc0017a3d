// Where jobs stand, for the modules that act on them without changing them: the worker
// deciding how a failed turn settles, the workspace janitor deciding which clones may go, the
// metrics' gauges. Reads only; the job core (lifecycle.ts, service.ts) is what changes them.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { JobStatus } from '../db/schema.ts';

/** The job's status; undefined when it is gone. */
export async function jobStatus(db: Db, jobId: string): Promise<JobStatus | undefined> {
  const row = await db
    .selectFrom('jobs')
    .select('status')
    .where('id', '=', jobId)
    .executeTakeFirst();
  return row?.status;
}

export interface JobState {
  status: JobStatus;
  /** A turn is queued or running. */
  busy: boolean;
  /** Unchanged for longer than the idle time. */
  stale: boolean;
}

const QUERY_CHUNK = 500;

/**
 * Status, open turns and idleness of the listed jobs: one query per 500. A job that is gone
 * has no entry.
 */
export async function jobStates(
  db: Db,
  jobIds: readonly string[],
  idleSeconds: number,
): Promise<Map<string, JobState>> {
  const states = new Map<string, JobState>();
  for (let i = 0; i < jobIds.length; i += QUERY_CHUNK) {
    const rows = await db
      .selectFrom('jobs')
      .select(['id', 'status'])
      .select(
        sql<boolean>`EXISTS (SELECT 1 FROM turns t WHERE t.job_id = jobs.id AND t.state IN ('queued', 'running'))`.as(
          'busy',
        ),
      )
      // The database's clock: workers on other machines may not agree with it.
      .select(
        sql<boolean>`jobs.updated_at < now() - make_interval(secs => ${idleSeconds})`.as('stale'),
      )
      .where('id', 'in', jobIds.slice(i, i + QUERY_CHUNK))
      .execute();
    for (const row of rows) {
      states.set(row.id, { status: row.status, busy: row.busy, stale: row.stale });
    }
  }
  return states;
}

/** How many jobs have each status (statuses no job has are missing). */
export async function jobCountsByStatus(db: Db): Promise<Map<JobStatus, number>> {
  const { rows } = await sql<{ status: JobStatus; n: string }>`
    SELECT status, count(*) AS n FROM jobs GROUP BY status`.execute(db);
  return new Map(rows.map((row) => [row.status, Number(row.n)]));
}

/** The turns waiting for a worker: how many, and how long the oldest has waited (0: none). */
export async function queuedTurns(db: Db): Promise<{ count: number; oldestSeconds: number }> {
  // turns_open is a partial index on exactly these rows.
  const { rows } = await sql<{ n: string; oldest: number | null }>`
    SELECT count(*) AS n, extract(epoch FROM now() - min(created_at))::float8 AS oldest
    FROM turns WHERE state = 'queued'`.execute(db);
  const row = rows[0];
  return { count: Number(row?.n ?? 0), oldestSeconds: Math.max(0, row?.oldest ?? 0) };
}
