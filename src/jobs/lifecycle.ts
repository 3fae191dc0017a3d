// The transitions a worker makes as it runs a turn (start, finish, retry, fail it) and the
// progress a turn records; with transaction.ts, create.ts, accept.ts and service.ts, the only
// code that writes the jobs, turns and events tables. One function per transition, each one
// transaction (inTransition). A test (lifecycle.test.ts) fails if another module writes these
// tables.
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { Database, JobRow, JobStatus, ProjectRow, TurnRow } from '../db/schema.ts';
import { checkEvent, type EventData, type ProgressType } from '../events/catalog.ts';
import { SecretUnavailableError, type TurnSecret, turnSecrets } from '../projects/secrets.ts';
import { shownTrigger } from './accept.ts';
import type { JobsContext } from './context.ts';
import { JOB_VIEW_COLUMNS } from './record.ts';
import { type EarlierTurn, TurnFailedError, type TurnImage, type TurnOutput } from './runner.ts';
import { addToMonth, usagePlus, usedAnything } from './spend.ts';
import {
  insertEvents,
  inTransition,
  type LifecycleContext,
  lockJob,
  recordStatus,
  type TransitionScope,
} from './transaction.ts';
import { readUsage, tokensOf, type Usage } from './usage.ts';

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
 * After a restore (errand import), gives every turn that was queued or running a new queue
 * entry, in the caller's transaction: none of them runs anywhere now. A job's turns are queued
 * in their order, and a running one is queued again. Returns how many were queued.
 */
export async function requeueOpenTurns(
  ctx: Pick<JobsContext, 'queue'>,
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
    // A turn a forge event asked for says which one (its URL and author).
    const data = {
      attempt,
      mode: turn.mode,
      ...(turn.trigger ? { trigger: shownTrigger(turn.trigger) } : {}),
    };
    await record({ type: 'turn.started', jobId, turn: seq, status: 'active', data });
    await recordStatus(scope, status, job);
    return { job, turn };
  });
}

/**
 * Records a running turn's result. The job completes unless a later turn is queued; its pull
 * request, once set, stays. `spent` is what this attempt used of the model, priced (the worker
 * prices it with the model registry); without it, the output's tokens count at an unknown
 * cost. It is added to the turn's usage (its earlier attempts' included), the job's and the
 * project's month. Returns false when the turn was no longer running.
 */
export function finishTurn(
  ctx: LifecycleContext,
  jobId: string,
  seq: number,
  output: TurnOutput,
  spent: Usage | null = output.usage ? { ...tokensOf(output.usage), costUsd: null } : null,
): Promise<boolean> {
  return inTransition(ctx, async (scope) => {
    const { trx, record } = scope;
    const before = await lockJob(trx, jobId);
    const counted = spent && usedAnything(spent) ? spent : null;
    const done = await trx
      .updateTable('turns')
      .set({
        state: 'done',
        summary: output.summary,
        ...(counted ? { usage: usagePlus('usage', counted) } : {}),
        messages: output.messages ? JSON.stringify(output.messages) : null,
        commit_sha: output.commitSha ?? null,
        ...(output.output ? { output: JSON.stringify(output.output.value) } : {}),
        finished_at: sql`now()`,
      })
      .where('job_id', '=', jobId)
      .where('seq', '=', seq)
      .where('state', '=', 'running')
      .returning(['usage', 'mode'])
      .executeTakeFirst();
    if (!done) return false;
    const job = await trx
      .updateTable('jobs')
      .set({
        status: statusAfterTurn(jobId, seq, 'completed'),
        summary: output.summary,
        // A plan waits for its approval unless a turn already follows it.
        awaiting_approval: sql<boolean>`${done.mode === 'plan'} AND NOT EXISTS (SELECT 1 FROM turns WHERE job_id = ${jobId} AND seq > ${seq})`,
        ...(output.prLink ? { pr_link: output.prLink } : {}),
        ...(output.prNumber ? { pr_number: output.prNumber } : {}),
        // The job's output is its last finished turn's that was asked for one: a turn without a
        // schema leaves it as it was.
        ...(output.output ? { output: JSON.stringify(output.output.value) } : {}),
        ...(output.attempts ? { attempts: JSON.stringify(output.attempts) } : {}),
        ...(counted ? { usage: usagePlus('usage', counted) } : {}),
        updated_at: sql`now()`,
      })
      .where('id', '=', jobId)
      .where('status', '!=', 'archived')
      .returning(JOB_VIEW_COLUMNS)
      .executeTakeFirst();
    if (counted) await countSpent(scope, jobId, counted, job !== undefined);
    await record({
      type: 'turn.finished',
      jobId,
      turn: seq,
      status: job?.status ?? 'archived',
      data: {
        summary: output.summary,
        usage: readUsage(done.usage) ?? null,
        prLink: output.prLink ?? null,
        ...(output.output ? { output: output.output.value } : {}),
      },
    });
    if (job) await recordStatus(scope, before, job);
    return true;
  });
}

