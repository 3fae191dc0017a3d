// The GitHub forge (github.com and GitHub Enterprise Server): finds, opens and updates a job's
// pull request through the REST API with Octokit, authenticated by a personal access token or
// a GitHub App installation, and hands git the matching HTTPS header for pushes.

import { Octokit } from '@octokit/rest';
import { z } from 'zod';
import type {
  CommentRef,
  CreatedPullRequest,
  ForgeClient,
  ForgeClientOptions,
  ForgeProvider,
  PullRequest,
  ThreadRef,
} from '../types.ts';
import { ForgeError } from '../types.ts';
import type { GitHubApi } from './api.ts';
import { githubAppTokens, staticToken, type TokenSource } from './auth.ts';
import { githubChecks } from './checks.ts';
import { type CallAttempt, toForgeError } from './errors.ts';
import { githubIssues } from './issues.ts';
import { githubPullRequestWatch } from './pull-requests.ts';
import { parseRepository } from './repository.ts';

export const id = 'github';

export const provider: ForgeProvider = {
  id,
  name: 'GitHub',
  tokenPermissions:
    "the token needs the 'Contents: Read and write' and 'Pull requests: Read and write' permissions on the repository (a fine-grained token, or a GitHub App installed on the repository) or the 'repo' scope (a classic token)",
  defaultApiUrl(repository) {
    try {
      const { host } = parseRepository(repository);
      return host === 'github.com' || host === 'www.github.com'
        ? 'https://api.github.com'
        : undefined;
    } catch {
      return undefined;
    }
  },
  checkTarget(apiUrl, repository) {
    parseRepository(repository);
    parseApiUrl(apiUrl);
  },
  create: createGitHubClient,
};

// Only the fields Errand reads; GitHub's objects carry dozens more.
const pullSchema = z.object({
  number: z.number().int().positive(),
  html_url: z.url(),
  state: z.enum(['open', 'closed']),
  // Absent on old GHES versions without drafts.
  draft: z.boolean().optional(),
  merged_at: z.string().nullable().optional(),
});
const pullListSchema = z.array(pullSchema);
const reactionSchema = z.object({ id: z.number(), content: z.string() });
const commentSchema = z.object({ id: z.number(), html_url: z.string() });
const reviewCommentSchema = z.object({
  id: z.number(),
  in_reply_to_id: z.number().nullable().optional(),
});
// `maintain` and custom roles show as `write` in `permission`; `role_name` names them.
const permissionSchema = z.object({ permission: z.string(), role_name: z.string().optional() });
const WRITE_PERMISSIONS: ReadonlySet<string> = new Set(['admin', 'maintain', 'write']);

type GitHubPull = z.infer<typeof pullSchema>;

const quietLog = { debug() {}, info() {}, warn() {}, error() {} };

export function createGitHubClient(options: ForgeClientOptions): ForgeClient {
  const target = parseRepository(options.repository);
  const repository = `${target.owner}/${target.repo}`;
  const baseUrl = parseApiUrl(options.apiUrl);
  // @octokit/rest bundles no retry or throttling plugin: Errand's queue owns retries, so a
  // rate-limited call fails at once with the wait GitHub asked for.
  const octokit = new Octokit({
    baseUrl,
    userAgent: 'errand',
    log: quietLog,
    ...(options.fetch ? { request: { fetch: options.fetch } } : {}),
  });

  const tokens = tokenSource(options, octokit.request, repository);

  /** One API call with the current token; a GitHub App gets one retry with a fresh token on 401. */
  async function call<T>(
    attempted: Omit<CallAttempt, 'repository' | 'auth'>,
    schema: z.ZodType<T>,
    run: (
      headers: { authorization: string },
      request: { signal?: AbortSignal },
    ) => Promise<unknown>,
    signal: AbortSignal | undefined,
  ): Promise<T> {
    const full: CallAttempt = { ...attempted, repository, auth: tokens.kind };
    const request = signal ? { signal } : {};
    for (let attempt = 1; ; attempt++) {
      const token = await tokens.token(signal);
      try {
        return await send(
          full,
          schema,
          () => run({ authorization: `token ${token}` }, request),
          signal,
        );
      } catch (err) {
        // An installation token can be revoked (app suspended, permissions changed) or expire
        // early against a skewed clock; a fresh one settles which.
        if (
          attempt === 1 &&
          tokens.kind === 'app' &&
          err instanceof ForgeError &&
          err.status === 401
        ) {
          tokens.invalidate(token);
          continue;
        }
        throw err;
      }
    }
  }

  async function send<T>(
    attempted: CallAttempt,
    schema: z.ZodType<T>,
    run: () => Promise<unknown>,
    signal?: AbortSignal,
  ): Promise<T> {
    let response: unknown;
    try {
      response = await run();
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw toForgeError(err, attempted);
    }
    const data = z.object({ data: schema }).safeParse(response);
    if (!data.success) throw unexpectedAnswer(attempted);
    return data.data.data;
  }

  const api: GitHubApi = {
    call,
    octokit,
    target,
    repository,
    fetch: options.fetch ?? globalThis.fetch,
  };
  return {
    kind: 'github',
    ...githubPulls(api),
    ...githubComments(api),
    ...githubPermissions(api),
    ...githubPullRequestWatch(api),
    ...githubChecks(api),
    ...githubIssues(api),
    async gitAuth(signal) {
      const token = await tokens.token(signal);
      return {
        urlPrefix: `https://${target.host}/`,
        header: `Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`,
      };
    },
  };
}

