// The webhook delivery queue on pg-boss, beside the turn queue and on the same instance. One
// entry per delivery, `key_strict_fifo` keyed by endpoint and job: a job's events reach one
// endpoint one after another (a failing delivery holds back the later ones of that job and
// endpoint only), different jobs and endpoints in parallel. Enqueueing takes the caller's
// transaction, so a delivery's entry commits with the event it announces.
//
// Retries are pg-boss's own, with its doubling backoff: a failed attempt throws, and the entry
// comes back after `retryDelaySeconds`, then twice that, up to an hour. The handler decides
// when the retry window is over and completes the entry then; an entry left `failed` would
// hold back its key for good (strict FIFO), so retryLimit is set past the window.
import { randomUUID } from 'node:crypto';
import type { Transaction } from 'kysely';
import type { JobWithMetadata, PgBoss } from 'pg-boss';
import type { Config } from '../config.ts';
import type { Database } from '../db/schema.ts';
import { ensureQueue, insertAll, workEach } from './work.ts';

const DELIVERY_QUEUE = 'webhooks';

/** The longest wait between two attempts of a delivery. */
const MAX_RETRY_DELAY_SECONDS = 3600;

export interface DeliveryMessage {
  deliveryId: string;
  webhookId: string;
  jobId: string;
}

/** A delivery as the queue hands it to a worker, with its attempt count and claim signal. */
export type DeliveryEntry = JobWithMetadata<DeliveryMessage>;

/**
 * Retries enough for the window: pg-boss waits at least `delay * 2^n` seconds before retry n+1
 * (plus up to as much again at random), capped at an hour, so this many retries cannot end
 * before the window has; two more spare a delivery from being failed by pg-boss early.
 */
function retryLimitFor(retryDelaySeconds: number, retryWindowMs: number): number {
  const window = retryWindowMs / 1000;
  let waited = 0;
  let retries = 0;
  while (waited <= window) {
    waited += Math.min(MAX_RETRY_DELAY_SECONDS, retryDelaySeconds * 2 ** Math.min(retries, 16));
    retries += 1;
  }
  return retries + 2;
}

export class DeliveryQueue {
  readonly #boss: PgBoss;

  private constructor(boss: PgBoss) {
    this.#boss = boss;
  }

  /**
   * Creates the queue, or brings its options up to date, on the started pg-boss instance of
   * TurnQueue.start.
   */
  static async create(boss: PgBoss, config: Config): Promise<DeliveryQueue> {
    const w = config.webhooks;
    const options = {
      notify: true,
      // A worker that stops mid-delivery is noticed by its heartbeat (TurnQueue's dead claim
      // check covers this queue too); the expiry is the backstop, past an attempt's bound.
      heartbeatSeconds: config.turn.heartbeatSeconds,
      expireInSeconds:
        Math.ceil(w.timeoutMs / 1000) + 2 * config.database.statementTimeoutSeconds + 30,
      retryLimit: retryLimitFor(w.retryDelaySeconds, w.retryWindowMs),
      retryDelay: w.retryDelaySeconds,
      retryBackoff: true,
      retryDelayMax: MAX_RETRY_DELAY_SECONDS,
      // An entry waiting out its retries must outlive the window, or pg-boss would drop it.
      retentionSeconds: Math.max(14 * 86_400, Math.ceil(w.retryWindowMs / 1000) + 2 * 86_400),
      deleteAfterSeconds: 7 * 86_400,
    };
    await ensureQueue(boss, DELIVERY_QUEUE, options);
    return new DeliveryQueue(boss);
  }

  /**
   * Enqueues deliveries inside `trx`, in one statement: no worker sees them before the
   * transaction commits. Each endpoint gets a job's deliveries one at a time, in this order.
   */
  async enqueueAll(
    trx: Transaction<Database>,
    messages: readonly DeliveryMessage[],
  ): Promise<void> {
    await insertAll(
      this.#boss,
      DELIVERY_QUEUE,
      trx,
      messages.map((message) => ({
        id: randomUUID(),
        data: message,
        singletonKey: `${message.webhookId}:${message.jobId}`,
      })),
      'webhook deliveries',
    );
  }

  /**
   * Runs `handler` for each delivery handed to this process, `concurrency` at a time, until
   * stopWork. A return completes the entry; a throw fails this attempt, to be retried.
   */
  async work(concurrency: number, handler: (entry: DeliveryEntry) => Promise<void>): Promise<void> {
    await workEach<DeliveryMessage>(this.#boss, DELIVERY_QUEUE, concurrency, handler);
  }

  /** Stops taking deliveries, once the running attempts have ended. */
  async stopWork(): Promise<void> {
    await this.#boss.offWork(DELIVERY_QUEUE, { wait: true });
  }
}
