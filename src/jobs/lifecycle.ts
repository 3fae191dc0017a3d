// The job lifecycle: with service.ts, the only code that writes the jobs, turns and events
// tables. One function per transition, each one transaction; each records its event through
// `inTransition` (the one writer of a transition's event), which announces it to subscribers
// after the commit. A job's create, the API's hot write, shares its transaction with the
// creates that arrive with it (createJobBatched). A test (lifecycle.test.ts) fails if another
// module writes these tables.
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { AppContext } from '../context.ts';
import { ReadBatcher } from '../db/batch.ts';
import type { Db } from '../db/database.ts';
import type { Database, JobRow, JobStatus, ProjectRow, TurnRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { type CommittingEvent, queueDeliveries } from '../events/webhooks/outbox.ts';
import { isWebhookEventType } from '../events/webhooks/types.ts';
import { consumeAll, RateLimitedError, type RateLimitState } from '../ratelimit/ratelimit.ts';
import { JOB_VIEW_COLUMNS, type JobView, toJobRecord } from './record.ts';
import type { EarlierTurn, TurnOutput } from './runner.ts';
import type { Transition } from './transitions.ts';

/**
 * What a transition function needs of the application context; the queue takes the webhook
 * deliveries of its events (events/webhooks/outbox.ts).
 */
export type LifecycleContext = Pick<AppContext, 'db' | 'transitions' | 'queue'>;

export interface TransitionScope {
  trx: Transaction<Database>;
  /**
   * Records a transition of this transaction: its event in the job's log (except a turn's
   * acceptance, which the job's record itself shows), and its announcement once committed.
   */
  record(transition: Transition): Promise<void>;
  /** Records several transitions, in order, their events written together. */
  recordAll(transitions: readonly Transition[]): Promise<void>;
}

/**
 * Runs `fn` in one transaction and announces the transitions it recorded after the commit. Each
 * event's webhook deliveries are written in the same transaction.
 */
export async function inTransition<T>(
  ctx: LifecycleContext,
  fn: (scope: TransitionScope) => Promise<T>,
): Promise<T> {
  const recorded: Transition[] = [];
  const result = await ctx.db.transaction().execute((trx) => {
    const recordAll = async (transitions: readonly Transition[]) => {
      const logged = transitions.filter((t) => t.type !== 'turn.accepted');
      if (logged.length > 0) await queueDeliveries(ctx, trx, await insertEvents(trx, logged));
      recorded.push(...transitions);
    };
    return fn({ trx, recordAll, record: (transition) => recordAll([transition]) });
  });
  ctx.transitions.publish(recorded);
  return result;
}

/** Writes the events of `entries` in one statement; they draw their seqs in this order. */
async function insertEvents(
  db: Db | Transaction<Database>,
  entries: readonly Omit<CommittingEvent, 'seq' | 'at'>[],
): Promise<CommittingEvent[]> {
  const rows = await db
    .insertInto('events')
    .values(
      entries.map((e) => ({
        job_id: e.jobId,
        turn: e.turn,
        type: e.type,
        data: JSON.stringify(e.data),
      })),
    )
    .returning(['seq', 'at'])
    .execute();
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

/** A new job as createJob decided it, with its first prompt. */
export interface NewJobRow {
  id: string;
  projectId: string;
  repository: string;
  ref: string;
  model: string;
  prompt: string;
}

/** A created job, and what its project's rate limit has left. */
export interface CreatedJob {
  job: JobView;
  rateLimit: RateLimitState | undefined;
}

/**
 * Creates jobs in the caller's transaction: each job, its `job.created` event (with the
 * webhook deliveries it asks for), its first turn and the turn's queue entry, and the rate
 * limit's count, a few statements for all of them together. Throws RateLimitedError, writing
 * nothing the transaction keeps, when one project's creates would pass its limit.
 */
export async function insertJobs(
  ctx: Pick<AppContext, 'queue' | 'config'>,
  scope: TransitionScope,
  jobs: readonly NewJobRow[],
): Promise<CreatedJob[]> {
  const { trx } = scope;
  const perProject = new Map<string, number>();
  for (const job of jobs) perProject.set(job.projectId, (perProject.get(job.projectId) ?? 0) + 1);
  const limits = await consumeAll(trx, inLockOrder(perProject), 'create', {
    limit: ctx.config.rateLimits.create,
    windowSeconds: ctx.config.rateLimits.windowSeconds,
  });
  const rows = await trx
    .insertInto('jobs')
    .values(
      jobs.map((job) => ({
        id: job.id,
        project_id: job.projectId,
        status: 'active' as const,
        repository: job.repository,
        ref: job.ref,
        branch: `errand/${job.id}`,
        model: job.model,
        turn_count: 1,
      })),
    )
    .returning(JOB_VIEW_COLUMNS)
    .execute();
  // RETURNING gives no order: the jobs are matched by id.
  const byId = new Map(rows.map((row) => [row.id, row]));
  const created = jobs.map((job) => {
    const row = byId.get(job.id);
    if (!row) throw new Error(`job ${job.id} was not written`);
    return row;
  });
  await writeTurns(
    ctx,
    trx,
    jobs.map((job) => ({ jobId: job.id, seq: 1, prompt: job.prompt })),
  );
  await scope.recordAll(
    created.flatMap((job) => [
      {
        type: 'job.created',
        jobId: job.id,
        turn: null,
        status: 'active',
        data: { job: toJobRecord(job) },
      },
      accepted(job.id, 1),
    ]),
  );
  // Each job's own view of the count: its project's count after the statement, less the
  // project's creates that come after it.
  const seen = new Map<string, number>();
  return created.map((job) => {
    const nth = (seen.get(job.project_id) ?? 0) + 1;
    seen.set(job.project_id, nth);
    const after = limits?.get(job.project_id);
    return {
      job,
      rateLimit: after && {
        ...after,
        remaining: after.remaining + (perProject.get(job.project_id) ?? 1) - nth,
      },
    };
  });
}

/** An error PostgreSQL answered for a statement: its transaction wrote nothing. */
function answeredError(err: unknown): boolean {
  return (
    typeof err === 'object' &&
    err !== null &&
    'severity' in err &&
    'code' in err &&
    typeof err.code === 'string'
  );
}

type Outcome = { ok: CreatedJob } | { error: unknown };

type CreateContext = Pick<AppContext, 'db' | 'queue' | 'transitions' | 'config'>;

const batchers = new WeakMap<CreateContext, ReadBatcher<NewJobRow, Outcome>>();

/** Most creates in one transaction; larger groups wait for the next. */
const MAX_CREATES = 64;

/**
 * Creates a job (insertJobs) in a transaction of its own, which concurrent creates share: the
 * creates that arrive while one transaction runs go into the next one together, with one
 * commit (a group commit, as the polling reads share their statement, db/batch.ts). The commit
 * waits for the disk, so one commit per create bounded their rate. A transaction of several
 * that fails with an answer (a rate limit used up, a project deleted meanwhile) wrote nothing,
 * and each of its creates runs again alone, so that every answer is its own.
 */
export async function createJobBatched(ctx: CreateContext, job: NewJobRow): Promise<CreatedJob> {
  let batcher = batchers.get(ctx);
  if (!batcher) {
    batcher = new ReadBatcher((jobs) => createTogether(ctx, jobs), {
      maxItems: MAX_CREATES,
      maxInFlight: 1,
      // A bound for the batch only when the pool's own bounds (getting a connection, each
      // statement) did not answer first: a transaction PostgreSQL never answered. Its creates
      // may still commit, as any write whose answer is lost; an Idempotency-Key retries safely.
      timeout: {
        ms:
          (ctx.config.database.connectTimeoutSeconds +
            8 * ctx.config.database.statementTimeoutSeconds) *
            1000 +
          10_000,
        error: () =>
          new AppError(
            'unavailable',
            'the database is unavailable or did not answer in time; try again shortly',
          ),
      },
    });
    batchers.set(ctx, batcher);
  }
  const outcome = await batcher.read(job);
  if ('error' in outcome) throw outcome.error;
  return outcome.ok;
}

async function createTogether(ctx: CreateContext, jobs: readonly NewJobRow[]): Promise<Outcome[]> {
  try {
    const created = await inTransition(ctx, (scope) => insertJobs(ctx, scope, jobs));
    return created.map((ok) => ({ ok }));
  } catch (err) {
    // Without the database's answer (a connection lost) the transaction may have committed,
    // and nothing is tried again.
    const refused = err instanceof RateLimitedError || answeredError(err);
    if (jobs.length === 1 || !refused) return jobs.map(() => ({ error: err }));
    return Promise.all(
      jobs.map((job) => createTogether(ctx, [job]).then(([outcome]) => outcome ?? { error: err })),
    );
  }
}

/**
 * A transaction's rate-limit counts, ordered by project id: two API processes' transactions
 * that count the same projects lock their counters in the same order, so neither waits for the
 * other in a deadlock.
 */
function inLockOrder(counts: Map<string, number>): [string, number][] {
  return [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
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

/**
 * The job's status once turn `seq` has ended: still active while a later turn waits in the
 * queue, else what the turn's end makes it.
 */
function statusAfterTurn(
  jobId: string,
  seq: number,
  otherwise: 'completed' | 'failed',
): RawBuilder<JobStatus> {
  return sql<JobStatus>`CASE WHEN EXISTS (SELECT 1 FROM turns WHERE job_id = ${jobId} AND seq > ${seq} AND state = 'queued') THEN 'active' ELSE ${sql.lit(otherwise)} END`;
}

/**
 * Accepts prompts as turns of jobs, in the caller's transaction, which has created the jobs or
 * locked them.
 */
export async function acceptTurns(
  ctx: Pick<AppContext, 'queue'>,
  scope: TransitionScope,
  turns: readonly { jobId: string; seq: number; prompt: string }[],
): Promise<void> {
  await writeTurns(ctx, scope.trx, turns);
  await scope.recordAll(turns.map(({ jobId, seq }) => accepted(jobId, seq)));
}

/** A turn's acceptance: announced, with no event of its own (the job's record says so). */
function accepted(jobId: string, seq: number): Transition {
  return { type: 'turn.accepted', jobId, turn: seq, status: 'active', data: {} };
}

/**
 * Writes turns and their queue entries. The entries are written first so that each turn row is
 * written once, with its queue id; no worker can see an entry before the transaction commits.
 */
async function writeTurns(
  ctx: Pick<AppContext, 'queue'>,
  trx: Transaction<Database>,
  turns: readonly { jobId: string; seq: number; prompt: string }[],
): Promise<void> {
  const queueIds = await ctx.queue.enqueueAll(
    trx,
    turns.map(({ jobId, seq }) => ({ jobId, seq })),
  );
  await trx
    .insertInto('turns')
    .values(
      turns.map(({ jobId, seq, prompt }, i) => ({
        job_id: jobId,
        seq,
        prompt,
        state: 'queued' as const,
        queue_id: queueIds[i] ?? null,
      })),
    )
    .execute();
}

/**
 * After a restore (errand import), gives every turn that was queued or running a new queue
 * entry, in the caller's transaction: none of them runs anywhere now. A job's turns are queued
 * in their order, and a running one is queued again. Returns how many were queued.
 */
export async function requeueOpenTurns(
  ctx: Pick<AppContext, 'queue'>,
  trx: Transaction<Database>,
): Promise<number> {
  const open = await trx
    .selectFrom('turns')
    .select(['job_id', 'seq'])
    .where('state', 'in', ['queued', 'running'])
    .orderBy('job_id')
    .orderBy('seq')
    .execute();
  if (open.length === 0) return 0;
  const ids = await ctx.queue.enqueueAll(
    trx,
    open.map((t) => ({ jobId: t.job_id, seq: t.seq })),
  );
  const entries = JSON.stringify(
    open.map((t, i) => ({ job_id: t.job_id, seq: t.seq, queue_id: ids[i] })),
  );
  await sql`
    UPDATE turns t SET state = 'queued', queue_id = e.queue_id
    FROM jsonb_to_recordset(${entries}::jsonb) AS e (job_id text, seq integer, queue_id text)
    WHERE t.job_id = e.job_id AND t.seq = e.seq`.execute(trx);
  return open.length;
}

/**
 * Marks a delivered turn running. Nothing changes, and undefined comes back, when the job is
 * gone or archived or the turn already settled: a repeated delivery leaves everything as it is.
 */
export function startTurn(
  ctx: LifecycleContext,
  jobId: string,
  seq: number,
  attempt: number,
): Promise<{ job: JobRow; turn: TurnRow } | undefined> {
  return inTransition(ctx, async (scope) => {
    const { trx, record } = scope;
    const status = await lockJob(trx, jobId);
    if (status === undefined || status === 'archived') return undefined;
    const turn = await trx
      .updateTable('turns')
      .set({ state: 'running', attempts: sql`attempts + 1`, started_at: sql`now()`, error: null })
      .where('job_id', '=', jobId)
      .where('seq', '=', seq)
      .where('state', 'in', ['queued', 'running'])
      .returningAll()
      .executeTakeFirst();
    if (!turn) return undefined;
    const job = await trx
      .updateTable('jobs')
      .set({ status: 'active', error: null, updated_at: sql`now()` })
      .where('id', '=', jobId)
      .returningAll()
      .executeTakeFirstOrThrow();
    await record({ type: 'turn.started', jobId, turn: seq, status: 'active', data: { attempt } });
    await recordStatus(scope, status, job);
    return { job, turn };
  });
}

/**
 * Records a running turn's result. The job completes unless a later turn is queued; its pull
 * request, once set, stays. Returns false when the turn was no longer running.
 */
export function finishTurn(
  ctx: LifecycleContext,
  jobId: string,
  seq: number,
  output: TurnOutput,
): Promise<boolean> {
  return inTransition(ctx, async (scope) => {
    const { trx, record } = scope;
    const before = await lockJob(trx, jobId);
    const done = await trx
      .updateTable('turns')
      .set({
        state: 'done',
        summary: output.summary,
        usage: output.usage ? JSON.stringify(output.usage) : null,
        messages: output.messages ? JSON.stringify(output.messages) : null,
        commit_sha: output.commitSha ?? null,
        finished_at: sql`now()`,
      })
      .where('job_id', '=', jobId)
      .where('seq', '=', seq)
      .where('state', '=', 'running')
      .executeTakeFirst();
    if (Number(done.numUpdatedRows) === 0) return false;
    const job = await trx
      .updateTable('jobs')
      .set({
        status: statusAfterTurn(jobId, seq, 'completed'),
        ...(output.prLink ? { pr_link: output.prLink } : {}),
        ...(output.prNumber ? { pr_number: output.prNumber } : {}),
        updated_at: sql`now()`,
      })
      .where('id', '=', jobId)
      .where('status', '!=', 'archived')
      .returning(JOB_VIEW_COLUMNS)
      .executeTakeFirst();
    await record({
      type: 'turn.finished',
      jobId,
      turn: seq,
      status: job?.status ?? 'archived',
      data: {
        summary: output.summary,
        usage: output.usage ?? null,
        prLink: output.prLink ?? null,
      },
    });
    if (job) await recordStatus(scope, before, job);
    return true;
  });
}

/**
 * Marks a turn failed for good; the job fails too unless another turn is queued behind it.
 * Returns false when the turn had already settled.
 */
export function failTurn(
  ctx: LifecycleContext,
  jobId: string,
  seq: number,
  message: string,
): Promise<boolean> {
  return settleFailed(ctx, jobId, seq, message);
}

export const ORPHAN_MESSAGE =
  'the turn was interrupted too many times (its worker stopped on every attempt) and was given up';

/**
 * Fails a turn the queue has given up on (its worker died on every attempt), as failTurn does
 * with a message that says so.
 */
export function failOrphan(ctx: LifecycleContext, jobId: string, seq: number): Promise<boolean> {
  return settleFailed(ctx, jobId, seq, ORPHAN_MESSAGE);
}

function settleFailed(
  ctx: LifecycleContext,
  jobId: string,
  seq: number,
  message: string,
): Promise<boolean> {
  return inTransition(ctx, async (scope) => {
    const { trx, record } = scope;
    const before = await lockJob(trx, jobId);
    const failed = await trx
      .updateTable('turns')
      .set({ state: 'failed', error: message, finished_at: sql`now()` })
      .where('job_id', '=', jobId)
      .where('seq', '=', seq)
      .where('state', 'in', ['queued', 'running'])
      .executeTakeFirst();
    if (Number(failed.numUpdatedRows) === 0) return false;
    const job = await trx
      .updateTable('jobs')
      .set({
        status: statusAfterTurn(jobId, seq, 'failed'),
        error: message,
        updated_at: sql`now()`,
      })
      .where('id', '=', jobId)
      .where('status', '!=', 'archived')
      .returning(JOB_VIEW_COLUMNS)
      .executeTakeFirst();
    await record({
      type: 'turn.failed',
      jobId,
      turn: seq,
      status: job?.status ?? 'archived',
      data: { error: message },
    });
    if (job) await recordStatus(scope, before, job);
    return true;
  });
}

/**
 * Notes that a running turn goes back to the queue to be tried again later; the turn stays
 * running until a worker takes it up. Returns false, recording nothing, when the job is gone
 * or archived.
 */
export function retryTurn(
  ctx: LifecycleContext,
  jobId: string,
  seq: number,
  data: { error: string; attempt: number; retryInSeconds: number; retryAfterSeconds?: number },
): Promise<boolean> {
  return inTransition(ctx, async ({ trx, record }) => {
    const status = await lockJob(trx, jobId);
    if (status === undefined || status === 'archived') return false;
    await record({ type: 'turn.retrying', jobId, turn: seq, status, data: { ...data } });
    return true;
  });
}

/**
 * Appends a progress event of a running turn (a tool call, a commit) to the job's log. The
 * statement locks the job's row before its seq is drawn, as every transition does: events of
 * one job then commit in the order of their seqs, so a reader that has seen seq N never misses
 * a smaller one committed later (the live stream and `after=` resume on that). Nothing is
 * written for a job that is gone. A type webhooks can ask for (`pull_request.opened`) is one
 * transaction instead, the job locked first as well, that also writes its deliveries.
 */
export async function recordProgress(
  ctx: Pick<AppContext, 'db' | 'queue'>,
  jobId: string,
  seq: number,
  type: string,
  data: Record<string, unknown>,
): Promise<void> {
  if (isWebhookEventType(type)) {
    await ctx.db.transaction().execute(async (trx) => {
      if ((await lockJob(trx, jobId)) === undefined) return;
      await queueDeliveries(ctx, trx, await insertEvents(trx, [{ jobId, turn: seq, type, data }]));
    });
    return;
  }
  await sql`
    WITH job AS (SELECT id FROM jobs WHERE id = ${jobId} FOR UPDATE)
    INSERT INTO events (job_id, turn, type, data)
    SELECT id, ${seq}, ${type}, ${JSON.stringify(data)}::jsonb FROM job`.execute(ctx.db);
}

/** Keeps the job's review diff (the review page shows it) current after a push. */
export async function recordReviewDiff(
  ctx: Pick<AppContext, 'db'>,
  jobId: string,
  diff: string,
  truncated: boolean,
): Promise<void> {
  await ctx.db
    .updateTable('jobs')
    .set({ review_diff: diff, review_diff_truncated: truncated })
    .where('id', '=', jobId)
    .execute();
}

/**
 * What a turn works from besides its prompt: the job's project as it is now, and the job's
 * earlier finished turns in order (their conversation, and their prompts and summaries for the
 * pull request's body).
 */
export async function turnContext(
  ctx: Pick<AppContext, 'db'>,
  job: JobRow,
  seq: number,
): Promise<{ project: ProjectRow; earlier: EarlierTurn[] }> {
  const project = await ctx.db
    .selectFrom('projects')
    .selectAll()
    .where('id', '=', job.project_id)
    .executeTakeFirstOrThrow();
  const earlier = await ctx.db
    .selectFrom('turns')
    .select(['seq', 'prompt', 'summary', 'messages'])
    .where('job_id', '=', job.id)
    .where('seq', '<', seq)
    .where('state', '=', 'done')
    .orderBy('seq')
    .execute();
  return {
    project,
    earlier: earlier.map((t) => ({
      seq: t.seq,
      prompt: t.prompt,
      summary: t.summary,
      messages: Array.isArray(t.messages) ? t.messages : [],
    })),
  };
}
