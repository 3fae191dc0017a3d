// One transaction per transition, the one writer of a transition's events: `inTransition`
// writes the events a transition records, runs the hooks registered for them in the same
// transaction (transitions.ts), and announces the transitions once it has committed. Every
// transaction that changes a job locks its row first (lockJob).
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.ts';
import { preparedMarker } from '../db/prepared.ts';
import type { Database, JobStatus } from '../db/schema.ts';
import { checkEvent, isLogged } from '../events/catalog.ts';
import type { JobsContext } from './context.ts';
import { type JobView, toJobRecord } from './record.ts';
import type { RecordedEvent, Transition, TransitionHook } from './transitions.ts';

/**
 * What a transition function needs of the application context: the database, and the hooks
 * and subscribers of its transitions.
 */
export type LifecycleContext = Pick<JobsContext, 'db' | 'transitions'>;

export interface TransitionScope {
  trx: Transaction<Database>;
  /**
   * Records a transition of this transaction: its event in the job's log (except a turn's
   * acceptance, which the job's record itself shows), and its announcement once committed.
   */
  record(transition: Transition): Promise<void>;
  /** Records several transitions, in order, their events written together. */
  recordAll(transitions: readonly Transition[]): Promise<void>;
  /**
   * Records transitions whose events the caller has written in its own statement
   * (eventsInsert), `written` in the order of the logged ones: runs the hooks on them, and
   * announces the transitions once committed. A create writes its jobs' events so, in the
   * statement that writes the jobs: a round trip less in the API's hottest write. The hooks
   * `passed` (that statement evaluated their conditions: Transitions.screen) do not run.
   */
  recordWritten(
    transitions: readonly Transition[],
    written: readonly RecordedEvent[],
    passed?: ReadonlySet<TransitionHook>,
  ): Promise<void>;
}

/**
 * Runs `fn` in one transaction and announces the transitions it recorded after the commit. The
 * hooks run on each transition's events in the same transaction (the webhook outbox writes
 * their deliveries there).
 */
export async function inTransition<T>(
  ctx: LifecycleContext,
  fn: (scope: TransitionScope) => Promise<T>,
): Promise<T> {
  const recorded: Transition[] = [];
  const result = await ctx.db.transaction().execute((trx) => {
    const recordAll = async (transitions: readonly Transition[]) => {
      const logged = transitions.filter((t) => isLogged(t.type));
      if (logged.length > 0) await ctx.transitions.runHooks(trx, await insertEvents(trx, logged));
      recorded.push(...transitions);
    };
    const recordWritten = async (
      transitions: readonly Transition[],
      written: readonly RecordedEvent[],
      passed?: ReadonlySet<TransitionHook>,
    ) => {
      const logged = transitions.filter((t) => isLogged(t.type));
      const same = (t: Transition, e: RecordedEvent | undefined) =>
        e?.type === t.type && e.jobId === t.jobId && e.turn === t.turn;
      if (logged.length !== written.length || logged.some((t, i) => !same(t, written[i])))
        throw new Error('the events written are not those of the transitions recorded');
      await ctx.transitions.runHooks(trx, written, passed);
      recorded.push(...transitions);
    };
    return fn({
      trx,
      recordAll,
      recordWritten,
      record: (transition) => recordAll([transition]),
    });
  });
  ctx.transitions.publish(recorded);
  return result;
}

const EVENTS_MARKER = sql.raw(preparedMarker('insert_events'));

/** An event to write: what a transition records, before the database numbers and times it. */
export type NewEvent = Omit<RecordedEvent, 'seq' | 'at'>;

/**
 * The statement that writes the events of `entries`, which draw their seqs in this order, when
 * `when` holds; it returns each one's seq, time and job. For a caller that writes them as a
 * part (a WITH query) of its own statement, and then records them with `recordWritten`. Each
 * is checked against the event catalog first: an undeclared type or data its schema refuses is
 * written nowhere. One text whatever the number of events.
 */
export function eventsInsert(
  entries: readonly NewEvent[],
  when: RawBuilder<boolean> = sql<boolean>`true`,
): RawBuilder<{ seq: string; at: Date; job_id: string }> {
  for (const e of entries) checkEvent(e.type, e.data);
  const rows = entries.map((e, n) => ({
    n,
    job_id: e.jobId,
    turn: e.turn,
    type: e.type,
    data: e.data,
  }));
  return sql`
    INSERT INTO events (job_id, turn, type, data)
    SELECT job_id, turn, type, data
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      AS e(n integer, job_id text, turn integer, type text, data jsonb)
    WHERE ${when}
    ORDER BY n
    RETURNING seq, at, job_id`;
}

/** Writes the events of `entries` in one statement (eventsInsert), prepared once per connection. */
export async function insertEvents(
  db: Db | Transaction<Database>,
  entries: readonly NewEvent[],
): Promise<RecordedEvent[]> {
  const { rows } = await sql<{
    seq: string;
    at: Date;
  }>`${EVENTS_MARKER}${eventsInsert(entries)}`.execute(db);
  // RETURNING gives no order; the seqs were drawn in the rows' order.
  const drawn = rows.sort((a, b) => Number(BigInt(a.seq) - BigInt(b.seq)));
  return entries.map((e, i) => {
    const row = drawn[i];
    if (!row) throw new Error('an event was not written');
    return { jobId: e.jobId, seq: row.seq, turn: e.turn, type: e.type, data: e.data, at: row.at };
  });
}

/**
 * Records a change of the job's status as an event of its own that carries the job's record
 * as the change left it (the live stream and webhooks send it): `job.created`,
 * `job.reactivated` (a follow-up to a completed or failed job), `job.completed`, `job.failed`,
 * `job.archived`. Nothing is recorded when the status stayed as it was.
 */
export async function recordStatus(
  scope: TransitionScope,
  before: JobStatus | undefined,
  job: JobView,
): Promise<void> {
  if (before === job.status) return;
  const type =
    before === undefined
      ? 'job.created'
      : job.status === 'active'
        ? 'job.reactivated'
        : (`job.${job.status}` as const);
  await scope.record({
    type,
    jobId: job.id,
    turn: null,
    status: job.status,
    data: { job: toJobRecord(job) },
  });
}

/**
 * Every transaction that changes a job and its turns locks the job row first, as the API's
 * follow-up and archive do: the same order everywhere, so they wait for each other instead
 * of deadlocking.
 */
export async function lockJob(
  trx: Transaction<Database>,
  jobId: string,
): Promise<JobStatus | undefined> {
  const row = await trx
    .selectFrom('jobs')
    .select('status')
    .where('id', '=', jobId)
    .forUpdate()
    .executeTakeFirst();
  return row?.status;
}
