// The job model: create, follow up, read, list and archive jobs. Every write that accepts a
// prompt stores the turn and its queue entry in the same transaction as the job change, so a
// 201/200 means the prompt is durable and will be worked on. The transitions a worker makes
// (start, finish, fail a turn) are in lifecycle.ts.
import { sql } from 'kysely';
import type { JobOrigin, JobStatus, ProjectRow, TurnTrigger } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import {
  claimKey,
  type IdempotentRequest,
  type StoredResponse,
  saveResponse,
} from '../idempotency/keys.ts';
import { isId, newId } from '../ids.ts';
import { engineModelRefusal } from '../projects/engine.ts';
import { consume, type RateLimitState } from '../ratelimit/ratelimit.ts';
import type { JobsContext } from './context.ts';
import { acceptTurns, createJobBatched, insertJobs, type NewJobRow } from './create.ts';
import { JOB_VIEW_COLUMNS, type JobView, toJobRecord } from './record.ts';
import { refuseSpentJob, refuseSpentMonths } from './spend.ts';
import { inTransition, recordStatus } from './transaction.ts';

export interface Accepted {
  job: JobView;
  rateLimit: RateLimitState | undefined;
}

/**
 * What a request with an Idempotency-Key whose first request committed gets instead: that
 * request's response, to send again. Nothing was changed and no rate limit was used.
 */
export interface Replayed {
  replayed: StoredResponse;
}

/** The response a keyed request stores: the status and the JSON text its route sends. */
function stored(status: number, job: JobView): StoredResponse {
  return { status, body: JSON.stringify(toJobRecord(job)) };
}

/**
 * The model a new job runs on: the one asked for, else the project's, else the server's. A
 * model that cannot be resolved (unknown provider, missing key) is refused here, with what to
 * set, rather than failing the job later.
 */
function modelFor(ctx: JobsContext, project: ProjectRow, asked?: string): string {
  const model = asked ?? project.model ?? ctx.models.defaultId;
  checkModel(ctx, project, model);
  return model;
}

/**
 * Refuses a model that cannot be used, and on a project with a budget one whose prices are
 * unknown: its spend could not be counted, so the budget could not hold it.
 */
function checkModel(ctx: JobsContext, project: ProjectRow, model: string): void {
  const check = ctx.models.check(model);
  if (!check.ok) throw new AppError('model_unavailable', check.message);
  const refusal = engineModelRefusal(project.engine, model);
  if (refusal !== undefined)
    throw new AppError(
      'model_unavailable',
      `${refusal} (the engine of project ${project.id}): ask for such a model, or change the project's engine`,
    );
  const budgets = [
    ...(project.job_budget_usd !== null ? ['jobBudgetUsd'] : []),
    ...(project.monthly_budget_usd !== null ? ['monthlyBudgetUsd'] : []),
  ];
  if (budgets.length > 0 && ctx.models.info(model).prices === undefined)
    throw new AppError(
      'model_unavailable',
      `model '${model}' has no known price, and project ${project.id} has a budget (${budgets.join(', ')}) that could not hold it: give its prices in the server's ERRAND_MODEL_CATALOG file, or use a model whose prices are known`,
    );
}

/** What a create may say: the prompt, and the model and ref it starts from (else the project's). */
export interface NewJob {
  prompt: string;
  model?: string | undefined;
  baseRef?: string | undefined;
  /** The forge issue the job is made from (src/forges/intake/). */
  origin?: JobOrigin | undefined;
  /** The forge event that asked for it. */
  trigger?: TurnTrigger | undefined;
}

/**
 * With an Idempotency-Key, the key is claimed first, in the transaction that creates the job
 * and stores the key's response: a retry after the commit gets that response; none can find
 * the job made and the key missing, or the reverse.
 */
