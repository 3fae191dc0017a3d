// The GitLab forge (gitlab.com and self-managed, REST API v4): finds, opens and updates a job's
// merge request, addressing the project by its full path (nested groups included), and hands
// git the HTTPS header for pushes; what the pull request watch asks (pipelines, job traces, the
// merge) is in ./pull-requests.ts. Every answer is checked by a schema before use.

import { z } from 'zod';
import {
  createForgeHttp,
  type ForgeHttp,
  type ForgeHttpOptions,
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
import { gitlabPullRequestWatch } from './pull-requests.ts';

export const id = 'gitlab';

const PERMISSIONS =
  'the token needs the api scope and at least the Developer role on the project (to push and to open merge requests)';

export const provider: ForgeProvider = {
  id,
  name: 'GitLab',
  tokenPermissions: PERMISSIONS,
  defaultApiUrl(repository) {
    const repo = readForgeRepository(repository);
    return repo?.host === 'gitlab.com' || repo?.host === 'www.gitlab.com'
      ? 'https://gitlab.com/api/v4'
      : undefined;
  },
  checkTarget(apiUrl, repository) {
    gitlabTarget(apiUrl, repository);
  },
  create: createGitLabClient,
};

const API_SUFFIX = '/api/v4';
const DRAFT_PREFIX = 'Draft: ';
// GitLab's own test for a draft title (MergeRequest::DRAFT_REGEX), anchored at the start.
const DRAFT_TITLE = /^\s*(?:\[draft\]|\(draft\)|draft:|draft\s-\s)/i;
// GitLab refuses longer titles and descriptions with 400.
const MAX_TITLE = 255;
const MAX_DESCRIPTION = 1_000_000;
// A branch has a handful of merge requests at most; one page is all of them.
const PER_PAGE = 100;

const TOKEN_HELP =
  "Create a personal, group or project access token with the api scope and set it as the project's forge token.";

// Only the fields Errand reads; GitLab's merge requests carry dozens more.
const mergeRequestSchema = z.object({
  iid: z.number().int().positive(),
  // Shown to users and on the dashboard: nothing but a web link is acceptable.
  web_url: z.url({ protocol: /^https?$/ }),
  title: z.string(),
  state: z.string(),
  // `draft` since GitLab 13.x; `work_in_progress` before (and deprecated after).
  draft: z.boolean().optional(),
  work_in_progress: z.boolean().optional(),
  source_branch: z.string(),
  source_project_id: z.number().int().optional(),
  target_project_id: z.number().int().optional(),
});
const mergeRequestListSchema = z.array(mergeRequestSchema);
const awardSchema = z.object({ id: z.number(), name: z.string() });
const noteSchema = z.object({ id: z.number() });
const issueSchema = z.object({
  iid: z.number().int().positive(),
  web_url: z.url({ protocol: /^https?$/ }),
  title: z.string(),
  description: z.string().nullable().optional(),
  // `opened` or `closed`.
  state: z.string(),
});
const memberSchema = z.object({ id: z.number(), access_level: z.number().int() });
/** GitLab's Developer role: the least that may push (Maintainer 40, Owner 50). */
const DEVELOPER = 30;
type GitLabMergeRequest = z.infer<typeof mergeRequestSchema>;

/** The API and the project a repository URL names below it; throws when it names none. */
function gitlabTarget(apiUrl: string, repository: string) {
  const api = normalizeApiUrl('gitlab', 'GitLab', apiUrl, API_SUFFIX);
  const repo = readForgeRepository(repository);
  const segments = repo ? pathBelowBase(repo, api, API_SUFFIX) : [];
  if (!repo || segments.length < 2) {
    throw new ForgeError(
      'gitlab',
      'The repository URL is not a GitLab project URL: expected https://host/group/project(.git) (subgroups allowed), ssh://git@host/group/project.git or git@host:group/project.git',
      { transient: false },
    );
  }
  return { api, repo, segments };
}

function createGitLabClient(options: ForgeClientOptions): ForgeClient {
  const token = options.credentials.token;
  if (!token) {
    throw new ForgeError('gitlab', `No GitLab token configured for this project. ${TOKEN_HELP}`, {
      transient: false,
    });
  }
  const { api, repo, segments } = gitlabTarget(options.apiUrl, options.repository);
  const projectPath = segments.join('/');
  // Where git pushes: the host, below the sub-path GitLab may be installed under.
  const webRoot = `${repo.scheme}://${repo.host}/${repo.segments
    .slice(0, repo.segments.length - segments.length)
    .map((s) => `${s}/`)
    .join('')}`;
  // GitLab takes a project's full path as its id when the slashes are encoded.
  const project = `/projects/${encodeURIComponent(projectPath)}`;
  const httpOptions: ForgeHttpOptions = {
    forge: 'gitlab',
    name: 'GitLab',
    apiUrl: api,
    // Bearer rather than PRIVATE-TOKEN: GitLab takes personal, group, project and OAuth tokens
    // this way, and fetch drops Authorization on a cross-origin redirect.
    headers: { authorization: `Bearer ${token}` },
    fetch: options.fetch ?? globalThis.fetch,
    repository: projectPath,
    repositoryNoun: 'project',
    permissions: PERMISSIONS,
    tokenHelp: TOKEN_HELP,
    secrets: [token],
  };
  const http: ForgeHttp = createForgeHttp(httpOptions);

  const { findPullRequest, createPullRequest, updatePullRequest } = gitlabMergeRequests(
    http,
    project,
    projectPath,
  );

  async function gitAuth() {
    // ssh remotes authenticate with the deployment's ssh key; the header is HTTP only.
    if (repo?.scheme === 'ssh') return undefined;
    return {
      urlPrefix: webRoot,
      // GitLab accepts any access token as the password over HTTPS; `oauth2` is the user name
      // it documents, and the only one that also works for OAuth tokens.
      header: `Authorization: Basic ${Buffer.from(`oauth2:${token}`).toString('base64')}`,
    };
  }

  /** The API path of an issue or merge request of the project. */
  const threadPath = (thread: ThreadRef) =>
    `${project}/${thread.kind === 'pull-request' ? 'merge_requests' : 'issues'}/${thread.number}`;
  const threadName = (thread: ThreadRef) =>
    thread.kind === 'pull-request' ? `merge request !${thread.number}` : `issue #${thread.number}`;

  async function acknowledge(comment: CommentRef, signal?: AbortSignal): Promise<void> {
    try {
      await http.request({
        method: 'POST',
        path: `${threadPath(comment.thread)}/notes/${encodeURIComponent(comment.commentId)}/award_emoji`,
        body: { name: 'eyes' },
        schema: awardSchema,
        action: `react to a comment on ${threadName(comment.thread)}`,
        signal,
      });
    } catch (err) {
      // GitLab answers an award the token's user gave already with a 404 that says so (GitHub
      // and Gitea answer the reaction there): the 👀 is there, as a retry wants it.
      if (
        err instanceof ForgeError &&
        err.status === 404 &&
        /already been taken/i.test(err.message)
      )
        return;
      throw err;
    }
  }

  async function comment(thread: ThreadRef, body: string, signal?: AbortSignal): Promise<void> {
    await http.request({
      method: 'POST',
      path: `${threadPath(thread)}/notes`,
      body: { body },
      schema: noteSchema,
      action: `comment on ${threadName(thread)}`,
      signal,
    });
  }

  async function reply(target: CommentRef, body: string, signal?: AbortSignal): Promise<void> {
    if (target.discussionId === null) return comment(target.thread, body, signal);
    await http.request({
      method: 'POST',
      path: `${threadPath(target.thread)}/discussions/${encodeURIComponent(target.discussionId)}/notes`,
      body: { body },
      schema: noteSchema,
      action: `reply in a discussion of ${threadName(target.thread)}`,
      signal,
    });
  }

  async function canWrite(user: ForgeUser, signal?: AbortSignal): Promise<boolean> {
    if (!/^\d+$/.test(user.id)) return false;
    try {
      const { data } = await http.request({
        method: 'GET',
        // `all`: members of the project and of its groups, inherited roles included.
        path: `${project}/members/all/${user.id}`,
        schema: memberSchema,
        action: `read ${user.login}'s role`,
        notFound: `${user.login} is not a member of ${projectPath}`,
        signal,
      });
      return data.access_level >= DEVELOPER;
    } catch (err) {
      if (err instanceof ForgeError && err.status === 404) return false;
      throw err;
    }
  }

  return {
    kind: 'gitlab',
    findPullRequest,
    createPullRequest,
    updatePullRequest,
    gitAuth,
    acknowledge,
    reply,
    comment,
    canWrite,
    ...gitlabIssues(http, project, projectPath),
    ...gitlabPullRequestWatch(httpOptions, project, projectPath),
  };
}

/** Reading the project's issues by iid. */
function gitlabIssues(
  http: ForgeHttp,
  project: string,
  projectPath: string,
): Pick<ForgeClient, 'issue'> {
  async function issue(iid: number, signal?: AbortSignal): Promise<ForgeIssue | undefined> {
    try {
      const { data } = await http.request({
        method: 'GET',
        path: `${project}/issues/${iid}`,
        schema: issueSchema,
        action: `read issue #${iid}`,
        notFound: `GitLab issue #${iid} not found in ${projectPath} (404)`,
        signal,
      });
      return {
        number: data.iid,
        title: data.title,
        body: data.description ?? '',
        state: data.state === 'opened' ? 'open' : 'closed',
        url: data.web_url,
        pullRequest: false,
      };
    } catch (err) {
      if (err instanceof ForgeError && err.status === 404) return undefined;
      throw err;
    }
  }
  return { issue };
}

/** Finding, opening and updating the job's merge request in the project at `project`. */
function gitlabMergeRequests(
  http: ForgeHttp,
  project: string,
  projectPath: string,
): Pick<ForgeClient, 'findPullRequest' | 'createPullRequest' | 'updatePullRequest'> {
  const mergeRequestNotFound = (iid: number) =>
    `GitLab merge request !${iid} not found in ${projectPath} (404): it was deleted, or the token cannot see the project.`;

  async function list(
    head: string,
    state: 'all' | 'opened',
    signal: AbortSignal | undefined,
  ): Promise<PullRequest[]> {
    const { data } = await http.request({
      method: 'GET',
      path: `${project}/merge_requests`,
      query: { source_branch: head, state, per_page: PER_PAGE },
      schema: mergeRequestListSchema,
      action: 'look up the merge request',
      signal,
    });
    return (
      data
        // A fork's merge request into this project can have the same branch name.
        .filter((mr) => mr.source_branch === head && !fromFork(mr))
        .map(toPullRequest)
        .sort((a, b) => rank(b) - rank(a) || b.number - a.number)
    );
  }

  async function get(iid: number, signal: AbortSignal | undefined): Promise<GitLabMergeRequest> {
    const { data } = await http.request({
      method: 'GET',
      path: `${project}/merge_requests/${iid}`,
      schema: mergeRequestSchema,
      action: `read merge request !${iid}`,
      notFound: mergeRequestNotFound(iid),
      signal,
    });
    return data;
  }

  async function findPullRequest(head: string, signal?: AbortSignal): Promise<PullRequest | null> {
    return (await list(head, 'all', signal))[0] ?? null;
  }

  async function createPullRequest(
    input: PullRequestInput,
    signal?: AbortSignal,
  ): Promise<CreatedPullRequest> {
    // Delivery is at-least-once: a turn that died after opening the merge request but before
    // recording it comes back here, and must adopt that one rather than open a second.
    const open = (await list(input.head, 'opened', signal))[0];
    if (open) return { pullRequest: open, notes: [] };

    const notes: string[] = [];
    const description = limitDescription(input.body, notes);
    try {
      const { data } = await http.request({
        method: 'POST',
        path: `${project}/merge_requests`,
        body: {
          source_branch: input.head,
          target_branch: input.base,
          title: draftTitle(input.title, input.draft),
          description,
        },
        schema: mergeRequestSchema,
        action: 'open a merge request',
        signal,
      });
      return { pullRequest: toPullRequest(data), notes };
    } catch (err) {
      // 409: another worker opened it between our look-up and our request.
      if (!(err instanceof ForgeError) || err.status !== 409) throw err;
      const existing = /!(\d+)/.exec(err.message)?.[1];
      const adopted = existing
        ? toPullRequest(await get(Number(existing), signal))
        : (await list(input.head, 'opened', signal))[0];
      if (!adopted) throw err;
      return { pullRequest: adopted, notes };
    }
  }

  async function updatePullRequest(
    number: number,
    change: { title?: string; body: string },
    signal?: AbortSignal,
  ): Promise<PullRequest> {
    const notes: string[] = [];
    const body: { title?: string; description: string } = {
      description: limitDescription(change.body, notes),
    };
    if (change.title !== undefined) {
      // A new title without the prefix would quietly mark a draft ready: keep whatever state
      // the merge request is in now (a person may have marked it ready on purpose).
      const current = await get(number, signal);
      body.title = draftTitle(change.title, isDraft(current));
    }
    const { data } = await http.request({
      method: 'PUT',
      path: `${project}/merge_requests/${number}`,
      body,
      schema: mergeRequestSchema,
      action: `update merge request !${number}`,
      notFound: mergeRequestNotFound(number),
      signal,
    });
    return toPullRequest(data);
  }

  return { findPullRequest, createPullRequest, updatePullRequest };
}

function fromFork(mr: GitLabMergeRequest): boolean {
  return (
    mr.source_project_id !== undefined &&
    mr.target_project_id !== undefined &&
    mr.source_project_id !== mr.target_project_id
  );
}

function isDraft(mr: GitLabMergeRequest): boolean {
  return mr.draft ?? mr.work_in_progress ?? DRAFT_TITLE.test(mr.title);
}

function toPullRequest(mr: GitLabMergeRequest): PullRequest {
  return { number: mr.iid, url: mr.web_url, draft: isDraft(mr), state: toState(mr.state) };
}

function toState(state: string): PullRequest['state'] {
  if (state === 'merged') return 'merged';
  // `locked` is an open merge request while GitLab merges it.
  if (state === 'opened' || state === 'locked') return 'open';
  return 'closed';
}

function rank(pr: PullRequest): number {
  return pr.state === 'open' ? 1 : 0;
}

/** The title GitLab should store: with the draft prefix exactly when `draft`, within 255 characters. */
export function draftTitle(title: string, draft: boolean): string {
  const bare = title.trim().replace(DRAFT_TITLE, '').trim() || 'Errand changes';
  const full = draft ? `${DRAFT_PREFIX}${bare}` : bare;
  return full.length > MAX_TITLE ? `${full.slice(0, MAX_TITLE - 1)}…` : full;
}

function limitDescription(body: string, notes: string[]): string {
  if (body.length <= MAX_DESCRIPTION) return body;
  notes.push('The description was longer than GitLab allows and was shortened.');
  return `${body.slice(0, MAX_DESCRIPTION)}\n\n… (shortened)`;
}
