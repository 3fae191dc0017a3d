// A stateful fake of Gitea's REST API v1 (the pull request endpoints Errand uses, with their
// reviews, merge and the commit statuses of their head, and issues; Forgejo speaks the same) on 127.0.0.1. It checks the token, keeps pull requests between calls, pages lists
// the way Gitea does (`page`/`limit`, capped at 50, `X-Total-Count`), validates bodies and
// answers errors with Gitea's status and `{message, url}` shape, and records every request.
// Anything it does not support, or a real Gitea would ignore but is probably a mistake (an
// unknown field or query parameter), lands in `unexpected`; `assertNoUnexpected()` throws.

import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import {
  type ForgeExchange,
  isRecord,
  pageOf,
  type RecordedForgeRequest,
  safeDecode,
  startRecordingForge,
  tickingClock,
} from './fake-forge-server.ts';
import { giteaSender, type SendWebhook } from './forge-requests.ts';

export interface FakeGiteaRepo {
  /** `owner/repo`. */
  path: string;
  /** Branches that exist; the base branch must be one of them. Default: `['main']`. */
  branches?: string[];
}

export interface FakeGiteaOptions {
  token: string;
  repos: Array<FakeGiteaRepo | string>;
  /**
   * `write` (default): the token has write:repository. `read`: a read-only token, refused with
   * Gitea's 403 scope message on every write.
   */
  access?: 'write' | 'read';
  /** Serve Gitea under a sub-path, e.g. `/gitea` (API at `/gitea/api/v1`). */
  basePath?: string;
  /** Refuse a head branch that is not in `branches` (Gitea does; off so tests need not push). */
  requireHeadBranch?: boolean;
  /** Send webhook deliveries as Forgejo does (X-Forgejo-* headers beside X-Gitea-*). */
  forgejo?: boolean;
  /** Add `draft` to pull request JSON, as recent versions do. Default: false, like older ones. */
  draftField?: boolean;
  /**
   * The commit a branch points at, read from the real git repository the test serves: a pull
   * request's head sha is `heads(repo, head)`, else a fixed sha.
   */
  heads?: (repo: string, branch: string) => string | undefined;
}

/** A check as a test sets it: Gitea keeps it as a commit status of the commit. */
export interface FakeGiteaCheck {
  name: string;
  /** Gitea's `error` and `warning` too, which Errand reads as failed and passed. */
  state: 'pending' | 'success' | 'failure' | 'error' | 'warning';
  /**
   * The CI's output. Gitea serves no log: a CI that reports through statuses says its last
   * words in the description, so the status's description is the log's last line.
   */
  log?: string;
  /** The status's description (what the CI says of the run); wins over `log`'s last line. */
  summary?: string;
  /** The target URL; default a path on the instance, as Gitea Actions gives it. */
  url?: string;
}

/** A commit status, as Gitea keeps it (every status posted is kept; the latest per context holds). */
export interface FakeGiteaStatus {
  repoPath: string;
  sha: string;
  id: number;
  context: string;
  status: FakeGiteaCheck['state'];
  description: string;
  targetUrl: string;
  createdAt: string;
}

/** A review of a pull request. */
export interface FakeGiteaReview {
  repoPath: string;
  number: number;
  id: number;
  login: string;
  state: 'APPROVED' | 'REQUEST_CHANGES' | 'COMMENT';
  dismissed: boolean;
  submittedAt: string;
}

