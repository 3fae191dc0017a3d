// The turn queue on pg-boss. One queue, `key_strict_fifo` keyed by job id: turns of one job
// run strictly one after another, turns of different jobs in parallel. Enqueueing takes the
// caller's transaction (pg-boss's `db` option), so a job, its turn and the queue entry commit
// together.
//
// Retries: pg-boss retries an entry at once (no retry delay of its own), so a turn whose worker
// died is taken up again as soon as the death is noticed; the backoff of real transient
// failures is Errand's, set by `retryLater`. A death is noticed by pg-boss's own supervision:
// its monitoring pass fails every entry whose heartbeat is older than its queue's
// `heartbeatSeconds`. That pass runs at most once per `monitorIntervalSeconds` across all
// processes (a claim on its queue row), in a process's supervision tick every
// `superviseIntervalSeconds`; both are one second here (see `start`). Errand reads and writes
// pg-boss only through its public API, never its tables. Measured death→pickup:
// bench/worker-death.
import type { Kysely, Transaction } from 'kysely';
import { type Clock, fromKysely, type JobWithMetadata, PgBoss } from 'pg-boss';
import type { Config } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import { fillRandom } from '../ids.ts';
import type { TurnMessage } from '../jobs/context.ts';
import type { Logger } from '../log.ts';
import { DeliveryQueue } from './deliveries.ts';
import { EnvironmentBuildQueue } from './environment-builds.ts';
import { ForgeEventQueue } from './forge-events.ts';
import { ScheduleQueue } from './schedules.ts';
import { ensureQueue, insertAll, workEach } from './work.ts';

const TURN_QUEUE = 'turns';

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
  const bytes = fillRandom(Buffer.alloc(16));
  bytes.writeUIntBE(lastMs, 0, 6);
  bytes.writeUInt16BE(0x7000 | sequence, 6);
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * A turn's message as the queue keeps it: the core's message, and how many times a stopping
 * worker handed the turn back unfinished (handBack), which used up none of its attempts.
 */
interface QueuedTurn extends TurnMessage {
  handedBack?: number;
}

/**
 * Where the queue reads the time and sets its timers (polls, heartbeats, supervision, the
 * scheduler's passes): the system's clock unless a test gives pg-boss's `TestClock`, which also
 * moves `now` for the queue's statements in the database. Never a setting: only tests pass one.
 */
export type QueueClock = Clock;

/** A turn as the queue delivers it: the message, its claim, and a signal of a lost claim. */
export type TurnEntry = JobWithMetadata<QueuedTurn>;

/**
 * How many attempts of the turn came before this delivery: the claims the queue counted, less
 * the hand-backs of stopping workers, which count none.
 */
