// The job record as the API returns it: every field of the seed interface, always present,
// null where there is no value, dates in ISO 8601 UTC; Errand's own fields after them.
import type { JobOrigin, JobRow, JobStatus } from '../db/schema.ts';
import { repositoryAsUrl } from '../repository/url.ts';
import { NO_USAGE, readUsage, type Usage } from './usage.ts';

export interface JobRecord {
  id: string;
  status: JobStatus;
  /**
   * The published interface's source: `ref` is the branch the agent works on (the job's work
   * branch); `baseRef`, Errand's own, the ref the job started from.
   */
  source: { repository: string; ref: string; baseRef: string };
  model: string;
  prLink: string | null;
  createdAt: string;
  archivedAt: string | null;
  projectId: string;
  branch: string;
  error: string | null;
  turns: number;
  /**
   * What the job's turns used of the model, summed: tokens by kind and the estimated cost at
   * list prices (null when a price of the model is unknown).
   */
  usage: Usage;
  /** The forge issue the job was made from (`{ forge, number, url, title }`); null otherwise. */
  origin: JobOrigin | null;
  updatedAt: string;
}

/**
 * A job row without the review diff, which can be megabytes and no record shows, and without its
 * review token, which only the review link and the review page's check read.
 */
export type JobView = Omit<JobRow, 'review_diff' | 'review_diff_truncated' | 'review_token'>;

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
    updatedAt: row.updated_at.toISOString(),
  };
}