/**
 * Adds an attempt's usage to the job's project's month, and to the job's row when the
 * transition's own update of the job did not (an archived job's).
 */
async function countSpent(
  scope: TransitionScope,
  jobId: string,
  spent: Usage,
  jobCounted: boolean,
): Promise<void> {
  if (!jobCounted)
    await scope.trx
      .updateTable('jobs')
      .set({ usage: usagePlus('usage', spent) })
      .where('id', '=', jobId)
      .execute();
  await addToMonth(scope.trx, jobId, spent);
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
  spent: Usage | null = null,
): Promise<boolean> {
  return settleFailed(ctx, jobId, seq, message, spent);
}

export const ORPHAN_MESSAGE =
  'the turn was interrupted too many times (its worker stopped on every attempt) and was given up';

/**
 * Fails a turn the queue has given up on (its worker died on every attempt), as failTurn does
 * with a message that says so.
 */
export function failOrphan(ctx: LifecycleContext, jobId: string, seq: number): Promise<boolean> {
  return settleFailed(ctx, jobId, seq, ORPHAN_MESSAGE, null);
}

function settleFailed(
  ctx: LifecycleContext,
  jobId: string,
  seq: number,
  message: string,
  spent: Usage | null,
): Promise<boolean> {
  return inTransition(ctx, async (scope) => {
    const { trx, record } = scope;
    const before = await lockJob(trx, jobId);
    const counted = spent && usedAnything(spent) ? spent : null;
    const failed = await trx
      .updateTable('turns')
      .set({
        state: 'failed',
        error: message,
        ...(counted ? { usage: usagePlus('usage', counted) } : {}),
        finished_at: sql`now()`,
      })
      .where('job_id', '=', jobId)
      .where('seq', '=', seq)
      .where('state', 'in', ['queued', 'running'])
      .returning('usage')
      .executeTakeFirst();
    if (!failed) return false;
    const job = await trx
      .updateTable('jobs')
      .set({
        status: statusAfterTurn(jobId, seq, 'failed'),
        error: message,
        ...(counted ? { usage: usagePlus('usage', counted) } : {}),
        updated_at: sql`now()`,
      })
      .where('id', '=', jobId)
      .where('status', '!=', 'archived')
      .returning(JOB_VIEW_COLUMNS)
      .executeTakeFirst();
    if (counted) await countSpent(scope, jobId, counted, job !== undefined);
    // What a failed turn used is told only when it used something.
    const usage = readUsage(failed.usage);
    await record({
      type: 'turn.failed',
      jobId,
      turn: seq,
      status: job?.status ?? 'archived',
      data: { error: message, ...(usage ? { usage } : {}) },
    });
    if (job) await recordStatus(scope, before, job);
    return true;
  });
}

/**
 * Notes that a running turn goes back to the queue to be tried again later; the turn stays
 * running until a worker takes it up. What the failed attempt used (`spent`) is added to the
 * turn, the job and the project's month: the model was paid for it all the same. Returns
 * false, recording nothing, when the job is gone or archived.
 */
export function retryTurn(
  ctx: LifecycleContext,
  jobId: string,
  seq: number,
  data: { error: string; attempt: number; retryInSeconds: number; retryAfterSeconds?: number },
  spent: Usage | null = null,
): Promise<boolean> {
  return inTransition(ctx, async (scope) => {
    const { trx, record } = scope;
    const status = await lockJob(trx, jobId);
    if (status === undefined || status === 'archived') return false;
    const counted = spent && usedAnything(spent) ? spent : null;
    if (counted) await addSpent(trx, jobId, seq, counted);
    await record({
      type: 'turn.retrying',
      jobId,
      turn: seq,
      status,
      data: { ...data, ...(counted ? { usage: counted } : {}) },
    });
    return true;
  });
}

/**
 * Records what an attempt that is not settled here used: one interrupted (its turn goes back
 * to the queue) or one of a job archived meanwhile. The model was paid for it all the same.
 */
export async function recordSpent(
  ctx: LifecycleContext,
  jobId: string,
  seq: number,
  spent: Usage,
): Promise<void> {
  if (!usedAnything(spent)) return;
  await ctx.db.transaction().execute(async (trx) => {
    if ((await lockJob(trx, jobId)) === undefined) return;
    await addSpent(trx, jobId, seq, spent);
  });
}

