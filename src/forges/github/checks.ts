// The checks of a commit as GitHub keeps them, for the pull request watch: check runs (GitHub
// Actions jobs and other apps' checks) and commit statuses, each name at its latest; and the
// end of a failed one's log: the check run's output and, for an Actions job, the job's log,
// read from the storage GitHub redirects to without handing the storage the token.

import { z } from 'zod';
import { byteLength, streamTail, textTail } from '../log-tail.ts';
import type { CheckResult, CheckState, ForgeClient } from '../types.ts';
import { ForgeError } from '../types.ts';
import type { GitHubApi } from './api.ts';

// Only the fields Errand reads; GitHub's objects carry dozens more.
const checkRunSchema = z.object({
  id: z.number(),
  name: z.string(),
  status: z.string(),
  conclusion: z.string().nullable(),
  html_url: z.string().nullable(),
  details_url: z.string().nullable().optional(),
  output: z.object({
    title: z.string().nullable(),
    summary: z.string().nullable(),
    text: z.string().nullable().optional(),
  }),
  app: z.object({ slug: z.string().optional() }).nullable().optional(),
});
const checkRunPageSchema = z.object({
  total_count: z.number(),
  check_runs: z.array(checkRunSchema),
});
const commitStatusSchema = z.object({
  id: z.number(),
  context: z.string(),
  state: z.string(),
  description: z.string().nullable(),
  target_url: z.string().nullable(),
});
const combinedStatusSchema = z.object({
  total_count: z.number(),
  statuses: z.array(commitStatusSchema),
});
// What the log download answered: a redirect to storage (GitHub's way), or the log itself.
const jobLogSchema = z.object({
  status: z.number(),
  location: z.string().nullable(),
  body: z.instanceof(ReadableStream).nullable(),
});

type CheckRun = z.infer<typeof checkRunSchema>;
type CommitStatus = z.infer<typeof commitStatusSchema>;

const PER_PAGE = 100;
/** Far more than any commit has; a bound so that a misbehaving server cannot keep us paging. */
const MAX_PAGES = 30;
/** The app whose check runs are GitHub Actions jobs, each with a log under the run's id. */
const ACTIONS_APP = 'github-actions';
/** A commit status's CheckResult id: `status:` and its context. */
const STATUS_PREFIX = 'status:';

export function githubChecks(api: GitHubApi): Pick<ForgeClient, 'checks' | 'checkLog'> {
  return {
    async checks(sha, signal) {
      const [runs, statuses] = await Promise.all([
        checkRuns(api, sha, signal),
        commitStatuses(api, sha, signal),
      ]);
      return [
        ...latestBy(runs, (run) => run.name).map(fromCheckRun),
        ...latestBy(statuses, (status) => status.context).map(fromStatus),
      ];
    },

    async checkLog(check, maxBytes, signal) {
      if (maxBytes <= 0) return '';
      if (check.id.startsWith(STATUS_PREFIX)) {
        // A commit status keeps no log: its description and the page it links to are all.
        return textTail([check.summary, check.url].filter(Boolean).join('\n'), maxBytes);
      }
      if (!/^\d{1,20}$/.test(check.id)) return '';
      const run = await checkRun(api, Number(check.id), signal);
      const output = [run.output.title, run.output.summary, run.output.text]
        .filter((part): part is string => Boolean(part?.trim()))
        .join('\n\n');
      if (run.app?.slug !== ACTIONS_APP) return textTail(output, maxBytes);
      // An Actions job's output is a line or two; its log, which says what failed, gets the
      // rest of the room. The job has the check run's id.
      const head = output ? `${textTail(output, Math.floor(maxBytes / 4))}\n\n` : '';
      const log = await jobLog(api, run.id, maxBytes - byteLength(head), signal);
      return log ? `${head}${log}` : head.trimEnd();
    },
  };
}

async function checkRuns(api: GitHubApi, sha: string, signal?: AbortSignal): Promise<CheckRun[]> {
  const { call, octokit, target, repository } = api;
  const all: CheckRun[] = [];
  for (let page = 1; page <= MAX_PAGES; page++) {
    const batch = await call(
      {
        action: 'read the check runs of a commit',
        method: 'GET',
        path: `/repos/${repository}/commits/${sha}/check-runs`,
      },
      checkRunPageSchema,
      (headers, request) =>
        octokit.rest.checks.listForRef({
          owner: target.owner,
          repo: target.repo,
          ref: sha,
          // Each check suite's latest run of a name: GitHub's default, said so it stays so.
          filter: 'latest',
          per_page: PER_PAGE,
          page,
          headers,
          request,
        }),
      signal,
    );
    all.push(...batch.check_runs);
    if (batch.check_runs.length < PER_PAGE || all.length >= batch.total_count) break;
  }
  return all;
}

