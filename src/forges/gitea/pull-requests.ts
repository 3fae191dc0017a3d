// What the pull request watch (src/features/pr-watch/) asks Gitea and Forgejo of a job's pull
// request: its state, head, labels, mergeability and reviews; the commit statuses of a commit
// (the only kind of check these forges have: Gitea Actions reports its jobs as statuses too);
// and the merge through Gitea's own merge API, whose refusals are outcomes, not errors.
// There is no CI log API to rely on, so a check's "log" is its description and target URL.

import { z } from 'zod';
import type { ForgeHttp } from '../http.ts';
import { textTail } from '../log-tail.ts';
import type {
  CheckResult,
  CheckState,
  ForgeClient,
  MergeMethod,
  MergeOutcome,
  PullRequestStatus,
} from '../types.ts';
import { ForgeError } from '../types.ts';

// Gitea's default MAX_RESPONSE_ITEMS: a larger limit is silently cut to it.
const PAGE_SIZE = 50;
// 1000 statuses or reviews: far more than a pull request has, and a bound on a runaway list.
const MAX_PAGES = 20;
// Gitea's default WORK_IN_PROGRESS_PREFIXES, for versions without the `draft` field.
const DRAFT_TITLE = /^\s*(?:wip:|\[wip\])/i;

const statusPullSchema = z.object({
  number: z.number().int().positive(),
  html_url: z.url({ protocol: /^https?$/ }),
  title: z.string(),
  state: z.enum(['open', 'closed']),
  merged: z.boolean(),
  merged_at: z.string().nullable().optional(),
  merge_commit_sha: z.string().nullable().optional(),
  // Gitea says false while it is still checking for conflicts, and for any draft.
  mergeable: z.boolean(),
  draft: z.boolean().optional(),
  labels: z
    .array(z.object({ name: z.string() }))
    .nullable()
    .optional(),
  head: z.object({ sha: z.string() }),
  base: z.object({ ref: z.string() }),
});
const reviewSchema = z.object({
  id: z.number(),
  // APPROVED, REQUEST_CHANGES, COMMENT, PENDING, REQUEST_REVIEW.
  state: z.string(),
  dismissed: z.boolean().optional(),
  // Null for a review by a deleted user or a team's review request.
  user: z.object({ id: z.number(), login: z.string() }).nullable().optional(),
});
const statusSchema = z.object({
  id: z.number(),
  // pending, success, error, failure, warning (and skipped on recent versions).
  status: z.string(),
  context: z.string(),
  description: z.string().nullable().optional(),
  target_url: z.string().nullable().optional(),
});
type GiteaStatus = z.infer<typeof statusSchema>;

/** Gitea's name (`Do`) for each merge method. */
const MERGE_STYLE: Record<MergeMethod, string> = {
  // A merge commit, always (Gitea's `merge` never fast-forwards).
  merge: 'merge',
  // One commit with the pull request's changes.
  squash: 'squash',
  // The head's commits replayed on the base, which then fast-forwards: no merge commit.
  rebase: 'rebase',
};

/** The statuses of merge refusals: the forge's rules, not the forge failing. */
const REFUSALS: Record<number, string> = {
  405: 'Gitea does not allow the merge now (405): branch protection, a required status check or approval, a draft, or a merge style the repository does not allow',
  409: 'Gitea could not merge (409): the head moved since it was checked, or the branches conflict',
  423: 'Gitea refused the merge (423): the repository is archived',
};

interface WatchOptions {
  http: ForgeHttp;
  /** `/repos/{owner}/{name}`, encoded. */
  base: string;
  /** `owner/name`, for messages. */
  repository: string;
  /** The web origin, which Gitea Actions' target URLs (paths without a host) are relative to. */
  origin: string;
}

export type GiteaWatch = Pick<
  ForgeClient,
  'pullRequestStatus' | 'checks' | 'checkLog' | 'mergePullRequest'
>;

