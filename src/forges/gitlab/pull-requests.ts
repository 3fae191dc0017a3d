// What the pull request watch (src/features/pr-watch/) asks GitLab about a job's merge request:
// its state, head, conflicts, labels and approval rules; the checks of a commit (the jobs of its
// latest pipeline, and the commit statuses other systems post); a job's trace; and the merge,
// through GitLab's own merge API so that protected branches and merge checks stay GitLab's.

import { z } from 'zod';
import { createForgeHttp, errorDetail, type ForgeHttp, type ForgeHttpOptions } from '../http.ts';
import { streamTail, textTail } from '../log-tail.ts';
import type {
  CheckResult,
  CheckState,
  ForgeClient,
  MergeMethod,
  MergeOutcome,
  PullRequestStatus,
} from '../types.ts';
import { plainTrace } from './trace.ts';

type WatchMethods = Pick<
  ForgeClient,
  'pullRequestStatus' | 'checks' | 'checkLog' | 'mergePullRequest'
>;

// GitLab's largest page; a pipeline rarely has more jobs, a commit more statuses.
const PER_PAGE = 100;
// Ten pages: a thousand jobs. Past that the list is cut rather than the forge asked forever.
const MAX_PAGES = 10;
/** What `checks` names an external commit status by in a CheckResult's id. */
const STATUS_PREFIX = 'status:';

const labelSchema = z.union([z.string(), z.object({ name: z.string() })]);
const mergeRequestSchema = z.object({
  iid: z.number().int().positive(),
  web_url: z.url({ protocol: /^https?$/ }),
  state: z.string(),
  merged_at: z.string().nullable().optional(),
  // The source branch's head; null only for a merge request whose diff GitLab has not made yet.
  sha: z.string().nullable().optional(),
  target_branch: z.string(),
  labels: z.array(labelSchema).optional(),
  // `draft` since GitLab 13.x; `work_in_progress` before.
  draft: z.boolean().optional(),
  work_in_progress: z.boolean().optional(),
  // GitLab 15.6 and later; `merge_status` before (deprecated since).
  detailed_merge_status: z.string().optional(),
  merge_status: z.string().optional(),
  has_conflicts: z.boolean().optional(),
  // Why the last merge GitLab tried failed, when it did.
  merge_error: z.string().nullable().optional(),
  merge_commit_sha: z.string().nullable().optional(),
  squash_commit_sha: z.string().nullable().optional(),
});
type GitLabMergeRequest = z.infer<typeof mergeRequestSchema>;
const approvalsSchema = z.object({
  approved: z.boolean().optional(),
  approvals_left: z.number().int().optional(),
});
const pipelineListSchema = z.array(
  z.object({
    id: z.number().int(),
    status: z.string(),
    // `external`: the pipeline GitLab makes to hold commit statuses posted through the API.
    source: z.string().optional(),
  }),
);
const jobListSchema = z.array(
  z.object({
    id: z.number().int(),
    name: z.string(),
    status: z.string(),
    allow_failure: z.boolean().optional(),
    web_url: z.string().nullable().optional(),
    failure_reason: z.string().nullable().optional(),
  }),
);
const commitStatusListSchema = z.array(
  z.object({
    id: z.number().int(),
    name: z.string(),
    status: z.string(),
    allow_failure: z.boolean().optional(),
    target_url: z.string().nullable().optional(),
    description: z.string().nullable().optional(),
    pipeline_id: z.number().int().nullable().optional(),
  }),
);
const traceSchema = z.object({ trace: z.string() });
/** A merge GitLab refused, as `refusalsAsAnswers` hands it to the schema. */
const refusalSchema = z.object({ refusal: z.number().int(), detail: z.string() });