/** Finding, opening and updating the job's pull request. */
function githubPulls(
  api: GitHubApi,
): Pick<ForgeClient, 'findPullRequest' | 'createPullRequest' | 'updatePullRequest'> {
  const { call, octokit, target, repository } = api;

  async function findPullRequest(head: string, signal?: AbortSignal): Promise<PullRequest | null> {
    const pulls = await call(
      { action: 'look up the pull request', method: 'GET', path: `/repos/${repository}/pulls` },
      pullListSchema,
      (headers, request) =>
        octokit.rest.pulls.list({
          owner: target.owner,
          repo: target.repo,
          // Always owner:branch: GitHub silently ignores a bare branch name here and answers
          // with every pull request of the repository.
          head: `${target.owner}:${head}`,
          state: 'all',
          per_page: 100,
          headers,
          request,
        }),
      signal,
    );
    const best = pulls
      .map(toPullRequest)
      .sort(
        (a, b) => Number(b.state === 'open') - Number(a.state === 'open') || b.number - a.number,
      );
    return best[0] ?? null;
  }

  async function openPull(
    input: { head: string; base: string; title: string; body: string; draft: boolean },
    signal: AbortSignal | undefined,
  ): Promise<PullRequest> {
    const pull = await call(
      { action: 'open a pull request', method: 'POST', path: `/repos/${repository}/pulls` },
      pullSchema,
      (headers, request) =>
        octokit.rest.pulls.create({
          owner: target.owner,
          repo: target.repo,
          title: input.title,
          head: input.head,
          base: input.base,
          body: input.body,
          draft: input.draft,
          headers,
          request,
        }),
      signal,
    );
    return toPullRequest(pull);
  }

  return {
    findPullRequest,

    async createPullRequest(input, signal): Promise<CreatedPullRequest> {
      try {
        return { pullRequest: await openPull(input, signal), notes: [] };
      } catch (err) {
        if (!(err instanceof ForgeError) || err.status !== 422) throw err;
        if (input.draft && /draft/i.test(err.message)) {
          // Private repositories on GitHub Free/Pro refuse drafts; no API tells beforehand.
          const pullRequest = await openPull({ ...input, draft: false }, signal);
          return {
            pullRequest,
            notes: [
              `GitHub does not allow draft pull requests in ${repository}: opened a normal pull request instead.`,
            ],
          };
        }
        if (/already exists/i.test(err.message)) {
          // A previous attempt opened it and died before recording it (delivery is
          // at-least-once): adopt that pull request rather than fail the turn.
          const existing = await findPullRequest(input.head, signal);
          if (existing?.state === 'open') return { pullRequest: existing, notes: [] };
        }
        throw err;
      }
    },

    async updatePullRequest(number, change, signal) {
      const pull = await call(
        {
          action: `update pull request #${number}`,
          method: 'PATCH',
          path: `/repos/${repository}/pulls/${number}`,
          pullRequest: number,
        },
        pullSchema,
        (headers, request) =>
          octokit.rest.pulls.update({
            owner: target.owner,
            repo: target.repo,
            pull_number: number,
            body: change.body,
            ...(change.title === undefined ? {} : { title: change.title }),
            headers,
            request,
          }),
        signal,
      );
      return toPullRequest(pull);
    },
  };
}

