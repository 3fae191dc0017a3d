// What the two queues (turns, webhook deliveries) share: how each is created or brought up to
// date at start, and how a worker process takes its entries, one entry per handler call,
// `concurrency` at a time.
import type { JobWithMetadata, PgBoss, QueueOptions } from 'pg-boss';

/** Creates the strict-FIFO queue `name`, or updates its options when it exists. */
export async function ensureQueue(
  boss: PgBoss,
  name: string,
  options: QueueOptions,
): Promise<void> {
  if (await boss.getQueue(name)) {
    await boss.updateQueue(name, options);
    return;
  }
  await boss
    .createQueue(name, { ...options, policy: 'key_strict_fifo' })
    .catch(async (err: unknown) => {
      // Another process created it between our check and our create.
      if (!(await boss.getQueue(name))) throw err;
    });
}

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
