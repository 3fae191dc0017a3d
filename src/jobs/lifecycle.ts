// The job lifecycle: with service.ts, the only code that writes the jobs, turns and events
// tables. One function per transition, each one transaction; each records its event through
// `inTransition` (the one writer of a transition's event), which announces it to subscribers
// after the commit; a job's create, the API's hot write, writes everything in one statement
// instead (createJobAtOnce). A test (lifecycle.test.ts) fails if another module writes these
// tables.
import { createHash } from 'node:crypto';
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { AppContext } from '../context.ts';
import { ReadBatcher } from '../db/batch.ts';
import type { Db } from '../db/database.ts';
import type { Database, JobRow, JobStatus, ProjectRow, TurnRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import {
  type CommittingEvent,
  endpointsWantSql,
  queueDeliveries,
} from '../events/webhooks/outbox.ts';
import { isWebhookEventType } from '../events/webhooks/types.ts';
import {
  consumeInStatement,
  type RateLimitPolicy,
  type RateLimitState,
} from '../ratelimit/ratelimit.ts';
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
  const result = await ctx.db.transaction().execute((trx) =>
    fn({
      trx,
      async record(transition) {
        if (transition.type !== 'turn.accepted') {
          const event = await insertEvent(
            trx,
            transition.jobId,
            transition.turn,
            transition.type,
            transition.data,
          );
          await queueDeliveries(ctx, trx, event);
        }
        recorded.push(transition);
      },
    }),
  );
  ctx.transitions.publish(recorded);
  return result;
}

