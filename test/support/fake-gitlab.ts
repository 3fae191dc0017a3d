// A stateful fake of GitLab's REST API v4 (the merge request endpoints Errand uses) on
// 127.0.0.1. It checks the token, keeps merge requests between calls, validates bodies and
// answers errors the way GitLab does (status and JSON shape), and records every request.
// Anything it does not support, or a real GitLab would ignore but is probably a mistake (an
// unknown field or query parameter), lands in `unexpected`; `assertNoUnexpected()` throws.

import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

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

export interface RecordedGitLabRequest {
  method: string;
  /** Decoded path below the host, e.g. `/api/v4/projects/group/sub/project/merge_requests`. */
  path: string;
  rawPath: string;
  query: Record<string, string>;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  status: number;
}

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
  /** The next request gets this status (GitLab's body shape) whatever it asked. */
  failNext(status: number, headers?: Record<string, string>, body?: unknown): void;
  assertNoUnexpected(): void;
  /** Forgets merge requests, recordings, failures and problems. */
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
  let requests: RecordedGitLabRequest[] = [];
  let unexpected: string[] = [];
  let failures: Array<{ status: number; headers: Record<string, string>; body: unknown }> = [];
  let clock = Date.parse('2025-01-01T00:00:00Z');
  // A clock that ticks a second per event, so "recently updated" orders are well defined.
  const now = () => {
    clock += 1000;
    return new Date(clock).toISOString();
  };
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

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const raw = await readBody(req);
    const target = new URL(req.url ?? '/', 'http://fake');
    const record: RecordedGitLabRequest = {
      method: req.method ?? '',
      path: safeDecode(target.pathname),
      rawPath: target.pathname,
      query: Object.fromEntries(target.searchParams),
      headers: { ...req.headers },
      body: undefined,
      status: 0,
    };
    requests.push(record);
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      record.status = status;
      const text = typeof body === 'string' ? body : JSON.stringify(body);
      res.writeHead(status, {
        'content-type': typeof body === 'string' ? 'text/plain' : 'application/json',
        ...headers,
      });
      res.end(text);
    };
    const problem = (text: string) => {
      unexpected.push(`${record.method} ${record.rawPath}${target.search}: ${text}`);
    };
    const refuse = (text: string) => {
      problem(text);
      send(404, { error: '404 Not Found' });
    };

    if (raw.length > 0) {
      if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) {
        return refuse('body without content-type application/json');
      }
      try {
        record.body = JSON.parse(raw);
      } catch {
        return send(400, {
          error: 'The provided content-type "application/json" is not valid JSON',
        });
      }
    }

    const failure = failures.shift();
    if (failure) {
      const body =
        failure.body ??
        (failure.status === 429
          ? 'Retry later'
          : { message: `${failure.status} ${REASONS[failure.status] ?? 'Error'}` });
      return send(failure.status, body, failure.headers);
    }

    if (!target.pathname.startsWith(`${apiPrefix}/`)) return refuse('not an API v4 path');
    if (!authenticated(req, options.token)) return send(401, { message: '401 Unauthorized' });

    // Split before decoding: the project id is the full path with its slashes encoded.
    const parts = target.pathname.slice(apiPrefix.length + 1).split('/');
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
        const perPage = Math.min(100, Number(target.searchParams.get('per_page') ?? 20) || 20);
        const page = Math.max(1, Number(target.searchParams.get('page') ?? 1) || 1);
        const matching = mrs
          .filter((mr) => mr.projectId === project.id)
          .filter((mr) => state === 'all' || mr.state === state)
          .filter((mr) => source === null || mr.sourceBranch === source)
          .sort((a, b) => b.id - a.id);
        const slice = matching.slice((page - 1) * perPage, page * perPage);
        return send(200, slice.map(toJson), {
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

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      unexpected.push(`fake failed: ${String(err)}`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  url = `http://127.0.0.1:${port}${basePath}`;

  const projectOrThrow = (path: string): ProjectState => {
    const project = findProject(path);
    if (!project) throw new Error(`fake GitLab has no project ${path}`);
    return project;
  };

  return {
    url,
    apiUrl: `${url}/api/v4`,
    get requests() {
      return requests;
    },
    get unexpected() {
      return unexpected;
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
    failNext(status, headers = {}, body) {
      failures.push({ status, headers, body });
    },
    assertNoUnexpected() {
      if (unexpected.length > 0) {
        throw new Error(`fake GitLab saw unexpected requests:\n${unexpected.join('\n')}`);
      }
    },
    reset() {
      mrs = [];
      requests = [];
      unexpected = [];
      failures = [];
      nextId = 1;
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
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

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
