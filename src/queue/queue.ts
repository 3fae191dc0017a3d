// The turn queue on pg-boss. One queue, `key_strict_fifo` keyed by job id: turns of one job
// run strictly one after another, turns of different jobs in parallel. Enqueueing takes the
// caller's transaction (pg-boss's `db` option), so a job, its turn and the queue entry commit
// together.
//
// Retries: pg-boss retries an entry at once (no retry delay of its own), so a turn whose worker
// died is taken up again as soon as the death is noticed; the backoff of real transient
// failures is Errand's, set by `retryLater`. A death is noticed by `reapDeadClaims`, which
// every process runs each second, rather than by pg-boss's own check, which rides on its
// monitoring pass (every `monitorIntervalSeconds`, a whole-table count of the queue, shared by
// all processes) and so added up to 10 s. Measured death→pickup: bench/worker-death.
import { randomBytes } from 'node:crypto';
import { type Kysely, sql, type Transaction } from 'kysely';
import { fromKysely, type JobWithMetadata, PgBoss } from 'pg-boss';
import type { Config } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import type { TurnMessage } from '../jobs/context.ts';
import type { Logger } from '../log.ts';
import { DELIVERY_QUEUE, DeliveryQueue } from './deliveries.ts';
import { ENVIRONMENT_BUILD_QUEUE, EnvironmentBuildQueue } from './environment-builds.ts';
import { FORGE_EVENT_QUEUE, ForgeEventQueue } from './forge-events.ts';
import { ensureQueue, insertAll, workEach } from './work.ts';

export const TURN_QUEUE = 'turns';

let lastMs = 0;
let sequence = 0;

/**
 * A queue entry id that sorts after every id this process made before (a UUIDv7: milliseconds,
 * a counter, random bits). pg-boss picks the next entry of a key by creation time, then by id,
 * and entries written in one transaction share their creation time: ordered ids keep a job's
 * turns enqueued together (an import) in their order.
 */
