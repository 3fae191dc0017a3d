// Creating a job, the API's hot write, from the request to the answer: the input is checked,
// then one transaction takes the project's rate limit and budget and writes the job, its first
// turn, the turn's queue entry, the job's events and its audit row (a 201 means the prompt is
// durable, and who asked for it recorded). The creates that arrive together share their
// transaction, and a few transactions run at once.

import type { Who } from '../audit/audit.ts';
import { Batcher } from '../db/batch.ts';
import type {
  BestOf,
  JobOrigin,
  McpServers,
  ProjectRow,
  TurnMode,
  TurnTrigger,
} from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { claimKey, type IdempotentRequest, saveResponse } from '../idempotency/keys.ts';
import { newId } from '../ids.ts';
import { checkMcpTargets } from '../projects/mcp-servers.ts';
import { RateLimitedError } from '../ratelimit/ratelimit.ts';
import type { AuditRecord } from '../records/audit.ts';
import {
  type Accepted,
  checkMode,
  checkModel,
  type Replayed,
  stored,
  type TurnExtras,
} from './accept.ts';
import { checkImages } from './attachments.ts';
import { checkBestOf } from './best-of.ts';
import type { JobsContext } from './context.ts';
import { type NewJobRow, planCreates, writeJobs } from './create-write.ts';
import { BudgetExhaustedError } from './spend.ts';
import { inTransition } from './transaction.ts';

/**
 * What a create may say: the prompt, and the model and ref it starts from (else the project's),
 * and what its first turn carries (an output schema, images).
 */
export interface NewJob extends TurnExtras {
  /**
   * The job's id, when the caller recorded it before asking (an eval run's result: a second
   * create of the same job then fails on the id instead of making another); else a new one.
   */
  id?: string | undefined;
  prompt: string;
  model?: string | undefined;
  baseRef?: string | undefined;
  /** What its first turn may do (docs/modes.md); absent: `code`. */
  mode?: TurnMode | undefined;
  /** MCP servers this job's turns get besides the project's (docs/mcp-servers.md). */
  mcpServers?: McpServers | undefined;
  /** Best-of-N: the attempts its first turn makes (docs/eval.md); absent: one. */
  attempts?: { count: number; agents?: BestOf['agents'] | undefined } | undefined;
  /** The command that judges its attempts instead of the project's. */
  checkCommand?: string | undefined;
  /** The eval run it is a task of (src/features/eval/). */
  evalRunId?: string | undefined;
  /** The forge issue the job is made from (src/features/forge-intake/). */
  origin?: JobOrigin | undefined;
  /** The forge event that asked for it. */
  trigger?: TurnTrigger | undefined;
  /**
   * Who asks, from where: the job's createdBy and its first turn's sender, and its audit row.
   * Absent only where no one asks (a test's own setup): the job's creator is then null.
   */
  by?: Who | undefined;
}

/**
 * Creates a job with its first turn. With an Idempotency-Key, the key is claimed first, in the
 * transaction that creates the job and stores the key's response: a retry after the commit
 * gets that response; none can find the job made and the key missing, or the reverse. Without
 * one, the create shares its transaction with the creates that arrive with it.
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
  {
    id,
    prompt,
    model: asked,
    baseRef,
    mode = 'code',
    mcpServers,
    attempts,
    checkCommand,
    evalRunId,
    outputSchema,
    attachments,
    origin,
    trigger,
    by,
  }: NewJob,
  idempotency?: IdempotentRequest,
): Promise<Accepted | Replayed> {
  // The model a new job runs on: the one asked for, else the project's, else the server's. One
  // that cannot be used is refused here, with what to set, rather than failing the job later.
  const model = asked ?? project.model ?? ctx.models.defaultId;
  const bestOf = attempts && { count: attempts.count, agents: attempts.agents ?? [] };
  // Attempts are checked each with its agent's engine and model (an eval's agent may run an
  // engine other than the project's); a job of one turn, with the project's engine.
  if (bestOf) checkBestOf(ctx, project, model, mode, bestOf);
  else {
    checkMode(project, mode);
    checkModel(ctx, project, model);
  }
  checkImages(ctx, project, model, attachments);
  if (mcpServers) await checkMcpTargets(mcpServers, ctx.config.webhooks.allowPrivate);
  const row: NewJobRow = {
    id: id ?? newId('job'),
    projectId: project.id,
    repository: project.repository,
    ref: baseRef ?? project.ref,
    model,
    prompt,
    mode,
    mcpServers,
    bestOf,
    checkCommand,
    evalRunId,
    outputSchema,
    attachments,
    monthlyBudgetUsd: project.monthly_budget_usd,
    origin,
    trigger,
    by,
  };
  if (!idempotency) return createJobBatched(ctx, row);
  const audited: AuditRecord[] = [];
  const plan = planCreates(ctx, [row]);
  const result = await inTransition(ctx, async (scope) => {
    const replayed = await claimKey(scope.trx, idempotency);
    if (replayed) return { replayed };
    // After the claim: a replay answers as the first request did, whatever changed since.
    const [created] = await writeJobs(ctx, scope, plan, audited);
    if (!created) throw new Error('the job was not created');
    await saveResponse(scope.trx, idempotency, stored(201, created.job));
    return created;
  });
  ctx.audit.written(audited);
  return result;
}

type CreateContext = Pick<JobsContext, 'db' | 'queue' | 'transitions' | 'config' | 'audit'>;

type Outcome = { ok: Accepted } | { error: unknown };

const batchers = new WeakMap<CreateContext, Batcher<NewJobRow, Outcome>>();

/** Most creates in one transaction; larger groups wait for the next. */
const MAX_CREATES = 64;

/**
 * Most create transactions at once. One at a time left the service and PostgreSQL idle while
 * its statements and its commit travelled; more than two made each transaction smaller, and
 * its fixed cost (its statements, its commit) was paid more often for no more throughput: in
 * the `POST` row of bench/perf, two made about 10 % more creates per second than one or three.
 * The creates that arrive meanwhile share the next transaction, as in a group commit.
 */
const CREATES_IN_FLIGHT = 2;

/**
 * Creates a job (writeJobs) in a transaction that the creates arriving with it share: one
 * commit for all of them (the commit waits for the disk, so one per create bounded their rate).
 * A transaction of several that fails with an answer (a rate limit used up, a month's budget
 * spent, a project deleted meanwhile) wrote nothing, and each of its creates runs again alone,
 * so that every answer is its own.
 */
export async function createJobBatched(ctx: CreateContext, job: NewJobRow): Promise<Accepted> {
  let batcher = batchers.get(ctx);
  if (!batcher) {
    batcher = new Batcher((jobs) => createTogether(ctx, jobs), {
      maxItems: MAX_CREATES,
      maxInFlight: CREATES_IN_FLIGHT,
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
  const outcome = await batcher.submit(job);
  if ('error' in outcome) throw outcome.error;
  return outcome.ok;
}

async function createTogether(ctx: CreateContext, jobs: readonly NewJobRow[]): Promise<Outcome[]> {
  try {
    const audited: AuditRecord[] = [];
    const plan = planCreates(ctx, jobs);
    const created = await inTransition(ctx, (scope) => writeJobs(ctx, scope, plan, audited));
    ctx.audit.written(audited);
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
