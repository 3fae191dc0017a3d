// The job lifecycle: with service.ts, the only code that writes the jobs, turns and events
// tables. One function per transition, each one transaction; each records its event through
// `inTransition` (the one writer of a transition's event), which announces it to subscribers
// after the commit. A test (lifecycle.test.ts) fails if another module writes these tables.
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { AppContext } from '../context.ts';
import type { Db } from '../db/database.ts';
import type { Database, JobRow, JobStatus, ProjectRow, TurnRow } from '../db/schema.ts';
import { type CommittingEvent, queueDeliveries } from '../events/webhooks/outbox.ts';
import { isWebhookEventType } from '../events/webhooks/types.ts';
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
