// Writing a group of creates (create.ts batches them): what they write is planned before
// their transaction opens (planCreates), then one statement writes the jobs, their first turns,
// their rows of the audit log and their `job.created` events, after the turns' queue entries
// (writeJobs). The record a create answers is made from the row it writes, not read back.

import { type RawBuilder, sql } from 'kysely';
import type { Who } from '../audit/audit.ts';
import { preparedMarker } from '../db/prepared.ts';
import type { BestOf, JobOrigin, McpServers, TurnMode, TurnTrigger } from '../db/schema.ts';
import { countUses } from '../ratelimit/ratelimit.ts';
import type { AuditRecord } from '../records/audit.ts';
import { type Accepted, accepted, type TurnExtras, writeAttachments } from './accept.ts';
import type { JobsContext } from './context.ts';
import { type JobView, toJobRecord } from './record.ts';
import { type SpentMonth, spentMonthRefusal, spentMonths } from './spend.ts';
import { eventsInsert, type TransitionScope } from './transaction.ts';
import type { HookScreen, RecordedEvent, Transition } from './transitions.ts';
import { NO_USAGE } from './usage.ts';

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

/** The create's statement is prepared once per connection (db/prepared.ts). */
const CREATE_MARKER = sql.raw(preparedMarker('create_jobs'));

/** Who a create without `by` is: no one known, from no request. */
const NO_ONE: Who = { actor: null, address: null, requestId: null };

/** A row of the create's statement: a job it wrote, or, when it wrote none, only `spent`. */
interface WrittenRow {
  /** The projects whose month's budget is spent; null when none is. */
  spent: SpentMonth[] | null;
  /** The job's project's rate-limit count after this statement; null when unlimited. */
  counted: number | null;
  /** The job written; null with no job. */
  id: string | null;
  /** The answers to the hooks' conditions (HookScreen). */
  hooks: boolean[];
  /** The job's row of the audit log and its `job.created` event: their numbers and times. */
  audit_seq: string | null;
  audit_at: Date | null;
  event_seq: string | null;
  event_at: Date | null;
}

/**
 * A new job's row as its create writes it: the statement writes these values, and the record
 * the create answers and its `job.created` event carry are made from it without reading the
 * row back. Its times are this process's clock at the create (the statement writes them).
 */
function newJobView(job: NewJobRow, now: Date): JobView {
  return {
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
    usage: NO_USAGE,
    origin: job.origin ?? null,
    created_by: job.by?.actor ?? null,
    pr: null,
    mode: job.mode,
    summary: null,
    awaiting_approval: false,
    output: null,
    attempts: null,
    eval_run_id: job.evalRunId ?? null,
    created_at: now,
    updated_at: now,
    archived_at: null,
  };
}

/**
 * What a group of creates writes, made before their transaction opens: the transaction then
 * holds its connection only while it writes (the jobs' rows, records and events, their budget
 * and rate-limit checks, all computed here), not while this process works between statements.
 */
export interface PlannedCreates {
  now: Date;
  jobs: readonly NewJobRow[];
  /** Each job's row as the statement writes it, and its `job.created` event. */
  fresh: readonly {
    job: NewJobRow;
    view: JobView;
    created: Transition & { type: 'job.created' };
  }[];
  spent: RawBuilder<unknown> | undefined;
  limit: ReturnType<typeof countUses>;
  /** How many of the creates are each project's. */
  perProject: ReadonlyMap<string, number>;
  /** Writes the `job.created` events, in the create's statement. */
  events: RawBuilder<unknown>;
  /** The conditions of the events' hooks, which the create's statement answers. */
  hooks: HookScreen;
}

export function planCreates(
  ctx: Pick<JobsContext, 'config' | 'transitions'>,
  jobs: readonly NewJobRow[],
): PlannedCreates {
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
  const fresh = jobs.map((job) => {
    const view = newJobView(job, now);
    const created = {
      type: 'job.created',
      jobId: view.id,
      turn: null,
      status: 'active',
      data: { job: toJobRecord(view) },
    } satisfies Transition;
    return { job, view, created };
  });
  const events = eventsInsert(
    fresh.map(({ created }) => created),
    sql<boolean>`(SELECT ok FROM accepted)`,
  );
  const hooks = ctx.transitions.screen([...perProject.keys()]);
  return { now, jobs, fresh, spent, limit, perProject, events, hooks };
}

/**
 * Writes planned creates in the caller's transaction, in two statements whatever their number
 * (and the webhook deliveries the events' hooks write): the turns' queue entries (pg-boss's
 * insert, in the transaction); then one statement that reads the projects' spent months,
 * counts the creates against their rate limits and writes the jobs, their first turns, their
 * rows of the audit log and their `job.created` events, or, when a month is spent or a limit
 * used up, writes none. The audit rows are added to `audited` for the stream once the caller
 * has committed. Throws BudgetExhaustedError or RateLimitedError when it wrote none.
 */
