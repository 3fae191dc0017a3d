// What jobs and projects have spent on models, and the budgets that bound it. The lifecycle adds
// each turn attempt's usage to its turn, its job's row and its project's month (UTC) in the
// transition's own transaction; creates and follow-ups read the month's row to refuse work on a
// project whose monthly budget is spent; the turn pipeline asks what a job's budget has left.
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { formatUsd } from '../words.ts';
import { NO_USAGE, readUsage, roundUsd, type TokenUsage, type Usage } from './usage.ts';

/** A create or follow-up refused because the budget it would spend from is spent. */
export class BudgetExhaustedError extends AppError {
  /** Seconds until the budget starts again (the next month), when it does by itself. */
  readonly retryAfterSeconds: number | undefined;
  constructor(message: string, retryAfterSeconds?: number) {
    super('budget_exhausted', message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** The first instant of the calendar month (UTC) `now` falls in, and of the next one. */
export function monthOf(now: Date): { start: Date; end: Date } {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const end = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
  return { start, end };
}

/** `2026-11`: a month as the messages and pages name it. */
function monthName(start: Date): string {
  return start.toISOString().slice(0, 7);
}

/** Whether a usage used anything: one with no tokens at all is not recorded. */
export function usedAnything(usage: TokenUsage): boolean {
  return (
    usage.inputTokens + usage.outputTokens + usage.cacheReadTokens + usage.cacheWriteTokens > 0
  );
}

/**
 * The stored usage in `column` (jsonb; null counts as nothing used) plus `usage`, as an SQL
 * expression for an UPDATE's SET. A stored cost that is unknown, or an unknown one added,
 * leaves the sum's cost unknown.
 */
export function usagePlus(column: 'usage', usage: Usage): RawBuilder<string> {
  const base = sql`COALESCE(${sql.ref(column)}, ${JSON.stringify(NO_USAGE)}::jsonb)`;
  const count = (key: keyof TokenUsage) =>
    sql`COALESCE((${base}->>${key})::bigint, 0) + ${usage[key]}::bigint`;
  return sql<string>`jsonb_build_object(
    'inputTokens', ${count('inputTokens')},
    'outputTokens', ${count('outputTokens')},
    'cacheReadTokens', ${count('cacheReadTokens')},
    'cacheWriteTokens', ${count('cacheWriteTokens')},
    'costUsd', (${base}->>'costUsd')::double precision + ${usage.costUsd}::double precision)`;
}

/**
 * Adds a turn attempt's usage to its job's project's month, in the caller's transaction (which
 * has locked the job). The month is the one of the transaction's time, in UTC.
 */
export async function addToMonth(
  trx: Transaction<Database>,
  jobId: string,
  usage: Usage,
): Promise<void> {
  await sql`
    INSERT INTO project_spend AS s (project_id, month, input_tokens, output_tokens,
      cache_read_tokens, cache_write_tokens, cost_usd, unpriced)
    SELECT project_id, date_trunc('month', now() AT TIME ZONE 'UTC')::date,
      ${usage.inputTokens}, ${usage.outputTokens}, ${usage.cacheReadTokens},
      ${usage.cacheWriteTokens}, ${usage.costUsd ?? 0}, ${usage.costUsd === null ? 1 : 0}
    FROM jobs WHERE id = ${jobId}
    ON CONFLICT (project_id, month) DO UPDATE SET
      input_tokens = s.input_tokens + EXCLUDED.input_tokens,
      output_tokens = s.output_tokens + EXCLUDED.output_tokens,
      cache_read_tokens = s.cache_read_tokens + EXCLUDED.cache_read_tokens,
      cache_write_tokens = s.cache_write_tokens + EXCLUDED.cache_write_tokens,
      cost_usd = s.cost_usd + EXCLUDED.cost_usd,
      unpriced = s.unpriced + EXCLUDED.unpriced`.execute(trx);
}

/** A project's usage in one calendar month (UTC). */
export interface MonthUsage {
  /** `2026-11`. */
  month: string;
  usage: Usage;
  /** The known part of the cost: usage whose price was unknown adds only its tokens. */
  costUsd: number;
  /** How many turn attempts' usage had no known price. */
  unpriced: number;
}

/** What each of these projects used in the month of `now` (UTC); nothing used is zeros. */
export async function monthUsage(
  ctx: { db: Db },
  projectIds: readonly string[],
  now: Date = new Date(),
): Promise<Map<string, MonthUsage>> {
  const { start } = monthOf(now);
  const month = monthName(start);
  const rows =
    projectIds.length === 0
      ? []
      : await ctx.db
          .selectFrom('project_spend')
          .select([
            'project_id',
            'input_tokens',
            'output_tokens',
            'cache_read_tokens',
            'cache_write_tokens',
            'cost_usd',
            'unpriced',
          ])
          .where('project_id', 'in', projectIds)
          .where('month', '=', sql<Date>`${start.toISOString().slice(0, 10)}::date`)
          .execute();
  const found = new Map(rows.map((row) => [row.project_id, row]));
  return new Map(
    projectIds.map((id) => {
      const row = found.get(id);
      const costUsd = roundUsd(row?.cost_usd ?? 0);
      const unpriced = row?.unpriced ?? 0;
      return [
        id,
        {
          month,
          usage: {
            inputTokens: Number(row?.input_tokens ?? 0),
            outputTokens: Number(row?.output_tokens ?? 0),
            cacheReadTokens: Number(row?.cache_read_tokens ?? 0),
            cacheWriteTokens: Number(row?.cache_write_tokens ?? 0),
            costUsd: unpriced > 0 ? null : costUsd,
          },
          costUsd,
          unpriced,
        },
      ];
    }),
  );
}

/** A project whose new work is to be held to its monthly budget. */
export interface BudgetedProject {
  projectId: string;
  monthlyBudgetUsd: number | null;
}

/** A project whose monthly budget is spent, as spentMonths finds it. */
export interface SpentMonth {
  project_id: string;
  cost_usd: number;
  budget: number;
}

/**
 * The projects among these that have spent their monthly budget this month (UTC), as a query
 * the caller runs in its transaction, alone (refuseSpentMonths) or in a WITH clause of its own
 * statement (a job's create). Undefined when none of them has a monthly budget: nothing to read.
 */
export function spentMonths(
  projects: readonly BudgetedProject[],
  now: Date = new Date(),
): RawBuilder<SpentMonth> | undefined {
  const budgets = new Map<string, number>();
  for (const p of projects)
    if (p.monthlyBudgetUsd !== null) budgets.set(p.projectId, p.monthlyBudgetUsd);
  if (budgets.size === 0) return undefined;
  const { start } = monthOf(now);
  return sql<SpentMonth>`
    SELECT s.project_id, s.cost_usd, b.budget
    FROM project_spend s
    JOIN unnest(${[...budgets.keys()]}::text[], ${[...budgets.values()]}::double precision[])
      AS b(project_id, budget) ON b.project_id = s.project_id
    WHERE s.month = ${start.toISOString().slice(0, 10)}::date AND s.cost_usd >= b.budget`;
}

/** The refusal of new work on a project whose month spentMonths found spent. */
export function spentMonthRefusal(spent: SpentMonth, now: Date = new Date()): BudgetExhaustedError {
  const { start, end } = monthOf(now);
  const seconds = Math.max(1, Math.ceil((end.getTime() - now.getTime()) / 1000));
  return new BudgetExhaustedError(
    `project ${spent.project_id} has spent ${formatUsd(spent.cost_usd)} of its monthly budget of ${formatUsd(spent.budget)} (monthlyBudgetUsd) in ${monthName(start)} (UTC): no new jobs or follow-ups until the month ends or the budget is raised`,
    seconds,
  );
}

/**
 * Refuses, with BudgetExhaustedError, when one of these projects has spent its monthly budget
 * this month (UTC). Read in the caller's transaction, which then writes nothing. Projects
 * without a monthly budget cost no query.
 */
export async function refuseSpentMonths(
  trx: Transaction<Database>,
  projects: readonly BudgetedProject[],
  now: Date = new Date(),
): Promise<void> {
  const query = spentMonths(projects, now);
  if (!query) return;
  const [spent] = (await query.execute(trx)).rows;
  if (spent) throw spentMonthRefusal(spent, now);
}

/**
 * Refuses a follow-up to a job that has spent its project's job budget: its next turn would
 * stop before its first step.
 */
export function refuseSpentJob(
  jobId: string,
  jobUsage: unknown,
  jobBudgetUsd: number | null,
): void {
  if (jobBudgetUsd === null) return;
  const spent = readUsage(jobUsage)?.costUsd ?? 0;
  if (spent < jobBudgetUsd) return;
  throw new BudgetExhaustedError(
    `job ${jobId} has spent ${formatUsd(spent)} of its budget of ${formatUsd(jobBudgetUsd)} (the project's jobBudgetUsd): raise the budget to continue it`,
  );
}

/**
 * The job budget a turn of `job` may spend from: the project's jobBudgetUsd and what the job's
 * turns have spent so far (its earlier attempts of this turn included). Undefined when the
 * project has no job budget. The turn pipeline asks at the start of each turn and stops the
 * turn once the turn's own cost reaches `limitUsd - spentUsd`.
 */
export async function jobBudgetLeft(
  ctx: { db: Db },
  job: { id: string },
): Promise<{ limitUsd: number; spentUsd: number } | undefined> {
  const row = await ctx.db
    .selectFrom('jobs')
    .innerJoin('projects', 'projects.id', 'jobs.project_id')
    .select(['projects.job_budget_usd', 'jobs.usage'])
    .where('jobs.id', '=', job.id)
    .executeTakeFirst();
  if (!row || row.job_budget_usd === null) return undefined;
  return { limitUsd: row.job_budget_usd, spentUsd: readUsage(row.usage)?.costUsd ?? 0 };
}

/**
 * The monthly budget a turn of `job` may spend from: its project's monthlyBudgetUsd and what the
 * project has spent this month (UTC) so far. Undefined when the project has none. An engine's
 * turn asks at its start and stops once its own cost reaches `limitUsd - spentUsd`.
 */
export async function monthBudgetLeft(
  ctx: { db: Db },
  job: { id: string },
  now: Date = new Date(),
): Promise<{ limitUsd: number; spentUsd: number } | undefined> {
  const row = await ctx.db
    .selectFrom('jobs')
    .innerJoin('projects', 'projects.id', 'jobs.project_id')
    .select(['projects.id', 'projects.monthly_budget_usd'])
    .where('jobs.id', '=', job.id)
    .executeTakeFirst();
  if (!row || row.monthly_budget_usd === null) return undefined;
  const month = (await monthUsage(ctx, [row.id], now)).get(row.id);
  return { limitUsd: row.monthly_budget_usd, spentUsd: month?.costUsd ?? 0 };
}

/**
 * Sums every job's usage and every project's months again from their turns, in the caller's
 * transaction: after an import, whose files may come from an Errand that did not keep them.
 * A turn's month is the one it ended in.
 */
export async function rebuildSpend(trx: Transaction<Database>): Promise<void> {
  await sql`
    UPDATE jobs j SET usage = COALESCE(s.usage, ${JSON.stringify(NO_USAGE)}::jsonb)
    FROM jobs k LEFT JOIN (
      SELECT job_id, jsonb_build_object(
          'inputTokens', sum(COALESCE((usage->>'inputTokens')::bigint, 0)),
          'outputTokens', sum(COALESCE((usage->>'outputTokens')::bigint, 0)),
          'cacheReadTokens', sum(COALESCE((usage->>'cacheReadTokens')::bigint, 0)),
          'cacheWriteTokens', sum(COALESCE((usage->>'cacheWriteTokens')::bigint, 0)),
          'costUsd', CASE WHEN bool_and(jsonb_typeof(usage->'costUsd') = 'number')
            THEN sum((usage->>'costUsd')::double precision) END) AS usage
      FROM turns WHERE jsonb_typeof(usage) = 'object' GROUP BY job_id
    ) s ON s.job_id = k.id
    WHERE j.id = k.id`.execute(trx);
  await sql`DELETE FROM project_spend`.execute(trx);
  await sql`
    INSERT INTO project_spend (project_id, month, input_tokens, output_tokens,
        cache_read_tokens, cache_write_tokens, cost_usd, unpriced)
    SELECT j.project_id,
      date_trunc('month', COALESCE(t.finished_at, t.started_at, t.created_at) AT TIME ZONE 'UTC')::date,
      sum(COALESCE((t.usage->>'inputTokens')::bigint, 0)),
      sum(COALESCE((t.usage->>'outputTokens')::bigint, 0)),
      sum(COALESCE((t.usage->>'cacheReadTokens')::bigint, 0)),
      sum(COALESCE((t.usage->>'cacheWriteTokens')::bigint, 0)),
      COALESCE(sum((t.usage->>'costUsd')::double precision), 0),
      count(*) FILTER (WHERE jsonb_typeof(t.usage->'costUsd') IS DISTINCT FROM 'number')
    FROM turns t JOIN jobs j ON j.id = t.job_id
    WHERE jsonb_typeof(t.usage) = 'object'
    GROUP BY 1, 2`.execute(trx);
}
