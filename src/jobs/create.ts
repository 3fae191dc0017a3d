// Creating a job, the API's hot write, from the request to the answer: the input is checked,
// then one transaction takes the project's rate limit and budget and writes the job, its first
// turn, the turn's queue entry, the job's events and its audit row (a 201 means the prompt is
// durable, and who asked for it recorded). The creates that arrive together share their
// transaction, and a few transactions run at once.

import { sql } from 'kysely';
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
import { countUses, RateLimitedError } from '../ratelimit/ratelimit.ts';
import type { AuditRecord } from '../records/audit.ts';
import {
  type Accepted,
  accepted,
  checkMode,
  checkModel,
  type Replayed,
  stored,
  type TurnExtras,
  writeAttachments,
} from './accept.ts';
import { checkImages } from './attachments.ts';
import { checkBestOf } from './best-of.ts';
import type { JobsContext } from './context.ts';
import { JOB_VIEW_COLUMNS, type JobView, toJobRecord } from './record.ts';
import { BudgetExhaustedError, type SpentMonth, spentMonthRefusal, spentMonths } from './spend.ts';
import { inTransition, type TransitionScope } from './transaction.ts';

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

/** A new job as createJob decided it, with its first prompt. */
export interface NewJobRow extends TurnExtras {
  id: string;
  projectId: string;
  repository: string;
  ref: string;
  model: string;
  prompt: string;
  mode: TurnMode;
  mcpServers?: McpServers | undefined;
  bestOf?: BestOf | undefined;
  checkCommand?: string | undefined;
  evalRunId?: string | undefined;
  /** The project's monthly budget as the request found it; null: none. */
  monthlyBudgetUsd: number | null;
  /** The forge issue the job comes from, for jobs made from one. */
  origin?: JobOrigin | undefined;
  /** The forge event that asked for the first turn. */
  trigger?: TurnTrigger | undefined;
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
  const result = await inTransition(ctx, async (scope) => {
    const replayed = await claimKey(scope.trx, idempotency);
    if (replayed) return { replayed };
    // After the claim: a replay answers as the first request did, whatever changed since.
    const [created] = await writeJobs(ctx, scope, [row], audited);
    if (!created) throw new Error('the job was not created');
    await saveResponse(scope.trx, idempotency, stored(201, created.job));
    return created;
  });
  ctx.audit.written(audited);
  return result;
}

/** Who a create without `by` is: no one known, from no request. */
const NO_ONE: Who = { actor: null, address: null, requestId: null };

type CreateContext = Pick<JobsContext, 'db' | 'queue' | 'transitions' | 'config' | 'audit'>;

type Outcome = { ok: Accepted } | { error: unknown };

const batchers = new WeakMap<CreateContext, Batcher<NewJobRow, Outcome>>();

/** Most creates in one transaction; larger groups wait for the next. */
const MAX_CREATES = 64;

/**
 * Most create transactions at once. One at a time left the service and PostgreSQL idle while
 * its statements and its commit travelled; the creates that arrive meanwhile still share the
 * next transaction, as in a group commit.
 */
const CREATES_IN_FLIGHT = 4;

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
    const created = await inTransition(ctx, (scope) => writeJobs(ctx, scope, jobs, audited));
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

/** A row of the create's statement: a job it wrote, or, when it wrote none, only `spent`. */
type WrittenRow = {
  /** The projects whose month's budget is spent; null when none is. */
  spent: SpentMonth[] | null;
  /** The job's project's rate-limit count after this statement; null when unlimited. */
  counted: number | null;
  /** The job's row of the audit log: its number and time (null with no job). */
  audit_seq: string | null;
  audit_at: Date | null;
} & (JobView | { [K in keyof JobView]: null });