export async function writeJobs(
  ctx: Pick<JobsContext, 'queue'>,
  scope: TransitionScope,
  plan: PlannedCreates,
  audited: AuditRecord[],
): Promise<Accepted[]> {
  const { trx } = scope;
  const { jobs, now, limit } = plan;
  // The queue entries first, so that each turn row is written once, with its queue id; no
  // worker sees an entry before the transaction commits, nor one of a create refused below.
  const queueIds = await ctx.queue.enqueueAll(
    trx,
    jobs.map((job) => ({ jobId: job.id, seq: 1 })),
  );
  const { rows } = await createStatement(plan, queueIds).execute(trx);
  const refusedFor = rows[0]?.spent?.[0];
  if (refusedFor) throw spentMonthRefusal(refusedFor, now);
  // RETURNING gives no order: the jobs are matched by id.
  const byId = new Map<string, WrittenRow>();
  for (const row of rows) if (row.id !== null) byId.set(row.id, row);
  if (byId.size === 0) throw limit.refusal();
  const written = plan.fresh.map(({ job, view, created }) => {
    const { counted, audit_seq, audit_at, event_seq, event_at } = byId.get(job.id) ?? {};
    if (counted === undefined || !audit_seq || !audit_at || !event_seq || !event_at)
      throw new Error(`job ${job.id} was not written with its audit row and event`);
    const event: RecordedEvent = { ...created, seq: event_seq, at: event_at };
    return { job, view, created, event, counted, audit: { seq: audit_seq, at: audit_at } };
  });
  await writeAttachments(
    trx,
    jobs.map((job) => ({ jobId: job.id, seq: 1, attachments: job.attachments })),
  );
  await scope.recordWritten(
    written.flatMap(({ job, created }) => [
      created,
      accepted({ jobId: job.id, seq: 1, trigger: job.trigger }),
    ]),
    written.map(({ event }) => event),
    plan.hooks.passed(rows[0]?.hooks ?? null),
  );
  // The jobs' rows of the audit log, written by the statement above, for the stream once the
  // caller has committed; in the order of their numbers.
  audited.push(
    ...written
      .map(({ job, audit }): AuditRecord => {
        const who = job.by ?? NO_ONE;
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
          details: { projectId: job.projectId, model: job.model },
        };
      })
      .sort((a, b) => Number(BigInt(a.id) - BigInt(b.id))),
  );
  // Each job's own view of the count: its project's count after the statement, less the
  // project's creates that come after it.
  const seen = new Map<string, number>();
  return written.map(({ view, counted }) => {
    const nth = (seen.get(view.project_id) ?? 0) + 1;
    seen.set(view.project_id, nth);
    const count =
      counted === null ? undefined : counted - (plan.perProject.get(view.project_id) ?? 1) + nth;
    return { job: view, rateLimit: count === undefined ? undefined : limit.stateAt(count) };
  });
}

/** The create's one statement (writeJobs), prepared once per connection (db/prepared.ts). */
function createStatement(
  plan: PlannedCreates,
  queueIds: readonly string[],
): RawBuilder<WrittenRow> {
  const { jobs, spent, limit, now } = plan;
  return sql<WrittenRow>`${CREATE_MARKER}
    WITH spent AS (
      ${spent ?? sql`SELECT NULL::text AS project_id, NULL::double precision AS cost_usd, NULL::double precision AS budget WHERE false`}
    ), counted AS (
      ${limit.statement ?? sql`SELECT NULL::text AS project_id, NULL::integer AS count WHERE false`}
    ), accepted AS (
      SELECT NOT EXISTS (SELECT 1 FROM spent)
        AND (SELECT count(*) FROM counted) = ${limit.projects} AS ok
    ), input AS (
      SELECT i.* FROM jsonb_to_recordset(${JSON.stringify(
        jobs.map((j, i) => ({
          n: i,
          id: j.id,
          project_id: j.projectId,
          repository: j.repository,
          ref: j.ref,
          model: j.model,
          origin: j.origin,
          prompt: j.prompt,
          queue_id: queueIds[i],
          trigger: j.trigger,
          created_by: j.by?.actor,
          address: j.by?.address,
          request_id: j.by?.requestId,
          mode: j.mode,
          mcp_servers: j.mcpServers,
          output_schema: j.outputSchema,
          best_of: j.bestOf,
          check_command: j.checkCommand,
          eval_run_id: j.evalRunId,
        })),
      )}::jsonb) AS i(n integer, id text, project_id text, repository text, ref text, model text,
        origin jsonb, prompt text, queue_id text, trigger jsonb, created_by jsonb, address text,
        request_id text, mode text, mcp_servers jsonb, output_schema jsonb, best_of jsonb,
        check_command text, eval_run_id text)
      WHERE (SELECT ok FROM accepted)
    ), job AS (
      INSERT INTO jobs (id, project_id, status, repository, ref, branch, model, turn_count, usage,
        origin, created_by, mode, mcp_servers, check_command, eval_run_id, created_at, updated_at)
      SELECT id, project_id, 'active', repository, ref, 'errand/' || id, model, 1,
        ${JSON.stringify(NO_USAGE)}::jsonb, origin, created_by, mode, mcp_servers, check_command,
        eval_run_id, ${now}::timestamptz, ${now}::timestamptz
      FROM input ORDER BY n
      RETURNING id, project_id
    ), turn AS (
      INSERT INTO turns (job_id, seq, prompt, state, queue_id, trigger, sent_by, mode,
        output_schema, best_of)
      SELECT id, 1, prompt, 'queued', queue_id, trigger, created_by, mode, output_schema, best_of
      FROM input ORDER BY n
    ), audit AS (
      INSERT INTO audit_log (actor, address, action, target_kind, target_id, outcome, request_id,
        details)
      SELECT created_by, address, 'job.create', 'job', id, 'success', request_id,
        jsonb_build_object('projectId', project_id, 'model', model)
      FROM input ORDER BY n
      RETURNING seq, at, target_id
    ), event AS (${plan.events})
    SELECT (SELECT json_agg(spent) FROM spent) AS spent, counted.count AS counted, job.id,
      ${plan.hooks.conditions} AS hooks,
      audit.seq AS audit_seq, audit.at AS audit_at, event.seq AS event_seq, event.at AS event_at
    FROM (SELECT) AS answer
    LEFT JOIN job ON true
    LEFT JOIN counted ON counted.project_id = job.project_id
    LEFT JOIN audit ON audit.target_id = job.id
    LEFT JOIN event ON event.job_id = job.id`;
}