// Still working out whether the source merges into the target: ask again later.
const MERGEABILITY_PENDING = new Set([
  'unchecked',
  'checking',
  'preparing',
  'cannot_be_merged_recheck',
  'cannot_be_merged_rechecking',
]);
// `need_rebase`: a fast-forward project's branch that is behind its target.
const NOT_MERGEABLE = new Set(['conflict', 'need_rebase', 'cannot_be_merged']);
/**
 * How GitLab's merge API says no: 401 the user may not merge into the target branch, 405 a
 * merge check fails (draft, closed, pipeline, approvals, discussions), 406 (422 since GitLab
 * 16) the branch cannot be merged, 409 the head is not the `sha` given.
 */
const REFUSALS = new Set([401, 405, 406, 409, 422]);
const REFUSAL_REASONS: Record<number, string> = {
  401: "the token's user may not merge into the target branch (its protection's Allowed to merge)",
  405: 'a merge check fails (a draft, a closed merge request, a pipeline that must succeed, approvals or discussions)',
  406: 'the branch cannot be merged into the target branch (a conflict)',
  409: 'its head moved since it was read',
  422: 'the branch cannot be merged into the target branch',
};

/**
 * The watch's four methods for the project at `project` (its API path). Each call makes its
 * own request helper from `httpOptions` where it needs to read an answer differently.
 */
export function gitlabPullRequestWatch(
  httpOptions: ForgeHttpOptions,
  project: string,
  projectPath: string,
): WatchMethods {
  const http = createForgeHttp(httpOptions);
  const notFound = (iid: number) =>
    `GitLab merge request !${iid} not found in ${projectPath} (404): it was deleted, or the token cannot see the project.`;

  async function pullRequestStatus(
    number: number,
    signal?: AbortSignal,
  ): Promise<PullRequestStatus> {
    const path = `${project}/merge_requests/${number}`;
    const [mr, approvals] = await Promise.all([
      http.request({
        method: 'GET',
        path,
        schema: mergeRequestSchema,
        action: `read merge request !${number}`,
        notFound: notFound(number),
        signal,
      }),
      http.request({
        method: 'GET',
        path: `${path}/approvals`,
        schema: approvalsSchema,
        action: `read the approvals of merge request !${number}`,
        notFound: notFound(number),
        signal,
      }),
    ]);
    const data = mr.data;
    return {
      number: data.iid,
      url: data.web_url,
      state: toState(data.state),
      mergedAt: data.merged_at ?? null,
      headSha: data.sha ?? '',
      base: data.target_branch,
      mergeable: mergeable(data),
      labels: (data.labels ?? []).map((label) => (typeof label === 'string' ? label : label.name)),
      draft: data.draft ?? data.work_in_progress ?? false,
      // GitLab Free: any approval; Premium and up: every approval rule met.
      approved: approvals.data.approved ?? approvals.data.approvals_left === 0,
    };
  }

  async function checks(sha: string, signal?: AbortSignal): Promise<CheckResult[]> {
    return commitChecks(http, project, sha, signal);
  }

  async function checkLog(
    check: CheckResult,
    maxBytes: number,
    signal?: AbortSignal,
  ): Promise<string> {
    // A status other systems post has no log on GitLab: what it said, and where to look.
    if (!/^\d+$/.test(check.id)) {
      return textTail([check.summary, check.url].filter(Boolean).join('\n'), maxBytes);
    }
    const traceHttp = createForgeHttp({
      ...httpOptions,
      fetch: tailingFetch(httpOptions.fetch, maxBytes),
    });
    const { data } = await traceHttp.request({
      method: 'GET',
      path: `${project}/jobs/${check.id}/trace`,
      schema: traceSchema,
      action: `read the log of job ${check.id}`,
      notFound: `GitLab job ${check.id} not found in ${projectPath} (404): it was deleted, or the token cannot see the project's jobs.`,
      signal,
    });
    return data.trace;
  }

  async function mergePullRequest(
    number: number,
    options: { method: MergeMethod; sha: string },
    signal?: AbortSignal,
  ): Promise<MergeOutcome> {
    const mergeHttp = createForgeHttp({
      ...httpOptions,
      fetch: refusalsAsAnswers(httpOptions.fetch),
    });
    const { data } = await mergeHttp.request({
      method: 'PUT',
      path: `${project}/merge_requests/${number}/merge`,
      // How GitLab merges (a merge commit, semi-linear, fast-forward) is the project's own
      // setting; the API chooses only whether to squash.
      body: { sha: options.sha, squash: options.method === 'squash' },
      schema: z.union([refusalSchema, mergeRequestSchema]),
      action: `merge merge request !${number}`,
      notFound: notFound(number),
      signal,
    });
    if ('refusal' in data) {
      const detail = http.scrub(data.detail);
      return {
        merged: false,
        reason: `GitLab refused to merge !${number} (${data.refusal}): ${REFUSAL_REASONS[data.refusal] ?? 'it cannot be merged now'}.${detail ? ` GitLab said: "${detail}"` : ''}`,
      };
    }
    if (data.state === 'merged') {
      return { merged: true, sha: data.merge_commit_sha ?? data.squash_commit_sha ?? null };
    }
    // GitLab answers 200 with the merge request as it is when the merge itself failed.
    const said = data.merge_error ? http.scrub(data.merge_error) : `it is ${data.state}`;
    return { merged: false, reason: `GitLab did not merge !${number}: ${said}` };
  }

  return { pullRequestStatus, checks, checkLog, mergePullRequest };
}