/**
 * Gives back the attempt of a turn that a stopping worker handed back to the queue unfinished
 * (its drain ran out, src/queue/worker.ts): the turn's count of attempts drops by the one its
 * start added, as the queue's own count was left as it was (TurnQueue.handBack). What the
 * attempt used is added as recordSpent adds it. The turn's state is left alone: another worker
 * may have started it already, and the count's change commutes with that start's.
 */
export async function handBackTurn(
  ctx: LifecycleContext,
  jobId: string,
  seq: number,
  spent: Usage,
): Promise<void> {
  await ctx.db.transaction().execute(async (trx) => {
    if ((await lockJob(trx, jobId)) === undefined) return;
    await trx
      .updateTable('turns')
      .set({ attempts: sql`greatest(attempts - 1, 0)` })
      .where('job_id', '=', jobId)
      .where('seq', '=', seq)
      .execute();
    if (usedAnything(spent)) await addSpent(trx, jobId, seq, spent);
  });
}

/** Adds an attempt's usage to its turn, its job and its project's month. */
async function addSpent(
  trx: Transaction<Database>,
  jobId: string,
  seq: number,
  spent: Usage,
): Promise<void> {
  await trx
    .updateTable('turns')
    .set({ usage: usagePlus('usage', spent) })
    .where('job_id', '=', jobId)
    .where('seq', '=', seq)
    .execute();
  await trx
    .updateTable('jobs')
    .set({ usage: usagePlus('usage', spent), updated_at: sql`now()` })
    .where('id', '=', jobId)
    .execute();
  await addToMonth(trx, jobId, spent);
}

/**
 * Appends a progress event of a running turn (a tool call, a commit) to the job's log. The
 * statement locks the job's row before its seq is drawn, as every transition does: events of
 * one job then commit in the order of their seqs, so a reader that has seen seq N never misses
 * a smaller one committed later (the live stream and `after=` resume on that). Nothing is
 * written for a job that is gone. A type a hook wants (the webhook outbox's
 * `pull_request.opened`) is one transaction instead, the job locked first as well, in which
 * the hooks run. The event is checked against the catalog (events/catalog.ts) before either.
 */
export async function recordProgress<T extends ProgressType>(
  ctx: LifecycleContext,
  jobId: string,
  seq: number,
  type: T,
  data: EventData<T>,
): Promise<void> {
  checkEvent(type, data);
  if (ctx.transitions.hooked(type)) {
    await ctx.db.transaction().execute(async (trx) => {
      if ((await lockJob(trx, jobId)) === undefined) return;
      const events = await insertEvents(trx, [{ jobId, turn: seq, type, data }]);
      await ctx.transitions.runHooks(trx, events);
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
  ctx: Pick<JobsContext, 'db'>,
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
 * What a turn works from besides its prompt: the job's project as it is now, its secrets, and
 * the job's earlier finished turns in order (their conversation, and their prompts and summaries
 * for the pull request's body), and the turn's own images. A secret that cannot be opened fails the turn.
 */
export async function loadTurnInputs(
  ctx: Pick<JobsContext, 'db' | 'config'>,
  job: JobRow,
  seq: number,
): Promise<{
  project: ProjectRow;
  secrets: TurnSecret[];
  earlier: EarlierTurn[];
  images: TurnImage[];
}> {
  const project = await ctx.db
    .selectFrom('projects')
    .selectAll()
    .where('id', '=', job.project_id)
    .executeTakeFirstOrThrow();
  const secrets = await turnSecrets(ctx, project.id).catch((err: unknown) => {
    throw err instanceof SecretUnavailableError ? new TurnFailedError(err.message) : err;
  });
  const earlier = await ctx.db
    .selectFrom('turns')
    .select(['seq', 'prompt', 'summary', 'messages'])
    .where('job_id', '=', job.id)
    .where('seq', '<', seq)
    .where('state', '=', 'done')
    .orderBy('seq')
    .execute();
  const images = await ctx.db
    .selectFrom('attachments')
    .select(['n', 'media_type as mediaType', 'data'])
    .where('job_id', '=', job.id)
    .where('seq', '=', seq)
    .orderBy('n')
    .execute();
  return {
    project,
    secrets,
    images,
    earlier: earlier.map((t) => ({
      seq: t.seq,
      prompt: t.prompt,
      summary: t.summary,
      messages: Array.isArray(t.messages) ? t.messages : [],
    })),
  };
}
