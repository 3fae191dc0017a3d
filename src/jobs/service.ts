// The job model: create, follow up, read, list and archive jobs. Every write that accepts a
// prompt stores the turn and its queue entry in the same transaction as the job change, so a
// 201/200 means the prompt is durable and will be worked on. The transitions a worker makes
// (start, finish, fail a turn) are in lifecycle.ts.

import { sql } from 'kysely';
import { audit, type Who } from '../audit/audit.ts';
import type { JobStatus, ProjectRow, TurnMode, TurnPurpose, TurnTrigger } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { claimKey, type IdempotentRequest, saveResponse } from '../idempotency/keys.ts';
import { isId } from '../ids.ts';
import { consume } from '../ratelimit/ratelimit.ts';
import type { AuditRecord } from '../records/audit.ts';
import {
  type Accepted,
  acceptTurns,
  checkMode,
  checkModel,
  type Replayed,
  stored,
  type TurnExtras,
} from './accept.ts';
import { checkImages } from './attachments.ts';
import type { JobsContext } from './context.ts';
import { JOB_VIEW_COLUMNS, type JobView } from './record.ts';
import { refuseSpentJob, refuseSpentMonths } from './spend.ts';
import { inTransition, recordStatus } from './transaction.ts';

// Creating a job, the hot write, reads top-down in its own module.
export { createJob } from './create.ts';

/** How a follow-up came, besides its prompt, and what it carries with it. */
export interface FollowUpOptions extends TurnExtras {
  /** An Idempotency-Key: claimed first, in the same transaction, as createJob does. */
  idempotency?: IdempotentRequest | undefined;
  /** The forge event that asked for it (src/features/forge-intake/), recorded in its turn. */
  trigger?: TurnTrigger | undefined;
  /**
   * Who sends it, from where: the turn's sentBy and the audit row's actor (absent only where no
   * one asks: Errand's own pull request watch, a test's own setup).
   */
  by?: Who | undefined;
  /** Why Errand queued it itself (the pull request watch, src/features/pr-watch/). */
  purpose?: TurnPurpose | undefined;
  /**
   * What the turn may do (docs/modes.md); absent: `code`, which after a plan carries it out, as
   * a prompt `approve` does.
   */
  mode?: TurnMode | undefined;
}

/** A follow-up of a job: a new turn, queued in the transaction that accepts it. */
export function sendMessage(
  ctx: JobsContext,
  project: ProjectRow,
  jobId: string,
  prompt: string,
  options?: FollowUpOptions & { idempotency?: undefined },
): Promise<Accepted>;
/** With an Idempotency-Key: a request whose first one committed gets that one's response. */
export function sendMessage(
  ctx: JobsContext,
  project: ProjectRow,
  jobId: string,
  prompt: string,
  options: FollowUpOptions,
): Promise<Accepted | Replayed>;
export async function sendMessage(
  ctx: JobsContext,
  project: ProjectRow,
  jobId: string,
  prompt: string,
  {
    idempotency,
    trigger,
    by,
    purpose,
    mode = 'code',
    outputSchema,
    attachments,
  }: FollowUpOptions = {},
): Promise<Accepted | Replayed> {
  if (!isId('job', jobId)) throw jobNotFound(jobId);
  checkMode(project, mode);
  const policy = {
    limit: ctx.config.rateLimits.message,
    windowSeconds: ctx.config.rateLimits.windowSeconds,
  };
  let audited: AuditRecord | undefined;
  const result = await inTransition(ctx, async (scope) => {
    const { trx } = scope;
    const replayed = idempotency && (await claimKey(trx, idempotency));
    if (replayed) return { replayed };
    // The row lock orders concurrent follow-ups and an archive of the same job.
    const current = await trx
      .selectFrom('jobs')
      .select(JOB_VIEW_COLUMNS)
      .where('id', '=', jobId)
      .where('project_id', '=', project.id)
      .forUpdate()
      .executeTakeFirst();
    if (!current) throw jobNotFound(jobId);
    if (current.status === 'archived') {
      throw new AppError('conflict', `job ${jobId} is archived and accepts no more messages`);
    }
    checkModel(ctx, project, current.model);
    checkImages(ctx, project, current.model, attachments);
    refuseSpentJob(jobId, current.usage, project.job_budget_usd);
    await refuseSpentMonths(trx, [
      { projectId: project.id, monthlyBudgetUsd: project.monthly_budget_usd },
    ]);
    const rateLimit = await consume(trx, project.id, 'message', policy);
    const seq = current.turn_count + 1;
    await acceptTurns(ctx, scope, [
      {
        jobId,
        seq,
        prompt,
        trigger,
        sentBy: by?.actor ?? null,
        purpose: purpose ?? null,
        mode,
        outputSchema,
        attachments,
      },
    ]);
    // A plan waits no more once anything follows it: a code turn carries it out.
    const job = await trx
      .updateTable('jobs')
      .set({
        status: 'active',
        turn_count: seq,
        mode,
        awaiting_approval: false,
        updated_at: sql`now()`,
      })
      .where('id', '=', jobId)
      .returning(JOB_VIEW_COLUMNS)
      .executeTakeFirstOrThrow();
    await recordStatus(scope, current.status, job);
    audited = await audit(
      { db: trx, who: by ?? NO_ONE },
      {
        action: 'job.message',
        target: { kind: 'job', id: jobId },
        details: { turn: seq, ...(mode === 'code' ? {} : { mode }) },
      },
    );
    if (idempotency) await saveResponse(trx, idempotency, stored(200, job));
    return { job, rateLimit };
  });
  if (audited) ctx.audit.written([audited]);
  return result;
}