function orderedId(): string {
  const now = Date.now();
  if (now > lastMs) {
    lastMs = now;
    sequence = 0;
  } else if (++sequence > 0xfff) {
    lastMs += 1;
    sequence = 0;
  }
  const bytes = randomBytes(16);
  bytes.writeUIntBE(lastMs, 0, 6);
  bytes.writeUInt16BE(0x7000 | sequence, 6);
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** How often each process looks for turns whose worker stopped sending heartbeats. */
const REAP_INTERVAL_MS = 1_000;

/** A turn as the queue delivers it: the message, its claim, and a signal of a lost claim. */
export type TurnEntry = JobWithMetadata<TurnMessage>;

/** One delivery of a queue entry: its id and the attempt it was fetched at. */
export interface TurnClaim {
  id: string;
  retryCount: number;
}

/** How many entries a pg-boss command changed: it returns the count, its types do not say so. */
function affected(response: object): number {
  if ('affected' in response && typeof response.affected === 'number') return response.affected;
  throw new Error('pg-boss answered a command without the count of entries it changed');
}

export class TurnQueue {
  // Private: no pg-boss object or query on its tables leaves src/queue/.
  readonly #boss: PgBoss;
  readonly #db: Kysely<Database>;
  readonly #log: Logger;
  /** The webhook delivery queue, on the same pg-boss instance (deliveries.ts). */
  readonly deliveries: DeliveryQueue;
  /** The queue of forge webhook events, on the same pg-boss instance (forge-events.ts). */
  readonly forgeEvents: ForgeEventQueue;
  /** The queue of environment builds, on the same pg-boss instance (environment-builds.ts). */
  readonly environmentBuilds: EnvironmentBuildQueue;
  #reaper: NodeJS.Timeout | undefined;
  #reaping: Promise<void> = Promise.resolve();
  #reapBusy = false;
  #reapFailing = false;

  constructor(
    boss: PgBoss,
    db: Kysely<Database>,
    log: Logger,
    deliveries: DeliveryQueue,
    forgeEvents: ForgeEventQueue,
    environmentBuilds: EnvironmentBuildQueue,
  ) {
    this.#boss = boss;
    this.#db = db;
    this.#log = log;
    this.deliveries = deliveries;
    this.forgeEvents = forgeEvents;
    this.environmentBuilds = environmentBuilds;
  }

  static async start(handle: DatabaseHandle, config: Config, log: Logger): Promise<TurnQueue> {
    const boss = new PgBoss({
      ...handle.connection,
      superviseIntervalSeconds: 2,
      monitorIntervalSeconds: 10,
      useListenNotify: true,
      migrate: true,
      // Its own pool beside Errand's: a few connections for fetching, completing and sending.
      max: Math.min(4, config.database.poolSize),
      // The same bound as Errand's own pool: a database that does not answer a connect fails
      // the queue's call in this time instead of holding its connections.
      connectionTimeoutMillis: config.database.connectTimeoutSeconds * 1000,
    });
    boss.on('error', (err: unknown) => log.error({ err }, 'queue error'));
    boss.on('warning', (warning: unknown) => log.warn({ warning }, 'queue warning'));
    await boss.start();
    const t = config.turn;
    const options = {
      notify: true,
      heartbeatSeconds: t.heartbeatSeconds,
      // Errand decides itself when a turn has failed for good (see worker.ts); pg-boss's own
      // retries are the backstop for a worker that died mid-turn. They start at once: a dead
      // worker's turn must not wait out a backoff meant for failing services (retryLater).
      retryLimit: t.retries + 2,
      retryDelay: 0,
      retryBackoff: false,
      expireInSeconds: t.timeoutSeconds + 120,
      deleteAfterSeconds: 7 * 86_400,
    };
    await ensureQueue(boss, TURN_QUEUE, options);
    const deliveries = await DeliveryQueue.create(boss, config);
    const forgeEvents = await ForgeEventQueue.create(boss, config);
    const environmentBuilds = await EnvironmentBuildQueue.create(boss, config);
    const queue = new TurnQueue(boss, handle.db, log, deliveries, forgeEvents, environmentBuilds);
    queue.#reaper = setInterval(() => {
      // A check slower than the interval (a database under load) is not stacked on.
      if (queue.#reapBusy) return;
      queue.#reapBusy = true;
      queue.#reaping = queue.#reapOnce().finally(() => {
        queue.#reapBusy = false;
      });
    }, REAP_INTERVAL_MS);
    queue.#reaper.unref();
    return queue;
  }

  /**
   * Hands back to the queue every running turn (and webhook delivery) whose worker's heartbeat
   * is older than the queue's `heartbeatSeconds`: pg-boss's own condition for a dead worker,
   * checked every second instead of every monitoring pass. The entry is failed for the attempt
   * that was read (a worker that claimed it again meanwhile keeps its claim) and is ready for
   * any worker after its queue's retry delay: none for turns. Returns how many were handed back.
   */
  async reapDeadClaims(): Promise<number> {
    // `policy` lets PostgreSQL use pg-boss's partial index of running strict-FIFO entries.
    const dead = await sql<{ name: string; id: string; retry_count: number }>`
      SELECT name, id, retry_count FROM pgboss.job
      WHERE name IN (${TURN_QUEUE}, ${DELIVERY_QUEUE}, ${FORGE_EVENT_QUEUE}, ${ENVIRONMENT_BUILD_QUEUE})
        AND policy = 'key_strict_fifo'
        AND state = 'active'
        AND heartbeat_seconds IS NOT NULL
        AND heartbeat_on + heartbeat_seconds * interval '1 second' < pgboss.job_now()
      LIMIT 100`.execute(this.#db);
    let count = 0;
    for (const name of [TURN_QUEUE, DELIVERY_QUEUE, FORGE_EVENT_QUEUE, ENVIRONMENT_BUILD_QUEUE]) {
      const claims = dead.rows
        .filter((r) => r.name === name)
        .map((r) => ({ id: r.id, retryCount: Number(r.retry_count) }));
      if (claims.length === 0) continue;
      const result = await this.#boss.fail(name, claims, {
        message: 'job heartbeat timeout: its worker stopped',
      });
      count += affected(result);
    }
    return count;
  }

  async #reapOnce(): Promise<void> {
    try {
      const count = await this.reapDeadClaims();
      if (count > 0)
        this.#log.warn(
          { count },
          'turns or deliveries of a stopped worker handed back to the queue',
        );
      if (this.#reapFailing) this.#log.info('dead worker check works again');
      this.#reapFailing = false;
    } catch (err) {
      // Once per outage: the check runs every second and the database's own errors say more.
      if (!this.#reapFailing) this.#log.error({ err }, 'dead worker check failed');
      this.#reapFailing = true;
    }
  }

  /**
   * Gives a claimed turn back to the queue to run again after `delaySeconds`, without holding
   * a worker meanwhile: the entry is failed (fenced to this attempt) and its start deferred in
   * one transaction, so no worker can take it up between the two. Returns false when the claim
   * was already gone (archived, or taken back as if the worker had died).
   */
  async retryLater(claim: TurnClaim, delaySeconds: number, reason: string): Promise<boolean> {
    return this.#db.transaction().execute(async (trx) => {
      const db = fromKysely(trx);
      const failed = await this.#boss.fail(
        TURN_QUEUE,
        [{ id: claim.id, retryCount: claim.retryCount }],
        { message: reason },
        { db },
      );
      if (affected(failed) === 0) return false;
      if (delaySeconds > 0) {
        await this.#boss.update(TURN_QUEUE, undefined, {
          id: claim.id,
          startAfter: delaySeconds,
          db,
        });
      }
      return true;
    });
  }

  /**
   * Runs `handler` for each turn delivered to this process, `concurrency` at a time, until
   * stopWork. The handler settles the turn; a throw hands it back to the queue.
   */
  async work(concurrency: number, handler: (entry: TurnEntry) => Promise<void>): Promise<void> {
    await workEach<TurnMessage>(this.#boss, TURN_QUEUE, concurrency, handler);
  }

  /** Stops taking turns, once the running ones have ended (their signals abort them). */
  async stopWork(): Promise<void> {
    await this.#boss.offWork(TURN_QUEUE, { wait: true });
  }

  /** Deletes an entry, e.g. a failed one that would hold back its job's later turns. */
  async remove(queueId: string): Promise<void> {
    await this.#boss.deleteJob(TURN_QUEUE, queueId);
  }

  /** Enqueues a turn inside `trx`; returns the queue entry's id. */
  async enqueue(trx: Transaction<Database>, message: TurnMessage): Promise<string> {
    const [id] = await this.enqueueAll(trx, [message]);
    if (!id) throw new Error(`the queue refused turn ${message.seq} of job ${message.jobId}`);
    return id;
  }

  /**
   * Enqueues turns inside `trx`, in one statement; returns the entries' ids in the messages'
   * order. Throws, failing the transaction, unless every entry was written.
   */
  async enqueueAll(
    trx: Transaction<Database>,
    messages: readonly TurnMessage[],
  ): Promise<string[]> {
    const ids = messages.map(() => orderedId());
    await insertAll(
      this.#boss,
      TURN_QUEUE,
      trx,
      messages.map((message, i) => ({ id: ids[i], data: message, singletonKey: message.jobId })),
      'turns',
    );
    return ids;
  }

  /** Cancels queue entries; a running one's worker sees its claim gone at the next heartbeat. */
  async cancel(ids: string[]): Promise<void> {
    if (ids.length > 0) await this.#boss.cancel(TURN_QUEUE, ids);
  }

  async stop(): Promise<void> {
    clearInterval(this.#reaper);
    await this.#reaping;
    await this.#boss.stop({ graceful: true, timeout: 10_000, close: true });
  }
}
