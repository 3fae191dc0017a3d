// A stateful fake of GitLab's REST API v4 (the merge request endpoints Errand uses, issues, and
// what the pull request watch reads: pipelines, jobs and their traces, commit statuses, approvals, the
// merge) on 127.0.0.1. It checks the token, keeps merge requests and pipelines between calls,
// validates bodies and answers errors the way GitLab does (status and JSON shape), and records
// every request.
// Anything it does not support, or a real GitLab would ignore but is probably a mistake (an
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
import { gitlabSender, type SendWebhook } from './forge-requests.ts';

export interface FakeGitLabProject {
  /** Full path, nested groups allowed: `group/sub/project`. */
  path: string;
  /** Branches that exist; the target branch must be one of them. Default: `['main']`. */
  branches?: string[];
}

export interface FakeGitLabOptions {
  token: string;
  projects: Array<FakeGitLabProject | string>;
  /**
   * `write` (default): the token has the api scope and the Developer role. `read`: a
   * `read_api` token, refused with GitLab's 403 `insufficient_scope` on every write.
   */
  access?: 'write' | 'read';
  /** Serve GitLab under a relative URL root, e.g. `/gitlab` (API at `/gitlab/api/v4`). */
  basePath?: string;
  /** Refuse a source branch that is not in `branches` (GitLab does; off so tests need not push). */
  requireSourceBranch?: boolean;
  /**
   * The commit a branch points at, read from the real git repository the test serves: a merge
   * request's head (`sha`) is heads(project path, source branch), else a fixed commit.
   */
  heads?: (repo: string, branch: string) => string | undefined;
}

/** A check as a test sets it: a job of the commit's pipeline. */
export interface FakeCheck {
  name: string;
  state: 'pending' | 'success' | 'failure';
  /** The job's trace. */
  log?: string;
  /** GitLab jobs have no one-line account: kept for the other forges' fakes, unused here. */
  summary?: string;
}

/** A commit status another system posted (POST /projects/:id/statuses/:sha). */
export interface FakeExternalStatus {
  name: string;
  state: 'pending' | 'running' | 'success' | 'failed' | 'canceled';
  description?: string;
  targetUrl?: string;
}

interface FakeJob {
  /** A commit status's id: GitLab numbers jobs and external statuses alike. */
  id: number;
  name: string;
  status: string;
  log: string;
  /** Replaced by a newer run of the same name (GitLab's `retried`). */
  retried: boolean;
  /** An external status rather than a CI job. */
  external: { description: string | null; targetUrl: string | null } | null;
  createdAt: string;
}

interface FakePipeline {
  id: number;
  iid: number;
  projectId: number;
  sha: string;
  ref: string;
  source: 'push' | 'external';
  jobs: FakeJob[];
  createdAt: string;
}

export interface FakeMergeRequest {
  id: number;
  iid: number;
  projectPath: string;
  projectId: number;
  title: string;
  description: string;
  state: 'opened' | 'closed' | 'merged' | 'locked';
  sourceBranch: string;
  targetBranch: string;
  /** For a merge request from a fork: that project's id. Default: the project's own. */
  sourceProjectId: number;
  createdAt: string;
  updatedAt: string;
  labels: string[];
  /** Whether it merges into its target: null while GitLab checks. Default true. */
  mergeable: boolean | null;
  /** Who approved it, by username. */
  approvedBy: string[];
  mergedAt: string | null;
  /** Its head when it was merged; its merge commit. */
  mergedSha: string | null;
  mergeCommitSha: string | null;
}

export interface FakeGitLabIssue {
  projectPath: string;
  iid: number;
  title: string;
  description: string;
  author: string;
  webUrl: string;
  state: 'opened' | 'closed';
}

/** A note (comment) on an issue or merge request, in a discussion; a line note has a position. */
export interface FakeNote {
  projectPath: string;
  id: number;
  on: 'issue' | 'merge_request';
  iid: number;
  discussionId: string;
  author: string;
  body: string;
  webUrl: string;
  position: { path: string; line: number; diffHunk: string } | null;
}

export interface FakeAward {
  projectPath: string;
  noteId: number;
  name: string;
  user: string;
}

export type RecordedGitLabRequest = RecordedForgeRequest;