export function giteaWatch({ http, base, repository, origin }: WatchOptions): GiteaWatch {
  const pullNotFound = (number: number) =>
    `Gitea pull request #${number} not found in ${repository} (404): it was deleted, or the token cannot see the repository.`;

  async function readPull(number: number, signal: AbortSignal | undefined) {
    const { data } = await http.request({
      method: 'GET',
      path: `${base}/pulls/${number}`,
      schema: statusPullSchema,
      action: `read pull request #${number}`,
      notFound: pullNotFound(number),
      signal,
    });
    return data;
  }

  async function pullRequestStatus(
    number: number,
    signal?: AbortSignal,
  ): Promise<PullRequestStatus> {
    const pr = await readPull(number, signal);
    const reviews = await listAll(
      http,
      {
        path: `${base}/pulls/${number}/reviews`,
        schema: reviewSchema,
        action: `read the reviews of pull request #${number}`,
        notFound: pullNotFound(number),
      },
      signal,
    );
    const state = pr.merged ? 'merged' : pr.state;
    const draft = pr.draft ?? DRAFT_TITLE.test(pr.title);
    return {
      number: pr.number,
      url: pr.html_url,
      state,
      mergedAt: pr.merged ? (pr.merged_at ?? null) : null,
      headSha: pr.head.sha,
      base: pr.base.ref,
      // Gitea's false also means "still checking" and "a draft", which say nothing of
      // conflicts: a draft's is unknown; a check in progress cannot be told from a conflict.
      mergeable: state !== 'open' ? null : pr.mergeable ? true : draft ? null : false,
      labels: (pr.labels ?? []).map((label) => label.name),
      draft,
      approved: isApproved(reviews),
    };
  }

  async function checks(sha: string, signal?: AbortSignal): Promise<CheckResult[]> {
    const statuses = await listAll(
      http,
      {
        path: `${base}/commits/${encodeURIComponent(sha)}/statuses`,
        schema: statusSchema,
        action: `read the commit statuses of ${sha.slice(0, 12)}`,
        notFound: `Gitea found no commit ${sha.slice(0, 12)} in ${repository} (404): it is not in the repository, or the token cannot see it.`,
      },
      signal,
    );
    return latestChecks(statuses, origin);
  }

  async function mergePullRequest(
    number: number,
    options: { method: MergeMethod; sha: string },
    signal?: AbortSignal,
  ): Promise<MergeOutcome> {
    try {
      await http.request({
        method: 'POST',
        path: `${base}/pulls/${number}/merge`,
        // Gitea refuses with 409 when the head is no longer `head_commit_id`.
        body: { Do: MERGE_STYLE[options.method], head_commit_id: options.sha },
        // Gitea answers 200 with an empty body.
        schema: z.unknown(),
        action: `merge pull request #${number}`,
        notFound: pullNotFound(number),
        signal,
      });
    } catch (err) {
      if (!(err instanceof ForgeError) || err.status === undefined) throw err;
      const refusal = REFUSALS[err.status];
      const said = giteaSaid(err.message);
      if (refusal && said) return { merged: false, reason: `${refusal}. Gitea said: "${said}"` };
      // Gitea says nothing of a merged pull request (405) and answers a closed one's merge
      // with 404: its state says why.
      if (refusal || err.status === 404) {
        const pr = await readPull(number, signal);
        if (pr.merged) return { merged: false, reason: 'the pull request is merged already' };
        if (pr.state === 'closed') return { merged: false, reason: 'the pull request is closed' };
        if (refusal) return { merged: false, reason: refusal };
      }
      throw err;
    }
    // The merge is done: a failure to read its commit must not make it look failed.
    try {
      const merged = await readPull(number, signal);
      return { merged: true, sha: merged.merge_commit_sha || null };
    } catch {
      return { merged: true, sha: null };
    }
  }

  return { pullRequestStatus, checks, checkLog, mergePullRequest };
}

/** Each context's latest status (every status posted is kept; the highest id holds now). */
function latestChecks(statuses: readonly GiteaStatus[], origin: string): CheckResult[] {
  const latest = new Map<string, GiteaStatus>();
  for (const status of statuses) {
    const seen = latest.get(status.context);
    if (!seen || status.id > seen.id) latest.set(status.context, status);
  }
  return [...latest.values()]
    .sort((a, b) => a.context.localeCompare(b.context))
    .map((status) => ({
      id: status.context,
      name: status.context,
      state: checkState(status.status),
      url: absoluteUrl(status.target_url, origin),
      summary: status.description?.trim() || null,
    }));
}

/** Gitea keeps no log a token may read for every CI: what the status said is its log. */
async function checkLog(check: CheckResult, maxBytes: number): Promise<string> {
  const lines = [check.summary, check.url ? `Details: ${check.url}` : null].filter(
    (line): line is string => line !== null && line !== '',
  );
  return textTail(lines.join('\n'), maxBytes);
}

/** Every item of a paged list, bounded; Gitea pages with `page`/`limit` and `X-Total-Count`. */
async function listAll<T>(
  http: ForgeHttp,
  spec: { path: string; schema: z.ZodType<T>; action: string; notFound: string },
  signal: AbortSignal | undefined,
): Promise<T[]> {
  const items: T[] = [];
  for (let page = 1; page <= MAX_PAGES; page++) {
    const { data, headers } = await http.request({
      method: 'GET',
      path: spec.path,
      query: { page, limit: PAGE_SIZE },
      schema: z.array(spec.schema),
      action: spec.action,
      notFound: spec.notFound,
      signal,
    });
    items.push(...data);
    const total = Number(headers.get('x-total-count'));
    // Servers may cap `limit` below what we asked, so only an empty page or the total ends it.
    if (data.length === 0 || (Number.isFinite(total) && total > 0 && items.length >= total)) {
      break;
    }
  }
  return items;
}

/**
 * Whether the reviews approve: each reviewer's latest approving or change-requesting review
 * counts (a comment changes nothing, a dismissed review is gone); at least one approves and
 * none asks for changes.
 */
function isApproved(reviews: readonly z.infer<typeof reviewSchema>[]): boolean {
  const verdicts = new Map<number, { id: number; approves: boolean }>();
  for (const review of reviews) {
    if (!review.user || review.dismissed) continue;
    if (review.state !== 'APPROVED' && review.state !== 'REQUEST_CHANGES') continue;
    const seen = verdicts.get(review.user.id);
    if (seen && seen.id > review.id) continue;
    verdicts.set(review.user.id, { id: review.id, approves: review.state === 'APPROVED' });
  }
  const all = [...verdicts.values()];
  return all.some((v) => v.approves) && all.every((v) => v.approves);
}

/** A Gitea commit status's state as a check's: a warning or a skip fails nothing. */
export function checkState(status: string): CheckState {
  switch (status) {
    case 'success':
    case 'warning':
    case 'skipped':
      return 'success';
    case 'failure':
    case 'error':
      return 'failure';
    default:
      return 'pending';
  }
}

/** A target URL as a web link: Gitea Actions gives a path on the instance; anything but http(s) is none. */
function absoluteUrl(target: string | null | undefined, origin: string): string | null {
  if (!target) return null;
  try {
    const url = new URL(target, origin);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch {
    return null;
  }
}

/** What Gitea said, as the ForgeError's message quotes it, or undefined. */
function giteaSaid(message: string): string | undefined {
  return /Gitea said: "(.*)"$/s.exec(message)?.[1]?.trim() || undefined;
}