export interface FakePullRequest {
  id: number;
  number: number;
  repoPath: string;
  repoId: number;
  title: string;
  body: string;
  state: 'open' | 'closed';
  merged: boolean;
  head: string;
  base: string;
  /** For a pull request from a fork: that repository's id. Default: the repository's own. */
  headRepoId: number;
  /** The head branch was deleted (after a merge): Gitea then reports `ref` as `refs/pull/N/head`. */
  headBranchDeleted: boolean;
  labels: string[];
  /** Whether it merges without conflicts; null while Gitea is still checking. Default true. */
  mergeable: boolean | null;
  mergedAt: string | null;
  mergeCommitSha: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface FakeGiteaIssue {
  repoPath: string;
  number: number;
  title: string;
  body: string;
  author: string;
  htmlUrl: string;
  state: 'open' | 'closed';
}

/** A comment on an issue or pull request; a review comment (on a line) has a path. */
export interface FakeGiteaComment {
  repoPath: string;
  id: number;
  number: number;
  author: string;
  body: string;
  htmlUrl: string;
  path: string | null;
  line: number | null;
  diffHunk: string | null;
}

/** A comment to write on an issue or pull request; with `path`, on a line of its diff. */
export interface NewGiteaComment {
  number: number;
  author: string;
  body: string;
  path?: string;
  line?: number;
  diffHunk?: string;
}

export interface FakeGiteaReaction {
  repoPath: string;
  on: 'comment' | 'issue';
  /** The comment's id, or the issue's number. */
  id: number;
  content: string;
  user: string;
}

export type FakeGiteaPermission = 'owner' | 'admin' | 'write' | 'read' | 'none';

export type RecordedGiteaRequest = RecordedForgeRequest;

export interface FakeGitea {
  /** `http://127.0.0.1:<port>` plus basePath: where repositories' web pages and git live. */
  url: string;
  /** `url` + `/api/v1`. */
  apiUrl: string;
  requests: RecordedGiteaRequest[];
  unexpected: string[];
  /** Stored pull requests (copies), optionally of one repository. */
  pulls(repoPath?: string): FakePullRequest[];
  /** Adds a pull request as if someone had opened it; returns it. */
  addPull(
    repoPath: string,
    pr: Partial<Omit<FakePullRequest, 'id' | 'number' | 'repoPath' | 'repoId'>> & { head: string },
  ): FakePullRequest;
  /** Closes, merges or reopens a pull request, as a person on Gitea would. */
  setState(repoPath: string, number: number, state: 'open' | 'closed' | 'merged'): void;
  addBranch(repoPath: string, branch: string): void;
  /** Sets what a user may do in the repository; a login never set is no user (404). */
  setPermission(repoPath: string, login: string, permission: FakeGiteaPermission): void;
  /** Opens an issue, as a person would; issues and pull requests share their numbers. */
  openIssue(
    repoPath: string,
    issue: { title: string; body?: string; author: string; state?: 'open' | 'closed' },
  ): FakeGiteaIssue;
  /** Writes a comment, as a person would; with `path`, a review comment on a line. */
  addComment(repoPath: string, comment: NewGiteaComment): FakeGiteaComment;
  issues(repoPath: string): FakeGiteaIssue[];
  comments(repoPath: string): FakeGiteaComment[];
  reactions(repoPath: string): FakeGiteaReaction[];
  /** A new status of that name on that commit; it replaces the last one as the one that holds. */
  setCheck(repo: string, sha: string, check: FakeGiteaCheck): void;
  /** Every status of a commit, oldest first. */
  statuses(repo: string, sha: string): FakeGiteaStatus[];
  /** Whether the pull request merges without conflicts (default true); null: still checking. */
  setMergeable(repo: string, number: number, mergeable: boolean | null): void;
  approve(repo: string, number: number, login: string): void;
  /** A review submitted by `login` (approving, asking for changes, or a comment). */
  addReview(
    repo: string,
    number: number,
    review: { login: string; state: FakeGiteaReview['state']; dismissed?: boolean },
  ): FakeGiteaReview;
  addPullLabel(repo: string, number: number, label: string): void;
  /** The merge API refuses with this message (branch protection), or accepts again (null). */
  blockMerges(repo: string, message: string | null): void;
  /** Merges done through the API, in order: the method is Gitea's `Do`, the sha the head merged. */
  merges(): Array<{ repo: string; number: number; method: string; sha: string }>;
  /** The next request gets this status (Gitea's body shape) whatever it asked. */
  failNext(status: number, headers?: Record<string, string>, body?: unknown): void;
  /**
   * Sends Errand a signed webhook delivery as this forge does, built from the fake's state
   * (test/support/forge-requests.ts); returns Errand's answer, and a way to redeliver it.
   */
  sendWebhook: SendWebhook;
  assertNoUnexpected(): void;
  /** Forgets pull requests, issues, comments, reactions, permissions, recordings, failures and problems. */
  reset(): void;
  close(): Promise<void>;
}

interface RepoState {
  id: number;
  owner: string;
  name: string;
  branches: Set<string>;
}

const CREATE_FIELDS = new Set([
  'head',
  'base',
  'title',
  'body',
  'assignee',
  'assignees',
  'milestone',
  'labels',
  'due_date',
  'reviewers',
  'team_reviewers',
]);
const EDIT_FIELDS = new Set([
  'title',
  'body',
  'base',
  'state',
  'assignee',
  'assignees',
  'milestone',
  'labels',
  'due_date',
  'unset_due_date',
  'allow_maintainer_edit',
]);
const LIST_PARAMS = new Set([
  'state',
  'sort',
  'page',
  'limit',
  'milestone',
  'labels',
  'poster',
  'base_branch',
]);
const SORTS = new Set([
  '',
  'oldest',
  'recentupdate',
  'recentclose',
  'leastupdate',
  'mostcomment',
  'leastcomment',
  'priority',
]);
/** What Gitea's merge form takes (`Do` must be one of MERGE_STYLES). */
const MERGE_FIELDS = new Set([
  'Do',
  'MergeTitleField',
  'MergeMessageField',
  'MergeCommitID',
  'head_commit_id',
  'delete_branch_after_merge',
  'force_merge',
  'merge_when_checks_succeed',
]);
const MERGE_STYLES = new Set([
  'merge',
  'rebase',
  'rebase-merge',
  'squash',
  'fast-forward-only',
  'manually-merged',
]);
const STATUS_PARAMS = new Set(['sort', 'state', 'page', 'limit']);
const PAGE_PARAMS = new Set(['page', 'limit']);
/** A pull request's head when the test serves no repository to read it from. */
const FIXED_HEAD = '1111111111111111111111111111111111111111';
const DEFAULT_PAGE_SIZE = 30;
const MAX_PAGE_SIZE = 50;
const WIP_TITLE = /^(?:wip:|\[wip\])/i;

export async function startFakeGitea(options: FakeGiteaOptions): Promise<FakeGitea> {
  const basePath = (options.basePath ?? '').replace(/\/+$/, '');
  const apiPrefix = `${basePath}/api/v1`;
  let nextRepoId = 1;
  const repos = new Map<string, RepoState>();
  for (const entry of options.repos) {
    const repo = typeof entry === 'string' ? { path: entry } : entry;
    const [owner, name, ...rest] = repo.path.split('/');
    if (!owner || !name || rest.length > 0) throw new Error(`not owner/repo: ${repo.path}`);
    repos.set(repo.path.toLowerCase(), {
      id: nextRepoId++,
      owner,
      name,
      branches: new Set(repo.branches ?? ['main']),
    });
  }
  let pulls: FakePullRequest[] = [];
  let nextId = 1;
  const tokenUser = 'errand-bot';
  const issues: FakeGiteaIssue[] = [];
  const comments: FakeGiteaComment[] = [];
  const reactions: FakeGiteaReaction[] = [];
  const permissions = new Map<string, FakeGiteaPermission>();
  let nextCommentId = 300;
  const statuses: FakeGiteaStatus[] = [];
  let nextStatusId = 1;
  const reviews: FakeGiteaReview[] = [];
  let nextReviewId = 1;
  const blocked = new Map<number, string>();
  const merges: Array<{ repo: string; number: number; method: string; sha: string }> = [];
  const headSha = (pr: FakePullRequest) => options.heads?.(pr.repoPath, pr.head) ?? FIXED_HEAD;
  /** Gitea reads `WIP:` and `[WIP]` titles as drafts, which it never calls mergeable. */
  const isMergeable = (pr: FakePullRequest) =>
    pr.state === 'open' && pr.mergeable === true && !WIP_TITLE.test(pr.title);
  const userJson = (login: string) => ({
    id: 10 + [...login].reduce((sum, ch) => sum + ch.charCodeAt(0), 0),
    login,
    username: login,
  });
  const threadExists = (repo: RepoState, number: number) =>
    issues.some((i) => i.repoPath === `${repo.owner}/${repo.name}` && i.number === number) ||
    pulls.some((p) => p.repoId === repo.id && p.number === number);
  /** Issues and pull requests share a repository's numbers. */
  const nextNumber = (repo: RepoState) =>
    pulls.filter((p) => p.repoId === repo.id).length +
    issues.filter((i) => i.repoPath === `${repo.owner}/${repo.name}`).length +
    1;
  /** Keeps a comment; one not on a line (no path, line or hunk) has them null. */
  const storeComment = (repo: RepoState, fields: NewGiteaComment, id = nextCommentId++) => {
    const isPull = pulls.some((p) => p.repoId === repo.id && p.number === fields.number);
    const comment: FakeGiteaComment = {
      number: fields.number,
      author: fields.author,
      body: fields.body,
      path: fields.path ?? null,
      line: fields.line ?? null,
      diffHunk: fields.diffHunk ?? null,
      repoPath: `${repo.owner}/${repo.name}`,
      id,
      htmlUrl: `${url}/${repo.owner}/${repo.name}/${isPull ? 'pulls' : 'issues'}/${fields.number}#issuecomment-${id}`,
    };
    comments.push(comment);
    return comment;
  };
  const now = tickingClock();
  let url = '';
  const swagger = () => `${url}/api/swagger`;
  const apiError = (message: string) => ({ message, url: swagger() });

  const repoJson = (repo: RepoState) => ({
    id: repo.id,
    name: repo.name,
    full_name: `${repo.owner}/${repo.name}`,
    owner: { id: 1, login: repo.owner },
    html_url: `${url}/${repo.owner}/${repo.name}`,
    clone_url: `${url}/${repo.owner}/${repo.name}.git`,
  });

  const toJson = (pr: FakePullRequest) => {
    const repo = repoById(pr.repoId);
    const headRepo = pr.headRepoId === pr.repoId ? repo : undefined;
    const htmlUrl = `${url}/${repo.owner}/${repo.name}/pulls/${pr.number}`;
    return {
      id: pr.id,
      url: htmlUrl,
      number: pr.number,
      user: { id: 1, login: 'errand-bot' },
      title: pr.title,
      body: pr.body,
      labels: pr.labels.map((name, i) => ({
        id: 40 + i,
        name,
        exclusive: false,
        is_archived: false,
        color: 'ee0701',
        description: '',
        url: `${url}/api/v1/repos/${repo.owner}/${repo.name}/labels/${40 + i}`,
      })),
      milestone: null,
      assignee: null,
      assignees: null,
      state: pr.state,
      is_locked: false,
      comments: 0,
      html_url: htmlUrl,
      diff_url: `${htmlUrl}.diff`,
      patch_url: `${htmlUrl}.patch`,
      // Gitea's false also stands for "still checking" and for a draft.
      mergeable: isMergeable(pr),
      merged: pr.merged,
      merged_at: pr.merged ? (pr.mergedAt ?? pr.updatedAt) : null,
      merge_commit_sha: pr.merged ? pr.mergeCommitSha : null,
      merged_by: null,
      ...(options.draftField ? { draft: WIP_TITLE.test(pr.title) } : {}),
      base: {
        label: pr.base,
        ref: pr.base,
        sha: '0000000000000000000000000000000000000000',
        repo_id: repo.id,
        repo: repoJson(repo),
      },
      head: {
        label: pr.head,
        ref: pr.headBranchDeleted ? `refs/pull/${pr.number}/head` : pr.head,
        sha: headSha(pr),
        repo_id: headRepo ? headRepo.id : pr.headRepoId,
        repo: headRepo ? repoJson(headRepo) : null,
      },
      merge_base: '0000000000000000000000000000000000000000',
      due_date: null,
      created_at: pr.createdAt,
      updated_at: pr.updatedAt,
      closed_at: pr.state === 'closed' ? pr.updatedAt : null,
    };
  };

  function repoById(id: number): RepoState {
    const repo = [...repos.values()].find((r) => r.id === id);
    if (!repo) throw new Error(`no repository ${id}`);
    return repo;
  }

  const route = ({ req, target, record, send, problem, refuse }: ForgeExchange) => {
    const auth = authenticate(req, options.token);
    if (auth === 'missing') return send(401, apiError('token is required'));
    if (auth === 'wrong') return send(401, apiError('invalid username, password or token'));

    const parts = target.pathname
      .slice(apiPrefix.length + 1)
      .split('/')
      .map(safeDecode);
    const [reposPart, owner, name, pullsPart, indexPart, ...rest] = parts;
    if (
      reposPart === 'repos' &&
      owner &&
      name &&
      (pullsPart === 'issues' || pullsPart === 'collaborators')
    ) {
      const repo = repos.get(`${owner}/${name}`.toLowerCase());
      if (!repo) return send(404, apiError('not found'));
      return conversation(repo, pullsPart, indexPart, rest);
    }
    const statusesOf = pullsPart === 'commits' && indexPart && rest.join('/') === 'statuses';
    const ofPull =
      pullsPart === 'pulls' &&
      indexPart !== undefined &&
      /^\d+$/.test(indexPart) &&
      rest.length === 1 &&
      (rest[0] === 'reviews' || rest[0] === 'merge');
    if (reposPart === 'repos' && owner && name && (statusesOf || ofPull)) {
      const repo = repos.get(`${owner}/${name}`.toLowerCase());
      if (!repo) return send(404, apiError('not found'));
      if (statusesOf) return listStatuses(repo, indexPart);
      const pr = pulls.find((p) => p.repoId === repo.id && p.number === Number(indexPart));
      return rest[0] === 'reviews' ? listReviews(pr) : merge(repo, pr);
    }
    if (reposPart !== 'repos' || !owner || !name || pullsPart !== 'pulls' || rest.length > 0) {
      return refuse('unsupported endpoint');
    }
    if (indexPart !== undefined && !/^\d+$/.test(indexPart)) {
      return refuse('unsupported endpoint (pulls/{base}/{head})');
    }
    const methods = indexPart === undefined ? ['GET', 'POST'] : ['GET', 'PATCH'];
    if (!methods.includes(record.method)) return refuse('unsupported method');
    const repo = repos.get(`${owner}/${name}`.toLowerCase());
    if (!repo) return send(404, apiError('not found'));
    const write = record.method !== 'GET';
    if (write && options.access === 'read') {
      return send(
        403,
        apiError(
          'token does not have at least one of required scope(s), required=[write:repository], token scope=read:repository',
        ),
      );
    }
    if (write && !isRecord(record.body)) {
      return send(422, apiError('[]: body must be a JSON object'));
    }
    const body = isRecord(record.body) ? record.body : {};

    if (indexPart === undefined) {
      if (record.method === 'GET') return list(repo);
      if (record.method === 'POST') return create(repo, body);
      return refuse('unsupported method');
    }
    const pr = pulls.find((p) => p.repoId === repo.id && p.number === Number(indexPart));
    if (record.method === 'GET')
      return pr ? send(200, toJson(pr)) : send(404, apiError('not found'));
    if (record.method === 'PATCH') {
      for (const key of Object.keys(body)) {
        if (!EDIT_FIELDS.has(key)) problem(`unknown field ${key}`);
      }
      const typeError = checkStrings(body, ['title', 'body', 'base', 'state']);
      if (typeError) return send(422, apiError(typeError));
      if (!pr) return send(404, apiError('not found'));
      if (typeof body.title === 'string' && body.title.length > 0) pr.title = body.title;
      if (typeof body.body === 'string') pr.body = body.body;
      pr.updatedAt = now();
      // Gitea answers an edit with 201 (a known quirk: "TODO this should be 200").
      return send(201, toJson(pr));
    }
    return refuse('unsupported method');

    /** GET /repos/{owner}/{repo}/commits/{ref}/statuses: newest first, paged. */
    function listStatuses(repo: RepoState, ref: string) {
      if (record.method !== 'GET') return refuse('unsupported method');
      for (const key of target.searchParams.keys()) {
        if (!STATUS_PARAMS.has(key)) problem(`unknown query parameter ${key}`);
      }
      // A branch name is resolved to its commit, as Gitea does for any ref.
      const sha = options.heads?.(`${repo.owner}/${repo.name}`, ref) ?? ref;
      const state = target.searchParams.get('state');
      const all = statuses
        .filter((st) => st.repoPath === `${repo.owner}/${repo.name}` && st.sha === sha)
        .filter((st) => !state || st.status === state)
        .sort((a, b) => b.id - a.id);
      const { items } = pageOf(all, target.searchParams, {
        param: 'limit',
        default: DEFAULT_PAGE_SIZE,
        max: MAX_PAGE_SIZE,
      });
      return send(
        200,
        items.map((st) => ({
          id: st.id,
          status: st.status,
          target_url: st.targetUrl,
          description: st.description,
          url: `${url}/api/v1/repos/${repo.owner}/${repo.name}/statuses/${st.sha}`,
          context: st.context,
          creator: userJson('gitea-actions'),
          created_at: st.createdAt,
          updated_at: st.createdAt,
        })),
        { 'x-total-count': String(all.length) },
      );
    }

    /** GET /repos/{owner}/{repo}/pulls/{index}/reviews: oldest first, paged. */
    function listReviews(pr: FakePullRequest | undefined) {
      if (record.method !== 'GET') return refuse('unsupported method');
      for (const key of target.searchParams.keys()) {
        if (!PAGE_PARAMS.has(key)) problem(`unknown query parameter ${key}`);
      }
      if (!pr) return send(404, apiError('not found'));
      const all = reviews.filter((r) => r.repoPath === pr.repoPath && r.number === pr.number);
      const { items } = pageOf(all, target.searchParams, {
        param: 'limit',
        default: DEFAULT_PAGE_SIZE,
        max: MAX_PAGE_SIZE,
      });
      const htmlUrl = `${url}/${pr.repoPath}/pulls/${pr.number}`;
      return send(
        200,
        items.map((r) => ({
          id: r.id,
          user: userJson(r.login),
          team: null,
          state: r.state,
          body: '',
          commit_id: headSha(pr),
          stale: false,
          official: r.state !== 'COMMENT',
          dismissed: r.dismissed,
          comments_count: 0,
          submitted_at: r.submittedAt,
          updated_at: r.submittedAt,
          html_url: `${htmlUrl}#issuecomment-${r.id}`,
          pull_request_url: htmlUrl,
        })),
        { 'x-total-count': String(all.length) },
      );
    }

    /**
     * POST /repos/{owner}/{repo}/pulls/{index}/merge, refusing in Gitea's order: merged (405
     * with an empty message), closed (404), a draft or not mergeable (405), branch protection
     * (405), the head moved (409); 200 with an empty body when merged.
     */
    function merge(repo: RepoState, pr: FakePullRequest | undefined) {
      if (record.method !== 'POST') return refuse('unsupported method');
      if (options.access === 'read')
        return send(
          403,
          apiError(
            'token does not have at least one of required scope(s), required=[write:repository], token scope=read:repository',
          ),
        );
      const body = isRecord(record.body) ? record.body : {};
      for (const key of Object.keys(body)) {
        if (!MERGE_FIELDS.has(key)) problem(`unknown field ${key}`);
      }
      if (typeof body.Do !== 'string' || !MERGE_STYLES.has(body.Do))
        return send(422, apiError('[Do]: Required'));
      if (body.head_commit_id !== undefined && typeof body.head_commit_id !== 'string')
        return send(422, apiError('[]: json: cannot unmarshal into Go struct field'));
      if (body.Do === 'manually-merged' || body.merge_when_checks_succeed === true)
        problem(`merge style ${body.Do} / scheduled merge is not supported by the fake`);
      if (!pr) return send(404, apiError('not found'));
      if (pr.merged) return send(405, apiError(''));
      if (pr.state === 'closed') return send(404, apiError('not found'));
      if (WIP_TITLE.test(pr.title))
        return send(405, apiError('Work in progress PRs cannot be merged'));
      if (pr.mergeable !== true) return send(405, apiError('Please try again later'));
      const protection = blocked.get(repo.id);
      if (protection !== undefined) return send(405, apiError(protection));
      const head = headSha(pr);
      const asked = typeof body.head_commit_id === 'string' ? body.head_commit_id : '';
      if (asked !== '' && asked !== head) return send(409, apiError('head out of date'));
      pr.merged = true;
      pr.state = 'closed';
      pr.updatedAt = now();
      pr.mergedAt = pr.updatedAt;
      pr.mergeCommitSha = fakeSha(`merge ${pr.repoPath} ${pr.number} ${head}`);
      merges.push({ repo: pr.repoPath, number: pr.number, method: body.Do, sha: head });
      return send(200, '');
    }

    /**
     * GET /repos/{owner}/{repo}/issues/{index}: the issue, or the pull request of that number
     * as Gitea tells one as an issue (with `pull_request`).
     */
    function issueAnswer(repo: RepoState, number: number) {
      const repoPath = `${repo.owner}/${repo.name}`;
      const issue = issues.find((i) => i.repoPath === repoPath && i.number === number);
      const pull = pulls.find((p) => p.repoId === repo.id && p.number === number);
      if (!issue && !pull) return send(404, apiError('issue does not exist'));
      const html = issue?.htmlUrl ?? `${url}/${repoPath}/pulls/${number}`;
      const state = issue?.state ?? pull?.state ?? 'open';
      return send(200, {
        id: 3000 + number,
        url: `${url}${apiPrefix}/repos/${repoPath}/issues/${number}`,
        html_url: html,
        number,
        user: userJson(issue?.author ?? tokenUser),
        title: issue?.title ?? pull?.title ?? '',
        body: issue?.body ?? pull?.body ?? '',
        labels: [],
        state,
        comments: comments.filter((c) => c.repoPath === repoPath && c.number === number).length,
        created_at: now(),
        updated_at: now(),
        closed_at: state === 'closed' ? now() : null,
        pull_request: pull
          ? { merged: pull.merged, merged_at: pull.mergedAt, html_url: html }
          : null,
      });
    }

    /** Comments, reactions and permissions: what Errand says on issues and pull requests. */
    function conversation(
      repo: RepoState,
      collection: string,
      part: string | undefined,
      rest: string[],
    ) {
      const body = isRecord(record.body) ? record.body : {};
      const fields = (allowed: string[]) => {
        for (const key of Object.keys(body))
          if (!allowed.includes(key)) problem(`unknown field ${key}`);
      };
      if (collection === 'collaborators') {
        // GET /repos/{owner}/{repo}/collaborators/{collaborator}/permission
        if (record.method !== 'GET' || !part || rest.join('/') !== 'permission')
          return refuse('unsupported collaborators endpoint');
        const permission = permissions.get(`${repo.id}\n${part.toLowerCase()}`);
        if (!permission) return send(404, apiError('user does not exist'));
        return send(200, { permission, role_name: permission, user: userJson(part) });
      }
      if (record.method === 'GET' && part && /^\d+$/.test(part) && rest.length === 0)
        return issueAnswer(repo, Number(part));
      if (record.method !== 'POST') return refuse('unsupported method');
      if (options.access === 'read')
        return send(
          403,
          apiError('token does not have at least one of required scope(s), required=[write:issue]'),
        );
      const react = (on: FakeGiteaReaction['on'], id: number) => {
        fields(['content']);
        if (typeof body.content !== 'string') return send(422, apiError('[Content]: Required'));
        const existing = reactions.find(
          (r) =>
            r.repoPath === `${repo.owner}/${repo.name}` &&
            r.on === on &&
            r.id === id &&
            r.content === body.content &&
            r.user === tokenUser,
        );
        if (!existing)
          reactions.push({
            repoPath: `${repo.owner}/${repo.name}`,
            on,
            id,
            content: body.content,
            user: tokenUser,
          });
        // Gitea answers 200 when the reaction was there already, 201 when it is new.
        return send(existing ? 200 : 201, {
          user: userJson(tokenUser),
          content: body.content,
          created_at: now(),
        });
      };
      if (part === 'comments' && rest.length === 2 && rest[1] === 'reactions') {
        const comment = comments.find(
          (c) => c.repoPath === `${repo.owner}/${repo.name}` && String(c.id) === rest[0],
        );
        if (!comment) return refuse(`no comment ${rest[0]}`);
        return react('comment', comment.id);
      }
      if (!part || !/^\d+$/.test(part)) return refuse('unsupported endpoint');
      const number = Number(part);
      if (!threadExists(repo, number)) return send(404, apiError('issue does not exist'));
      if (rest.length === 1 && rest[0] === 'reactions') return react('issue', number);
      if (rest.length === 1 && rest[0] === 'comments') {
        fields(['body']);
        if (typeof body.body !== 'string' || body.body === '')
          return send(422, apiError('[Body]: Required'));
        const comment = storeComment(repo, { number, author: tokenUser, body: body.body });
        return send(201, {
          id: comment.id,
          html_url: comment.htmlUrl,
          issue_url: `${url}/${repo.owner}/${repo.name}/issues/${number}`,
          user: userJson(tokenUser),
          body: comment.body,
          created_at: now(),
          updated_at: now(),
        });
      }
      return refuse('unsupported endpoint');
    }

    function list(repo: RepoState) {
      for (const key of target.searchParams.keys()) {
        if (!LIST_PARAMS.has(key)) problem(`unknown query parameter ${key}`);
      }
      const state = target.searchParams.get('state') ?? 'open';
      const sort = target.searchParams.get('sort') ?? '';
      if (!['open', 'closed', 'all'].includes(state)) {
        return send(422, apiError(`[State]: invalid state ${state}`));
      }
      if (!SORTS.has(sort)) problem(`unknown sort ${sort}`);
      const matching = pulls
        .filter((p) => p.repoId === repo.id)
        .filter((p) => state === 'all' || p.state === state)
        .sort((a, b) => {
          if (sort === 'oldest') return a.id - b.id;
          if (sort === 'recentupdate') return b.updatedAt.localeCompare(a.updatedAt) || b.id - a.id;
          if (sort === 'leastupdate') return a.updatedAt.localeCompare(b.updatedAt) || a.id - b.id;
          return b.id - a.id;
        });
      const { items } = pageOf(matching, target.searchParams, {
        param: 'limit',
        default: DEFAULT_PAGE_SIZE,
        max: MAX_PAGE_SIZE,
      });
      return send(200, items.map(toJson), { 'x-total-count': String(matching.length) });
    }

    function create(repo: RepoState, body: Record<string, unknown>) {
      for (const key of Object.keys(body)) {
        if (!CREATE_FIELDS.has(key)) problem(`unknown field ${key}`);
      }
      const typeError = checkStrings(body, ['head', 'base', 'title', 'body']);
      if (typeError) return send(422, apiError(typeError));
      const missing = ['Head', 'Base', 'Title'].filter((k) => !body[k.toLowerCase()]);
      if (missing.length > 0) return send(422, apiError(`[${missing.join(', ')}]: Required`));
      const head = String(body.head);
      const base = String(body.base);
      if (head === base) {
        return send(
          422,
          apiError('Invalid PullRequest: There are no changes between the head and the base'),
        );
      }
      if (head.includes(':')) problem('cross-repository head (owner:branch) is not supported');
      if (!repo.branches.has(base) || (options.requireHeadBranch && !repo.branches.has(head))) {
        return send(404, apiError('not found'));
      }
      const existing = pulls.find(
        (p) =>
          p.repoId === repo.id &&
          p.headRepoId === repo.id &&
          p.state === 'open' &&
          !p.merged &&
          p.head === head &&
          p.base === base,
      );
      if (existing) {
        return send(
          409,
          apiError(
            `pull request already exists for these targets [id: ${existing.id}, issue_id: ${existing.number}, head_repo_id: ${repo.id}, base_repo_id: ${repo.id}, head_branch: ${head}, base_branch: ${base}]`,
          ),
        );
      }
      const pr = store(repo, {
        head,
        base,
        title: String(body.title),
        body: typeof body.body === 'string' ? body.body : '',
      });
      return send(201, toJson(pr));
    }
  };

  const store = (
    repo: RepoState,
    fields: Partial<FakePullRequest> & { head: string },
  ): FakePullRequest => {
    const at = now();
    const pr: FakePullRequest = {
      id: nextId++,
      number: nextNumber(repo),
      repoPath: `${repo.owner}/${repo.name}`,
      repoId: repo.id,
      title: fields.title ?? `Changes from ${fields.head}`,
      body: fields.body ?? '',
      state: fields.state ?? 'open',
      merged: fields.merged ?? false,
      head: fields.head,
      base: fields.base ?? 'main',
      headRepoId: fields.headRepoId ?? repo.id,
      headBranchDeleted: fields.headBranchDeleted ?? false,
      labels: [...(fields.labels ?? [])],
      mergeable: fields.mergeable === undefined ? true : fields.mergeable,
      mergedAt: fields.mergedAt ?? null,
      mergeCommitSha: fields.mergeCommitSha ?? null,
      createdAt: fields.createdAt ?? at,
      updatedAt: fields.updatedAt ?? at,
    };
    pulls.push(pr);
    return pr;
  };

  const server = await startRecordingForge(
    {
      name: 'fake Gitea',
      contentType: 'application/json;charset=utf-8',
      apiPrefix,
      notFound: () => apiError('not found'),
      notJson: (err) => ({ status: 422, body: apiError(`[]: ${String(err)}`) }),
      failure: (status) => apiError(`fake failure ${status}`),
    },
    route,
  );
  url = `${server.origin}${basePath}`;

  const repoOrThrow = (path: string): RepoState => {
    const repo = repos.get(path.toLowerCase());
    if (!repo) throw new Error(`fake Gitea has no repository ${path}`);
    return repo;
  };
  const pullOrThrow = (path: string, number: number): FakePullRequest => {
    const repo = repoOrThrow(path);
    const pr = pulls.find((p) => p.repoId === repo.id && p.number === number);
    if (!pr) throw new Error(`fake Gitea has no pull request #${number} in ${path}`);
    return pr;
  };
  const setCheck = (path: string, sha: string, check: FakeGiteaCheck): FakeGiteaStatus => {
    const repo = repoOrThrow(path);
    const repoPath = `${repo.owner}/${repo.name}`;
    const id = nextStatusId++;
    const lastLine = check.log
      ?.split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '')
      .at(-1);
    const status: FakeGiteaStatus = {
      repoPath,
      sha,
      id,
      context: check.name,
      status: check.state,
      description: check.summary ?? lastLine ?? DESCRIPTIONS[check.state],
      // Gitea Actions links its job by a path on the instance, without the host.
      targetUrl: check.url ?? `${basePath}/${repoPath}/actions/runs/${id}/jobs/0`,
      createdAt: now(),
    };
    statuses.push(status);
    return status;
  };
  const addReview: FakeGitea['addReview'] = (path, number, review) => {
    const pr = pullOrThrow(path, number);
    const stored: FakeGiteaReview = {
      repoPath: pr.repoPath,
      number,
      id: nextReviewId++,
      login: review.login,
      state: review.state,
      dismissed: review.dismissed ?? false,
      submittedAt: now(),
    };
    reviews.push(stored);
    return { ...stored };
  };
  const addPullLabel = (path: string, number: number, label: string) => {
    const pr = pullOrThrow(path, number);
    if (!pr.labels.includes(label)) pr.labels.push(label);
    pr.updatedAt = now();
  };
  const setState: FakeGitea['setState'] = (repoPath, number, state) => {
    const pr = pullOrThrow(repoPath, number);
    pr.state = state === 'open' ? 'open' : 'closed';
    const wasMerged = pr.merged;
    pr.merged = state === 'merged';
    pr.updatedAt = now();
    if (pr.merged && !wasMerged) {
      pr.mergedAt = pr.updatedAt;
      pr.mergeCommitSha = fakeSha(`merge ${pr.repoPath} ${pr.number}`);
    }
  };

