// Reads of jobs for the pages that show them to people (the dashboard, the review page): the
// counts per project, the prompts and turns of a job, its review diff. Reads only: every write
// to these tables is the lifecycle's and the job service's.
import type { TurnRow } from '../db/schema.ts';
import { isId } from '../ids.ts';
import type { JobsContext } from './context.ts';
import { JOB_VIEW_COLUMNS, type JobView } from './record.ts';

type Reader = Pick<JobsContext, 'db'>;

/**
 * How many jobs each of these projects has, and how many of them are active: its own work, not
 * the jobs of eval runs.
 */
export async function jobCounts(
  ctx: Reader,
  projectIds: readonly string[],
): Promise<Map<string, { active: number; total: number }>> {
  if (projectIds.length === 0) return new Map();
  const rows = await ctx.db
    .selectFrom('jobs')
    .select((eb) => [
      'project_id',
      eb.fn.countAll<string>().as('total'),
      eb.fn.countAll<string>().filterWhere('status', '=', 'active').as('active'),
    ])
    .where('project_id', 'in', projectIds)
    .where('eval_run_id', 'is', null)
    .groupBy('project_id')
    .execute();
  return new Map(
    rows.map((row) => [row.project_id, { active: Number(row.active), total: Number(row.total) }]),
  );
}

/** The first prompt of each of these jobs: what a list shows of a job. */
export async function firstPrompts(
  ctx: Reader,
  jobIds: readonly string[],
): Promise<Map<string, string>> {
  if (jobIds.length === 0) return new Map();
  const rows = await ctx.db
    .selectFrom('turns')
    .select(['job_id', 'prompt'])
    .where('job_id', 'in', jobIds)
    .where('seq', '=', 1)
    .execute();
  return new Map(rows.map((turn) => [turn.job_id, turn.prompt]));
}

/** A turn as a page shows it: the prompt, what came of it, and when. */
export type TurnSummary = Pick<
  TurnRow,
  | 'seq'
  | 'state'
  | 'prompt'
  | 'summary'
  | 'error'
  | 'usage'
  | 'created_at'
  | 'started_at'
  | 'finished_at'
  | 'sent_by'
  | 'mode'
  | 'output_schema'
  | 'output'
>;

/** The turns of a job, in order. */
export async function listTurns(ctx: Reader, jobId: string): Promise<TurnSummary[]> {
  return ctx.db
    .selectFrom('turns')
    .select([
      'seq',
      'state',
      'prompt',
      'summary',
      'error',
      'usage',
      'created_at',
      'started_at',
      'finished_at',
      'sent_by',
      'mode',
      'output_schema',
      'output',
    ])
    .where('job_id', '=', jobId)
    .orderBy('seq')
    .execute();
}

/** The diff of the job's work branch as its last push left it; undefined before one. */
export async function getReviewDiff(
  ctx: Reader,
  jobId: string,
): Promise<{ diff: string; truncated: boolean } | undefined> {
  const row = await ctx.db
    .selectFrom('jobs')
    .select(['review_diff', 'review_diff_truncated'])
    .where('id', '=', jobId)
    .executeTakeFirst();
  return row?.review_diff
    ? { diff: row.review_diff, truncated: row.review_diff_truncated }
    : undefined;
}

/**
 * A job of any project, by its id alone, with the token of its review link: for the review page,
 * which checks the token or the reader's session. Undefined for an unknown or malformed id.
 */
export async function findReviewJob(
  ctx: Reader,
  jobId: string,
): Promise<(JobView & { review_token: string }) | undefined> {
  if (!isId('job', jobId)) return undefined;
  return ctx.db
    .selectFrom('jobs')
    .select([...JOB_VIEW_COLUMNS, 'review_token'])
    .where('id', '=', jobId)
    .executeTakeFirst();
}