/** Every item of a list GitLab pages, up to MAX_PAGES pages. */
async function allPages<T>(
  http: ForgeHttp,
  path: string,
  schema: z.ZodType<T[]>,
  action: string,
  signal: AbortSignal | undefined,
): Promise<T[]> {
  const items: T[] = [];
  for (let page = 1; page <= MAX_PAGES; page++) {
    const { data, headers } = await http.request({
      method: 'GET',
      path,
      query: { per_page: PER_PAGE, page },
      schema,
      action,
      signal,
    });
    items.push(...data);
    // X-Next-Page is empty on the last page; a proxy may drop it, a short page says the same.
    const next = headers.get('x-next-page');
    if (data.length === 0 || (next === null ? data.length < PER_PAGE : next.trim() === '')) {
      break;
    }
  }
  return items;
}

/** The jobs of the commit's latest pipeline and the statuses other systems posted on it. */
async function commitChecks(
  http: ForgeHttp,
  project: string,
  sha: string,
  signal: AbortSignal | undefined,
): Promise<CheckResult[]> {
  const commit = encodeURIComponent(sha);
  // Newest first (GitLab's default order); one page holds every pipeline a commit has.
  const { data: pipelines } = await http.request({
    method: 'GET',
    path: `${project}/pipelines`,
    query: { sha, order_by: 'id', sort: 'desc', per_page: PER_PAGE },
    schema: pipelineListSchema,
    action: `list the pipelines of ${sha.slice(0, 12)}`,
    signal,
  });
  const latest = pipelines.find((p) => p.source !== 'external');
  const [jobs, statuses] = await Promise.all([
    latest
      ? allPages(
          http,
          `${project}/pipelines/${latest.id}/jobs`,
          jobListSchema,
          `list the jobs of pipeline ${latest.id}`,
          signal,
        )
      : [],
    allPages(
      http,
      `${project}/repository/commits/${commit}/statuses`,
      commitStatusListSchema,
      `list the statuses of ${sha.slice(0, 12)}`,
      signal,
    ),
  ]);
  return combineChecks(pipelines, latest?.id ?? null, jobs, statuses);
}

/**
 * One CheckResult per name: the latest pipeline's jobs, then the statuses other systems
 * posted.
 */