/** Who a change without `by` is: no one known, from no request. */
const NO_ONE: Who = { actor: null, address: null, requestId: null };

export async function getJob(ctx: JobsContext, projectId: string, jobId: string): Promise<JobView> {
  if (!isId('job', jobId)) throw jobNotFound(jobId);
  const job = await ctx.db
    .selectFrom('jobs')
    .select(JOB_VIEW_COLUMNS)
    .where('id', '=', jobId)
    .where('project_id', '=', projectId)
    .executeTakeFirst();
  if (!job) throw jobNotFound(jobId);
  return job;
}

export interface JobPage {
  jobs: JobView[];
  nextCursor: string | null;
}

// A cursor names the last job of the page; the next page is the jobs ordered after it. The
// comparison runs in SQL on the stored timestamp (microseconds), which a JavaScript Date
// (milliseconds) would round: jobs created within one millisecond would be skipped.
function encodeCursor(job: JobView): string {
  return Buffer.from(job.id).toString('base64url');
}

function decodeCursor(value: string): string {
  const id = Buffer.from(value, 'base64url').toString('utf8');
  if (!isId('job', id))
    throw new AppError('bad_request', '"cursor" is not a cursor this API returned');
  return id;
}

export async function listJobs(
  ctx: JobsContext,
  projectId: string,
  opts: {
    limit: number;
    cursor?: string | undefined;
    status?: JobStatus | undefined;
    /** An actor's ref (src/records/actor.ts's actorRef): the jobs it created. */
    createdBy?: string | undefined;
    /**
     * The eval run whose jobs to list (src/features/eval/); absent: the project's own work,
     * without any run's jobs.
     */
    evalRun?: string | undefined;
  },
): Promise<JobPage> {
  let query = ctx.db
    .selectFrom('jobs')
    .select(JOB_VIEW_COLUMNS)
    .where('project_id', '=', projectId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(opts.limit + 1);
  if (opts.status) query = query.where('status', '=', opts.status);
  query =
    opts.evalRun === undefined
      ? query.where('eval_run_id', 'is', null)
      : query.where('eval_run_id', '=', opts.evalRun);
  // actor_ref() is the expression the jobs_created_by index holds (migration 0027).
  if (opts.createdBy !== undefined)
    query = query.where(sql<string>`actor_ref(created_by)`, '=', opts.createdBy);
  if (opts.cursor) {
    const after = decodeCursor(opts.cursor);
    query = query.where(
      sql<boolean>`(created_at, id) < (SELECT c.created_at, c.id FROM jobs c WHERE c.id = ${after} AND c.project_id = ${projectId})`,
    );
  }
  const rows = await query.execute();
  const jobs = rows.slice(0, opts.limit);
  const last = jobs.at(-1);
  return { jobs, nextCursor: rows.length > opts.limit && last ? encodeCursor(last) : null };
}

/** Archives a job: terminal. Queued turns are cancelled and a running one is aborted. */
export async function archiveJob(
  ctx: JobsContext,
  projectId: string,
  jobId: string,
  by?: Who,
): Promise<JobView> {
  if (!isId('job', jobId)) throw jobNotFound(jobId);
  let audited: AuditRecord | undefined;
  const { job, queueIds } = await inTransition(ctx, async (scope) => {
    const { trx } = scope;
    const current = await trx
      .selectFrom('jobs')
      .select(JOB_VIEW_COLUMNS)
      .where('id', '=', jobId)
      .where('project_id', '=', projectId)
      .forUpdate()
      .executeTakeFirst();
    if (!current) throw jobNotFound(jobId);
    if (current.status === 'archived') return { job: current, queueIds: [] };
    const open = await trx
      .updateTable('turns')
      .set({ state: 'cancelled', finished_at: sql`now()`, error: 'the job was archived' })
      .where('job_id', '=', jobId)
      .where('state', 'in', ['queued', 'running'])
      .returning('queue_id')
      .execute();
    const job = await trx
      .updateTable('jobs')
      .set({ status: 'archived', archived_at: sql`now()`, updated_at: sql`now()` })
      .where('id', '=', jobId)
      .returning(JOB_VIEW_COLUMNS)
      .executeTakeFirstOrThrow();
    await recordStatus(scope, current.status, job);
    audited = await audit(
      { db: trx, who: by ?? NO_ONE },
      { action: 'job.archive', target: { kind: 'job', id: jobId }, details: { projectId } },
    );
    return { job, queueIds: open.map((t) => t.queue_id).filter((q): q is string => q !== null) };
  });
  if (audited) ctx.audit.written([audited]);
  ctx.aborts.abort(jobId, 'the job was archived');
  await ctx.queue.cancel(queueIds);
  return job;
}

function jobNotFound(jobId: string): AppError {
  return new AppError('not_found', `job ${jobId} not found in this project`);
}