  return {
    url,
    apiUrl: `${url}/api/v1`,
    sendWebhook: giteaSender({
      web: url,
      repo: (() => {
        const first = [...repos.values()][0];
        return first ? `${first.owner}/${first.name}` : 'owner/repo';
      })(),
      ...(options.forgejo ? { forgejo: true } : {}),
      pull(path, number) {
        const repo = repos.get(path.toLowerCase());
        const pr = repo && pulls.find((p) => p.repoId === repo.id && p.number === number);
        return pr ? toJson(pr) : undefined;
      },
      status(repo, sha, check) {
        // A delivery announces a status that was created: the one a test set, or a new one.
        const last = statuses
          .filter((st) => st.repoPath.toLowerCase() === repo.toLowerCase() && st.sha === sha)
          .filter((st) => st.context === check.name)
          .at(-1);
        const st = last?.status === check.state ? last : setCheck(repo, sha, check);
        return {
          id: st.id,
          description: st.description,
          target_url: st.targetUrl,
          created_at: st.createdAt,
        };
      },
      happened(repo, number, change) {
        if (change.type === 'approval')
          addReview(repo, number, { login: change.login, state: 'APPROVED' });
        else if (change.type === 'labeled') addPullLabel(repo, number, change.label);
        else if (change.type === 'synchronize') return;
        else if (change.type === 'reopened') setState(repo, number, 'open');
        else {
          // Closing a merged pull request again changes nothing.
          const pr = pullOrThrow(repo, number);
          if (!pr.merged) setState(repo, number, change.type);
        }
      },
      written: (c) => {
        const repo = repos.get(c.repo.toLowerCase());
        if (!repo) throw new Error(`fake Gitea has no repository ${c.repo}`);
        // A review's body is no comment: Gitea keeps it as a review, which nothing here reads.
        if (c.kind === 'review') return;
        storeComment(repo, c, c.id);
      },
    }),
    get requests() {
      return server.requests;
    },
    get unexpected() {
      return server.unexpected;
    },
    pulls(repoPath) {
      const repo = repoPath === undefined ? undefined : repoOrThrow(repoPath);
      return pulls.filter((p) => !repo || p.repoId === repo.id).map((p) => ({ ...p }));
    },
    addPull(repoPath, pr) {
      return { ...store(repoOrThrow(repoPath), pr) };
    },
    setState,
    setCheck(repo, sha, check) {
      setCheck(repo, sha, check);
    },
    statuses(repo, sha) {
      const repoPath = `${repoOrThrow(repo).owner}/${repoOrThrow(repo).name}`;
      return statuses
        .filter((st) => st.repoPath === repoPath && st.sha === sha)
        .map((st) => ({ ...st }));
    },
    setMergeable(repo, number, mergeable) {
      pullOrThrow(repo, number).mergeable = mergeable;
    },
    approve(repo, number, login) {
      addReview(repo, number, { login, state: 'APPROVED' });
    },
    addReview,
    addPullLabel,
    blockMerges(repo, message) {
      const { id } = repoOrThrow(repo);
      if (message === null) blocked.delete(id);
      else blocked.set(id, message);
    },
    merges() {
      return merges.map((m) => ({ ...m }));
    },
    addBranch(repoPath, branch) {
      repoOrThrow(repoPath).branches.add(branch);
    },
    setPermission(repoPath, login, permission) {
      permissions.set(`${repoOrThrow(repoPath).id}\n${login.toLowerCase()}`, permission);
    },
    openIssue(repoPath, issue) {
      const repo = repoOrThrow(repoPath);
      const number = nextNumber(repo);
      const stored: FakeGiteaIssue = {
        repoPath: `${repo.owner}/${repo.name}`,
        number,
        title: issue.title,
        body: issue.body ?? '',
        author: issue.author,
        htmlUrl: `${url}/${repo.owner}/${repo.name}/issues/${number}`,
        state: issue.state ?? 'open',
      };
      issues.push(stored);
      return { ...stored };
    },
    addComment(repoPath, comment) {
      const repo = repoOrThrow(repoPath);
      if (!threadExists(repo, comment.number))
        throw new Error(
          `fake Gitea has no issue or pull request #${comment.number} in ${repoPath}`,
        );
      return { ...storeComment(repo, comment) };
    },
    issues(repoPath) {
      const repo = repoOrThrow(repoPath);
      return issues
        .filter((i) => i.repoPath === `${repo.owner}/${repo.name}`)
        .map((i) => ({ ...i }));
    },
    comments(repoPath) {
      const repo = repoOrThrow(repoPath);
      return comments
        .filter((c) => c.repoPath === `${repo.owner}/${repo.name}`)
        .map((c) => ({ ...c }));
    },
    reactions(repoPath) {
      const repo = repoOrThrow(repoPath);
      return reactions
        .filter((r) => r.repoPath === `${repo.owner}/${repo.name}`)
        .map((r) => ({ ...r }));
    },
    failNext: server.failNext,
    assertNoUnexpected: server.assertNoUnexpected,
    reset() {
      pulls = [];
      issues.length = 0;
      comments.length = 0;
      reactions.length = 0;
      permissions.clear();
      statuses.length = 0;
      reviews.length = 0;
      blocked.clear();
      merges.length = 0;
      server.forget();
      nextId = 1;
    },
    close: server.close,
  };
}