async function commitStatuses(
  api: GitHubApi,
  sha: string,
  signal?: AbortSignal,
): Promise<CommitStatus[]> {
  const { call, octokit, target, repository } = api;
  const all: CommitStatus[] = [];
  for (let page = 1; page <= MAX_PAGES; page++) {
    const batch = await call(
      {
        action: 'read the statuses of a commit',
        method: 'GET',
        path: `/repos/${repository}/commits/${sha}/status`,
      },
      combinedStatusSchema,
      (headers, request) =>
        octokit.rest.repos.getCombinedStatusForRef({
          owner: target.owner,
          repo: target.repo,
          ref: sha,
          per_page: PER_PAGE,
          page,
          headers,
          request,
        }),
      signal,
    );
    all.push(...batch.statuses);
    if (batch.statuses.length < PER_PAGE || all.length >= batch.total_count) break;
  }
  return all;
}

async function checkRun(api: GitHubApi, id: number, signal?: AbortSignal): Promise<CheckRun> {
  const { call, octokit, target, repository } = api;
  return call(
    {
      action: `read check run ${id}`,
      method: 'GET',
      path: `/repos/${repository}/check-runs/${id}`,
    },
    checkRunSchema,
    (headers, request) =>
      octokit.rest.checks.get({
        owner: target.owner,
        repo: target.repo,
        check_run_id: id,
        headers,
        request,
      }),
    signal,
  );
}

/** The end of an Actions job's log, or '' when GitHub keeps none (expired, deleted). */
async function jobLog(
  api: GitHubApi,
  jobId: number,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<string> {
  const { call, octokit, target, repository } = api;
  let answer: z.infer<typeof jobLogSchema>;
  try {
    answer = await call(
      {
        action: `read the log of job ${jobId}`,
        method: 'GET',
        path: `/repos/${repository}/actions/jobs/${jobId}/logs`,
      },
      jobLogSchema,
      async (headers, request) => {
        // GitHub answers with a redirect to a signed storage URL. Followed by fetch, the token
        // would go along wherever the storage shares the API's origin (GHES can): it is
        // followed by hand, below, without it.
        const response = await octokit.rest.actions.downloadJobLogsForWorkflowRun({
          owner: target.owner,
          repo: target.repo,
          job_id: jobId,
          headers,
          request: { ...request, redirect: 'manual', parseSuccessResponseBody: false },
        });
        const location = response.headers.location;
        const body: unknown = response.data;
        return {
          data: {
            status: response.status,
            location: typeof location === 'string' ? location : null,
            body: body instanceof ReadableStream ? body : null,
          },
        };
      },
      signal,
    );
  } catch (err) {
    if (err instanceof ForgeError && (err.status === 404 || err.status === 410)) return '';
    throw err;
  }
  if (answer.status === 200 && answer.body) return streamTail(answer.body, maxBytes);
  await answer.body?.cancel();
  if (answer.status < 300 || answer.status >= 400 || !answer.location) {
    throw new ForgeError(
      'github',
      `GitHub answered ${answer.status} without a log to the download of job ${jobId}'s log`,
      { transient: false, status: answer.status },
    );
  }
  return storedLog(api, jobId, answer.location, maxBytes, signal);
}

/**
 * A log from the storage URL GitHub redirected to: sent no token, and the URL never shown in a
 * message (its signature is a credential for the minutes it lives).
 */
async function storedLog(
  api: GitHubApi,
  jobId: number,
  location: string,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<string> {
  let response: Response;
  try {
    response = await api.fetch(location, { redirect: 'follow', ...(signal ? { signal } : {}) });
  } catch {
    if (signal?.aborted) throw signal.reason;
    throw new ForgeError(
      'github',
      `GitHub's log storage could not be reached to read the log of job ${jobId}`,
      { transient: true, cause: new Error('log storage unreachable') },
    );
  }
  if (!response.ok || !response.body) {
    await response.body?.cancel();
    if (response.status === 404 || response.status === 410) return '';
    throw new ForgeError(
      'github',
      `GitHub's log storage answered ${response.status} to the download of job ${jobId}'s log`,
      { transient: response.status >= 500 || response.status === 429, status: response.status },
    );
  }
  return streamTail(response.body, maxBytes);
}

/** One item per name, the latest (the highest id: GitHub numbers runs and statuses as made). */
function latestBy<T extends { id: number }>(items: T[], name: (item: T) => string): T[] {
  const byName = new Map<string, T>();
  for (const item of items) {
    const known = byName.get(name(item));
    if (!known || item.id > known.id) byName.set(name(item), item);
  }
  return [...byName.values()];
}

function fromCheckRun(run: CheckRun): CheckResult {
  return {
    id: String(run.id),
    name: run.name,
    state: checkRunState(run),
    url: run.html_url ?? run.details_url ?? null,
    summary: run.output.title ?? null,
  };
}

function checkRunState(run: CheckRun): CheckState {
  if (run.status !== 'completed') return 'pending';
  switch (run.conclusion) {
    case 'success':
    case 'neutral':
    case 'skipped':
      return 'success';
    case null:
      return 'pending';
    default:
      // failure, cancelled, timed_out, action_required, startup_failure, stale: none passes.
      return 'failure';
  }
}

function fromStatus(status: CommitStatus): CheckResult {
  const state: CheckState =
    status.state === 'success' ? 'success' : status.state === 'pending' ? 'pending' : 'failure';
  return {
    id: `${STATUS_PREFIX}${status.context}`,
    name: status.context,
    state,
    url: status.target_url,
    summary: status.description,
  };
}
