// A stateful fake of GitLab's REST API v4 (the merge request endpoints Errand uses) on
// 127.0.0.1. It checks the token, keeps merge requests between calls, validates bodies and
// answers errors the way GitLab does (status and JSON shape), and records every request.
// Anything it does not support, or a real GitLab would ignore but is probably a mistake (an
// unknown field or query parameter), lands in `unexpected`; `assertNoUnexpected()` throws.

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
}

export interface FakeGitLabIssue {
  projectPath: string;
  iid: number;
  title: string;
  description: string;
  author: string;
  webUrl: string;
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
    issue: { title: string; description?: string; author: string },
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
   * Sends Errand a signed webhook delivery as this forge does, built from the fake's state
   * (test/support/forge-requests.ts); returns Errand's answer, and a way to redeliver it.
   */
  sendWebhook: SendWebhook;
  assertNoUnexpected(): void;
  /** Forgets merge requests, issues, notes, award emoji, recordings, failures and problems (users stay). */
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

  const toJson = (mr: FakeMergeRequest) => {
    const draft = DRAFT_TITLE.test(mr.title);
    const project = findProject(mr.projectPath);
    return {
      id: mr.id,
      iid: mr.iid,
      project_id: mr.projectId,
      title: mr.title,
      description: mr.description,
      state: mr.state,
      created_at: mr.createdAt,
      updated_at: mr.updatedAt,
      merged_at: mr.state === 'merged' ? mr.updatedAt : null,
      closed_at: mr.state === 'closed' ? mr.updatedAt : null,
      target_branch: mr.targetBranch,
      source_branch: mr.sourceBranch,
      source_project_id: mr.sourceProjectId,
      target_project_id: mr.projectId,
      author: { id: 1, username: 'errand-bot', name: 'Errand', state: 'active' },
      labels: [],
      draft,
      work_in_progress: draft,
      merge_status: 'can_be_merged',
      detailed_merge_status: draft ? 'draft_status' : 'mergeable',
      sha: '0000000000000000000000000000000000000000',
      references: {
        short: `!${mr.iid}`,
        relative: `!${mr.iid}`,
        full: `${project?.path ?? mr.projectPath}!${mr.iid}`,
      },
      web_url: `${url}/${project?.path ?? mr.projectPath}/-/merge_requests/${mr.iid}`,
    };
  };

  const route = ({ req, target, record, send, problem, refuse }: ForgeExchange) => {
    if (!authenticated(req, options.token)) return send(401, { message: '401 Unauthorized' });

    // Split before decoding: the project id is the full path with its slashes encoded.
    const parts = target.pathname.slice(apiPrefix.length + 1).split('/');
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
