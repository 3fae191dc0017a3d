// The turn queue on pg-boss. One queue, `key_strict_fifo` keyed by job id: turns of one job
// run strictly one after another, turns of different jobs in parallel. Enqueueing takes the
// caller's transaction, so a job, its turn and the queue entry commit together.
import type { Transaction } from 'kysely';
import { fromKysely, fromPglite, PgBoss } from 'pg-boss';
import type { Config } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import type { Logger } from '../log.ts';

export const TURN_QUEUE = 'turns';

export interface TurnMessage {
  jobId: string;
  seq: number;
}

export class TurnQueue {
  readonly boss: PgBoss;

  constructor(boss: PgBoss) {
    this.boss = boss;
  }

  static async start(handle: DatabaseHandle, config: Config, log: Logger): Promise<TurnQueue> {
    const common = {
      superviseIntervalSeconds: 2,
      monitorIntervalSeconds: 10,
      useListenNotify: true,
      migrate: true,
    };
    const boss =
      handle.kind === 'pglite' && handle.pglite
        ? new PgBoss({ ...common, db: fromPglite(handle.pglite), backend: 'pglite' })
        : new PgBoss({ ...common, connectionString: handle.connectionString, max: 4 });
    boss.on('error', (err: unknown) => log.error({ err }, 'queue error'));
    boss.on('warning', (warning: unknown) => log.warn({ warning }, 'queue warning'));
    await boss.start();
    const t = config.turn;
    const options = {
      notify: true,
      heartbeatSeconds: t.heartbeatSeconds,
      // Errand decides itself when a turn has failed for good (see turn-handler.ts); pg-boss's
      // own retries are the backstop for a worker that died mid-turn.
      retryLimit: t.retries + 2,
      retryDelay: t.retryDelaySeconds,
      retryBackoff: t.retryDelaySeconds > 0,
      expireInSeconds: t.timeoutSeconds + 120,
      deleteAfterSeconds: 7 * 86_400,
    };
    // Created at boot, before any send. A send looks the queue up in pg-boss's cache; on a cold
    // cache the lookup is a query that, on PGlite, waits for the very transaction the send runs
    // in. Creating or updating the queue empties that cache, so it is filled again right after
    // (getBlockedKeys reads through it and changes nothing).
    if (await boss.getQueue(TURN_QUEUE)) {
      await boss.updateQueue(TURN_QUEUE, options);
    } else {
      await boss
        .createQueue(TURN_QUEUE, { ...options, policy: 'key_strict_fifo' })
        .catch(async (err: unknown) => {
          // Another process created it between our check and our create.
          if (!(await boss.getQueue(TURN_QUEUE))) throw err;
        });
    }
    await boss.getBlockedKeys(TURN_QUEUE);
    return new TurnQueue(boss);
  }

  /** Enqueues a turn inside `trx`; returns the queue entry's id. */
  async enqueue(trx: Transaction<Database>, message: TurnMessage): Promise<string> {
    const id = await this.boss.send(TURN_QUEUE, message, {
      singletonKey: message.jobId,
      db: fromKysely(trx),
    });
    if (!id) throw new Error(`the queue refused turn ${message.seq} of job ${message.jobId}`);
    return id;
  }

  /** Cancels queue entries; a running one's worker sees its claim gone at the next heartbeat. */
  async cancel(ids: string[]): Promise<void> {
    if (ids.length > 0) await this.boss.cancel(TURN_QUEUE, ids);
  }

  async stop(): Promise<void> {
    await this.boss.stop({ graceful: true, timeout: 10_000, close: true });
  }
}
