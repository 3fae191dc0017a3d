// The Gitea and Forgejo forge (REST API v1, always at an explicit URL): finds, opens and updates
// a job's pull request and hands git the HTTPS header for pushes; what the pull request watch
// asks of it (status, checks, merge) is in ./pull-requests.ts. Gitea's list of pull requests
// cannot filter by head branch, so the look-up pages through it, newest activity first, bounded.

import { z } from 'zod';
import {
  createForgeHttp,
  type ForgeHttp,
  normalizeApiUrl,
  pathBelowBase,
  readForgeRepository,
} from '../http.ts';
import type {
  CommentRef,
  CreatedPullRequest,
  ForgeClient,
  ForgeClientOptions,
  ForgeIssue,
  ForgeProvider,
  ForgeUser,
  PullRequest,
  PullRequestInput,
  ThreadRef,
} from '../types.ts';
import { ForgeError } from '../types.ts';
import { giteaWatch } from './pull-requests.ts';

export const id = 'gitea';

const PERMISSIONS =
  'the token needs the write:repository scope (Gitea 1.19 and later; older versions and Forgejo before 1.20 also need write:issue) and write access to the repository';

export const provider: ForgeProvider = {
  id,
  name: 'Gitea',
  tokenPermissions: PERMISSIONS,
  // Gitea and Forgejo have no single public instance: the API URL is always configured.
  defaultApiUrl: () => undefined,
  checkTarget(apiUrl, repository) {
    giteaTarget(apiUrl, repository);
  },
  create: createGiteaClient,
};

const API_SUFFIX = '/api/v1';
const DRAFT_PREFIX = 'WIP: ';
// Gitea's default WORK_IN_PROGRESS_PREFIXES ("WIP:", "[WIP]"), compared case-insensitively.
const DRAFT_TITLE = /^\s*(?:wip:|\[wip\])/i;
const MAX_TITLE = 255;
// Gitea's default MAX_RESPONSE_ITEMS: a larger limit is silently cut to it.
const PAGE_SIZE = 50;
// 1000 pull requests per look-up: enough for a job's recent one, and a bound on a huge list.
const MAX_PAGES = 20;

const TOKEN_HELP =
  "Create an access token (Settings → Applications) with the write:repository scope and set it as the project's forge token.";

const branchSchema = z.object({
  // The branch name; `ref` becomes `refs/pull/N/head` once the branch is deleted.
  label: z.string(),
  ref: z.string(),
  // -1 when the head repository (a fork) was deleted.
  repo_id: z.number().int(),
});
// Only the fields Errand reads. `draft` is absent before Gitea 1.24 / on older Forgejo.
const pullSchema = z.object({
  number: z.number().int().positive(),
  // Shown to users and on the dashboard: nothing but a web link is acceptable.
  html_url: z.url({ protocol: /^https?$/ }),
  title: z.string(),
  state: z.enum(['open', 'closed']),
  merged: z.boolean(),
  draft: z.boolean().optional(),
  head: branchSchema,
  base: branchSchema,
});
const pullListSchema = z.array(pullSchema);
const reactionSchema = z.object({ content: z.string() });
const commentSchema = z.object({ id: z.number() });
const permissionSchema = z.object({ permission: z.string() });
// A pull request is an issue to Gitea too: then `pull_request` is set.
const issueSchema = z.object({
  number: z.number().int().positive(),
  html_url: z.url({ protocol: /^https?$/ }),
  title: z.string(),
  body: z.string().nullable().optional(),
  state: z.enum(['open', 'closed']),
  pull_request: z.object({}).loose().nullable().optional(),
});
const WRITE_PERMISSIONS: ReadonlySet<string> = new Set(['write', 'admin', 'owner']);
type GiteaPull = z.infer<typeof pullSchema>;

/** The API and the repository a repository URL names below it; throws when it names none. */
function giteaTarget(apiUrl: string, repository: string) {
  const api = normalizeApiUrl('gitea', 'Gitea', apiUrl, API_SUFFIX);
  const repo = readForgeRepository(repository);
  const segments = repo ? pathBelowBase(repo, api, API_SUFFIX) : [];
  const [owner, name] = segments;
  if (!repo || !owner || !name || segments.length !== 2) {
    throw new ForgeError(
      'gitea',
      'The repository URL is not a Gitea repository URL: expected https://host/owner/repo(.git), ssh://git@host/owner/repo.git or git@host:owner/repo.git',
      { transient: false },
    );
  }
  return { api, repo, owner, name };
}