export interface FakeGitLab {
  /** `http://127.0.0.1:<port>` plus basePath: where projects' web pages and git live. */
  url: string;
  /** `url` + `/api/v4`. */
  apiUrl: string;
  requests: RecordedGitLabRequest[];
  unexpected: string[];
  /** Stored merge requests (copies), optionally of one project. */
  mergeRequests(projectPath?: string): FakeMergeRequest[];
  /** Adds a merge request as if someone had opened it; returns it. */
  addMergeRequest(
    projectPath: string,
    mr: Partial<Omit<FakeMergeRequest, 'id' | 'iid' | 'projectPath' | 'projectId'>> & {
      sourceBranch: string;
    },
  ): FakeMergeRequest;
  /** Closes, merges or reopens a merge request, as a person on GitLab would. */
  setState(projectPath: string, iid: number, state: FakeMergeRequest['state']): void;
  addBranch(projectPath: string, branch: string): void;
  /** A user of this GitLab, with their role on every project (10 Guest … 30 Developer … 50 Owner; 0: none). */
  addUser(user: { username: string; id: number }, accessLevel: number): void;
  /** Opens an issue, as a person on GitLab would. */
  openIssue(
    projectPath: string,
    issue: { title: string; description?: string; author: string; state?: 'opened' | 'closed' },
  ): FakeGitLabIssue;
  /** Writes a note, as a person would: in a new discussion, or in `discussionId`'s. */
  addNote(
    projectPath: string,
    note: {
      on: 'issue' | 'merge_request';
      iid: number;
      author: string;
      body: string;
      discussionId?: string;
      position?: { path: string; line: number; diffHunk: string };
    },
  ): FakeNote;
  issues(projectPath: string): FakeGitLabIssue[];
  notes(projectPath: string): FakeNote[];
  awards(projectPath: string): FakeAward[];
  /** The next request gets this status (GitLab's body shape) whatever it asked. */
  failNext(status: number, headers?: Record<string, string>, body?: unknown): void;
  /**
   * A job of that name on the commit's pipeline (made when the commit has none) ends, or runs,
   * with `state`; a new run of that name replaces the last (which GitLab then calls retried).
   */
  setCheck(repo: string, sha: string, check: FakeCheck): void;
  /** A commit status posted by another system (GitLab's external commit statuses). */
  addStatus(repo: string, sha: string, status: FakeExternalStatus): void;
  /** Whether the merge request merges into its target (null: GitLab still checking). */
  setMergeable(repo: string, number: number, mergeable: boolean | null): void;
  approve(repo: string, number: number, login: string): void;
  addPullLabel(repo: string, number: number, label: string): void;
  /** The merge API refuses with this message (branch protection), or accepts again (null). */
  blockMerges(repo: string, message: string | null): void;
  /** Merges done through the API, in order; `method` is `squash` or `merge` (GitLab's choice). */
  merges(): Array<{ repo: string; number: number; method: string; sha: string }>;
  /**
   * Sends Errand a signed webhook delivery as this forge does, built from the fake's state
   * (test/support/forge-requests.ts); returns Errand's answer, and a way to redeliver it.
   */
  sendWebhook: SendWebhook;
  assertNoUnexpected(): void;
  /**
   * Forgets merge requests, pipelines, issues, notes, award emoji, blocks, merges, recordings,
   * failures and problems (users stay).
   */
  reset(): void;
  close(): Promise<void>;
}

interface ProjectState {
  id: number;
  path: string;
  branches: Set<string>;
}

