// Accepting prompts: new jobs with their first turn, and follow-up turns, each turn written
// with its queue entry in the transaction that accepts it (a 201/200 means the prompt is
// durable). A job's create, the API's hot write, shares its transaction with the creates that
// arrive with it (createJobBatched).
import type { Transaction } from 'kysely';
import { ReadBatcher } from '../db/batch.ts';
import type { Database, JobOrigin, TurnTrigger } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { consumeAll, RateLimitedError, type RateLimitState } from '../ratelimit/ratelimit.ts';
import type { JobsContext } from './context.ts';
import { JOB_VIEW_COLUMNS, type JobView, toJobRecord } from './record.ts';
import { BudgetExhaustedError, refuseSpentMonths } from './spend.ts';
import { inTransition, type TransitionScope } from './transaction.ts';
import type { Transition } from './transitions.ts';

/** A new job as createJob decided it, with its first prompt. */
export interface NewJobRow {
  id: string;
  projectId: string;
  repository: string;
  ref: string;
  model: string;
  prompt: string;
  /** The project's monthly budget as the request found it; null: none. */
  monthlyBudgetUsd: number | null;
  /** The forge issue the job comes from, for jobs made from one. */
  origin?: JobOrigin | undefined;
  /** The forge event that asked for the first turn. */
  trigger?: TurnTrigger | undefined;
}

/** A prompt accepted as a turn of a job. */
export interface NewTurn {
  jobId: string;
  seq: number;
  prompt: string;
  trigger?: TurnTrigger | undefined;
}

/** A created job, and what its project's rate limit has left. */
export interface CreatedJob {
  job: JobView;
  rateLimit: RateLimitState | undefined;
}

/**
 * Creates jobs in the caller's transaction: each job, its `job.created` event (with the
 * webhook deliveries it asks for), its first turn and the turn's queue entry, and the rate
 * limit's count, a few statements for all of them together. Throws RateLimitedError, or
 * BudgetExhaustedError, writing nothing the transaction keeps, when one project's creates
 * would pass its rate limit or its month's budget is spent.
 */
export async function insertJobs(
  ctx: Pick<JobsContext, 'queue' | 'config'>,
  scope: TransitionScope,
  jobs: readonly NewJobRow[],
): Promise<CreatedJob[]> {
  const { trx } = scope;
  const perProject = new Map<string, number>();
  for (const job of jobs) perProject.set(job.projectId, (perProject.get(job.projectId) ?? 0) + 1);
  await refuseSpentMonths(
    trx,
    jobs.map((job) => ({ projectId: job.projectId, monthlyBudgetUsd: job.monthlyBudgetUsd })),
  );
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
        origin: job.origin ? JSON.stringify(job.origin) : null,
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
    jobs.map((job) => ({ jobId: job.id, seq: 1, prompt: job.prompt, trigger: job.trigger })),
  );
  await scope.recordAll(
    created.flatMap((job, i) => [
      {
        type: 'job.created',
        jobId: job.id,
        turn: null,
        status: 'active',
        data: { job: toJobRecord(job) },
      },
      // `created` is in the order of `jobs`.
      accepted({ jobId: job.id, seq: 1, trigger: jobs[i]?.trigger }),
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

type CreateContext = Pick<JobsContext, 'db' | 'queue' | 'transitions' | 'config'>;

const batchers = new WeakMap<CreateContext, ReadBatcher<NewJobRow, Outcome>>();

/** Most creates in one transaction; larger groups wait for the next. */
const MAX_CREATES = 64;

/**
 * Creates a job (insertJobs) in a transaction of its own, which concurrent creates share: the
 * creates that arrive while one transaction runs go into the next one together, with one
 * commit (a group commit, as the polling reads share their statement, db/batch.ts). The commit
 * waits for the disk, so one commit per create bounded their rate. A transaction of several
 * that fails with an answer (a rate limit used up, a month's budget spent, a project deleted
 * meanwhile) wrote nothing, and each of its creates runs again alone, so that every answer is
 * its own.
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
    const refused =
      err instanceof RateLimitedError || err instanceof BudgetExhaustedError || answeredError(err);
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
 * Accepts prompts as turns of jobs, in the caller's transaction, which has created the jobs or
 * locked them.
 */
export async function acceptTurns(
  ctx: Pick<JobsContext, 'queue'>,
  scope: TransitionScope,
  turns: readonly NewTurn[],
): Promise<void> {
  await writeTurns(ctx, scope.trx, turns);
  await scope.recordAll(turns.map(accepted));
}

/**
 * A turn's acceptance: announced, with no event of its own (the job's record says so; a forge
 * event that asked for it is told again by the turn's `turn.started`).
 */
function accepted(turn: Pick<NewTurn, 'jobId' | 'seq' | 'trigger'>): Transition {
  return {
    type: 'turn.accepted',
    jobId: turn.jobId,
    turn: turn.seq,
    status: 'active',
    data: turn.trigger ? { trigger: shownTrigger(turn.trigger) } : {},
  };
}

/** What the job's events say of the forge event that asked for a turn: never where Errand answers. */
export function shownTrigger(trigger: TurnTrigger): Record<string, string> {
  return { forge: trigger.forge, kind: trigger.kind, url: trigger.url, author: trigger.author };
}

/**
 * Writes turns and their queue entries. The entries are written first so that each turn row is
 * written once, with its queue id; no worker can see an entry before the transaction commits.
 */
async function writeTurns(
  ctx: Pick<JobsContext, 'queue'>,
  trx: Transaction<Database>,
  turns: readonly NewTurn[],
): Promise<void> {
  const queueIds = await ctx.queue.enqueueAll(
    trx,
    turns.map(({ jobId, seq }) => ({ jobId, seq })),
  );
  await trx
    .insertInto('turns')
    .values(
      turns.map(({ jobId, seq, prompt, trigger }, i) => ({
        job_id: jobId,
        seq,
        prompt,
        state: 'queued' as const,
        queue_id: queueIds[i] ?? null,
        trigger: trigger ? JSON.stringify(trigger) : null,
      })),
    )
    .execute();
}
