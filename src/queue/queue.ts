// The turn queue on pg-boss. One queue, `key_strict_fifo` keyed by job id: turns of one job
// run strictly one after another, turns of different jobs in parallel. Enqueueing takes the
// caller's transaction, or rides in the caller's own statement (enqueueCarried), so a job, its
// turn and the queue entry commit together.
//
// Retries: pg-boss retries an entry at once (no retry delay of its own), so a turn whose worker
// died is taken up again as soon as the death is noticed; the backoff of real transient
// failures is Errand's, set by `retryLater`. A death is noticed by `reapDeadClaims`, which
// every process runs each second, rather than by pg-boss's own check, which rides on its
// monitoring pass (every `monitorIntervalSeconds`, a whole-table count of the queue, shared by
// all processes) and so added up to 10 s. Measured death→pickup: bench/worker-death.
import { randomUUID } from 'node:crypto';
import { type Kysely, sql, type Transaction } from 'kysely';
import { type Db as BossDb, fromKysely, fromPglite, type JobWithMetadata, PgBoss } from 'pg-boss';
import type { Config } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import type { Logger } from '../log.ts';
import { DELIVERY_QUEUE, DeliveryQueue } from './deliveries.ts';
import { workEach } from './work.ts';

export const TURN_QUEUE = 'turns';

/** How often each process looks for turns whose worker stopped sending heartbeats. */
const REAP_INTERVAL_MS = 1_000;

export interface TurnMessage {
  jobId: string;
  seq: number;
}

/** A turn as the queue delivers it: the message, its claim, and a signal of a lost claim. */
export type TurnEntry = JobWithMetadata<TurnMessage>;

/** One delivery of a queue entry: its id and the attempt it was fetched at. */
export interface TurnClaim {
  id: string;
  retryCount: number;
}

/**
 * pg-boss's insert of a turn's queue entry, as common table expressions that another statement
 * carries in its WITH list: the entry is written in the same round trip and the same
 * transaction as that statement's own writes. It is pg-boss's own statement, unchanged, for the
 * row it writes; only its final SELECT becomes the CTE `queue_entry`, which has the entry's
 * `id` (and no row when pg-boss skipped the insert). The carrying statement must read
 * `queue_entry`, or PostgreSQL would not run it, and fail when it has no row.
 */
export interface CarriedEntry {
  /** CTEs to follow the carrying statement's WITH, the last one `queue_entry`. */
  ctes: string;
  /** The values of the CTEs' parameters, $1 to $n: the carrying statement numbers its own after them. */
  values: unknown[];
}

// pg-boss 12's single-entry insert: with NOTIFY on, a WITH of the insert and its notification
// and a final SELECT of the id; without, the INSERT itself.
const NOTIFYING_INSERT =
  /^\s*WITH\s+(ins AS \([\s\S]*\))\s*(SELECT id FROM ins WHERE \(SELECT count\(\*\) FROM notified\) >= 0)\s*$/;
const PLAIN_INSERT = /^\s*(INSERT INTO [\s\S]* RETURNING id(?:, start_after)?)\s*$/;

const carried = new Map<string, string>();

function carriedEntry(text: string, values: unknown[]): CarriedEntry {
  let ctes = carried.get(text);
  if (ctes === undefined) {
    const notifying = NOTIFYING_INSERT.exec(text);
    const plain = notifying ? null : PLAIN_INSERT.exec(text);
    const maxParam = Math.max(0, ...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
    if ((!notifying && !plain) || maxParam > values.length)
      // A pg-boss release that changed its insert: the test of enqueueCarried fails first.
      throw new Error("pg-boss's insert of a queue entry has a form Errand cannot carry");
    ctes = notifying
      ? `${notifying[1]}, queue_entry AS (${notifying[2]})`
      : `queue_entry_insert AS (${plain?.[1]}), queue_entry AS (SELECT id FROM queue_entry_insert)`;
    carried.set(text, ctes);
  }
  return { ctes, values };
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
  #reaper: NodeJS.Timeout | undefined;
  #reaping: Promise<void> = Promise.resolve();
  #reapBusy = false;
  #reapFailing = false;

  constructor(boss: PgBoss, db: Kysely<Database>, log: Logger, deliveries: DeliveryQueue) {
    this.#boss = boss;
    this.#db = db;
    this.#log = log;
    this.deliveries = deliveries;
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
        : new PgBoss({
            ...common,
            connectionString: handle.connectionString,
            max: 4,
            // The same bound as Errand's own pool: a database that does not answer a connect
            // fails the queue's call in this time instead of holding its connections.
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
    const deliveries = await DeliveryQueue.create(boss, config);
    const queue = new TurnQueue(boss, handle.db, log, deliveries);
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
      WHERE name IN (${TURN_QUEUE}, ${DELIVERY_QUEUE})
        AND policy = 'key_strict_fifo'
        AND state = 'active'
        AND heartbeat_seconds IS NOT NULL
        AND heartbeat_on + heartbeat_seconds * interval '1 second' < pgboss.job_now()
      LIMIT 100`.execute(this.#db);
    let count = 0;
    for (const name of [TURN_QUEUE, DELIVERY_QUEUE]) {
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
    const id = await this.#boss.send(TURN_QUEUE, message, {
      singletonKey: message.jobId,
      db: fromKysely(trx),
    });
    if (!id) throw new Error(`the queue refused turn ${message.seq} of job ${message.jobId}`);
    return id;
  }

  /**
   * Enqueues turns inside another statement of the caller's (see CarriedEntry): pg-boss builds
   * its insert of the entries as `insert` does, through its database adapter interface, and
   * `run` executes it as part of the caller's statement, which must fail unless `queue_entry`
   * holds every id of `queueIds` (the entries' ids, in the messages' order). `run` returns the
   * caller's result, or undefined when its statement wrote nothing (then so does this). One
   * round trip for the caller's writes and the entries, in one transaction: the statement's
   * own, or the caller's.
   */
  async enqueueCarried<R>(
    messages: readonly TurnMessage[],
    run: (entry: CarriedEntry, queueIds: readonly string[]) => Promise<R | undefined>,
  ): Promise<R | undefined> {
    const queueIds = messages.map(() => randomUUID());
    let outcome: { result: R } | undefined;
    let asked = false;
    const db: BossDb = {
      executeSql: async (text, values = []) => {
        if (asked) throw new Error('pg-boss asked to insert one set of turns twice');
        asked = true;
        const result = await run(carriedEntry(text, values), queueIds);
        if (result === undefined) return { rows: [] };
        outcome = { result };
        return { rows: queueIds.map((id) => ({ id })) };
      },
    };
    const ids = await this.#boss.insert(
      TURN_QUEUE,
      messages.map((message, i) => ({
        id: queueIds[i],
        data: message,
        singletonKey: message.jobId,
      })),
      { db, returnId: true },
    );
    if (!asked) throw new Error('pg-boss inserted turns without asking for its statement');
    if (outcome === undefined) return undefined;
    if (ids?.length !== messages.length)
      throw new Error(`the queue refused ${messages.length - (ids?.length ?? 0)} turns`);
    return outcome.result;
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