export function createJob(ctx: JobsContext, project: ProjectRow, job: NewJob): Promise<Accepted>;
export function createJob(
  ctx: JobsContext,
  project: ProjectRow,
  job: NewJob,
  idempotency: IdempotentRequest | undefined,
): Promise<Accepted | Replayed>;
export async function createJob(
  ctx: JobsContext,
  project: ProjectRow,
  { prompt, model: asked, baseRef, origin, trigger }: NewJob,
  idempotency?: IdempotentRequest,
): Promise<Accepted | Replayed> {
  const draft = (model: string): NewJobRow => ({
    id: newId('job'),
    projectId: project.id,
    repository: project.repository,
    ref: baseRef ?? project.ref,
    model,
    prompt,
    monthlyBudgetUsd: project.monthly_budget_usd,
    origin,
    trigger,
  });
  // The common case shares its transaction with the creates that arrive with it.
  if (!idempotency) return createJobBatched(ctx, draft(modelFor(ctx, project, asked)));
  return inTransition(ctx, async (scope) => {
    const replayed = await claimKey(scope.trx, idempotency);
    if (replayed) return { replayed };
    // After the claim: a replay answers as the first request did, whatever changed since.
    const [created] = await insertJobs(ctx, scope, [draft(modelFor(ctx, project, asked))]);
    if (!created) throw new Error('the job was not created');
    await saveResponse(scope.trx, idempotency, stored(201, created.job));
    return created;
  });
}

/** With an Idempotency-Key, as createJob: the key is claimed first, in the same transaction. */
export function sendMessage(
  ctx: JobsContext,
  project: ProjectRow,
  jobId: string,
  prompt: string,
): Promise<Accepted>;
export function sendMessage(
  ctx: JobsContext,
  project: ProjectRow,
  jobId: string,
  prompt: string,
  idempotency: IdempotentRequest | undefined,
): Promise<Accepted | Replayed>;
/** A follow-up a forge event asked for (src/forges/intake/): the turn records which. */
export function sendMessage(
  ctx: JobsContext,
  project: ProjectRow,
  jobId: string,
  prompt: string,
  idempotency: undefined,
  trigger: TurnTrigger,
): Promise<Accepted>;
export async function sendMessage(
  ctx: JobsContext,
  project: ProjectRow,
  jobId: string,
  prompt: string,
  idempotency?: IdempotentRequest,
  trigger?: TurnTrigger,
): Promise<Accepted | Replayed> {
  if (!isId('job', jobId)) throw jobNotFound(jobId);
  const policy = {
    limit: ctx.config.rateLimits.message,
    windowSeconds: ctx.config.rateLimits.windowSeconds,
  };
  return inTransition(ctx, async (scope) => {
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
    refuseSpentJob(jobId, current.usage, project.job_budget_usd);
    await refuseSpentMonths(trx, [
      { projectId: project.id, monthlyBudgetUsd: project.monthly_budget_usd },
    ]);
    const rateLimit = await consume(trx, project.id, 'message', policy);
    const seq = current.turn_count + 1;
    await acceptTurns(ctx, scope, [{ jobId, seq, prompt, trigger }]);
    const job = await trx
      .updateTable('jobs')
      .set({ status: 'active', turn_count: seq, updated_at: sql`now()` })
      .where('id', '=', jobId)
      .returning(JOB_VIEW_COLUMNS)
      .executeTakeFirstOrThrow();
    await recordStatus(scope, current.status, job);
    if (idempotency) await saveResponse(trx, idempotency, stored(200, job));
    return { job, rateLimit };
  });
}

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
  opts: { limit: number; cursor?: string | undefined; status?: JobStatus | undefined },
): Promise<JobPage> {
  let query = ctx.db
    .selectFrom('jobs')
    .select(JOB_VIEW_COLUMNS)
    .where('project_id', '=', projectId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(opts.limit + 1);
  if (opts.status) query = query.where('status', '=', opts.status);
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
): Promise<JobView> {
  if (!isId('job', jobId)) throw jobNotFound(jobId);
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
    return { job, queueIds: open.map((t) => t.queue_id).filter((q): q is string => q !== null) };
  });
  ctx.aborts.abort(jobId, 'the job was archived');
  await ctx.queue.cancel(queueIds);
  return job;
}

function jobNotFound(jobId: string): AppError {
  return new AppError('not_found', `job ${jobId} not found in this project`);
}