async function insertEvent(
  db: Db | Transaction<Database>,
  jobId: string,
  turn: number | null,
  type: string,
  data: Record<string, unknown>,
): Promise<CommittingEvent> {
  const row = await db
    .insertInto('events')
    .values({ job_id: jobId, turn, type, data: JSON.stringify(data) })
    .returning(['seq', 'at'])
    .executeTakeFirstOrThrow();
  return { jobId, seq: row.seq, turn, type, data, at: row.at };
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

/** SQLSTATE of errand_refuse (migration 0010): a check of a multi-write statement failed. */
const REFUSED = 'ER001';

function refusal(err: unknown): string | undefined {
  return typeof err === 'object' &&
    err !== null &&
    'code' in err &&
    err.code === REFUSED &&
    'message' in err &&
    typeof err.message === 'string'
    ? err.message
    : undefined;
}

/** A timestamp column as JavaScript's toISOString writes it (milliseconds, truncated, UTC). */
function isoSql(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

type CreatedRow = JobView & { rate_count: number | null };

const statementNames = new Map<string, string>();

function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `errand_create_jobs_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
    statementNames.set(text, name);
  }
  return name;
}

/** An error PostgreSQL (or PGlite) answered for a statement: its transaction wrote nothing. */
function answeredError(err: unknown): boolean {
  return (
    typeof err === 'object' &&
    err !== null &&
    'severity' in err &&
    'code' in err &&
    typeof err.code === 'string'
  );
}

/** What createJobAtOnce answers for one job. */
export type AtOnce =
  | { job: JobView; rateLimit: RateLimitState | undefined }
  /** Not created: its project has a webhook endpoint for job.created (see createJobAtOnce). */
  | undefined;

type Outcome = { ok: AtOnce } | { error: unknown };

type CreateContext = Pick<AppContext, 'prepared' | 'queue' | 'transitions' | 'config'>;

const batchers = new WeakMap<CreateContext, ReadBatcher<NewJobRow, Outcome>>();

/** Most creates in one statement; larger groups wait for the next. */
const MAX_CREATES = 64;

/**
 * Creates a job as createJob's transaction does (the job, its first turn, the turn's queue
 * entry, the `job.created` event with its NOTIFY, and the rate limit's count) in one statement,
 * a named prepared one, in its own transaction: one round trip instead of eight. Concurrent
 * creates share that statement and its commit (a group commit, as the polling reads share
 * theirs, db/batch.ts): PostgreSQL serialises the commits of transactions that NOTIFY, and
 * the commit waits for the disk, so one commit per create bounded their rate.
 *
 * When a check fails the statement fails and nothing is kept; a statement of several creates
 * that fails with an answer from the database is run again for each create alone, so that one
 * create's refusal is its own: a used-up rate limit throws RateLimitedError. A project with a
 * webhook endpoint that wants `job.created` is not handled here: nothing is written and
 * undefined comes back, for the caller to create the job in a transaction that writes the
 * deliveries too (inTransition). The statement reads the endpoints in the same snapshot as it
 * writes the event, as queueDeliveries does in the transaction's statement after the event's
 * insert: an endpoint created concurrently gets the event in exactly the cases it got it
 * before.
 */
export async function createJobAtOnce(ctx: CreateContext, job: NewJobRow): Promise<AtOnce> {
  let batcher = batchers.get(ctx);
  if (!batcher) {
    const policy = {
      limit: ctx.config.rateLimits.create,
      windowSeconds: ctx.config.rateLimits.windowSeconds,
    };
    batcher = new ReadBatcher((jobs) => createJobs(ctx, jobs, policy), {
      maxItems: MAX_CREATES,
      maxInFlight: 1,
      // A bound for the batch only when the pool's own bounds (getting a connection, the
      // statement) did not answer first: a statement PostgreSQL never answered. Its create
      // may still commit, as any write whose answer is lost; an Idempotency-Key retries safely.
      timeout: {
        ms:
          (ctx.config.database.connectTimeoutSeconds +
            ctx.config.database.statementTimeoutSeconds) *
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

async function createJobs(
  ctx: CreateContext,
  jobs: readonly NewJobRow[],
  policy: RateLimitPolicy,
): Promise<Outcome[]> {
  try {
    const created = await createAll(ctx, jobs, policy);
    return created.map((ok) => ({ ok }));
  } catch (err) {
    // A refusal, or an error of one create (its project deleted meanwhile), in a statement of
    // several: nothing was written, so each is tried alone. Without the database's answer
    // (a connection lost) the statement may have committed, and nothing is tried again.
    if (!answeredError(err)) return jobs.map(() => ({ error: err }));
    const reason = refusal(err);
    if (jobs.length === 1) return [reason === 'webhooks' ? { ok: undefined } : { error: err }];
    return Promise.all(
      jobs.map((job) =>
        createJobs(ctx, [job], policy).then(([outcome]) => outcome ?? { error: err }),
      ),
    );
  }
}

/**
 * A statement's rate-limit counts, ordered by project id: two API processes' statements that
 * count the same projects lock their counters in the same order, so neither waits for the
 * other in a deadlock.
 */
function inLockOrder(counts: Map<string, number>): [string, number][] {
  return [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** One statement that creates every job of `jobs`, or fails and creates none. */
async function createAll(
  ctx: CreateContext,
  jobs: readonly NewJobRow[],
  policy: RateLimitPolicy,
): Promise<{ job: JobView; rateLimit: RateLimitState | undefined }[]> {
  const drafts = jobs.map(
    (job): JobView => ({
      id: job.id,
      project_id: job.projectId,
      status: 'active',
      repository: job.repository,
      ref: job.ref,
      branch: `errand/${job.id}`,
      model: job.model,
      pr_link: null,
      pr_number: null,
      error: null,
      turn_count: 1,
      // The event's record, but for the two times, which the statement fills in.
      created_at: new Date(0),
      updated_at: new Date(0),
      archived_at: null,
    }),
  );
  // A rate limit counts a project's creates of the statement at once: all of them fit in its
  // window, or the statement fails and each is counted alone.
  const perProject = new Map<string, number>();
  for (const job of jobs) perProject.set(job.projectId, (perProject.get(job.projectId) ?? 0) + 1);
  let limit: ReturnType<typeof consumeInStatement> | undefined;
  const rows = await ctx.queue.enqueueCarried(
    jobs.map((job) => ({ jobId: job.id, seq: 1 })),
    async (entry, queueIds) => {
      const values = [...entry.values];
      const param = (value: unknown, type: string): string => {
        values.push(value);
        return `$${values.length}::${type}`;
      };
      limit =
        policy.limit > 0
          ? consumeInStatement(inLockOrder(perProject), 'create', policy, param)
          : undefined;
      // One text[] parameter per column of errand_new, in its order.
      const columns = [
        drafts.map((d) => d.id),
        drafts.map((d) => d.project_id),
        drafts.map((d) => d.repository),
        drafts.map((d) => d.ref),
        drafts.map((d) => d.model),
        jobs.map((j) => j.prompt),
        drafts.map((d) => JSON.stringify(toJobRecord(d))),
        queueIds,
      ]
        .map((column) => param(column, 'text[]'))
        .join(', ');
      const text = `WITH ${entry.ctes},
      ${limit ? `errand_limit AS (${limit.cte}),` : ''}
      errand_new AS (
        SELECT * FROM unnest(${columns})
          WITH ORDINALITY AS n(id, project_id, repository, ref, model, prompt, record, queue_id, i)
      ),
      errand_job AS (
        INSERT INTO jobs (id, project_id, status, repository, ref, branch, model, turn_count)
        SELECT id, project_id, 'active', repository, ref, 'errand/' || id, model, 1
        FROM errand_new ORDER BY i
        RETURNING ${JOB_VIEW_COLUMNS.join(', ')}
      ),
      errand_turn AS (
        INSERT INTO turns (job_id, seq, prompt, state, queue_id)
        SELECT id, 1, prompt, 'queued', queue_id FROM errand_new ORDER BY i
      ),
      errand_event AS (
        INSERT INTO events (job_id, turn, type, data)
        SELECT j.id, NULL, 'job.created', jsonb_build_object('job', n.record::jsonb
          || jsonb_build_object('createdAt', ${isoSql('j.created_at')}, 'updatedAt', ${isoSql('j.updated_at')}))
        FROM errand_job j JOIN errand_new n ON n.id = j.id ORDER BY n.i
      )
      SELECT j.*, ${limit ? 'l.count' : 'NULL::integer'} AS rate_count
      FROM errand_new n JOIN errand_job j ON j.id = n.id
        ${limit ? 'LEFT JOIN errand_limit l ON l.project_id = n.project_id' : ''}
      WHERE CASE
        WHEN (SELECT count(*) FROM queue_entry q WHERE q.id::text = ANY (${param(queueIds, 'text[]')}))
          <> ${param(queueIds.length, 'integer')} THEN errand_refuse('the queue skipped an entry')
        ${limit ? "WHEN l.count IS NULL THEN errand_refuse('rate_limited')" : ''}
        WHEN ${endpointsWantSql('n.project_id', "'job.created'")} THEN errand_refuse('webhooks')
        ELSE true END
      ORDER BY n.i`;
      try {
        return await ctx.prepared<CreatedRow>(statementName(text), text, values);
      } catch (err) {
        if (refusal(err) === 'rate_limited' && limit && jobs.length === 1) limit.state(null);
        throw err;
      }
    },
  );
  if (rows?.length !== jobs.length)
    throw new Error(`the create of ${jobs.length} jobs answered ${rows?.length ?? 0} rows`);
  const seen = new Map<string, number>();
  const created = rows.map(({ rate_count, ...job }) => {
    // The project's count after the statement, less its creates that come after this one.
    const nth = (seen.get(job.project_id) ?? 0) + 1;
    seen.set(job.project_id, nth);
    const count =
      rate_count === null ? null : rate_count - (perProject.get(job.project_id) ?? 1) + nth;
    return { job, rateLimit: limit?.state(count) };
  });
  ctx.transitions.publish(
    created.flatMap(({ job }): Transition[] => [
      {
        type: 'job.created',
        jobId: job.id,
        turn: null,
        status: 'active',
        data: { job: toJobRecord(job) },
      },
      { type: 'turn.accepted', jobId: job.id, turn: 1, status: 'active', data: {} },
    ]),
  );
  return created;
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
 * Accepts a prompt as turn `seq` of a job, in the caller's transaction, which has created the
 * job or locked it. The queue entry is sent first so that the turn row is written once, with
 * its queue id; no worker can see the entry before the transaction commits.
 */
export async function acceptTurn(
  ctx: Pick<AppContext, 'queue'>,
  scope: TransitionScope,
  jobId: string,
  seq: number,
  prompt: string,
): Promise<void> {
  const queueId = await ctx.queue.enqueue(scope.trx, { jobId, seq });
  await scope.trx
    .insertInto('turns')
    .values({
      job_id: jobId,
      seq,
      prompt,
      state: 'queued',
      queue_id: queueId,
      summary: null,
      error: null,
      usage: null,
      started_at: null,
      finished_at: null,
    })
    .execute();
  await scope.record({ type: 'turn.accepted', jobId, turn: seq, status: 'active', data: {} });
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
  return inTransition(ctx, async ({ trx, record }) => {
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
    await recordStatus({ trx, record }, status, job);
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
  return inTransition(ctx, async ({ trx, record }) => {
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
    if (job) await recordStatus({ trx, record }, before, job);
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
  return inTransition(ctx, async ({ trx, record }) => {
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
    if (job) await recordStatus({ trx, record }, before, job);
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
      await queueDeliveries(ctx, trx, await insertEvent(trx, jobId, seq, type, data));
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