function createGiteaClient(options: ForgeClientOptions): ForgeClient {
  const token = options.credentials.token;
  if (!token) {
    throw new ForgeError('gitea', `No Gitea token configured for this project. ${TOKEN_HELP}`, {
      transient: false,
    });
  }
  const { api, repo, owner, name } = giteaTarget(options.apiUrl, options.repository);
  const repository = `${owner}/${name}`;
  const base = `/repos/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`;
  // Where git pushes: the host, below the sub-path Gitea may be installed under.
  const webRoot = `${repo.scheme}://${repo.host}/${repo.segments
    .slice(0, repo.segments.length - 2)
    .map((s) => `${s}/`)
    .join('')}`;
  const http: ForgeHttp = createForgeHttp({
    forge: 'gitea',
    name: 'Gitea',
    apiUrl: api,
    headers: { authorization: `token ${token}` },
    fetch: options.fetch ?? globalThis.fetch,
    repository,
    permissions: PERMISSIONS,
    tokenHelp: TOKEN_HELP,
    secrets: [token],
  });

  const { findPullRequest, createPullRequest, updatePullRequest } = giteaPulls(
    http,
    base,
    repository,
  );
  // The API's origin is the instance's: Gitea Actions' status links are paths on it.
  const watch = giteaWatch({ http, base, repository, origin: api.origin });

  async function gitAuth() {
    // ssh remotes authenticate with the deployment's ssh key; the header is HTTP only.
    if (repo?.scheme === 'ssh') return undefined;
    return {
      urlPrefix: webRoot,
      // Gitea and Forgejo take an access token as the Basic password with any user name (the
      // name is ignored once the token matches); older versions refuse `Authorization: token`
      // on git's paths, so Basic is the one form every version accepts.
      header: `Authorization: Basic ${Buffer.from(`errand:${token}`).toString('base64')}`,
    };
  }

  async function acknowledge(target: CommentRef, signal?: AbortSignal): Promise<void> {
    // A review's body is no comment and takes no reaction: its pull request gets the 👀.
    const path =
      target.where === 'review'
        ? `${base}/issues/${target.thread.number}/reactions`
        : `${base}/issues/comments/${encodeURIComponent(target.commentId)}/reactions`;
    await http.request({
      method: 'POST',
      path,
      body: { content: 'eyes' },
      schema: reactionSchema,
      action: `react to a comment on #${target.thread.number}`,
      signal,
    });
  }

  async function comment(thread: ThreadRef, body: string, signal?: AbortSignal): Promise<void> {
    // Pull requests are issues to Gitea's comment API.
    await http.request({
      method: 'POST',
      path: `${base}/issues/${thread.number}/comments`,
      body: { body },
      schema: commentSchema,
      action: `comment on #${thread.number}`,
      signal,
    });
  }

  async function canWrite(user: ForgeUser, signal?: AbortSignal): Promise<boolean> {
    try {
      const { data } = await http.request({
        method: 'GET',
        path: `${base}/collaborators/${encodeURIComponent(user.login)}/permission`,
        schema: permissionSchema,
        action: `read ${user.login}'s permission`,
        notFound: `${user.login} is not a user of this Gitea`,
        signal,
      });
      return WRITE_PERMISSIONS.has(data.permission);
    } catch (err) {
      if (err instanceof ForgeError && err.status === 404) return false;
      // Gitea tells another user's permission only to an administrator of the repository.
      if (err instanceof ForgeError && err.status === 403)
        throw new ForgeError(
          'gitea',
          `Gitea refused to tell ${user.login}'s permission on ${repository} (403): the token's user must be an administrator of the repository for Errand to check who may ask it for work`,
          { transient: false, status: 403 },
        );
      throw err;
    }
  }

  async function issue(number: number, signal?: AbortSignal): Promise<ForgeIssue | undefined> {
    try {
      const { data } = await http.request({
        method: 'GET',
        path: `${base}/issues/${number}`,
        schema: issueSchema,
        action: `read issue #${number}`,
        notFound: `Gitea issue #${number} not found in ${repository} (404)`,
        signal,
      });
      return {
        number: data.number,
        title: data.title,
        body: data.body ?? '',
        state: data.state,
        url: data.html_url,
        pullRequest: data.pull_request != null,
      };
    } catch (err) {
      if (err instanceof ForgeError && err.status === 404) return undefined;
      throw err;
    }
  }

  return {
    kind: 'gitea',
    findPullRequest,
    createPullRequest,
    updatePullRequest,
    gitAuth,
    acknowledge,
    // Gitea's API answers no comment in its thread: the answer goes in the conversation.
    reply: (target, body, signal) => comment(target.thread, body, signal),
    comment,
    canWrite,
    issue,
    ...watch,
  };
}