export function attemptsBefore(entry: TurnEntry): number {
  return Math.max(0, entry.retryCount - (entry.data.handedBack ?? 0));
}

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
  // Private: no pg-boss object leaves src/queue/, and nothing queries pg-boss's tables.
  readonly #boss: PgBoss;
  readonly #db: Kysely<Database>;
  /** The webhook delivery queue, on the same pg-boss instance (deliveries.ts). */
  readonly deliveries: DeliveryQueue;
  /** The queue of forge webhook events, on the same pg-boss instance (forge-events.ts). */
  readonly forgeEvents: ForgeEventQueue;
  /** The queue of environment builds, on the same pg-boss instance (environment-builds.ts). */
  readonly environmentBuilds: EnvironmentBuildQueue;
  /** The schedules' firings, from pg-boss's scheduler on the same instance (schedules.ts). */
  readonly schedules: ScheduleQueue;

  constructor(
    boss: PgBoss,
    db: Kysely<Database>,
    deliveries: DeliveryQueue,
    forgeEvents: ForgeEventQueue,
    environmentBuilds: EnvironmentBuildQueue,
    schedules: ScheduleQueue,
  ) {
    this.#boss = boss;
    this.#db = db;
    this.deliveries = deliveries;
    this.forgeEvents = forgeEvents;
    this.environmentBuilds = environmentBuilds;
    this.schedules = schedules;
  }

  static async start(
    handle: DatabaseHandle,
    config: Config,
    log: Logger,
    clock?: QueueClock,
  ): Promise<TurnQueue> {
    const boss = new PgBoss({
      ...handle.connection,
      ...(clock ? { clock } : {}),
      // A dead worker's entry is failed (and so retried) by the monitoring pass, which is gated
      // by both intervals: at one second each, its turn is handed back at most about a second
      // after its heartbeat expired. Each pass also refreshes the queues' counts, a scan of the
      // job table; pg-boss itself defers that scan (not the heartbeat check) when it grows long
      // enough to hold back vacuum. pg-boss has no option to check heartbeats more often than it
      // counts the queues, so the count comes along at the same pace.
      superviseIntervalSeconds: 1,
      monitorIntervalSeconds: 1,
      useListenNotify: true,
      // The scheduler's pass (one process at a time claims it) and the poll of what it sent: a
      // schedule's occurrence becomes a firing within seconds (src/queue/schedules.ts).
      cronMonitorIntervalSeconds: 5,
      cronWorkerIntervalSeconds: 1,
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
    const schedules = await ScheduleQueue.create(boss);
    return new TurnQueue(boss, handle.db, deliveries, forgeEvents, environmentBuilds, schedules);
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
    await workEach<QueuedTurn>(this.#boss, TURN_QUEUE, concurrency, handler);
  }

  /**
   * Stops taking turns at once, and returns without waiting: the running ones go on, and are
   * settled as usual when they end (stopWork waits for them).
   */
  async stopTaking(): Promise<void> {
    await this.#boss.offWork(TURN_QUEUE, { wait: false });
  }

  /** Stops taking turns, once the running ones have ended (their signals abort them). */
  async stopWork(): Promise<void> {
    await this.#boss.offWork(TURN_QUEUE, { wait: true });
  }

  /**
   * Hands a claimed turn back to the queue unfinished (its worker is stopping), without using
   * up an attempt. pg-boss counts an attempt each time an entry is claimed again, so the entry
   * is failed back to the queue (fenced to this attempt) and, in the same transaction, counts
   * the hand-back in its message and raises its retry limit by one: the next worker starts it
   * at once, at the attempt this one had (attemptsBefore), and the backstop for dead workers is
   * as far away as it was. An entry whose fail was its last (the dead-worker backstop used up)
   * is retried, which raises the limit itself. Returns false, changing nothing, when the claim
   * was already gone (cancelled, or taken back as if the worker had died).
   */
  async handBack(entry: TurnEntry, reason: string): Promise<boolean> {
    return this.#db.transaction().execute(async (trx) => {
      const db = fromKysely(trx);
      const failed = await this.#boss.fail(
        TURN_QUEUE,
        [{ id: entry.id, retryCount: entry.retryCount }],
        { message: reason },
        { db },
      );
      if (affected(failed) === 0) return false;
      const last = entry.retryCount >= entry.retryLimit;
      if (last) await this.#boss.retry(TURN_QUEUE, entry.id, { db });
      const data: QueuedTurn = { ...entry.data, handedBack: (entry.data.handedBack ?? 0) + 1 };
      const updated = await this.#boss.update(TURN_QUEUE, data, {
        id: entry.id,
        ...(last ? {} : { retryLimit: entry.retryLimit + 1 }),
        db,
      });
      if (updated.updated !== 1) throw new Error(`the queue did not take turn ${entry.id} back`);
      return true;
    });
  }

  /**
   * The state of a turn's queue entry (`created`, `retry`, `active`, `completed`, `cancelled`,
   * `failed`), or undefined when the queue no longer has it.
   */
  async entryState(queueId: string): Promise<TurnEntry['state'] | undefined> {
    const [entry] = await this.#boss.findJobs<TurnMessage>(TURN_QUEUE, { id: queueId });
    return entry?.state;
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
    await this.#boss.stop({ graceful: true, timeout: 10_000, close: true });
  }
}
