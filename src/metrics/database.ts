// The gauges read from the database at scrape time: jobs by status and the turn queue. A
// database that is down or slow sets errand_database_up to 0 and keeps the last readings out.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { JobStatus } from '../db/schema.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import type { Metrics, Sampler } from './metrics.ts';

const STATUSES: readonly JobStatus[] = ['active', 'completed', 'failed', 'archived'];

export function databaseSampler(db: Db, metrics: Metrics): Sampler {
  return async () => {
    try {
      const [jobs, queue] = await Promise.all([
        sql<{ status: JobStatus; n: string }>`
          SELECT status, count(*) AS n FROM jobs GROUP BY status`.execute(db),
        // turns_open is a partial index on exactly these rows.
        sql<{ n: string; oldest: number | null }>`
          SELECT count(*) AS n, extract(epoch FROM now() - min(created_at))::float8 AS oldest
          FROM turns WHERE state = 'queued'`.execute(db),
      ]);
      metrics.jobs.reset();
      for (const status of STATUSES) metrics.jobs.set({ status }, 0);
      for (const row of jobs.rows) metrics.jobs.set({ status: row.status }, Number(row.n));
      const q = queue.rows[0];
      metrics.queuedTurns.set(Number(q?.n ?? 0));
      metrics.oldestQueuedSeconds.set(Math.max(0, q?.oldest ?? 0));
      metrics.databaseUp.set(1);
    } catch (err) {
      // A database that cannot be reached is the reading (Prometheus alerts on
      // errand_database_up), and stale figures are dropped rather than shown as current.
      // Anything else is a fault of Errand's and fails the scrape.
      if (!isDatabaseUnavailable(err)) throw err;
      metrics.jobs.reset();
      metrics.queuedTurns.reset();
      metrics.oldestQueuedSeconds.reset();
      metrics.databaseUp.set(0);
    }
  };
}
