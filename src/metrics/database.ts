// The gauges read from the database at scrape time: jobs by status and the turn queue. A
// database that is down or slow sets errand_database_up to 0 and keeps the last readings out.

import type { Db } from '../db/database.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import { jobCountsByStatus, queuedTurns } from '../jobs/states.ts';
import { JOB_STATUSES } from '../words.ts';
import type { Metrics, Sampler } from './metrics.ts';

export function databaseSampler(db: Db, metrics: Metrics): Sampler {
  return async () => {
    try {
      const [jobs, queued] = await Promise.all([jobCountsByStatus(db), queuedTurns(db)]);
      metrics.jobs.reset();
      for (const status of JOB_STATUSES) metrics.jobs.set({ status }, 0);
      for (const [status, n] of jobs) metrics.jobs.set({ status }, n);
      metrics.queuedTurns.set(queued.count);
      metrics.oldestQueuedSeconds.set(queued.oldestSeconds);
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