function combineChecks(
  pipelines: z.infer<typeof pipelineListSchema>,
  latest: number | null,
  jobs: z.infer<typeof jobListSchema>,
  statuses: z.infer<typeof commitStatusListSchema>,
): CheckResult[] {
  const results = new Map<string, CheckResult & { order: number }>();
  // Without `include_retried` GitLab lists each job once, at its latest run; the highest id
  // wins anyway, should a name come twice.
  for (const job of jobs) {
    const seen = results.get(job.name);
    if (seen && seen.order > job.id) continue;
    results.set(job.name, {
      order: job.id,
      id: String(job.id),
      name: job.name,
      state: checkState(job.status, job.allow_failure === true),
      url: webUrl(job.web_url),
      summary: job.failure_reason ? job.failure_reason.replaceAll('_', ' ') : null,
    });
  }
  // The commit's statuses list CI jobs too (a job is a commit status), each name at its
  // latest. Kept: the ones posted by other systems, which sit on the `external` pipeline or
  // on the latest one beside its jobs; left: jobs, and anything of an older CI pipeline of
  // the same commit, which the latest pipeline replaced.
  const jobIds = new Set(jobs.map((job) => job.id));
  const external = new Set(pipelines.filter((p) => p.source === 'external').map((p) => p.id));
  for (const status of statuses) {
    if (jobIds.has(status.id) || results.has(status.name)) continue;
    const pipeline = status.pipeline_id ?? null;
    if (pipeline !== null && pipeline !== latest && !external.has(pipeline)) continue;
    results.set(status.name, {
      order: status.id,
      id: `${STATUS_PREFIX}${status.id}`,
      name: status.name,
      state: checkState(status.status, status.allow_failure === true),
      url: webUrl(status.target_url),
      summary: status.description?.trim() || null,
    });
  }
  return [...results.values()].map(({ order: _, ...check }) => check);
}

function toState(state: string): PullRequestStatus['state'] {
  if (state === 'merged') return 'merged';
  // `locked`: open, while GitLab merges it.
  if (state === 'opened' || state === 'locked') return 'open';
  return 'closed';
}

/** Whether the source branch merges into the target: null while GitLab works it out. */
function mergeable(mr: GitLabMergeRequest): boolean | null {
  const status = mr.detailed_merge_status ?? mr.merge_status;
  if (status !== undefined && MERGEABILITY_PENDING.has(status)) return null;
  if (status !== undefined && NOT_MERGEABLE.has(status)) return false;
  return mr.has_conflicts !== true;
}

/**
 * A job's or commit status's state: allowed failures and non-blocking manual jobs do not fail
 * the pipeline, and so are no failure here; a blocking manual job waits for a person.
 */
function checkState(status: string, allowFailure: boolean): CheckState {
  switch (status) {
    case 'success':
    case 'skipped':
      return 'success';
    case 'failed':
    case 'canceled':
    case 'canceling':
      return allowFailure ? 'success' : 'failure';
    case 'manual':
      return allowFailure ? 'success' : 'pending';
    default:
      // created, waiting_for_resource, preparing, pending, running, scheduled, …
      return 'pending';
  }
}

/** A link people may open: http(s) only (a status's target URL is whatever was posted). */
function webUrl(url: string | null | undefined): string | null {
  if (!url) return null;
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed.href : null;
  } catch {
    return null;
  }
}

/**
 * A fetch that reads a successful answer (a job's trace, plain text) as its last `maxBytes`
 * bytes and hands the request helper `{trace}` as JSON: the trace is never held whole, and the
 * helper's timeouts, redirects and errors stay the same as for every other call.
 */
function tailingFetch(fetch: typeof globalThis.fetch, maxBytes: number): typeof globalThis.fetch {
  return async (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('accept', 'text/plain');
    const response = await fetch(input, { ...init, headers });
    if (response.status < 200 || response.status >= 300) return response;
    const tail = await streamTail(response.body, maxBytes);
    return Response.json({ trace: plainTrace(tail) });
  };
}

/**
 * A fetch that turns the merge API's refusals into an answer the merge reads (`{refusal,
 * detail}`): a refusal is an outcome, not a failure of the forge.
 */
function refusalsAsAnswers(fetch: typeof globalThis.fetch): typeof globalThis.fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (!REFUSALS.has(response.status)) return response;
    const text = await response.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    return Response.json({ refusal: response.status, detail: errorDetail(body) });
  };
}