/**
 * Writes jobs in the caller's transaction, in three statements whatever their number (and the
 * webhook deliveries the events' hooks write): the turns' queue entries (pg-boss's insert, in
 * the transaction); one statement that reads the projects' spent months, counts the creates
 * against their rate limits and writes the jobs, their first turns and their rows of the audit
 * log, or, when a month is spent or a limit used up, writes none; and the `job.created`
 * events. The audit rows are added to `audited` for the stream once the caller has committed.
 * Throws BudgetExhaustedError or RateLimitedError when it wrote none.
 */
async function writeJobs(
  ctx: Pick<JobsContext, 'queue' | 'config'>,
  scope: TransitionScope,
  jobs: readonly NewJobRow[],
  audited: AuditRecord[],
): Promise<Accepted[]> {
  const { trx } = scope;
  const now = new Date();
  const spent = spentMonths(
    jobs.map((job) => ({ projectId: job.projectId, monthlyBudgetUsd: job.monthlyBudgetUsd })),
    now,
  );
  const perProject = new Map<string, number>();
  for (const job of jobs) perProject.set(job.projectId, (perProject.get(job.projectId) ?? 0) + 1);
  // By project id: two transactions that count the same projects lock their counters in the
  // same order.
  const uses = [...perProject].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const limit = countUses(uses, 'create', {
    limit: ctx.config.rateLimits.create,
    windowSeconds: ctx.config.rateLimits.windowSeconds,
  });
  // The queue entries first, so that each turn row is written once, with its queue id; no
  // worker sees an entry before the transaction commits, nor one of a create refused below.
  const queueIds = await ctx.queue.enqueueAll(
    trx,
    jobs.map((job) => ({ jobId: job.id, seq: 1 })),
  );
  const column = <T>(pick: (job: NewJobRow, i: number) => T) => jobs.map(pick);
  const { rows } = await sql<WrittenRow>`
    WITH spent AS (
      ${spent ?? sql`SELECT NULL::text AS project_id, NULL::double precision AS cost_usd, NULL::double precision AS budget WHERE false`}
    ), counted AS (
      ${limit.statement ?? sql`SELECT NULL::text AS project_id, NULL::integer AS count WHERE false`}
    ), accepted AS (
      SELECT NOT EXISTS (SELECT 1 FROM spent)
        AND (SELECT count(*) FROM counted) = ${limit.projects} AS ok
    ), input AS (
      SELECT i.* FROM unnest(
          ${column((j) => j.id)}::text[], ${column((j) => j.projectId)}::text[],
          ${column((j) => j.repository)}::text[], ${column((j) => j.ref)}::text[],
          ${column((j) => j.model)}::text[],
          ${column((j) => (j.origin ? JSON.stringify(j.origin) : null))}::jsonb[],
          ${column((j) => j.prompt)}::text[], ${column((_, i) => queueIds[i] ?? null)}::text[],
          ${column((j) => (j.trigger ? JSON.stringify(j.trigger) : null))}::jsonb[],
          ${column((j) => (j.by?.actor ? JSON.stringify(j.by.actor) : null))}::jsonb[],
          ${column((j) => j.by?.address ?? null)}::text[],
          ${column((j) => j.by?.requestId ?? null)}::text[], ${column((j) => j.mode)}::text[],
          ${column((j) => (j.mcpServers ? JSON.stringify(j.mcpServers) : null))}::jsonb[],
          ${column((j) => (j.outputSchema ? JSON.stringify(j.outputSchema) : null))}::jsonb[],
          ${column((j) => (j.bestOf ? JSON.stringify(j.bestOf) : null))}::jsonb[],
          ${column((j) => j.checkCommand ?? null)}::text[],
          ${column((j) => j.evalRunId ?? null)}::text[])
        WITH ORDINALITY AS i(id, project_id, repository, ref, model, origin, prompt, queue_id,
          trigger, created_by, address, request_id, mode, mcp_servers, output_schema, best_of,
          check_command, eval_run_id, n)
      WHERE (SELECT ok FROM accepted)
    ), job AS (
      INSERT INTO jobs (id, project_id, status, repository, ref, branch, model, turn_count, origin,
        created_by, mode, mcp_servers, check_command, eval_run_id)
      SELECT id, project_id, 'active', repository, ref, 'errand/' || id, model, 1, origin,
        created_by, mode, mcp_servers, check_command, eval_run_id
      FROM input ORDER BY n
      RETURNING ${sql.join(JOB_VIEW_COLUMNS.map((c) => sql.ref(c)))}
    ), turn AS (
      INSERT INTO turns (job_id, seq, prompt, state, queue_id, trigger, sent_by, mode,
        output_schema, best_of)
      SELECT id, 1, prompt, 'queued', queue_id, trigger, created_by, mode, output_schema, best_of
      FROM input ORDER BY n
    ), audit AS (
      -- Each job's row of the audit log, in this statement: a round trip less per batch.
      INSERT INTO audit_log (actor, address, action, target_kind, target_id, outcome, request_id,
        details)
      SELECT created_by, address, 'job.create', 'job', id, 'success', request_id,
        jsonb_build_object('projectId', project_id, 'model', model)
      FROM input ORDER BY n
      RETURNING seq, at, target_id
    )
    SELECT (SELECT json_agg(spent) FROM spent) AS spent, counted.count AS counted,
      audit.seq AS audit_seq, audit.at AS audit_at, job.*
    FROM (SELECT) AS answer
    LEFT JOIN job ON true
    LEFT JOIN counted ON counted.project_id = job.project_id
    LEFT JOIN audit ON audit.target_id = job.id`.execute(trx);
  const refusedFor = rows[0]?.spent?.[0];
  if (refusedFor) throw spentMonthRefusal(refusedFor, now);
  // RETURNING gives no order: the jobs are matched by id.
  const byId = new Map<
    string,
    { job: JobView; counted: number | null; audit: { seq: string; at: Date } }
  >();
  for (const { spent: _, counted, audit_seq, audit_at, ...job } of rows) {
    if (job.id === null) continue;
    if (audit_seq === null || audit_at === null) throw new Error(`job ${job.id} has no audit row`);
    byId.set(job.id, { job, counted, audit: { seq: audit_seq, at: audit_at } });
  }
  if (byId.size === 0) throw limit.refusal();
  const created = jobs.map((job) => {
    const written = byId.get(job.id);
    if (!written) throw new Error(`job ${job.id} was not written`);
    return written;
  });
  await writeAttachments(
    trx,
    jobs.map((job) => ({ jobId: job.id, seq: 1, attachments: job.attachments })),
  );
  await scope.recordAll(
    created.flatMap(({ job }, i) => [
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
  // The jobs' rows of the audit log, written by the statement above, for the stream once the
  // caller has committed; in the order of their numbers.
  audited.push(
    ...created
      .map(({ job, audit }, i): AuditRecord => {
        const who = jobs[i]?.by ?? NO_ONE;
        return {
          id: String(audit.seq),
          at: audit.at.toISOString(),
          actor: who.actor,
          address: who.address,
          action: 'job.create',
          target: { kind: 'job', id: job.id },
          outcome: 'success',
          errorCode: null,
          requestId: who.requestId,
          details: { projectId: job.project_id, model: job.model },
        };
      })
      .sort((a, b) => Number(BigInt(a.id) - BigInt(b.id))),
  );
  // Each job's own view of the count: its project's count after the statement, less the
  // project's creates that come after it.
  const seen = new Map<string, number>();
  return created.map(({ job, counted }) => {
    const nth = (seen.get(job.project_id) ?? 0) + 1;
    seen.set(job.project_id, nth);
    const count =
      counted === null ? undefined : counted - (perProject.get(job.project_id) ?? 1) + nth;
    return { job, rateLimit: count === undefined ? undefined : limit.stateAt(count) };
  });
}