const REASONS: Record<number, string> = {
  400: 'Bad request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

// GitLab's MergeRequest::DRAFT_REGEX, anchored at the start of the title.
const DRAFT_TITLE = /^\s*(?:\[draft\]|\(draft\)|draft:|draft\s-\s)/i;
const CREATE_FIELDS = new Set([
  'source_branch',
  'target_branch',
  'title',
  'description',
  'assignee_id',
  'assignee_ids',
  'reviewer_ids',
  'labels',
  'milestone_id',
  'remove_source_branch',
  'squash',
  'allow_collaboration',
]);
const UPDATE_FIELDS = new Set([
  'title',
  'description',
  'target_branch',
  'state_event',
  'assignee_id',
  'assignee_ids',
  'reviewer_ids',
  'labels',
  'milestone_id',
  'remove_source_branch',
  'squash',
  'discussion_locked',
]);
const LIST_PARAMS = new Set([
  'source_branch',
  'target_branch',
  'state',
  'per_page',
  'page',
  'order_by',
  'sort',
]);
const MAX_TITLE = 255;
const MAX_DESCRIPTION = 1_048_576;
const MERGE_FIELDS = new Set([
  'merge_commit_message',
  'squash_commit_message',
  'squash',
  'should_remove_source_branch',
  'merge_when_pipeline_succeeds',
  'auto_merge',
  'sha',
]);
const PIPELINE_PARAMS = new Set([
  'sha',
  'ref',
  'status',
  'source',
  'scope',
  'order_by',
  'sort',
  'per_page',
  'page',
]);
const JOB_PARAMS = new Set(['scope', 'include_retried', 'per_page', 'page']);
const STATUS_PARAMS = new Set(['ref', 'stage', 'name', 'pipeline_id', 'all', 'per_page', 'page']);
/** A merge request's head when the test serves no repository (`heads`) that knows it. */
export const FAKE_GITLAB_HEAD = 'c0ffee0000000000000000000000000000c0ffee';

export async function startFakeGitLab(options: FakeGitLabOptions): Promise<FakeGitLab> {
  const basePath = (options.basePath ?? '').replace(/\/+$/, '');
  const apiPrefix = `${basePath}/api/v4`;
  let nextProjectId = 1;
  const projects = new Map<string, ProjectState>();
  for (const entry of options.projects) {
    const project = typeof entry === 'string' ? { path: entry } : entry;
    projects.set(project.path.toLowerCase(), {
      id: nextProjectId++,
      path: project.path,
      branches: new Set(project.branches ?? ['main']),
    });
  }
  let mrs: FakeMergeRequest[] = [];
  let nextId = 1;
  const tokenUser = 'errand-bot';
  const users = new Map<string, { id: number; username: string; accessLevel: number }>([
    [tokenUser, { id: 1, username: tokenUser, accessLevel: 40 }],
  ]);
  const issues: FakeGitLabIssue[] = [];
  const notes: FakeNote[] = [];
  const awards: FakeAward[] = [];
  let nextNoteId = 500;
  const userJson = (username: string) => {
    const user = users.get(username);
    return { id: user?.id ?? 0, username, name: username, state: 'active' };
  };
  const noteJson = (note: FakeNote) => ({
    id: note.id,
    type: note.position ? 'DiffNote' : 'DiscussionNote',
    body: note.body,
    author: userJson(note.author),
    created_at: now(),
    updated_at: now(),
    system: false,
    noteable_id: note.iid,
    noteable_type: note.on === 'issue' ? 'Issue' : 'MergeRequest',
    noteable_iid: note.iid,
    resolvable: note.position !== null,
  });
  const storeNote = (
    project: ProjectState,
    fields: Omit<FakeNote, 'projectPath' | 'id' | 'webUrl' | 'discussionId'> & {
      discussionId?: string | undefined;
    },
    id = nextNoteId++,
  ) => {
    const page = fields.on === 'issue' ? 'issues' : 'merge_requests';
    const note: FakeNote = {
      ...fields,
      projectPath: project.path,
      id,
      discussionId: fields.discussionId ?? `d${id.toString(16).padStart(39, '0')}`,
      webUrl: `${url}/${project.path}/-/${page}/${fields.iid}#note_${id}`,
    };
    notes.push(note);
    return note;
  };
  const threadExists = (project: ProjectState, on: string, iid: number) =>
    on === 'issues'
      ? issues.some((i) => i.projectPath === project.path && i.iid === iid)
      : mrs.some((m) => m.projectId === project.id && m.iid === iid);
  const now = tickingClock();
  let url = '';

  const findProject = (ref: string): ProjectState | undefined => {
    if (/^\d+$/.test(ref)) return [...projects.values()].find((p) => p.id === Number(ref));
    return projects.get(ref.toLowerCase());
  };

  let pipelines: FakePipeline[] = [];
  let nextPipelineId = 9001;
  let nextJobId = 70_001;
  const blocked = new Map<number, string>();
  let merged: Array<{ repo: string; number: number; method: string; sha: string }> = [];
  /** The commit the merge request's source branch points at (its head when merged). */
  const headOf = (mr: FakeMergeRequest) =>
    mr.mergedSha ?? options.heads?.(mr.projectPath, mr.sourceBranch) ?? FAKE_GITLAB_HEAD;
  /** GitLab's merge status fields for a merge request's mergeability. */
  const mergeStatus = (mr: FakeMergeRequest, draft: boolean) => {
    if (mr.state !== 'opened') return { merge_status: 'can_be_merged', detailed: 'not_open' };
    if (mr.mergeable === null) return { merge_status: 'checking', detailed: 'checking' };
    if (!mr.mergeable) return { merge_status: 'cannot_be_merged', detailed: 'conflict' };
    return { merge_status: 'can_be_merged', detailed: draft ? 'draft_status' : 'mergeable' };
  };

  const toJson = (mr: FakeMergeRequest) => {
    const draft = DRAFT_TITLE.test(mr.title);
    const project = findProject(mr.projectPath);
    const status = mergeStatus(mr, draft);
    return {
      id: mr.id,
      iid: mr.iid,
      project_id: mr.projectId,
      title: mr.title,
      description: mr.description,
      state: mr.state,
      created_at: mr.createdAt,
      updated_at: mr.updatedAt,
      merged_at: mr.state === 'merged' ? (mr.mergedAt ?? mr.updatedAt) : null,
      closed_at: mr.state === 'closed' ? mr.updatedAt : null,
      target_branch: mr.targetBranch,
      source_branch: mr.sourceBranch,
      source_project_id: mr.sourceProjectId,
      target_project_id: mr.projectId,
      author: { id: 1, username: 'errand-bot', name: 'Errand', state: 'active' },
      labels: [...mr.labels],
      draft,
      work_in_progress: draft,
      merge_status: status.merge_status,
      detailed_merge_status: status.detailed,
      has_conflicts: mr.state === 'opened' && mr.mergeable === false,
      sha: headOf(mr),
      merge_commit_sha: mr.mergeCommitSha,
      squash_commit_sha: null,
      merge_error: null,
      references: {
        short: `!${mr.iid}`,
        relative: `!${mr.iid}`,
        full: `${project?.path ?? mr.projectPath}!${mr.iid}`,
      },
      web_url: `${url}/${project?.path ?? mr.projectPath}/-/merge_requests/${mr.iid}`,
    };
  };

  const pipelineStatus = (pipeline: FakePipeline) => {
    const current = pipeline.jobs.filter((j) => !j.retried).map((j) => j.status);
    if (current.includes('failed')) return 'failed';
    if (current.some((status) => status === 'running' || status === 'pending')) return 'running';
    return current.length === 0 ? 'created' : 'success';
  };
  const pipelineJson = (project: ProjectState, pipeline: FakePipeline) => ({
    id: pipeline.id,
    iid: pipeline.iid,
    project_id: project.id,
    sha: pipeline.sha,
    ref: pipeline.ref,
    status: pipelineStatus(pipeline),
    source: pipeline.source,
    created_at: pipeline.createdAt,
    updated_at: pipeline.createdAt,
    web_url: `${url}/${project.path}/-/pipelines/${pipeline.id}`,
  });
  const jobUrl = (project: ProjectState, job: FakeJob) => `${url}/${project.path}/-/jobs/${job.id}`;
  const jobJson = (project: ProjectState, pipeline: FakePipeline, job: FakeJob) => ({
    id: job.id,
    status: job.status,
    stage: 'test',
    name: job.name,
    ref: pipeline.ref,
    tag: false,
    coverage: null,
    allow_failure: false,
    created_at: job.createdAt,
    started_at: job.createdAt,
    finished_at: job.status === 'running' ? null : job.createdAt,
    erased_at: null,
    duration: 1,
    queued_duration: 0,
    user: userJson(tokenUser),
    commit: { id: pipeline.sha, short_id: pipeline.sha.slice(0, 8), title: 'Commit' },
    pipeline: pipelineJson(project, pipeline),
    ...(job.status === 'failed' ? { failure_reason: 'script_failure' } : {}),
    web_url: jobUrl(project, job),
    project: { ci_job_token_scope_enabled: false },
    artifacts: [],
    runner: null,
    tag_list: [],
    archived: false,
  });
  const statusJson = (project: ProjectState, pipeline: FakePipeline, job: FakeJob) => ({
    id: job.id,
    sha: pipeline.sha,
    ref: pipeline.ref,
    status: job.status,
    name: job.name,
    target_url: job.external ? job.external.targetUrl : jobUrl(project, job),
    description: job.external ? job.external.description : null,
    created_at: job.createdAt,
    started_at: job.createdAt,
    finished_at: job.status === 'running' ? null : job.createdAt,
    allow_failure: false,
    coverage: null,
    pipeline_id: pipeline.id,
    author: userJson(tokenUser),
  });
  /** The commit's newest pipeline, made (for a push of `ref`, or to hold statuses) when none. */
  const pipelineFor = (project: ProjectState, sha: string, source: FakePipeline['source']) => {
    // Jobs go on a CI pipeline, never on the one GitLab makes to hold posted statuses.
    const existing = pipelines
      .filter((p) => p.projectId === project.id && p.sha === sha)
      .filter((p) => source === 'external' || p.source !== 'external')
      .sort((a, b) => b.id - a.id)[0];
    if (existing) return existing;
    const mr = mrs.find((m) => m.projectId === project.id && headOf(m) === sha);
    const pipeline: FakePipeline = {
      id: nextPipelineId++,
      iid: pipelines.filter((p) => p.projectId === project.id).length + 1,
      projectId: project.id,
      sha,
      ref: mr?.sourceBranch ?? 'main',
      source,
      jobs: [],
      createdAt: now(),
    };
    pipelines.push(pipeline);
    return pipeline;
  };
  /** A new run of `name` in the pipeline: the last one of that name is retried. */
  const addRun = (pipeline: FakePipeline, job: Omit<FakeJob, 'id' | 'retried' | 'createdAt'>) => {
    for (const old of pipeline.jobs) if (old.name === job.name) old.retried = true;
    pipeline.jobs.push({ ...job, id: nextJobId++, retried: false, createdAt: now() });
  };
  const mergeRequestOrThrow = (repo: string, iid: number) => {
    const project = projectOrThrow(repo);
    const mr = mrs.find((m) => m.projectId === project.id && m.iid === iid);
    if (!mr) throw new Error(`fake GitLab has no merge request !${iid} in ${repo}`);
    return mr;
  };

  const route = ({ req, target, record, send, problem, refuse }: ForgeExchange) => {
    if (!authenticated(req, options.token)) return send(401, { message: '401 Unauthorized' });

    // Split before decoding: the project id is the full path with its slashes encoded.
    const parts = target.pathname.slice(apiPrefix.length + 1).split('/');
    if (
      parts[0] === 'projects' &&
      parts[1] !== undefined &&
      (['pipelines', 'repository', 'jobs'].includes(parts[2] ?? '') ||
        (parts[2] === 'merge_requests' &&
          parts.length === 5 &&
          (parts[4] === 'approvals' || parts[4] === 'merge')))
    ) {
      return watched(parts);
    }
    if (
      parts[0] === 'projects' &&
      parts[1] !== undefined &&
      (parts[2] === 'issues' ||
        parts[2] === 'members' ||
        (parts[2] === 'merge_requests' && parts.length > 4))
    ) {
      return conversation(parts);
    }
    if (parts[0] !== 'projects' || parts[1] === undefined || parts[2] !== 'merge_requests') {
      return refuse('unsupported endpoint');
    }
    const project = findProject(safeDecode(parts[1]));
    if (!project) return send(404, { message: '404 Project Not Found' });
    const iidPart = parts[3];
    if (parts.length > 4 || iidPart === '') return refuse('unsupported endpoint');
    const methods = iidPart === undefined ? ['GET', 'POST'] : ['GET', 'PUT'];
    if (!methods.includes(record.method)) return refuse('unsupported method');
    const write = record.method !== 'GET';
    if (write && options.access === 'read') {
      return send(
        403,
        {
          error: 'insufficient_scope',
          error_description:
            'The request requires higher privileges than provided by the access token.',
          scope: 'api',
        },
        { 'www-authenticate': 'Bearer realm="", error="insufficient_scope", scope="api"' },
      );
    }
    const body = isRecord(record.body) ? record.body : {};
    if (write && !isRecord(record.body)) {
      return send(400, { error: 'body must be a JSON object' });
    }

    if (iidPart === undefined) {
      if (record.method === 'GET') {
        for (const key of target.searchParams.keys()) {
          if (!LIST_PARAMS.has(key)) problem(`unknown query parameter ${key}`);
        }
        const state = target.searchParams.get('state') ?? 'all';
        if (!['opened', 'closed', 'locked', 'merged', 'all'].includes(state)) {
          return send(400, { error: 'state does not have a valid value' });
        }
        const source = target.searchParams.get('source_branch');
        const matching = mrs
          .filter((mr) => mr.projectId === project.id)
          .filter((mr) => state === 'all' || mr.state === state)
          .filter((mr) => source === null || mr.sourceBranch === source)
          .sort((a, b) => b.id - a.id);
        const { items, page, perPage } = pageOf(matching, target.searchParams, {
          param: 'per_page',
          default: 20,
          max: 100,
        });
        return send(200, items.map(toJson), {
          'x-total': String(matching.length),
          'x-page': String(page),
          'x-per-page': String(perPage),
        });
      }
      if (record.method === 'POST') return create(project, body);
      return refuse('unsupported method');
    }

    if (!/^\d+$/.test(iidPart)) return send(400, { error: 'merge_request_iid is invalid' });
    const mr = mrs.find((m) => m.projectId === project.id && m.iid === Number(iidPart));
    if (record.method === 'GET') {
      return mr ? send(200, toJson(mr)) : send(404, { message: '404 Not found' });
    }
    if (record.method === 'PUT') {
      for (const key of Object.keys(body)) {
        if (!UPDATE_FIELDS.has(key)) problem(`unknown field ${key}`);
      }
      if (![...UPDATE_FIELDS].some((key) => key in body)) {
        return send(400, {
          error: `${[...UPDATE_FIELDS].join(', ')} are missing, at least one parameter must be provided`,
        });
      }
      const typeError = checkStrings(body, [
        'title',
        'description',
        'target_branch',
        'state_event',
      ]);
      if (typeError) return send(400, { error: typeError });
      if (body.title !== undefined && String(body.title).trim() === '') {
        return send(400, { error: 'title is empty' });
      }
      if (!mr) return send(404, { message: '404 Not found' });
      const tooLong = lengthErrors(body);
      if (tooLong) return send(400, { message: tooLong });
      if (typeof body.title === 'string') mr.title = body.title;
      if (typeof body.description === 'string') mr.description = body.description;
      mr.updatedAt = now();
      return send(200, toJson(mr));
    }
    return refuse('unsupported method');

    /** Approvals, the merge, pipelines, jobs and statuses: what the pull request watch reads. */
    function watched(parts: string[]) {
      const project = findProject(safeDecode(parts[1] ?? ''));
      if (!project) return send(404, { message: '404 Project Not Found' });
      const [, , collection, id, sub, ...rest] = parts;
      const allowed = (params: Set<string>) => {
        for (const key of target.searchParams.keys()) {
          if (!params.has(key)) problem(`unknown query parameter ${key}`);
        }
      };
      const paged = (items: unknown[]) => {
        const {
          items: page,
          page: number,
          perPage,
        } = pageOf(items, target.searchParams, {
          param: 'per_page',
          default: 20,
          max: 100,
        });
        const last = number * perPage >= items.length;
        return send(200, page, {
          'x-total': String(items.length),
          'x-page': String(number),
          'x-per-page': String(perPage),
          'x-next-page': last ? '' : String(number + 1),
        });
      };
      if (collection === 'merge_requests') {
        if (!id || !/^\d+$/.test(id)) return send(400, { error: 'merge_request_iid is invalid' });
        const mr = mrs.find((m) => m.projectId === project.id && m.iid === Number(id));
        if (sub === 'approvals') {
          if (record.method !== 'GET') return refuse('unsupported method');
          if (!mr) return send(404, { message: '404 Not found' });
          return send(200, {
            id: mr.id,
            iid: mr.iid,
            project_id: mr.projectId,
            title: mr.title,
            description: mr.description,
            state: mr.state,
            created_at: mr.createdAt,
            updated_at: mr.updatedAt,
            merge_status: mergeStatus(mr, DRAFT_TITLE.test(mr.title)).merge_status,
            // GitLab Free: approved once anyone approved (no approval rules).
            approved: mr.approvedBy.length > 0,
            approvals_required: 0,
            approvals_left: 0,
            approved_by: mr.approvedBy.map((login) => ({ user: userJson(login) })),
            user_has_approved: mr.approvedBy.includes(tokenUser),
            user_can_approve: false,
          });
        }
        if (record.method !== 'PUT') return refuse('unsupported method');
        return merge(project, mr);
      }
      if (record.method !== 'GET') return refuse('unsupported method');
      const commitPipelines = (sha: string) =>
        pipelines.filter((p) => p.projectId === project.id && p.sha === sha);
      if (collection === 'pipelines' && id === undefined) {
        allowed(PIPELINE_PARAMS);
        const sha = target.searchParams.get('sha');
        const listed = pipelines
          .filter((p) => p.projectId === project.id && (sha === null || p.sha === sha))
          .sort((a, b) => b.id - a.id);
        return paged(listed.map((p) => pipelineJson(project, p)));
      }
      if (collection === 'pipelines' && id && sub === 'jobs' && rest.length === 0) {
        allowed(JOB_PARAMS);
        const pipeline = pipelines.find((p) => p.projectId === project.id && String(p.id) === id);
        if (!pipeline) return send(404, { message: '404 Not found' });
        const retried = target.searchParams.get('include_retried') === 'true';
        const jobs = pipeline.jobs
          .filter((j) => j.external === null && (retried || !j.retried))
          .sort((a, b) => b.id - a.id);
        return paged(jobs.map((j) => jobJson(project, pipeline, j)));
      }
      if (collection === 'repository' && id === 'commits' && sub && rest[0] === 'statuses') {
        allowed(STATUS_PARAMS);
        const sha = safeDecode(sub);
        // Without `all`: each name once, at its latest, over every pipeline of the commit.
        const latest = new Map<string, { pipeline: FakePipeline; job: FakeJob }>();
        for (const pipeline of commitPipelines(sha)) {
          for (const job of pipeline.jobs) {
            const seen = latest.get(job.name);
            if (!seen || seen.job.id < job.id) latest.set(job.name, { pipeline, job });
          }
        }
        const statuses = [...latest.values()]
          .sort((a, b) => b.job.id - a.job.id)
          .map(({ pipeline, job }) => statusJson(project, pipeline, job));
        return paged(statuses);
      }
      if (collection === 'jobs' && id && sub === 'trace' && rest.length === 0) {
        const job = pipelines
          .filter((p) => p.projectId === project.id)
          .flatMap((p) => p.jobs)
          .find((j) => j.external === null && String(j.id) === id);
        if (!job) return send(404, { message: '404 Not found' });
        return send(200, job.log);
      }
      return refuse('unsupported endpoint');
    }

    /** PUT …/merge: GitLab's checks in GitLab's order, then the merge. */
    function merge(project: ProjectState, mr: FakeMergeRequest | undefined) {
      if (options.access === 'read') return send(403, { error: 'insufficient_scope' });
      const body = isRecord(record.body) ? record.body : {};
      for (const key of Object.keys(body)) {
        if (!MERGE_FIELDS.has(key)) problem(`unknown field ${key}`);
      }
      if (body.sha !== undefined && typeof body.sha !== 'string') {
        return send(400, { error: 'sha is invalid' });
      }
      if (body.squash !== undefined && typeof body.squash !== 'boolean') {
        return send(400, { error: 'squash is invalid' });
      }
      if (!mr) return send(404, { message: '404 Not found' });
      // Branch protection (Allowed to merge) is GitLab's 401.
      const block = blocked.get(project.id);
      if (block !== undefined) return send(401, { message: block });
      if (mr.state !== 'opened' || DRAFT_TITLE.test(mr.title)) {
        return send(405, { message: '405 Method Not Allowed' });
      }
      if (mr.mergeable !== true) return send(422, { message: 'Branch cannot be merged' });
      const head = headOf(mr);
      if (typeof body.sha === 'string' && body.sha !== head) {
        return send(409, { message: `SHA does not match HEAD of source branch: ${head}` });
      }
      const at = now();
      mr.state = 'merged';
      mr.mergedAt = at;
      mr.updatedAt = at;
      mr.mergedSha = head;
      mr.mergeCommitSha = fakeSha(`merge ${project.path} ${mr.iid} ${head}`);
      merged.push({
        repo: project.path,
        number: mr.iid,
        method: body.squash === true ? 'squash' : 'merge',
        sha: head,
      });
      return send(200, toJson(mr));
    }

    /** Notes, discussions, award emoji and members: what Errand says on issues and merge requests. */
    function conversation(parts: string[]) {
      const project = findProject(safeDecode(parts[1] ?? ''));
      if (!project) return send(404, { message: '404 Project Not Found' });
      const [, , collection, iidPart, sub, subId, subSub, ...rest] = parts;
      if (collection === 'members') {
        // GET /projects/:id/members/all/:user_id
        if (record.method !== 'GET' || iidPart !== 'all' || !sub || subId !== undefined)
          return refuse('unsupported members endpoint');
        const user = [...users.values()].find((u) => String(u.id) === sub);
        if (!user || user.accessLevel === 0) return send(404, { message: '404 Not found' });
        return send(200, {
          ...userJson(user.username),
          access_level: user.accessLevel,
          web_url: `${url}/${user.username}`,
        });
      }
      if (collection === 'issues' && record.method === 'GET' && sub === undefined) {
        // GET /projects/:id/issues/:issue_iid
        if (!iidPart || !/^\d+$/.test(iidPart)) return refuse('unsupported endpoint');
        const issue = issues.find(
          (i) => i.projectPath === project.path && i.iid === Number(iidPart),
        );
        if (!issue) return send(404, { message: '404 Not found' });
        return send(200, {
          id: 7000 + issues.indexOf(issue),
          iid: issue.iid,
          project_id: project.id,
          title: issue.title,
          // GitLab sends null for an issue without a description.
          description: issue.description === '' ? null : issue.description,
          state: issue.state,
          author: userJson(issue.author),
          web_url: issue.webUrl,
          created_at: now(),
          updated_at: now(),
          closed_at: issue.state === 'closed' ? now() : null,
          labels: [],
        });
      }
      if (record.method !== 'POST') return refuse('unsupported endpoint');
      if (!iidPart || !/^\d+$/.test(iidPart)) return refuse('unsupported endpoint');
      const iid = Number(iidPart);
      if (!threadExists(project, collection ?? '', iid))
        return send(404, { message: '404 Not found' });
      const on = collection === 'issues' ? 'issue' : 'merge_request';
      const body = isRecord(record.body) ? record.body : {};
      const fields = (allowed: string[]) => {
        for (const key of Object.keys(body))
          if (!allowed.includes(key)) problem(`unknown field ${key}`);
      };
      /** The first note on this issue or merge request that `match` picks. */
      const noteHere = (match: (n: (typeof notes)[number]) => boolean) =>
        notes.find(
          (n) => n.projectPath === project.path && n.on === on && n.iid === iid && match(n),
        );
      if (sub === 'notes' && subId === undefined) {
        // POST …/notes: a note in a discussion of its own.
        fields(['body', 'created_at', 'internal', 'merge_request_diff_head_sha']);
        if (typeof body.body !== 'string' || body.body === '')
          return send(400, { error: 'body is missing' });
        const note = storeNote(project, {
          on,
          iid,
          author: tokenUser,
          body: body.body,
          position: null,
        });
        return send(201, noteJson(note));
      }
      if (sub === 'notes' && subId && subSub === 'award_emoji' && rest.length === 0) {
        fields(['name']);
        const note = noteHere((n) => String(n.id) === subId);
        if (!note) return refuse(`no note ${subId} on ${on} ${iid}`);
        if (typeof body.name !== 'string') return send(400, { error: 'name is missing' });
        if (
          awards.some((a) => a.noteId === note.id && a.name === body.name && a.user === tokenUser)
        )
          return send(404, { message: '404 Award Emoji Name has already been taken' });
        awards.push({
          projectPath: project.path,
          noteId: note.id,
          name: body.name,
          user: tokenUser,
        });
        return send(201, {
          id: awards.length,
          name: body.name,
          user: userJson(tokenUser),
          awardable_id: note.id,
          awardable_type: 'Note',
        });
      }
      if (sub === 'discussions' && subId && subSub === 'notes' && rest.length === 0) {
        fields(['body', 'note_id', 'created_at']);
        const thread = noteHere((n) => n.discussionId === subId);
        if (!thread) return refuse(`no discussion ${subId} on ${on} ${iid}`);
        if (typeof body.body !== 'string' || body.body === '')
          return send(400, { error: 'body is missing' });
        const note = storeNote(project, {
          on,
          iid,
          author: tokenUser,
          body: body.body,
          discussionId: subId,
          position: thread.position,
        });
        return send(201, noteJson(note));
      }
      return refuse('unsupported endpoint');
    }

    function create(project: ProjectState, body: Record<string, unknown>) {
      for (const key of Object.keys(body)) {
        if (!CREATE_FIELDS.has(key)) problem(`unknown field ${key}`);
      }
      const missing = ['title', 'source_branch', 'target_branch'].filter(
        (k) => body[k] === undefined,
      );
      if (missing.length > 0) {
        return send(400, { error: missing.map((k) => `${k} is missing`).join(', ') });
      }
      const typeError = checkStrings(body, [
        'title',
        'source_branch',
        'target_branch',
        'description',
      ]);
      if (typeError) return send(400, { error: typeError });
      const title = String(body.title);
      const source = String(body.source_branch);
      const targetBranch = String(body.target_branch);
      const tooLong = lengthErrors(body);
      if (tooLong) return send(400, { message: tooLong });
      if (title.trim() === '') return send(400, { message: { title: ["can't be blank"] } });
      if (source === targetBranch) {
        return send(422, { message: ["You can't use same project/branch for source and target"] });
      }
      if (options.requireSourceBranch && !project.branches.has(source)) {
        return send(422, { message: [`Source branch "${source}" does not exist`] });
      }
      if (!project.branches.has(targetBranch)) {
        return send(422, { message: [`Target branch "${targetBranch}" does not exist`] });
      }
      const conflict = mrs.find(
        (m) =>
          m.projectId === project.id &&
          m.state === 'opened' &&
          m.sourceBranch === source &&
          m.targetBranch === targetBranch &&
          m.sourceProjectId === project.id,
      );
      if (conflict) {
        return send(409, {
          message: [
            `Another open merge request already exists for this source branch: !${conflict.iid}`,
          ],
        });
      }
      const mr = store(project, {
        title,
        description: typeof body.description === 'string' ? body.description : '',
        sourceBranch: source,
        targetBranch,
      });
      return send(201, toJson(mr));
    }
  };

  const store = (
    project: ProjectState,
    fields: Partial<FakeMergeRequest> & { sourceBranch: string },
  ): FakeMergeRequest => {
    const at = now();
    const mr: FakeMergeRequest = {
      id: nextId++,
      iid: mrs.filter((m) => m.projectId === project.id).length + 1,
      projectPath: project.path,
      projectId: project.id,
      title: fields.title ?? `Changes from ${fields.sourceBranch}`,
      description: fields.description ?? '',
      state: fields.state ?? 'opened',
      sourceBranch: fields.sourceBranch,
      targetBranch: fields.targetBranch ?? 'main',
      sourceProjectId: fields.sourceProjectId ?? project.id,
      createdAt: fields.createdAt ?? at,
      updatedAt: fields.updatedAt ?? at,
      labels: [...(fields.labels ?? [])],
      mergeable: fields.mergeable === undefined ? true : fields.mergeable,
      approvedBy: [...(fields.approvedBy ?? [])],
      mergedAt: fields.mergedAt ?? null,
      mergedSha: fields.mergedSha ?? null,
      mergeCommitSha: fields.mergeCommitSha ?? null,
    };
    mrs.push(mr);
    return mr;
  };

  const server = await startRecordingForge(
    {
      name: 'fake GitLab',
      contentType: 'application/json',
      apiPrefix,
      notFound: () => ({ error: '404 Not Found' }),
      notJson: () => ({
        status: 400,
        body: { error: 'The provided content-type "application/json" is not valid JSON' },
      }),
      failure: (status) =>
        status === 429 ? 'Retry later' : { message: `${status} ${REASONS[status] ?? 'Error'}` },
    },
    route,
  );
  url = `${server.origin}${basePath}`;

  const projectOrThrow = (path: string): ProjectState => {
    const project = findProject(path);
    if (!project) throw new Error(`fake GitLab has no project ${path}`);
    return project;
  };

  return {
    url,
    apiUrl: `${url}/api/v4`,
    sendWebhook: gitlabSender({
      web: url,
      repo: [...projects.values()][0]?.path ?? 'group/project',
      projectId: (path) => findProject(path)?.id ?? 9999,
      pipeline(path, sha) {
        const project = findProject(path);
        const pipeline =
          project && pipelines.find((p) => p.projectId === project.id && p.sha === sha);
        return pipeline && project
          ? {
              ...pipelineJson(project, pipeline),
              jobs: pipeline.jobs
                .filter((j) => !j.retried && j.external === null)
                .map((j) => ({ id: j.id, name: j.name, status: j.status })),
            }
          : undefined;
      },
      pull(path, iid) {
        const project = findProject(path);
        const mr = project && mrs.find((m) => m.projectId === project.id && m.iid === iid);
        return mr ? toJson(mr) : undefined;
      },
      written: (c) => {
        const project = findProject(c.repo);
        if (!project) throw new Error(`fake GitLab has no project ${c.repo}`);
        storeNote(
          project,
          {
            on: c.on === 'pull' ? 'merge_request' : 'issue',
            iid: c.number,
            author: c.author,
            body: c.body,
            discussionId: c.discussionId,
            position:
              c.path === undefined
                ? null
                : { path: c.path, line: c.line ?? 0, diffHunk: c.diffHunk ?? '' },
          },
          c.id,
        );
      },
    }),
    get requests() {
      return server.requests;
    },
    get unexpected() {
      return server.unexpected;
    },
    mergeRequests(projectPath) {
      const project = projectPath === undefined ? undefined : projectOrThrow(projectPath);
      return mrs.filter((m) => !project || m.projectId === project.id).map((m) => ({ ...m }));
    },
    addMergeRequest(projectPath, mr) {
      return { ...store(projectOrThrow(projectPath), mr) };
    },
    setState(projectPath, iid, state) {
      const project = projectOrThrow(projectPath);
      const mr = mrs.find((m) => m.projectId === project.id && m.iid === iid);
      if (!mr) throw new Error(`fake GitLab has no merge request !${iid} in ${projectPath}`);
      mr.state = state;
      mr.updatedAt = now();
      if (state === 'merged') {
        mr.mergedAt = mr.updatedAt;
        mr.mergedSha = headOf(mr);
      }
    },
    setCheck(repo, sha, check) {
      const pipeline = pipelineFor(projectOrThrow(repo), sha, 'push');
      const status = { pending: 'running', success: 'success', failure: 'failed' }[check.state];
      addRun(pipeline, { name: check.name, status, log: check.log ?? '', external: null });
    },
    addStatus(repo, sha, status) {
      // GitLab puts a posted status on the commit's newest pipeline, else on one of its own.
      const pipeline = pipelineFor(projectOrThrow(repo), sha, 'external');
      addRun(pipeline, {
        name: status.name,
        status: status.state,
        log: '',
        external: {
          description: status.description ?? null,
          targetUrl: status.targetUrl ?? null,
        },
      });
    },
    setMergeable(repo, number, mergeable) {
      mergeRequestOrThrow(repo, number).mergeable = mergeable;
    },
    approve(repo, number, login) {
      const mr = mergeRequestOrThrow(repo, number);
      if (!mr.approvedBy.includes(login)) mr.approvedBy.push(login);
    },
    addPullLabel(repo, number, label) {
      const mr = mergeRequestOrThrow(repo, number);
      if (!mr.labels.includes(label)) mr.labels.push(label);
    },
    blockMerges(repo, message) {
      const project = projectOrThrow(repo);
      if (message === null) blocked.delete(project.id);
      else blocked.set(project.id, message);
    },
    merges() {
      return merged.map((m) => ({ ...m }));
    },
    addBranch(projectPath, branch) {
      projectOrThrow(projectPath).branches.add(branch);
    },
    addUser({ username, id }, accessLevel) {
      users.set(username, { id, username, accessLevel });
    },
    openIssue(projectPath, issue) {
      const project = projectOrThrow(projectPath);
      const iid = issues.filter((i) => i.projectPath === project.path).length + 1;
      const stored: FakeGitLabIssue = {
        projectPath: project.path,
        iid,
        title: issue.title,
        description: issue.description ?? '',
        author: issue.author,
        webUrl: `${url}/${project.path}/-/issues/${iid}`,
        state: issue.state ?? 'opened',
      };
      issues.push(stored);
      return { ...stored };
    },
    addNote(projectPath, note) {
      const project = projectOrThrow(projectPath);
      if (!threadExists(project, note.on === 'issue' ? 'issues' : 'merge_requests', note.iid))
        throw new Error(`fake GitLab has no ${note.on} ${note.iid} in ${projectPath}`);
      return {
        ...storeNote(project, {
          on: note.on,
          iid: note.iid,
          author: note.author,
          body: note.body,
          discussionId: note.discussionId,
          position: note.position ?? null,
        }),
      };
    },
    issues(projectPath) {
      const project = projectOrThrow(projectPath);
      return issues.filter((i) => i.projectPath === project.path).map((i) => ({ ...i }));
    },
    notes(projectPath) {
      const project = projectOrThrow(projectPath);
      return notes.filter((n) => n.projectPath === project.path).map((n) => ({ ...n }));
    },
    awards(projectPath) {
      const project = projectOrThrow(projectPath);
      return awards.filter((a) => a.projectPath === project.path).map((a) => ({ ...a }));
    },
    failNext: server.failNext,
    assertNoUnexpected: server.assertNoUnexpected,
    reset() {
      mrs = [];
      pipelines = [];
      blocked.clear();
      merged = [];
      issues.length = 0;
      notes.length = 0;
      awards.length = 0;
      server.forget();
      nextId = 1;
    },
    close: server.close,
  };
}

function authenticated(req: IncomingMessage, token: string): boolean {
  const privateToken = req.headers['private-token'];
  if (privateToken !== undefined) return privateToken === token;
  const auth = req.headers.authorization;
  return auth === `Bearer ${token}`;
}

/** A commit id made from `text`, for the commits the fake makes (merge commits). */
function fakeSha(text: string): string {
  return createHash('sha1').update(text).digest('hex');
}

function checkStrings(body: Record<string, unknown>, keys: string[]): string | undefined {
  const wrong = keys.filter((k) => body[k] !== undefined && typeof body[k] !== 'string');
  return wrong.length > 0 ? wrong.map((k) => `${k} is invalid`).join(', ') : undefined;
}

function lengthErrors(body: Record<string, unknown>): Record<string, string[]> | undefined {
  const errors: Record<string, string[]> = {};
  if (typeof body.title === 'string' && body.title.length > MAX_TITLE) {
    errors.title = [`is too long (maximum is ${MAX_TITLE} characters)`];
  }
  if (typeof body.description === 'string' && body.description.length > MAX_DESCRIPTION) {
    errors.description = [`is too long (maximum is ${MAX_DESCRIPTION} characters)`];
  }
  return Object.keys(errors).length > 0 ? errors : undefined;
}
