// The forge event queue on pg-boss, beside the turn queue and on the same instance: what a
// project's forge reported by webhook (src/forges/events.ts), queued by the forge intake in
// the transaction that records the events, and worked off by the forge-events worker. One
// entry per event, `key_strict_fifo` keyed by project and issue or pull request: the events of
// one thread are taken one after another (a second mention sees the job the first one made),
// different threads in parallel.
import { randomUUID } from 'node:crypto';
import type { Transaction } from 'kysely';
import type { JobWithMetadata, PgBoss } from 'pg-boss';
import type { Config } from '../config.ts';
import type { Database } from '../db/schema.ts';
import type { ForgeEvent } from '../forges/events.ts';
import { ensureQueue, insertAll, workEach } from './work.ts';

const FORGE_EVENT_QUEUE = 'forge-events';

export interface ForgeEventMessage {
  projectId: string;
  event: ForgeEvent;
}

/** An event as the queue hands it to a worker, with its attempt count and claim signal. */
export type ForgeEventEntry = JobWithMetadata<ForgeEventMessage>;

/** The key that orders a project's events on one issue or pull request. */
function threadKey(message: ForgeEventMessage): string {
  const { thread } = message.event;
  return `${message.projectId}:${thread.kind}:${thread.number}`;
}

export class ForgeEventQueue {
  readonly #boss: PgBoss;

  private constructor(boss: PgBoss) {
    this.#boss = boss;
  }

  /** Creates the queue, or brings its options up to date, on TurnQueue.start's pg-boss. */
  static async create(boss: PgBoss, config: Config): Promise<ForgeEventQueue> {
    const options = {
      notify: true,
      // A stopped worker's entry is handed back by TurnQueue's dead claim check.
      heartbeatSeconds: config.turn.heartbeatSeconds,
      // An event's work is a few forge calls and a transaction; a forge that is down is
      // retried with pg-boss's doubling backoff, for about an hour and a half in all.
      expireInSeconds: 300,
      retryLimit: 8,
      retryDelay: 10,
      retryBackoff: true,
      retryDelayMax: 1800,
      deleteAfterSeconds: 7 * 86_400,
    };
    await ensureQueue(boss, FORGE_EVENT_QUEUE, options);
    return new ForgeEventQueue(boss);
  }

  /**
   * Enqueues events inside `trx`, in one statement: no worker sees them before the
   * transaction (which records them) commits. Throws unless every one was written.
   */
  async enqueueAll(
    trx: Transaction<Database>,
    messages: readonly ForgeEventMessage[],
  ): Promise<void> {
    if (messages.length === 0) return;
    await insertAll(
      this.#boss,
      FORGE_EVENT_QUEUE,
      trx,
      messages.map((message) => ({
        id: randomUUID(),
        data: message,
        singletonKey: threadKey(message),
      })),
      'forge events',
    );
  }

  /**
   * Runs `handler` for each event handed to this process, `concurrency` at a time, until
   * stopWork. A return completes the entry; a throw fails this attempt, to be retried.
   */
  async work(
    concurrency: number,
    handler: (entry: ForgeEventEntry) => Promise<void>,
  ): Promise<void> {
    await workEach<ForgeEventMessage>(this.#boss, FORGE_EVENT_QUEUE, concurrency, handler);
  }

  /** Stops taking events, once the running ones have ended. */
  async stopWork(): Promise<void> {
    await this.#boss.offWork(FORGE_EVENT_QUEUE, { wait: true });
  }
}
