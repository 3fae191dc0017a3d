// How a worker process takes entries of a queue (turns, webhook deliveries): one entry per
// handler call, `concurrency` at a time, with the options both queues need.
import type { JobWithMetadata, PgBoss } from 'pg-boss';

export async function workEach<T extends object>(
  boss: PgBoss,
  queue: string,
  concurrency: number,
  handler: (entry: JobWithMetadata<T>) => Promise<void>,
): Promise<void> {
  await boss.work(
    queue,
    {
      includeMetadata: true,
      localConcurrency: concurrency,
      pollingIntervalSeconds: 1,
      // Notifications wake workers for new entries, but not for a key's next entry, held back
      // (strict FIFO) behind the one that just ended; a short poll picks that up.
      notifyPollingIntervalSeconds: 1,
      heartbeatRefreshSeconds: 2,
    },
    async ([entry]: JobWithMetadata<T>[]) => {
      if (entry) await handler(entry);
    },
  );
}