/** Finding, opening and updating the job's pull request in the repository at `base`. */
function giteaPulls(
  http: ForgeHttp,
  base: string,
  repository: string,
): Pick<ForgeClient, 'findPullRequest' | 'createPullRequest' | 'updatePullRequest'> {
  const pullNotFound = (index: number) =>
    `Gitea pull request #${index} not found in ${repository} (404): it was deleted, or the token cannot see the repository.`;

  /** The first pull request from `head` in this repository, scanning `state`, newest activity first. */
  async function scan(
    head: string,
    state: 'open' | 'all',
    signal: AbortSignal | undefined,
    want: (pr: PullRequest) => boolean,
  ): Promise<PullRequest | undefined> {
    let seen = 0;
    for (let page = 1; page <= MAX_PAGES; page++) {
      const { data, headers } = await http.request({
        method: 'GET',
        path: `${base}/pulls`,
        query: { state, sort: 'recentupdate', page, limit: PAGE_SIZE },
        schema: pullListSchema,
        action: 'look up the pull request',
        signal,
      });
      const match = data
        .filter((pr) => isFrom(pr, head))
        .map(toPullRequest)
        .find(want);
      if (match) return match;
      seen += data.length;
      const total = Number(headers.get('x-total-count'));
      // Servers may cap `limit` below what we asked, so only an empty page or the total ends it.
      if (data.length === 0 || (Number.isFinite(total) && total > 0 && seen >= total)) break;
    }
    return undefined;
  }

  async function get(index: number, signal: AbortSignal | undefined): Promise<GiteaPull> {
    const { data } = await http.request({
      method: 'GET',
      path: `${base}/pulls/${index}`,
      schema: pullSchema,
      action: `read pull request #${index}`,
      notFound: pullNotFound(index),
      signal,
    });
    return data;
  }

  async function findPullRequest(head: string, signal?: AbortSignal): Promise<PullRequest | null> {
    // Open ones first: a short list on most repositories, and the one a follow-up wants.
    const open = await scan(head, 'open', signal, () => true);
    if (open) return open;
    return (await scan(head, 'all', signal, () => true)) ?? null;
  }

  async function createPullRequest(
    input: PullRequestInput,
    signal?: AbortSignal,
  ): Promise<CreatedPullRequest> {
    // Delivery is at-least-once: a turn that died after opening the pull request but before
    // recording it comes back here, and must adopt that one rather than open a second.
    const open = await scan(input.head, 'open', signal, () => true);
    if (open) return { pullRequest: open, notes: [] };
    try {
      const { data } = await http.request({
        method: 'POST',
        path: `${base}/pulls`,
        body: {
          head: input.head,
          base: input.base,
          title: draftTitle(input.title, input.draft),
          body: input.body,
        },
        schema: pullSchema,
        action: 'open a pull request',
        notFound: `Gitea found no repository ${repository}, or no branch ${JSON.stringify(input.base)} or ${JSON.stringify(input.head)} in it (404): check the repository URL, the job's base branch, and that the push succeeded.`,
        signal,
      });
      return { pullRequest: toPullRequest(data), notes: [] };
    } catch (err) {
      // 409: another worker opened it between our look-up and our request. Gitea names the
      // existing one ("issue_id: N" is its number), even past the look-up's page bound.
      if (!(err instanceof ForgeError) || err.status !== 409) throw err;
      const existing = /issue_id: (\d+)/.exec(err.message)?.[1];
      const adopted = existing
        ? toPullRequest(await get(Number(existing), signal))
        : await scan(input.head, 'open', signal, () => true);
      if (!adopted) throw err;
      return { pullRequest: adopted, notes: [] };
    }
  }

  async function updatePullRequest(
    number: number,
    change: { title?: string; body: string },
    signal?: AbortSignal,
  ): Promise<PullRequest> {
    const body: { title?: string; body: string } = { body: change.body };
    if (change.title !== undefined) {
      // A new title without the prefix would quietly mark a draft ready: keep whatever state
      // the pull request is in now (a person may have marked it ready on purpose).
      const current = await get(number, signal);
      body.title = draftTitle(change.title, isDraft(current));
    }
    const { data } = await http.request({
      method: 'PATCH',
      path: `${base}/pulls/${number}`,
      body,
      schema: pullSchema,
      action: `update pull request #${number}`,
      notFound: pullNotFound(number),
      signal,
    });
    return toPullRequest(data);
  }

  return { findPullRequest, createPullRequest, updatePullRequest };
}

function isFrom(pr: GiteaPull, head: string): boolean {
  // A fork's pull request into this repository can have the same branch name.
  return pr.head.label === head && pr.head.repo_id === pr.base.repo_id;
}

function isDraft(pr: GiteaPull): boolean {
  return pr.draft ?? DRAFT_TITLE.test(pr.title);
}

function toPullRequest(pr: GiteaPull): PullRequest {
  return {
    number: pr.number,
    url: pr.html_url,
    draft: isDraft(pr),
    state: pr.merged ? 'merged' : pr.state,
  };
}

/** The title Gitea should store: with the WIP prefix exactly when `draft`, within 255 characters. */
export function draftTitle(title: string, draft: boolean): string {
  const bare = title.trim().replace(DRAFT_TITLE, '').trim() || 'Errand changes';
  const full = draft ? `${DRAFT_PREFIX}${bare}` : bare;
  return full.length > MAX_TITLE ? `${full.slice(0, MAX_TITLE - 1)}…` : full;
}
