// A job row as the API returns it: the record's schema and type are src/records/job.ts's; this
// maps a row onto it, every field always present, null where there is no value.
import type { JobRow } from '../db/schema.ts';
import type { JobRecord } from '../records/job.ts';
import { repositoryAsUrl } from '../repository/url.ts';
import { NO_USAGE, readUsage } from './usage.ts';

/**
 * A job row without the review diff, which can be megabytes and no record shows, without its
 * review token, which only the review link and the review page's check read, and without its
 * MCP servers, whose headers and environment no reader of the job may see, and without the check
 * command its create gave, which only its turns read.
 */
export type JobView = Omit<
  JobRow,
  'review_diff' | 'review_diff_truncated' | 'review_token' | 'mcp_servers' | 'check_command'
>;

export const JOB_VIEW_COLUMNS = [
  'id',
  'project_id',
  'status',
  'repository',
  'ref',
  'branch',
  'model',
  'pr_link',
  'pr_number',
  'error',
  'turn_count',
  'usage',
  'origin',
  'created_by',
  'pr',
  'mode',
  'summary',
  'awaiting_approval',
  'output',
  'attempts',
  'eval_run_id',
  'created_at',
  'updated_at',
  'archived_at',
] as const satisfies readonly (keyof JobView)[];

export function toJobRecord(row: JobView): JobRecord {
  return {
    id: row.id,
    status: row.status,
    source: { repository: repositoryAsUrl(row.repository), ref: row.branch, baseRef: row.ref },
    model: row.model,
    prLink: row.pr_link,
    createdAt: row.created_at.toISOString(),
    archivedAt: row.archived_at ? row.archived_at.toISOString() : null,
    projectId: row.project_id,
    branch: row.branch,
    error: row.error,
    turns: row.turn_count,
    usage: readUsage(row.usage) ?? NO_USAGE,
    origin: row.origin ?? null,
    createdBy: row.created_by ?? null,
    updatedAt: row.updated_at.toISOString(),
    pr: row.pr ?? null,
    mode: row.mode,
    summary: row.summary,
    awaitingApproval: row.awaiting_approval,
    output: row.output ?? null,
    attempts: row.attempts ?? null,
    evalRunId: row.eval_run_id,
  };
}
