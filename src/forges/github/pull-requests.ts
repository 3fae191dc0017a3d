// A job's pull request as the pull request watch (src/features/pr-watch/) reads it on GitHub:
// its state, mergeability, labels and reviews; and the merge through GitHub's merge API, whose
// refusals (branch protection, a moved head, a conflict) are outcomes, not errors.

import { z } from 'zod';
import type { ForgeClient, MergeMethod, MergeOutcome, PullRequestStatus } from '../types.ts';
import type { GitHubApi } from './api.ts';
import { refusalOf } from './errors.ts';

// Only the fields Errand reads; GitHub's objects carry dozens more.
const pullStatusSchema = z.object({
  number: z.number().int().positive(),
  html_url: z.string(),
  state: z.enum(['open', 'closed']),
  merged_at: z.string().nullable().optional(),
  // Null while GitHub works it out, which reading the pull request starts.
  mergeable: z.boolean().nullable().optional(),
  draft: z.boolean().optional(),
  labels: z.array(z.object({ name: z.string() })),
  head: z.object({ sha: z.string() }),
  base: z.object({ ref: z.string() }),
});
const reviewSchema = z.object({
  id: z.number(),
  // Null for a deleted account (GitHub's "ghost").
  user: z.object({ id: z.number(), login: z.string() }).nullable(),
  state: z.string(),
});
const reviewListSchema = z.array(reviewSchema);
const mergeOutcomeSchema = z.discriminatedUnion('merged', [
  z.object({ merged: z.literal(true), sha: z.string().nullable() }),
  z.object({ merged: z.literal(false), reason: z.string() }),
]);

type Review = z.infer<typeof reviewSchema>;

const PER_PAGE = 100;
/** Far more than any pull request has; a bound so that a misbehaving server cannot keep us paging. */
const MAX_PAGES = 30;
/** GitHub's answers to a merge it will not do: not mergeable or blocked (405), head moved (409), invalid (422). */
const MERGE_REFUSALS = [405, 409, 422];

export function githubPullRequestWatch(
  api: GitHubApi,
): Pick<ForgeClient, 'pullRequestStatus' | 'mergePullRequest'> {
  return {
    pullRequestStatus: (number, signal) => pullRequestStatus(api, number, signal),
    mergePullRequest: (number, options, signal) => merge(api, number, options, signal),
  };
}

async function pullRequestStatus(
  api: GitHubApi,
  number: number,
  signal?: AbortSignal,
): Promise<PullRequestStatus> {
  const { call, octokit, target, repository } = api;
  const [pull, given] = await Promise.all([
    call(
      {
        action: `read pull request #${number}`,
        method: 'GET',
        path: `/repos/${repository}/pulls/${number}`,
        pullRequest: number,
      },
      pullStatusSchema,
      (headers, request) =>
        octokit.rest.pulls.get({
          owner: target.owner,
          repo: target.repo,
          pull_number: number,
          headers,
          request,
        }),
      signal,
    ),
    reviews(api, number, signal),
  ]);
  return {
    number: pull.number,
    url: pull.html_url,
    state: pull.merged_at ? 'merged' : pull.state,
    mergedAt: pull.merged_at ?? null,
    headSha: pull.head.sha,
    base: pull.base.ref,
    mergeable: pull.mergeable ?? null,
    labels: pull.labels.map((label) => label.name),
    draft: pull.draft ?? false,
    approved: approvedBy(given),
  };
}

async function reviews(api: GitHubApi, number: number, signal?: AbortSignal): Promise<Review[]> {
  const { call, octokit, target, repository } = api;
  const all: Review[] = [];
  for (let page = 1; page <= MAX_PAGES; page++) {
    const batch = await call(
      {
        action: `read the reviews of pull request #${number}`,
        method: 'GET',
        path: `/repos/${repository}/pulls/${number}/reviews`,
        pullRequest: number,
      },
      reviewListSchema,
      (headers, request) =>
        octokit.rest.pulls.listReviews({
          owner: target.owner,
          repo: target.repo,
          pull_number: number,
          per_page: PER_PAGE,
          page,
          headers,
          request,
        }),
      signal,
    );
    all.push(...batch);
    if (batch.length < PER_PAGE) break;
  }
  return all;
}

/**
 * At least one approval and no change request still standing, each reviewer's latest of the
 * two counting: a later comment or a dismissed review changes neither. (GitHub turns a review
 * it dismisses into DISMISSED, so a dismissed change request stands no more.)
 */
function approvedBy(reviews: Review[]): boolean {
  const latest = new Map<number, string>();
  for (const review of [...reviews].sort((a, b) => a.id - b.id)) {
    if (!review.user) continue;
    if (review.state === 'APPROVED' || review.state === 'CHANGES_REQUESTED') {
      latest.set(review.user.id, review.state);
    }
  }
  const states = [...latest.values()];
  return states.includes('APPROVED') && !states.includes('CHANGES_REQUESTED');
}

async function merge(
  api: GitHubApi,
  number: number,
  { method, sha }: { method: MergeMethod; sha: string },
  signal?: AbortSignal,
): Promise<MergeOutcome> {
  const { call, octokit, target, repository } = api;
  return call(
    {
      action: `merge pull request #${number}`,
      method: 'PUT',
      path: `/repos/${repository}/pulls/${number}/merge`,
      pullRequest: number,
    },
    mergeOutcomeSchema,
    async (headers, request) => {
      try {
        const answer = await octokit.rest.pulls.merge({
          owner: target.owner,
          repo: target.repo,
          pull_number: number,
          // GitHub merges only while the head is still this commit (409 otherwise).
          sha,
          merge_method: method,
          headers,
          request,
        });
        return {
          data:
            answer.data.merged === false
              ? { merged: false, reason: answer.data.message || 'GitHub did not merge it' }
              : { merged: true, sha: answer.data.sha ?? null },
        };
      } catch (err) {
        // Branch protection, a missing check or review, a conflict, a moved head: GitHub's
        // word on it is the outcome, for the watch to report and not to retry.
        const refused = refusalOf(err, MERGE_REFUSALS);
        if (!refused) throw err;
        return {
          data: {
            merged: false,
            reason: refused.detail || `GitHub refused the merge (${refused.status})`,
          },
        };
      }
    },
    signal,
  );
}
