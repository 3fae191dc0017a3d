// What the queues (turns, webhook deliveries, forge events) share: how each is created or
// brought up to date at start, how entries are written in the caller's transaction, and how a
// worker process takes its entries, one entry per handler call, `concurrency` at a time.
import { CompiledQuery, type Transaction } from 'kysely';
import type { Db, JobInsert, JobWithMetadata, PgBoss, QueueOptions } from 'pg-boss';
import { preparedMarker } from '../db/prepared.ts';
import type { Database } from '../db/schema.ts';

/**
 * Creates the queue `name`, strict FIFO per key unless another `policy` is given, or updates its
 * options when it exists (a queue's policy is fixed when it is created).
 */
export async function ensureQueue(
  boss: PgBoss,
  name: string,
  options: QueueOptions,
  policy: 'key_strict_fifo' | 'stately' | 'standard' = 'key_strict_fifo',
): Promise<void> {
  if (await boss.getQueue(name)) {
    await boss.updateQueue(name, options);
    return;
  }
  await boss.createQueue(name, { ...options, policy }).catch(async (err: unknown) => {
    // Another process created it between our check and our create.
    if (!(await boss.getQueue(name))) throw err;
  });
}

/**
 * Writes `entries` to `queue` inside `trx`, in one statement: no worker sees them before the
 * transaction commits. Throws, failing the transaction, unless every entry was written; the
 * error counts the refused ones as `what` (turns, forge events…).
 */
export async function insertAll<T extends object>(
  boss: PgBoss,
  queue: string,
  trx: Transaction<Database>,
  entries: JobInsert<T>[],
  what: string,
): Promise<void> {
  const written = await boss.insert(queue, entries, { db: preparedIn(trx), returnId: true });
  if (written?.length !== entries.length)
    throw new Error(`the queue refused ${entries.length - (written?.length ?? 0)} ${what}`);
}

const INSERT_MARKER = preparedMarker('queue_insert');

/**
 * pg-boss's statements in `trx`, each run as a named prepared statement (db/prepared.ts): its
 * insert is one of the statements of every create. Its text depends only on the queue.
 */
function preparedIn(trx: Transaction<Database>): Db {
  return {
    async executeSql(text, values) {
      const result = await trx.executeQuery(CompiledQuery.raw(`${INSERT_MARKER}\n${text}`, values));
      return { rows: [...result.rows] };
    },
  };
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