/** The description a CI gives a status when the test says nothing, as Gitea Actions words it. */
const DESCRIPTIONS: Record<FakeGiteaCheck['state'], string> = {
  pending: 'Waiting to run',
  success: 'Successful in 3s',
  failure: 'Failing after 3s',
  error: 'Has been cancelled',
  warning: 'Successful in 3s, with warnings',
};

/** A commit id made from `seed`, the same for the same seed. */
function fakeSha(seed: string): string {
  return createHash('sha1').update(seed).digest('hex');
}

/** Gitea takes `token <t>`, `Bearer <t>`, or Basic with the token as password (or as user name). */
function authenticate(req: IncomingMessage, token: string): 'ok' | 'missing' | 'wrong' {
  const header = req.headers.authorization;
  if (!header) return 'missing';
  const [scheme = '', value = ''] = header.split(' ', 2);
  switch (scheme.toLowerCase()) {
    case 'token':
    case 'bearer':
      return value === token ? 'ok' : 'wrong';
    case 'basic': {
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      const user = colon < 0 ? decoded : decoded.slice(0, colon);
      const password = colon < 0 ? '' : decoded.slice(colon + 1);
      const candidate = password === '' || password === 'x-oauth-basic' ? user : password;
      return candidate === token ? 'ok' : 'wrong';
    }
    default:
      return 'wrong';
  }
}

function checkStrings(body: Record<string, unknown>, keys: string[]): string | undefined {
  const wrong = keys.filter((k) => body[k] !== undefined && typeof body[k] !== 'string');
  return wrong.length > 0
    ? `[]: json: cannot unmarshal into Go struct field of type string: ${wrong.join(', ')}`
    : undefined;
}