/** Reactions, comments and replies on the repository's threads. */
function githubComments(api: GitHubApi): Pick<ForgeClient, 'acknowledge' | 'reply' | 'comment'> {
  const { call, octokit, target, repository } = api;

  async function commentOn(thread: ThreadRef, body: string, signal?: AbortSignal): Promise<void> {
    // Pull requests are issues to GitHub's comment API.
    await call(
      {
        action: `comment on #${thread.number}`,
        method: 'POST',
        path: `/repos/${repository}/issues/${thread.number}/comments`,
      },
      commentSchema,
      (headers, request) =>
        octokit.rest.issues.createComment({
          owner: target.owner,
          repo: target.repo,
          issue_number: thread.number,
          body,
          headers,
          request,
        }),
      signal,
    );
  }

  return {
    async acknowledge(comment: CommentRef, signal?: AbortSignal) {
      const where = { owner: target.owner, repo: target.repo, content: 'eyes' as const };
      if (comment.where === 'line') {
        await call(
          {
            action: 'react to a review comment',
            method: 'POST',
            path: `/repos/${repository}/pulls/comments/${comment.commentId}/reactions`,
          },
          reactionSchema,
          (headers, request) =>
            octokit.rest.reactions.createForPullRequestReviewComment({
              ...where,
              comment_id: Number(comment.commentId),
              headers,
              request,
            }),
          signal,
        );
        return;
      }
      if (comment.where === 'review') {
        // A review's body takes no reaction: the pull request it reviews gets the 👀.
        await call(
          {
            action: `react to pull request #${comment.thread.number}`,
            method: 'POST',
            path: `/repos/${repository}/issues/${comment.thread.number}/reactions`,
          },
          reactionSchema,
          (headers, request) =>
            octokit.rest.reactions.createForIssue({
              ...where,
              issue_number: comment.thread.number,
              headers,
              request,
            }),
          signal,
        );
        return;
      }
      await call(
        {
          action: 'react to a comment',
          method: 'POST',
          path: `/repos/${repository}/issues/comments/${comment.commentId}/reactions`,
        },
        reactionSchema,
        (headers, request) =>
          octokit.rest.reactions.createForIssueComment({
            ...where,
            comment_id: Number(comment.commentId),
            headers,
            request,
          }),
        signal,
      );
    },

    async reply(comment, body, signal) {
      if (comment.where !== 'line') return commentOn(comment.thread, body, signal);
      const number = comment.thread.number;
      // GitHub takes replies to a thread's first comment only: a reply in the thread names it.
      const asked = await call(
        {
          action: 'read a review comment',
          method: 'GET',
          path: `/repos/${repository}/pulls/comments/${comment.commentId}`,
        },
        reviewCommentSchema,
        (headers, request) =>
          octokit.rest.pulls.getReviewComment({
            owner: target.owner,
            repo: target.repo,
            comment_id: Number(comment.commentId),
            headers,
            request,
          }),
        signal,
      );
      const root = asked.in_reply_to_id ?? asked.id;
      await call(
        {
          action: `reply to a review comment on pull request #${number}`,
          method: 'POST',
          path: `/repos/${repository}/pulls/${number}/comments/${root}/replies`,
          pullRequest: number,
        },
        commentSchema,
        (headers, request) =>
          octokit.rest.pulls.createReplyForReviewComment({
            owner: target.owner,
            repo: target.repo,
            pull_number: number,
            comment_id: root,
            body,
            headers,
            request,
          }),
        signal,
      );
    },

    comment: commentOn,
  };
}

/** Who may write to the repository. */
function githubPermissions(api: GitHubApi): Pick<ForgeClient, 'canWrite'> {
  const { call, octokit, target, repository } = api;
  return {
    async canWrite(user, signal) {
      try {
        const level = await call(
          {
            action: `read ${user.login}'s permission`,
            method: 'GET',
            path: `/repos/${repository}/collaborators/${user.login}/permission`,
          },
          permissionSchema,
          (headers, request) =>
            octokit.rest.repos.getCollaboratorPermissionLevel({
              owner: target.owner,
              repo: target.repo,
              username: user.login,
              headers,
              request,
            }),
          signal,
        );
        return (
          WRITE_PERMISSIONS.has(level.permission) || WRITE_PERMISSIONS.has(level.role_name ?? '')
        );
      } catch (err) {
        // GitHub answers 404 for a login that is not a user (a deleted account): no access.
        if (err instanceof ForgeError && err.status === 404) return false;
        throw err;
      }
    },
  };
}

function tokenSource(
  options: ForgeClientOptions,
  request: Octokit['request'],
  repository: string,
): TokenSource {
  const { githubApp, token } = options.credentials;
  if (githubApp) {
    const exchange: CallAttempt = {
      action: 'create a GitHub App installation token',
      method: 'POST',
      path: `/app/installations/${githubApp.installationId}/access_tokens`,
      repository,
      auth: 'app',
      appTokenExchange: { installationId: githubApp.installationId },
    };
    return githubAppTokens(githubApp, {
      request,
      failure: (err) => toForgeError(err, exchange),
      unexpected: () => unexpectedAnswer(exchange),
      now: options.now,
    });
  }
  if (token) return staticToken(token);
  throw new ForgeError(
    'github',
    'No GitHub credentials configured: set a personal access token or a GitHub App (app id, private key, installation id)',
    { transient: false },
  );
}

function parseApiUrl(apiUrl: string): string {
  let url: URL;
  try {
    url = new URL(apiUrl);
  } catch {
    url = new URL('invalid:');
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.username || url.password) {
    throw new ForgeError(
      'github',
      'The GitHub API URL must be an http(s) URL without credentials, e.g. https://api.github.com or https://ghe.example.com/api/v3',
      { transient: false },
    );
  }
  return url.href.replace(/\/+$/, '');
}

function toPullRequest(pull: GitHubPull): PullRequest {
  return {
    number: pull.number,
    url: pull.html_url,
    draft: pull.draft ?? false,
    state: pull.merged_at ? 'merged' : pull.state,
  };
}

function unexpectedAnswer(attempted: CallAttempt): ForgeError {
  return new ForgeError(
    'github',
    `GitHub answered an unexpected response to ${attempted.method} ${attempted.path}: check the API URL (GitHub Enterprise Server: https://<host>/api/v3)`,
    { transient: false },
  );
}
