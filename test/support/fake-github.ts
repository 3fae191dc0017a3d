// A stateful fake of the GitHub REST endpoints Errand uses (pull requests, their reviews, checks
// and merge, issues, Actions job logs, GitHub App installation tokens) on 127.0.0.1. Requests are checked against GitHub's published OpenAPI
// description (@octokit/openapi) and refused the way GitHub refuses them; anything the fake does
// not serve, or that the description forbids, is recorded in `unexpected` so tests can fail on it.

import {
  createHmac,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  verify,
} from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import {
  assertNoneUnexpected,
  type ForgeRequest,
  type HoldMatch,
  pageOf,
  startFakeForgeServer,
} from './fake-forge-server.ts';
import { githubSender, type SendWebhook } from './forge-requests.ts';

export interface FakeGitHubApp {
  appId: string;
  installationId: string;
  /** PEM (SPKI or PKCS#1) or a KeyObject: the fake verifies JWTs with it, like GitHub. */
  publicKey: string | KeyObject;
  /** Lifetime of minted installation tokens (GitHub: 3600). */
  tokenTtlSeconds?: number;
}

export interface FakeGitHubOptions {
  /** Repositories that exist, as `owner/repo`; any other is 404. */
  repos: string[];
  /** A personal access token the fake accepts. */
  token?: string;
  app?: FakeGitHubApp;
  /** Refuse draft pull requests with 422, as GitHub does for private repos on Free/Pro plans. */
  draftsRefused?: boolean;
  /** Serve as GitHub Enterprise Server: the API under /api/v3, checked against the GHES description. */
  enterprise?: boolean;
  /** The login the token acts as: the author of the comments and reactions it makes. */
  tokenUser?: string;
  /**
   * The fake's clock, in milliseconds like `Date.now` (the default): what installation tokens
   * expire by, JWTs are checked against, and times and rate limit resets are written in. A test
   * moves it instead of waiting for a token to expire.
   */
  now?: () => number;
  /**
   * The commit a branch points at, read from the real git repository the test serves: a pull
   * request's head sha is `heads(repo, head)` (a fixed sha derived from the branch's name when
   * it answers undefined, or without it).
   */
  heads?: (repo: string, branch: string) => string | undefined;
}

/** A check as a test sets it: a GitHub Actions job's check run, with its log. */
export interface FakeCheck {
  name: string;
  state: 'pending' | 'success' | 'failure';
  /** The job's log, served through the log download's redirect; default empty. */
  log?: string;
  /** The check run's output title (what the checks list shows under the name). */
  summary?: string;
}

/** A commit status as a test sets it (`error` fails like `failure`). */
export interface FakeStatus {
  context: string;
  state: 'pending' | 'success' | 'failure' | 'error';
  description?: string;
  targetUrl?: string;
}

/** A review's state as GitHub's review list gives it. */
export type FakeReviewState = 'APPROVED' | 'CHANGES_REQUESTED' | 'COMMENTED' | 'DISMISSED';

/** A merge done through the merge API: `method` as asked (default `merge`), `sha` the head merged. */
export interface FakeMerge {
  repo: string;
  number: number;
  method: string;
  sha: string;
}

/** A repository permission as GitHub reports it (maintain and triage as role names). */
export type FakePermission = 'admin' | 'maintain' | 'write' | 'triage' | 'read' | 'none';

export interface FakeIssue {
  repo: string;
  number: number;
  title: string;
  body: string;
  author: string;
  htmlUrl: string;
  state: 'open' | 'closed';
}

/** A comment on an issue or pull request: in its conversation (`issue`) or on a line (`line`). */
export interface FakeComment {
  repo: string;
  id: number;
  /** The issue or pull request it is on. */
  number: number;
  kind: 'issue' | 'line';
  author: string;
  body: string;
  htmlUrl: string;
  /** A line comment answering another: the thread's first comment. */
  inReplyTo: number | null;
  path: string | null;
  line: number | null;
  diffHunk: string | null;
}

export interface FakeReaction {
  repo: string;
  /** What it is on: a conversation comment, a line comment, or an issue or pull request. */
  on: 'issue-comment' | 'review-comment' | 'issue';
  /** The comment's id, or the issue's number. */
  id: number;
  content: string;
  user: string;
}

export interface RecordedRequest {
  index: number;
  method: string;
  /** The path as sent, without the query string. */
  path: string;
  query: Record<string, string>;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  /** The OpenAPI operationId that served it, e.g. `pulls/list`. */
  operation: string | undefined;
  /** Which credential it carried. */
  auth: 'token' | 'installation' | 'jwt' | 'none' | 'invalid';
  status: number;
  /** Why this request is one a test should never send (unsupported, or refused by the description). */
  unexpected?: string;
}

export interface FakePullRequest {
  repo: string;
  number: number;
  title: string;
  body: string | null;
  head: string;
  base: string;
  draft: boolean;
  state: 'open' | 'closed';
  merged: boolean;
  htmlUrl: string;
}

export interface FakeGitHub {
  /** The server's origin, e.g. http://127.0.0.1:1234 (also the "web" origin of html_url). */
  url: string;
  /** What a client uses as its API base URL: `url`, or `url/api/v3` as Enterprise Server. */
  apiUrl: string;
  requests: RecordedRequest[];
  unexpected: RecordedRequest[];
  /** Every installation token minted, in order. */
  installationTokens: { token: string; expiresAt: Date }[];
  pullRequests(repo?: string): FakePullRequest[];
  /** Marks a pull request merged (and closed), as if someone clicked the button. */
  merge(repo: string, number: number): void;
  /**
   * A GitHub Actions job's check run of that name on commit `sha`: a new run of that name on
   * that commit replaces the last (GitHub keeps both; the checks list gives the latest).
   */
  setCheck(repo: string, sha: string, check: FakeCheck): void;
  /** A commit status of that context on commit `sha`; a new one replaces the last. */
  setStatus(repo: string, sha: string, status: FakeStatus): void;
  /** Whether the pull request merges into its base: null while GitHub works it out; default true. */
  setMergeable(repo: string, number: number, mergeable: boolean | null): void;
  /** `login` submits a review approving the pull request. */
  approve(repo: string, number: number, login: string): void;
  /** `login` submits a review in `state` (DISMISSED: a review since dismissed). */
  review(repo: string, number: number, login: string, state: FakeReviewState): void;
  addPullLabel(repo: string, number: number, label: string): void;
  /** The merge API refuses with this message (branch protection), or accepts again (null). */
  blockMerges(repo: string, message: string | null): void;
  /** Merges done through the API, in order. */
  merges(): FakeMerge[];
  /** The next request to a served operation gets this answer instead. Queued in order. */
  failNext(status: number, options?: { headers?: Record<string, string>; message?: string }): void;
  /**
   * Holds the next request that `matches` before it is answered, until `release`: a forge slow
   * to answer. `arrived` resolves when the request has come (its body read).
   */
  holdNext(matches: HoldMatch): {
    arrived: Promise<void>;
    release: () => void;
  };
  /** Makes every installation token minted so far invalid (app suspended, token revoked). */
  revokeInstallationTokens(): void;
  /** Opens an issue, as a person on GitHub would; it shares pull requests' numbers. */
  openIssue(
    repo: string,
    issue: { title: string; body?: string; author: string; state?: 'open' | 'closed' },
  ): FakeIssue;
  /** Writes a comment, as a person on GitHub would. */
  addComment(
    repo: string,
    comment: {
      number: number;
      author: string;
      body: string;
      /** Default `issue`; `line` needs path, line and diffHunk. */
      kind?: 'issue' | 'line';
      path?: string;
      line?: number;
      diffHunk?: string;
      inReplyTo?: number;
    },
  ): FakeComment;
  /** Sets what a user may do in the repository; a login never set is no user (404). */
  setPermission(repo: string, login: string, permission: FakePermission): void;
  issues(repo: string): FakeIssue[];
  comments(repo: string): FakeComment[];
  reactions(repo: string): FakeReaction[];
  /**
   * Sends Errand a signed webhook delivery as this forge does, built from the fake's state
   * (test/support/forge-requests.ts); returns Errand's answer, and a way to redeliver it.
   */
  sendWebhook: SendWebhook;
  assertNoUnexpected(): void;
  close(): Promise<void>;
}

/** An RSA key pair shaped like the one GitHub gives an app (private key as PKCS#1 PEM). */
export function generateAppKeys(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  return { privateKey, publicKey };
}

// ---- the OpenAPI description ---------------------------------------------------------------

interface JsonSchema {
  $ref?: string;
  type?: string;
  nullable?: boolean;
  enum?: unknown[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  oneOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  allOf?: JsonSchema[];
  maximum?: number;
  minimum?: number;
}

interface Parameter {
  $ref?: string;
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  schema?: JsonSchema;
}

interface MediaType {
  schema?: JsonSchema;
}

interface Operation {
  operationId: string;
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, MediaType> };
  responses: Record<string, { content?: Record<string, MediaType> }>;
}

interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, JsonSchema>; parameters: Record<string, Parameter> };
}

const documents = new Map<string, OpenApiDocument>();

function loadDocument(name: string): OpenApiDocument {
  let doc = documents.get(name);
  if (!doc) {
    const file = createRequire(import.meta.url).resolve(`@octokit/openapi/generated/${name}.json`);
    doc = JSON.parse(readFileSync(file, 'utf8')) as OpenApiDocument;
    documents.set(name, doc);
  }
  return doc;
}

function resolve<T extends { $ref?: string }>(doc: OpenApiDocument, node: T): T {
  let current: T = node;
  for (let depth = 0; current.$ref !== undefined; depth++) {
    const match = /^#\/components\/(schemas|parameters)\/(.+)$/.exec(current.$ref);
    const target = match?.[1] === 'schemas' ? doc.components.schemas : doc.components.parameters;
    const next = match?.[2] === undefined ? undefined : target[match[2]];
    if (!next || depth > 20) throw new Error(`fake-github: cannot resolve ${current.$ref}`);
    current = next as T;
  }
  return current;
}

interface CheckMode {
  /** Reject properties the description does not define (request bodies; the fake's own answers). */
  strict: boolean;
  /** Enforce `required` (requests yes; the fake's answers carry only a useful subset). */
  required: boolean;
}

/** Errors in GitHub's wording ("Invalid request.\n\n…" details); empty when the value fits. */
function check(
  doc: OpenApiDocument,
  raw: JsonSchema,
  value: unknown,
  at: string,
  mode: CheckMode,
  out: string[],
): void {
  const schema = merged(doc, resolve(doc, raw));
  if (value === null) {
    if (schema.nullable || (!schema.type && !schema.oneOf && !schema.anyOf)) return;
    out.push(`For '${at}', nil is not ${article(schema.type ?? 'value')}.`);
    return;
  }
  const alternatives = schema.oneOf ?? schema.anyOf;
  if (alternatives) {
    const fits = alternatives.some((option) => {
      const errors: string[] = [];
      check(doc, option, value, at, mode, errors);
      return errors.length === 0;
    });
    if (!fits) out.push(`For '${at}', ${JSON.stringify(value)} matches no allowed form.`);
    return;
  }
  if (schema.enum && !schema.enum.includes(value)) {
    out.push(
      `For '${at}', ${JSON.stringify(value)} is not a member of ${JSON.stringify(schema.enum)}.`,
    );
    return;
  }
  switch (schema.type) {
    case 'string':
      if (typeof value !== 'string')
        out.push(`For '${at}', ${JSON.stringify(value)} is not a string.`);
      return;
    case 'integer':
      if (!Number.isInteger(value))
        out.push(`For '${at}', ${JSON.stringify(value)} is not an integer.`);
      return;
    case 'number':
      if (typeof value !== 'number')
        out.push(`For '${at}', ${JSON.stringify(value)} is not a number.`);
      return;
    case 'boolean':
      if (typeof value !== 'boolean')
        out.push(`For '${at}', ${JSON.stringify(value)} is not a boolean.`);
      return;
    case 'array':
      if (!Array.isArray(value)) {
        out.push(`For '${at}', ${JSON.stringify(value)} is not an array.`);
        return;
      }
      value.forEach((item, i) => {
        if (schema.items) check(doc, schema.items, item, `${at}/${i}`, mode, out);
      });
      return;
    case 'object':
    case undefined: {
      if (schema.type === undefined && !schema.properties) return;
      if (typeof value !== 'object' || Array.isArray(value)) {
        out.push(`For '${at}', ${JSON.stringify(value)} is not an object.`);
        return;
      }
      const record = value as Record<string, unknown>;
      if (mode.required) {
        for (const name of schema.required ?? []) {
          if (!(name in record)) out.push(`"${name}" wasn't supplied.`);
        }
      }
      for (const [name, item] of Object.entries(record)) {
        const property = schema.properties?.[name];
        if (property) check(doc, property, item, `${at}/${name}`, mode, out);
        else if (typeof schema.additionalProperties === 'object') {
          check(doc, schema.additionalProperties, item, `${at}/${name}`, mode, out);
        } else if (schema.additionalProperties !== true && mode.strict) {
          out.push(`"${name}" is not a permitted key.`);
        }
      }
      return;
    }
    default:
      out.push(
        `For '${at}', the description uses type ${schema.type}, which the fake cannot check.`,
      );
  }
}

/** `allOf` folded into one object schema, so strictness sees all allowed properties at once. */
function merged(doc: OpenApiDocument, schema: JsonSchema): JsonSchema {
  if (!schema.allOf) return schema;
  const result: JsonSchema = { ...schema, allOf: undefined, properties: { ...schema.properties } };
  const required = new Set(schema.required);
  for (const part of schema.allOf) {
    const resolved = merged(doc, resolve(doc, part));
    result.type ??= resolved.type;
    Object.assign(result.properties ?? {}, resolved.properties);
    for (const name of resolved.required ?? []) required.add(name);
    if (resolved.nullable) result.nullable = true;
  }
  result.required = [...required];
  return result;
}

function article(type: string): string {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

// ---- the server ----------------------------------------------------------------------------

interface StoredPull extends FakePullRequest {
  headLabel: string;
  createdAt: Date;
  updatedAt: Date;
  closedAt: Date | null;
  mergedAt: Date | null;
  mergeable: boolean | null;
  labels: string[];
  /** The head's commit when it was merged: the branch may move or go afterwards. */
  mergedHead: string | null;
}

interface StoredReview {
  repo: string;
  number: number;
  id: number;
  login: string;
  state: FakeReviewState;
  commitId: string;
  submittedAt: Date;
}

interface StoredCheckRun {
  repo: string;
  sha: string;
  id: number;
  name: string;
  state: FakeCheck['state'];
  log: string;
  summary: string | null;
  startedAt: Date;
}

interface StoredStatus extends FakeStatus {
  repo: string;
  sha: string;
  id: number;
  createdAt: Date;
}

interface Answer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Set when the answer refuses something the client should never have sent. */
  unexpected?: string;
}

interface RouteSpec {
  method: string;
  template: string;
  handle: (ctx: RouteContext) => Answer;
}

interface Route extends RouteSpec {
  pattern: RegExp;
  names: string[];
}

interface RouteContext {
  params: Record<string, string>;
  query: Record<string, string>;
  body: unknown;
  repo: string;
  owner: string;
}

const docsUrl = 'https://docs.github.com/rest';

function failure(status: number, message: string, extra?: Record<string, unknown>): Answer {
  return {
    status,
    body: { message, documentation_url: docsUrl, status: String(status), ...extra },
  };
}

function validationFailed(errors: Record<string, unknown>[]): Answer {
  return failure(422, 'Validation Failed', { errors });
}

function isoSeconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function fakeSha(text: string): string {
  let hex = '';
  for (let i = 0; hex.length < 40; i++)
    hex += ((text.charCodeAt(i % text.length) * (i + 7)) % 256).toString(16).padStart(2, '0');
  return hex.slice(0, 40);
}

function hmacHex(key: string, text: string): string {
  return createHmac('sha256', key).update(text).digest('hex');
}

function defaultMessage(status: number, headers: Record<string, string>): string {
  if (status === 401) return 'Bad credentials';
  if (status === 404) return 'Not Found';
  if (status === 403 && headers['x-ratelimit-remaining'] === '0')
    return 'API rate limit exceeded for user ID 1.';
  if ((status === 403 || status === 429) && headers['retry-after']) {
    return 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.';
  }
  if (status === 403) return 'Resource not accessible by personal access token';
  if (status >= 500) return 'Server Error';
  return 'Error';
}

export async function startFakeGitHub(options: FakeGitHubOptions): Promise<FakeGitHub> {
  const doc = loadDocument(options.enterprise ? 'ghes-3.19' : 'api.github.com');
  const prefix = options.enterprise ? '/api/v3' : '';
  const repos = new Map(options.repos.map((full) => [full.toLowerCase(), full]));
  const appKey = options.app ? createPublicKey(options.app.publicKey) : undefined;
  const requests: RecordedRequest[] = [];
  const unexpected: RecordedRequest[] = [];
  const clock = options.now ?? Date.now;
  // Requests that made the fake itself fail: a bug of the fake, reported as unexpected.
  const crashes: string[] = [];
  const installationTokens: { token: string; expiresAt: Date; revoked: boolean }[] = [];
  const pulls: StoredPull[] = [];
  const counters = new Map<string, number>();
  const tokenUser = options.tokenUser ?? 'errand-bot';
  const issues: FakeIssue[] = [];
  const comments: FakeComment[] = [];
  const reactions: FakeReaction[] = [];
  const permissions = new Map<string, FakePermission>();
  let nextCommentId = 9000;
  const reviews: StoredReview[] = [];
  const checkRuns: StoredCheckRun[] = [];
  const statuses: StoredStatus[] = [];
  const mergeBlocks = new Map<string, string>();
  const mergesDone: FakeMerge[] = [];
  let nextReviewId = 80_000_001;
  let nextCheckRunId = 30_000_000_001;
  let nextStatusId = 50_000_000_001;
  // What signs the log storage URLs the log download redirects to, as GitHub's storage does.
  const storageKey = randomBytes(16).toString('hex');
  const fullName = (repo: string) => repos.get(repo.toLowerCase()) ?? repo;
  const headSha = (pull: StoredPull): string =>
    pull.mergedHead ?? options.heads?.(pull.repo, pull.head) ?? fakeSha(pull.head);
  const pullOrThrow = (repo: string, number: number): StoredPull => {
    const pull = findPull(fullName(repo), String(number));
    if (!pull) throw new Error(`fake-github: no pull request ${repo}#${number}`);
    return pull;
  };
  const markMerged = (pull: StoredPull) => {
    const now = new Date(clock());
    pull.mergedHead = headSha(pull);
    Object.assign(pull, {
      state: 'closed',
      merged: true,
      mergedAt: now,
      closedAt: now,
      updatedAt: now,
    });
  };
  const addReview = (repo: string, number: number, login: string, state: FakeReviewState) => {
    const pull = pullOrThrow(repo, number);
    reviews.push({
      repo: pull.repo,
      number,
      id: nextReviewId++,
      login,
      state,
      commitId: headSha(pull),
      submittedAt: new Date(clock()),
    });
  };
  const addCheckRun = (repo: string, sha: string, check: FakeCheck): StoredCheckRun => {
    const run: StoredCheckRun = {
      repo: fullName(repo),
      sha,
      id: nextCheckRunId++,
      name: check.name,
      state: check.state,
      log: check.log ?? '',
      summary: check.summary ?? null,
      startedAt: new Date(clock()),
    };
    checkRuns.push(run);
    return run;
  };
  /** Each name's latest run on the commit, as GitHub's `filter=latest`. */
  const latestRuns = (repo: string, sha: string): StoredCheckRun[] => {
    const latest = new Map<string, StoredCheckRun>();
    for (const run of checkRuns)
      if (run.repo === repo && run.sha === sha) latest.set(run.name, run);
    return [...latest.values()];
  };
  const checkRunJson = (run: StoredCheckRun) => {
    const apiRepo = `${origin}${prefix}/repos/${run.repo}`;
    const done = run.state !== 'pending';
    const pullRequests = pulls
      .filter((p) => p.repo === run.repo && p.state === 'open' && headSha(p) === run.sha)
      .map((p) => ({
        id: 5000 + pulls.indexOf(p),
        number: p.number,
        url: `${apiRepo}/pulls/${p.number}`,
        head: { ref: p.head, sha: headSha(p), repo: { id: 1000, url: apiRepo, name: p.repo } },
        base: { ref: p.base, sha: fakeSha(p.base), repo: { id: 1000, url: apiRepo, name: p.repo } },
      }));
    return {
      id: run.id,
      head_sha: run.sha,
      node_id: `CR_fake${run.id}`,
      external_id: '',
      url: `${apiRepo}/check-runs/${run.id}`,
      html_url: `${origin}/${run.repo}/runs/${run.id}`,
      details_url: `${origin}/${run.repo}/actions/runs/${run.id - 1}/job/${run.id}`,
      status: done ? 'completed' : 'in_progress',
      conclusion: done ? run.state : null,
      started_at: isoSeconds(run.startedAt),
      completed_at: done ? isoSeconds(run.startedAt) : null,
      output: {
        title: run.summary,
        summary: null,
        text: null,
        annotations_count: 0,
        annotations_url: `${apiRepo}/check-runs/${run.id}/annotations`,
      },
      name: run.name,
      check_suite: { id: run.id - 1 },
      app: {
        id: 15368,
        slug: 'github-actions',
        node_id: 'MDM6QXBwMTUzNjg=',
        name: 'GitHub Actions',
        description: 'Automate your workflow from idea to production',
        external_url: 'https://help.github.com/en/actions',
        html_url: `${origin}/apps/github-actions`,
        created_at: '2018-07-30T09:30:17Z',
        updated_at: '2019-12-10T19:10:43Z',
        permissions: { actions: 'write', checks: 'write', contents: 'write' },
        events: ['check_run', 'push', 'pull_request'],
      },
      pull_requests: pullRequests,
    };
  };
  const statusJson = (status: StoredStatus) => ({
    url: `${origin}${prefix}/repos/${status.repo}/statuses/${status.sha}`,
    avatar_url: null,
    id: status.id,
    node_id: `SC_fake${status.id}`,
    state: status.state,
    description: status.description ?? null,
    target_url: status.targetUrl ?? null,
    context: status.context,
    created_at: isoSeconds(status.createdAt),
    updated_at: isoSeconds(status.createdAt),
  });
  const storagePath = (id: number) => `/_storage/job-logs/${id}`;
  const storageSignature = (id: number) => hmacHex(storageKey, String(id));
  const userJson = (login: string) => ({
    login,
    id: 100 + [...login].reduce((sum, ch) => sum + ch.charCodeAt(0), 0),
    type: login.endsWith('[bot]') ? 'Bot' : 'User',
  });
  const nextNumber = (repo: string): number => {
    const number = (counters.get(repo) ?? 0) + 1;
    counters.set(repo, number);
    return number;
  };
  const threadExists = (repo: string, number: string): boolean =>
    issues.some((i) => i.repo === repo && String(i.number) === number) ||
    findPull(repo, number) !== undefined;
  const storeComment = (
    repo: string,
    fields: Omit<FakeComment, 'repo' | 'id' | 'htmlUrl'>,
    id = nextCommentId++,
  ) => {
    const isPull = pulls.some((p) => p.repo === repo && p.number === fields.number);
    const htmlUrl =
      fields.kind === 'line'
        ? `${origin}/${repo}/pull/${fields.number}#discussion_r${id}`
        : `${origin}/${repo}/${isPull ? 'pull' : 'issues'}/${fields.number}#issuecomment-${id}`;
    const comment: FakeComment = { repo, id, htmlUrl, ...fields };
    comments.push(comment);
    return comment;
  };
  const issueCommentJson = (c: FakeComment) => ({
    id: c.id,
    node_id: `IC_fake${c.id}`,
    url: `${origin}${prefix}/repos/${c.repo}/issues/comments/${c.id}`,
    html_url: c.htmlUrl,
    issue_url: `${origin}${prefix}/repos/${c.repo}/issues/${c.number}`,
    body: c.body,
    user: userJson(c.author),
    created_at: isoSeconds(new Date(clock())),
    updated_at: isoSeconds(new Date(clock())),
    author_association: 'COLLABORATOR',
  });
  const reviewCommentJson = (c: FakeComment) => {
    const self = `${origin}${prefix}/repos/${c.repo}/pulls/comments/${c.id}`;
    const pull = `${origin}${prefix}/repos/${c.repo}/pulls/${c.number}`;
    return {
      url: self,
      id: c.id,
      node_id: `PRRC_fake${c.id}`,
      pull_request_review_id: c.id + 1,
      diff_hunk: c.diffHunk ?? '',
      path: c.path ?? '',
      commit_id: fakeSha(`head${c.number}`),
      original_commit_id: fakeSha(`head${c.number}`),
      ...(c.inReplyTo === null ? {} : { in_reply_to_id: c.inReplyTo }),
      user: userJson(c.author),
      body: c.body,
      created_at: isoSeconds(new Date(clock())),
      updated_at: isoSeconds(new Date(clock())),
      html_url: c.htmlUrl,
      pull_request_url: pull,
      author_association: 'COLLABORATOR',
      _links: { self: { href: self }, html: { href: c.htmlUrl }, pull_request: { href: pull } },
      ...(c.line === null ? {} : { line: c.line }),
    };
  };
  const react = (repo: string, on: FakeReaction['on'], id: number, body: unknown): Answer => {
    const content = (body as { content?: unknown }).content;
    const existing = reactions.find(
      (r) =>
        r.repo === repo &&
        r.on === on &&
        r.id === id &&
        r.user === tokenUser &&
        r.content === content,
    );
    // GitHub answers 200 with the reaction already there.
    const reaction = existing ?? { repo, on, id, content: String(content), user: tokenUser };
    if (!existing) reactions.push(reaction);
    return {
      status: existing ? 200 : 201,
      body: {
        id: 7000 + reactions.indexOf(reaction),
        node_id: `REA_fake${reactions.indexOf(reaction)}`,
        user: userJson(tokenUser),
        content: reaction.content,
        created_at: isoSeconds(new Date(clock())),
      },
    };
  };
  const findComment = (repo: string, id: string, kind: FakeComment['kind']) =>
    comments.find((c) => c.repo === repo && String(c.id) === id && c.kind === kind);
  const noSuch = (what: string): Answer => ({
    ...failure(404, 'Not Found'),
    unexpected: `no ${what}`,
  });
  const injected: { status: number; headers: Record<string, string>; message?: string }[] = [];
  let origin = '';

  const pullJson = (pull: StoredPull, full: boolean): Record<string, unknown> => {
    const [owner = '', name = ''] = pull.repo.split('/');
    const apiRepo = `${origin}${prefix}/repos/${pull.repo}`;
    const repository = {
      id: 1000 + options.repos.indexOf(pull.repo),
      name,
      full_name: pull.repo,
      private: true,
      html_url: `${origin}/${pull.repo}`,
      url: apiRepo,
    };
    const simple: Record<string, unknown> = {
      url: `${apiRepo}/pulls/${pull.number}`,
      id: 5000 + pulls.indexOf(pull),
      node_id: `PR_fake${pull.number}`,
      html_url: pull.htmlUrl,
      number: pull.number,
      state: pull.state,
      locked: false,
      title: pull.title,
      user: { login: 'errand-bot', id: 1, type: 'Bot' },
      body: pull.body,
      labels: pull.labels.map((label, i) => ({
        id: 600 + i,
        node_id: `LA_fake${i}`,
        url: `${apiRepo}/labels/${encodeURIComponent(label)}`,
        name: label,
        description: null,
        color: 'ededed',
        default: false,
      })),
      created_at: isoSeconds(pull.createdAt),
      updated_at: isoSeconds(pull.updatedAt),
      closed_at: pull.closedAt ? isoSeconds(pull.closedAt) : null,
      merged_at: pull.mergedAt ? isoSeconds(pull.mergedAt) : null,
      merge_commit_sha: pull.mergedAt ? fakeSha(`merge${pull.number}`) : null,
      head: { label: pull.headLabel, ref: pull.head, sha: headSha(pull), repo: repository },
      base: {
        label: `${owner}:${pull.base}`,
        ref: pull.base,
        sha: fakeSha(pull.base),
        repo: repository,
      },
      author_association: 'OWNER',
      auto_merge: null,
      draft: pull.draft,
    };
    if (!full) return simple;
    return {
      ...simple,
      merged: pull.merged,
      mergeable: pull.merged ? null : pull.mergeable,
      mergeable_state: pull.merged
        ? 'unknown'
        : pull.mergeable === null
          ? 'unknown'
          : !pull.mergeable
            ? 'dirty'
            : mergeBlocks.has(pull.repo)
              ? 'blocked'
              : 'clean',
      comments: 0,
      commits: 1,
      maintainer_can_modify: false,
    };
  };

  const findPull = (repo: string, number: string): StoredPull | undefined =>
    pulls.find((p) => p.repo === repo && String(p.number) === number);
  /** An issue as GitHub's issues endpoint answers it; a pull request's number answers it as one. */
  const issueJson = (repo: string, number: string): Record<string, unknown> | undefined => {
    const apiRepo = `${origin}${prefix}/repos/${repo}`;
    const issue = issues.find((i) => i.repo === repo && String(i.number) === number);
    const pull = findPull(repo, number);
    const fields = issue
      ? { ...issue, pullRequest: undefined }
      : pull
        ? {
            number: pull.number,
            title: pull.title,
            body: pull.body ?? '',
            author: 'errand-bot',
            htmlUrl: pull.htmlUrl,
            state: pull.state,
            pullRequest: pull,
          }
        : undefined;
    if (!fields) return undefined;
    const url = `${apiRepo}/issues/${fields.number}`;
    return {
      id: 4000 + fields.number,
      node_id: `I_fake${fields.number}`,
      url,
      repository_url: apiRepo,
      labels_url: `${url}/labels{/name}`,
      comments_url: `${url}/comments`,
      events_url: `${url}/events`,
      html_url: fields.htmlUrl,
      number: fields.number,
      state: fields.state,
      title: fields.title,
      // GitHub sends null for an empty body.
      body: fields.body === '' ? null : fields.body,
      user: userJson(fields.author),
      labels: [],
      assignee: null,
      milestone: null,
      locked: false,
      comments: comments.filter((c) => c.repo === repo && String(c.number) === number).length,
      created_at: isoSeconds(new Date(clock())),
      updated_at: isoSeconds(new Date(clock())),
      closed_at: fields.state === 'closed' ? isoSeconds(new Date(clock())) : null,
      author_association: 'OWNER',
      ...(fields.pullRequest
        ? {
            pull_request: {
              url: `${apiRepo}/pulls/${fields.number}`,
              html_url: fields.htmlUrl,
              diff_url: `${fields.htmlUrl}.diff`,
              patch_url: `${fields.htmlUrl}.patch`,
              merged_at: fields.pullRequest.mergedAt
                ? isoSeconds(fields.pullRequest.mergedAt)
                : null,
            },
          }
        : {}),
    };
  };

  const specs: RouteSpec[] = [
    {
      method: 'POST',
      template: '/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions',
      handle: ({ params, repo, body }) => {
        const comment = findComment(repo, params.comment_id ?? '', 'issue');
        if (!comment) return noSuch(`issue comment ${params.comment_id}`);
        return react(repo, 'issue-comment', comment.id, body);
      },
    },
    {
      method: 'POST',
      template: '/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions',
      handle: ({ params, repo, body }) => {
        const comment = findComment(repo, params.comment_id ?? '', 'line');
        if (!comment) return noSuch(`review comment ${params.comment_id}`);
        return react(repo, 'review-comment', comment.id, body);
      },
    },
    {
      method: 'POST',
      template: '/repos/{owner}/{repo}/issues/{issue_number}/reactions',
      handle: ({ params, repo, body }) => {
        const number = params.issue_number ?? '';
        if (!threadExists(repo, number)) return noSuch(`issue ${number}`);
        return react(repo, 'issue', Number(number), body);
      },
    },
    {
      method: 'GET',
      template: '/repos/{owner}/{repo}/pulls/comments/{comment_id}',
      handle: ({ params, repo }) => {
        const comment = findComment(repo, params.comment_id ?? '', 'line');
        return comment
          ? { status: 200, body: reviewCommentJson(comment) }
          : noSuch(`review comment ${params.comment_id}`);
      },
    },
    {
      method: 'POST',
      template: '/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies',
      handle: ({ params, repo, body }) => {
        const number = params.pull_number ?? '';
        const asked = findComment(repo, params.comment_id ?? '', 'line');
        if (!findPull(repo, number) || !asked || String(asked.number) !== number)
          return noSuch(`review comment ${params.comment_id} on pull request ${number}`);
        // Like GitHub: replies go to a thread's first comment, never to a reply.
        if (asked.inReplyTo !== null)
          return {
            ...validationFailed([{ resource: 'PullRequestReviewComment', code: 'invalid' }]),
            unexpected: 'a reply to a reply',
          };
        const reply = storeComment(repo, {
          number: asked.number,
          kind: 'line',
          author: tokenUser,
          body: String((body as { body?: unknown }).body),
          inReplyTo: asked.id,
          path: asked.path,
          line: asked.line,
          diffHunk: asked.diffHunk,
        });
        return { status: 201, body: reviewCommentJson(reply) };
      },
    },
    {
      method: 'POST',
      template: '/repos/{owner}/{repo}/issues/{issue_number}/comments',
      handle: ({ params, repo, body }) => {
        const number = params.issue_number ?? '';
        if (!threadExists(repo, number)) return noSuch(`issue ${number}`);
        const comment = storeComment(repo, {
          number: Number(number),
          kind: 'issue',
          author: tokenUser,
          body: String((body as { body?: unknown }).body),
          inReplyTo: null,
          path: null,
          line: null,
          diffHunk: null,
        });
        return { status: 201, body: issueCommentJson(comment) };
      },
    },
    {
      method: 'GET',
      template: '/repos/{owner}/{repo}/issues/{issue_number}',
      handle: ({ params, repo }) => {
        const issue = issueJson(repo, params.issue_number ?? '');
        // Asking for an issue that is not there is a fair question: GitHub's 404 answers it.
        return issue ? { status: 200, body: issue } : failure(404, 'Not Found');
      },
    },
    {
      method: 'GET',
      template: '/repos/{owner}/{repo}/collaborators/{username}/permission',
      handle: ({ params, repo }) => {
        const login = params.username ?? '';
        const permission = permissions.get(`${repo}\n${login.toLowerCase()}`);
        if (!permission) return failure(404, `${login} is not a user`);
        // GitHub's `permission` is the classic level; maintain and triage show in role_name.
        const classic =
          permission === 'maintain' ? 'write' : permission === 'triage' ? 'read' : permission;
        return {
          status: 200,
          body: { permission: classic, role_name: permission, user: userJson(login) },
        };
      },
    },
    {
      method: 'GET',
      template: '/repos/{owner}/{repo}/pulls',
      handle: ({ query, repo }) => {
        const state = query.state ?? 'open';
        let list = pulls.filter((p) => p.repo === repo && (state === 'all' || p.state === state));
        // Like GitHub: only `user:ref` filters; a bare branch name is ignored and every pull
        // request comes back.
        const head = query.head;
        if (head?.includes(':')) list = list.filter((p) => sameLabel(p.headLabel, head));
        if (query.base) list = list.filter((p) => p.base === query.base);
        const ascending = query.direction === 'asc';
        list = [...list].sort((a, b) => (ascending ? a.number - b.number : b.number - a.number));
        const { items } = pageOf(list, new URLSearchParams(query), {
          param: 'per_page',
          default: 30,
          max: 100,
        });
        return { status: 200, body: items.map((p) => pullJson(p, false)) };
      },
    },
    {
      method: 'POST',
      template: '/repos/{owner}/{repo}/pulls',
      handle: ({ body, repo, owner }) => {
        const input = body as Record<string, unknown>;
        if (input.issue !== undefined || input.head_repo !== undefined) {
          return {
            ...failure(422, 'Validation Failed'),
            unexpected: 'the fake does not support issue or head_repo',
          };
        }
        if (typeof input.title !== 'string' || input.title === '') {
          return validationFailed([
            { resource: 'PullRequest', code: 'missing_field', field: 'title' },
          ]);
        }
        const rawHead = String(input.head);
        const colon = rawHead.indexOf(':');
        const headOwner = colon < 0 ? owner : rawHead.slice(0, colon);
        const headRef = colon < 0 ? rawHead : rawHead.slice(colon + 1);
        const base = String(input.base);
        if (headOwner.toLowerCase() !== owner.toLowerCase() || headRef === '') {
          return validationFailed([{ resource: 'PullRequest', field: 'head', code: 'invalid' }]);
        }
        const label = `${owner}:${headRef}`;
        if (headRef === base) {
          return validationFailed([
            {
              resource: 'PullRequest',
              code: 'custom',
              message: `No commits between ${base} and ${headRef}`,
            },
          ]);
        }
        if (input.draft === true && options.draftsRefused) {
          return failure(422, 'Draft pull requests are not supported in this repository.');
        }
        if (
          pulls.some(
            (p) =>
              p.repo === repo && p.state === 'open' && p.headLabel === label && p.base === base,
          )
        ) {
          return validationFailed([
            {
              resource: 'PullRequest',
              code: 'custom',
              message: `A pull request already exists for ${label}.`,
            },
          ]);
        }
        const number = nextNumber(repo);
        const now = new Date(clock());
        const pull: StoredPull = {
          repo,
          number,
          title: input.title,
          body: typeof input.body === 'string' ? input.body : null,
          head: headRef,
          headLabel: label,
          base,
          draft: input.draft === true,
          state: 'open',
          merged: false,
          htmlUrl: `${origin}/${repo}/pull/${number}`,
          createdAt: now,
          updatedAt: now,
          closedAt: null,
          mergedAt: null,
          mergeable: true,
          labels: [],
          mergedHead: null,
        };
        pulls.push(pull);
        return {
          status: 201,
          body: pullJson(pull, true),
          headers: { location: `${origin}${prefix}/repos/${repo}/pulls/${number}` },
        };
      },
    },
    {
      method: 'GET',
      template: '/repos/{owner}/{repo}/pulls/{pull_number}',
      handle: ({ params, repo }) => {
        const pull = findPull(repo, params.pull_number ?? '');
        return pull ? { status: 200, body: pullJson(pull, true) } : failure(404, 'Not Found');
      },
    },
    {
      method: 'PATCH',
      template: '/repos/{owner}/{repo}/pulls/{pull_number}',
      handle: ({ params, body, repo }) => {
        const pull = findPull(repo, params.pull_number ?? '');
        if (!pull) return failure(404, 'Not Found');
        const input = (body ?? {}) as Record<string, unknown>;
        if (typeof input.title === 'string') pull.title = input.title;
        if (typeof input.body === 'string') pull.body = input.body;
        if (typeof input.base === 'string') pull.base = input.base;
        if (input.state === 'closed' && pull.state === 'open') {
          pull.state = 'closed';
          pull.closedAt = new Date(clock());
        } else if (input.state === 'open' && pull.state === 'closed') {
          if (pull.merged)
            return validationFailed([
              {
                resource: 'PullRequest',
                code: 'custom',
                message: 'state cannot be changed. The pull request has been merged.',
              },
            ]);
          pull.state = 'open';
          pull.closedAt = null;
        }
        pull.updatedAt = new Date(clock());
        return { status: 200, body: pullJson(pull, true) };
      },
    },
    {
      method: 'GET',
      template: '/repos/{owner}/{repo}/pulls/{pull_number}/reviews',
      handle: ({ params, query, repo }) => {
        const pull = findPull(repo, params.pull_number ?? '');
        if (!pull) return failure(404, 'Not Found');
        const list = reviews.filter((r) => r.repo === repo && r.number === pull.number);
        const { items } = pageOf(list, new URLSearchParams(query), {
          param: 'per_page',
          default: 30,
          max: 100,
        });
        return {
          status: 200,
          body: items.map((r) => ({
            id: r.id,
            node_id: `PRR_fake${r.id}`,
            user: userJson(r.login),
            body: '',
            state: r.state,
            html_url: `${pull.htmlUrl}#pullrequestreview-${r.id}`,
            pull_request_url: `${origin}${prefix}/repos/${repo}/pulls/${pull.number}`,
            _links: {
              html: { href: `${pull.htmlUrl}#pullrequestreview-${r.id}` },
              pull_request: { href: `${origin}${prefix}/repos/${repo}/pulls/${pull.number}` },
            },
            submitted_at: isoSeconds(r.submittedAt),
            commit_id: r.commitId,
            author_association: 'COLLABORATOR',
          })),
        };
      },
    },
    {
      method: 'PUT',
      template: '/repos/{owner}/{repo}/pulls/{pull_number}/merge',
      handle: ({ params, body, repo }) => {
        const pull = findPull(repo, params.pull_number ?? '');
        if (!pull) return failure(404, 'Not Found');
        const input = (body ?? {}) as { sha?: unknown; merge_method?: unknown };
        // GitHub's words for each refusal, in the order it checks.
        if (pull.merged || pull.state !== 'open' || pull.mergeable === false)
          return failure(405, 'Pull Request is not mergeable');
        const head = headSha(pull);
        if (typeof input.sha === 'string' && input.sha !== head)
          return failure(409, 'Head branch was modified. Review and try the merge again.');
        const blocked = mergeBlocks.get(repo);
        if (blocked !== undefined) return failure(405, blocked);
        markMerged(pull);
        const method = typeof input.merge_method === 'string' ? input.merge_method : 'merge';
        mergesDone.push({ repo, number: pull.number, method, sha: head });
        return {
          status: 200,
          body: {
            sha: fakeSha(`merge${pull.number}`),
            merged: true,
            message: 'Pull Request successfully merged',
          },
        };
      },
    },
    {
      method: 'GET',
      template: '/repos/{owner}/{repo}/commits/{ref}/check-runs',
      handle: ({ params, query, repo }) => {
        const sha = params.ref ?? '';
        let list =
          query.filter === 'all'
            ? checkRuns.filter((r) => r.repo === repo && r.sha === sha)
            : latestRuns(repo, sha);
        if (query.check_name) list = list.filter((r) => r.name === query.check_name);
        // Newest first, as GitHub lists them.
        list = [...list].sort((a, b) => b.id - a.id);
        const { items } = pageOf(list, new URLSearchParams(query), {
          param: 'per_page',
          default: 30,
          max: 100,
        });
        return {
          status: 200,
          body: { total_count: list.length, check_runs: items.map(checkRunJson) },
        };
      },
    },
    {
      method: 'GET',
      template: '/repos/{owner}/{repo}/check-runs/{check_run_id}',
      handle: ({ params, repo }) => {
        const run = checkRuns.find((r) => r.repo === repo && String(r.id) === params.check_run_id);
        return run ? { status: 200, body: checkRunJson(run) } : failure(404, 'Not Found');
      },
    },
    {
      method: 'GET',
      template: '/repos/{owner}/{repo}/commits/{ref}/status',
      handle: ({ params, query, repo }) => {
        const sha = params.ref ?? '';
        const latest = new Map<string, StoredStatus>();
        for (const status of statuses)
          if (status.repo === repo && status.sha === sha) latest.set(status.context, status);
        const list = [...latest.values()].sort((a, b) => b.id - a.id);
        const { items } = pageOf(list, new URLSearchParams(query), {
          param: 'per_page',
          default: 30,
          max: 100,
        });
        const states = list.map((status) => status.state);
        const combined =
          states.includes('failure') || states.includes('error')
            ? 'failure'
            : states.length === 0 || states.includes('pending')
              ? 'pending'
              : 'success';
        return {
          status: 200,
          body: {
            state: combined,
            statuses: items.map(statusJson),
            sha,
            total_count: list.length,
            commit_url: `${origin}${prefix}/repos/${repo}/commits/${sha}`,
            url: `${origin}${prefix}/repos/${repo}/commits/${sha}/status`,
          },
        };
      },
    },
    {
      method: 'GET',
      template: '/repos/{owner}/{repo}/actions/jobs/{job_id}/logs',
      handle: ({ params, repo }) => {
        const run = checkRuns.find((r) => r.repo === repo && String(r.id) === params.job_id);
        if (!run) return failure(404, 'Not Found');
        // Like GitHub: a redirect to a short-lived signed URL of its log storage.
        const location = `${origin}${storagePath(run.id)}?sig=${storageSignature(run.id)}`;
        return { status: 302, headers: { location } };
      },
    },
    {
      method: 'POST',
      template: '/app/installations/{installation_id}/access_tokens',
      handle: () => {
        const ttl = options.app?.tokenTtlSeconds ?? 3600;
        const token = `ghs_${randomBytes(27).toString('base64url').replace(/[-_]/g, 'x').slice(0, 36)}`;
        const expiresAt = new Date(clock() + ttl * 1000);
        installationTokens.push({ token, expiresAt, revoked: false });
        return {
          status: 201,
          body: {
            token,
            expires_at: isoSeconds(expiresAt),
            permissions: { contents: 'write', pull_requests: 'write', metadata: 'read' },
            repository_selection: 'all',
          },
        };
      },
    },
  ];
  const routes: Route[] = specs.map((route) => {
    const names: string[] = [];
    const source = route.template.replace(/\{(\w+)\}/g, (_, name: string) => {
      names.push(name);
      return '([^/]+)';
    });
    if (!doc.paths[route.template]?.[route.method.toLowerCase()]) {
      throw new Error(`fake-github: ${route.method} ${route.template} is not in the description`);
    }
    return { ...route, names, pattern: new RegExp(`^${source}$`) };
  });

  function authenticate(
    header: string | undefined,
    wantJwt: boolean,
  ): { kind: RecordedRequest['auth']; error?: Answer } {
    if (!header) return { kind: 'none', error: failure(401, 'Requires authentication') };
    const match = /^(token|bearer)\s+(\S+)$/i.exec(header.trim());
    const scheme = match?.[1]?.toLowerCase();
    const credential = match?.[2] ?? '';
    if (wantJwt) {
      if (scheme !== 'bearer')
        return { kind: 'invalid', error: failure(401, 'A JSON web token could not be decoded') };
      const problem = verifyJwt(credential);
      return problem ? { kind: 'invalid', error: failure(401, problem) } : { kind: 'jwt' };
    }
    if (options.token !== undefined && credential === options.token) return { kind: 'token' };
    const minted = installationTokens.find((t) => t.token === credential);
    if (minted && !minted.revoked && minted.expiresAt.getTime() > clock())
      return { kind: 'installation' };
    return { kind: 'invalid', error: failure(401, 'Bad credentials') };
  }

  function verifyJwt(jwt: string): string | undefined {
    if (!options.app || !appKey) return 'A JSON web token could not be decoded';
    const parts = jwt.split('.');
    const [header, payload, signature] = parts;
    if (parts.length !== 3 || !header || !payload || !signature)
      return 'A JSON web token could not be decoded';
    let claims: { alg?: unknown; iat?: unknown; exp?: unknown; iss?: unknown };
    try {
      const decodedHeader = JSON.parse(Buffer.from(header, 'base64url').toString()) as {
        alg?: unknown;
      };
      if (decodedHeader.alg !== 'RS256') return 'A JSON web token could not be decoded';
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as typeof claims;
    } catch {
      return 'A JSON web token could not be decoded';
    }
    const valid = verify(
      'sha256',
      Buffer.from(`${header}.${payload}`),
      appKey,
      Buffer.from(signature, 'base64url'),
    );
    if (!valid) return 'A JSON web token could not be decoded';
    const now = Math.floor(clock() / 1000);
    if (!Number.isInteger(claims.iat) || !Number.isInteger(claims.exp)) {
      return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued.";
    }
    const iat = claims.iat as number;
    const exp = claims.exp as number;
    if (iat > now + 60)
      return "'Issued at' claim ('iat') must be an Integer representing a time in the past.";
    if (exp <= now)
      return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires.";
    if (exp - iat > 600 || exp > now + 600)
      return "'Expiration time' claim ('exp') is too far in the future.";
    if (String(claims.iss) !== options.app.appId) return 'Integration not found';
    return undefined;
  }

  /** Path, query and body against the operation's description; an Answer when refused. */
  function validate(
    op: Operation,
    params: Record<string, string>,
    query: Record<string, string>,
    duplicated: string[],
    body: unknown,
  ): Answer | undefined {
    const parameters = (op.parameters ?? []).map((p) => resolve(doc, p));
    for (const p of parameters.filter((p) => p.in === 'path')) {
      const value = params[p.name] ?? '';
      if (resolve(doc, p.schema ?? {}).type === 'integer' && !/^\d+$/.test(value)) {
        return {
          ...failure(404, 'Not Found'),
          unexpected: `path parameter ${p.name} is not an integer: ${value}`,
        };
      }
    }
    const known = new Map(parameters.filter((p) => p.in === 'query').map((p) => [p.name, p]));
    if (duplicated.length)
      return {
        ...failure(400, 'Bad request'),
        unexpected: `repeated query parameters: ${duplicated.join(', ')}`,
      };
    for (const [name, raw] of Object.entries(query)) {
      const p = known.get(name);
      // GitHub ignores unknown query parameters, which is exactly how a misspelled filter goes
      // unnoticed: the fake refuses them.
      if (!p)
        return {
          ...failure(400, `Unknown query parameter "${name}"`),
          unexpected: `unknown query parameter ${name}`,
        };
      const schema = resolve(doc, p.schema ?? {});
      const value =
        schema.type === 'integer' && /^-?\d+$/.test(raw)
          ? Number(raw)
          : schema.type === 'boolean' && /^(true|false)$/.test(raw)
            ? raw === 'true'
            : raw;
      const errors: string[] = [];
      check(doc, schema, value, name, { strict: true, required: true }, errors);
      if (errors.length) {
        return {
          ...validationFailed([{ resource: 'Query', field: name, code: 'invalid' }]),
          unexpected: errors.join(' '),
        };
      }
    }
    const schema = op.requestBody?.content['application/json']?.schema;
    if (body === undefined) {
      if (op.requestBody?.required)
        return {
          ...failure(400, 'Problems parsing JSON'),
          unexpected: 'the operation requires a JSON body',
        };
      return undefined;
    }
    if (!schema)
      return {
        ...failure(400, 'Problems parsing JSON'),
        unexpected: 'the operation takes no body',
      };
    const errors: string[] = [];
    check(doc, schema, body, 'body', { strict: true, required: true }, errors);
    if (errors.length)
      return {
        ...failure(422, `Invalid request.\n\n${errors.join('\n')}`),
        unexpected: errors.join(' '),
      };
    return undefined;
  }

  /** The fake's own success answers must fit the description too, or tests prove nothing. */
  function checkAnswer(op: Operation, answer: Answer): string | undefined {
    const schema = op.responses[String(answer.status)]?.content?.['application/json']?.schema;
    if (!schema) return `the description has no ${answer.status} answer for ${op.operationId}`;
    const errors: string[] = [];
    check(doc, schema, answer.body, 'response', { strict: true, required: false }, errors);
    return errors.length
      ? `fake-github bug, answer does not fit the description: ${errors.join(' ')}`
      : undefined;
  }

  function handle(request: ForgeRequest, res: ServerResponse): void {
    if (request.target.pathname.startsWith('/_storage/')) {
      serveStorage(request, res);
      return;
    }
    const { req, method, target, text } = request;
    const query: Record<string, string> = {};
    const duplicated: string[] = [];
    for (const [name, value] of target.searchParams) {
      if (name in query) duplicated.push(name);
      query[name] = value;
    }
    const record: RecordedRequest = {
      index: requests.length,
      method,
      path: target.pathname,
      query,
      headers: req.headers,
      body: undefined,
      operation: undefined,
      auth: 'none',
      status: 0,
    };
    requests.push(record);
    const answer = route(record, text, duplicated);
    record.status = answer.status;
    if (answer.unexpected) {
      record.unexpected = answer.unexpected;
      unexpected.push(record);
    }
    const headers: Record<string, string> = {
      'content-type': 'application/json; charset=utf-8',
      'x-github-request-id': `FAKE:${record.index}`,
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': '4999',
      'x-ratelimit-reset': String(Math.floor(clock() / 1000) + 3600),
      'x-ratelimit-resource': 'core',
      ...answer.headers,
    };
    res.writeHead(answer.status, headers);
    res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
  }

  /**
   * The log storage the log download redirects to: the signature in the URL is its only
   * credential, and a request carrying GitHub's token there is one a client should never send.
   */
  function serveStorage({ req, method, target }: ForgeRequest, res: ServerResponse): void {
    const query = Object.fromEntries(target.searchParams);
    const authorization = req.headers.authorization;
    const record: RecordedRequest = {
      index: requests.length,
      method,
      path: target.pathname,
      query,
      headers: req.headers,
      body: undefined,
      operation: undefined,
      auth: authorization ? 'invalid' : 'none',
      status: 0,
    };
    requests.push(record);
    const match = /^\/_storage\/job-logs\/(\d+)$/.exec(target.pathname);
    const run = checkRuns.find((r) => String(r.id) === match?.[1]);
    let status = 200;
    if (authorization) {
      record.unexpected = "GitHub's token was sent to the log storage";
      unexpected.push(record);
      status = 400;
    } else if (method !== 'GET' || !run) {
      status = 404;
    } else if (query.sig !== storageSignature(run.id)) {
      status = 403;
    }
    record.status = status;
    res.writeHead(status, { 'content-type': status === 200 ? 'text/plain' : 'application/xml' });
    res.end(status === 200 ? run?.log : '<Error><Code>AuthenticationFailed</Code></Error>');
  }

  function route(record: RecordedRequest, text: string, duplicated: string[]): Answer {
    const notServed = (why: string): Answer => ({ ...failure(404, 'Not Found'), unexpected: why });
    if (!record.path.startsWith(`${prefix}/`))
      return notServed(`not under the API prefix "${prefix}"`);
    const path = record.path.slice(prefix.length);
    let matched: { route: Route; params: Record<string, string> } | undefined;
    let otherMethod = false;
    for (const candidate of routes) {
      const m = candidate.pattern.exec(path);
      if (!m) continue;
      if (candidate.method !== record.method) {
        otherMethod = true;
        continue;
      }
      const params: Record<string, string> = {};
      candidate.names.forEach((name, i) => {
        params[name] = decodeURIComponent(m[i + 1] ?? '');
      });
      matched = { route: candidate, params };
    }
    if (!matched)
      return notServed(
        otherMethod
          ? `method ${record.method} not served for ${path}`
          : `no operation serves ${record.method} ${path}`,
      );
    const op = doc.paths[matched.route.template]?.[record.method.toLowerCase()];
    if (!op) return notServed('not in the description');
    record.operation = op.operationId;

    if (text !== '') {
      try {
        record.body = JSON.parse(text) as unknown;
      } catch {
        return { ...failure(400, 'Problems parsing JSON'), unexpected: 'the body is not JSON' };
      }
    }
    if (!record.headers['user-agent']) {
      return failure(
        403,
        'Request forbidden by administrative rules. Please make sure your request has a User-Agent header.',
      );
    }
    const inject = injected.shift();
    if (inject) {
      return {
        ...failure(inject.status, inject.message ?? defaultMessage(inject.status, inject.headers)),
        headers: inject.headers,
      };
    }
    const isApp = matched.route.template.startsWith('/app/');
    const auth = authenticate(
      typeof record.headers.authorization === 'string' ? record.headers.authorization : undefined,
      isApp,
    );
    record.auth = auth.kind;
    if (auth.error) return auth.error;

    let repo = '';
    let owner = '';
    if (isApp) {
      if (matched.params.installation_id !== options.app?.installationId)
        return failure(404, 'Not Found');
    } else {
      const full = repos.get(`${matched.params.owner}/${matched.params.repo}`.toLowerCase());
      if (!full) return failure(404, 'Not Found');
      repo = full;
      owner = full.split('/')[0] ?? '';
    }
    const refused = validate(op, matched.params, record.query, duplicated, record.body);
    if (refused) return refused;
    const answer = matched.route.handle({
      params: matched.params,
      query: record.query,
      body: record.body,
      repo,
      owner,
    });
    if (answer.status < 300 && !answer.unexpected) {
      const problem = checkAnswer(op, answer);
      if (problem) return { ...answer, unexpected: problem };
    }
    return answer;
  }

  const server = await startFakeForgeServer(handle, (err) => crashes.push(String(err)));
  origin = server.origin;

  return {
    url: origin,
    apiUrl: `${origin}${prefix}`,
    sendWebhook: githubSender({
      web: origin,
      repo: options.repos[0] ?? 'owner/repo',
      pull(repo, number) {
        const pull = findPull(repos.get(repo.toLowerCase()) ?? repo, String(number));
        return pull ? pullJson(pull, true) : undefined;
      },
      checkRun(repo, sha, name, state) {
        const known = latestRuns(fullName(repo), sha).find((run) => run.name === name);
        return checkRunJson(
          known?.state === state ? known : addCheckRun(repo, sha, { name, state }),
        );
      },
      pullChanged(change) {
        const pull = pullOrThrow(change.repo, change.number);
        const now = new Date(clock());
        switch (change.action) {
          case 'closed':
            if (pull.state === 'open') Object.assign(pull, { state: 'closed', closedAt: now });
            break;
          case 'merged':
            if (!pull.merged) markMerged(pull);
            break;
          case 'reopened':
            if (pull.state === 'closed' && !pull.merged)
              Object.assign(pull, { state: 'open', closedAt: null });
            break;
          case 'labeled':
            if (change.label !== undefined && !pull.labels.includes(change.label))
              pull.labels.push(change.label);
            break;
          case 'approved': {
            const login = change.login ?? '';
            const latest = reviews
              .filter((r) => r.repo === pull.repo && r.number === pull.number && r.login === login)
              .filter((r) => r.state === 'APPROVED' || r.state === 'CHANGES_REQUESTED')
              .at(-1);
            if (latest?.state !== 'APPROVED') addReview(pull.repo, pull.number, login, 'APPROVED');
            break;
          }
          case 'synchronize':
            // The head is what `heads` says: the test pushed to the real repository.
            break;
        }
        pull.updatedAt = now;
      },
      written: (c) => {
        // A review's body is no comment: GitHub keeps it as a review, which nothing here reads.
        if (c.kind === 'review') return;
        const full = repos.get(c.repo.toLowerCase()) ?? c.repo;
        storeComment(
          full,
          {
            number: c.number,
            kind: c.kind === 'line' ? 'line' : 'issue',
            author: c.author,
            body: c.body,
            inReplyTo: null,
            path: c.path ?? null,
            line: c.line ?? null,
            diffHunk: c.diffHunk ?? null,
          },
          c.id,
        );
      },
    }),
    requests,
    unexpected,
    get installationTokens() {
      return installationTokens.map(({ token, expiresAt }) => ({ token, expiresAt }));
    },
    pullRequests(repo) {
      return pulls
        .filter((p) => repo === undefined || p.repo.toLowerCase() === repo.toLowerCase())
        .map(({ repo, number, title, body, head, base, draft, state, merged, htmlUrl }) => ({
          repo,
          number,
          title,
          body,
          head,
          base,
          draft,
          state,
          merged,
          htmlUrl,
        }));
    },
    merge(repo, number) {
      markMerged(pullOrThrow(repo, number));
    },
    setCheck(repo, sha, check) {
      addCheckRun(repo, sha, check);
    },
    setStatus(repo, sha, status) {
      statuses.push({
        ...status,
        repo: fullName(repo),
        sha,
        id: nextStatusId++,
        createdAt: new Date(clock()),
      });
    },
    setMergeable(repo, number, mergeable) {
      pullOrThrow(repo, number).mergeable = mergeable;
    },
    approve(repo, number, login) {
      addReview(repo, number, login, 'APPROVED');
    },
    review(repo, number, login, state) {
      addReview(repo, number, login, state);
    },
    addPullLabel(repo, number, label) {
      const pull = pullOrThrow(repo, number);
      if (!pull.labels.includes(label)) pull.labels.push(label);
    },
    blockMerges(repo, message) {
      if (message === null) mergeBlocks.delete(fullName(repo));
      else mergeBlocks.set(fullName(repo), message);
    },
    merges() {
      return mergesDone.map((m) => ({ ...m }));
    },
    failNext(status, opts) {
      injected.push({
        status,
        headers: opts?.headers ?? {},
        ...(opts?.message === undefined ? {} : { message: opts.message }),
      });
    },
    holdNext: server.holdNext,
    revokeInstallationTokens() {
      for (const t of installationTokens) t.revoked = true;
    },
    openIssue(repo, issue) {
      const full = repos.get(repo.toLowerCase()) ?? repo;
      const number = nextNumber(full);
      const stored: FakeIssue = {
        repo: full,
        number,
        title: issue.title,
        body: issue.body ?? '',
        author: issue.author,
        htmlUrl: `${origin}/${full}/issues/${number}`,
        state: issue.state ?? 'open',
      };
      issues.push(stored);
      return { ...stored };
    },
    addComment(repo, comment) {
      const full = repos.get(repo.toLowerCase()) ?? repo;
      if (!threadExists(full, String(comment.number)))
        throw new Error(`fake-github: no issue or pull request ${repo}#${comment.number}`);
      return {
        ...storeComment(full, {
          number: comment.number,
          kind: comment.kind ?? 'issue',
          author: comment.author,
          body: comment.body,
          inReplyTo: comment.inReplyTo ?? null,
          path: comment.path ?? null,
          line: comment.line ?? null,
          diffHunk: comment.diffHunk ?? null,
        }),
      };
    },
    setPermission(repo, login, permission) {
      permissions.set(
        `${repos.get(repo.toLowerCase()) ?? repo}\n${login.toLowerCase()}`,
        permission,
      );
    },
    issues(repo) {
      return issues
        .filter((i) => i.repo.toLowerCase() === repo.toLowerCase())
        .map((i) => ({ ...i }));
    },
    comments(repo) {
      return comments
        .filter((c) => c.repo.toLowerCase() === repo.toLowerCase())
        .map((c) => ({ ...c }));
    },
    reactions(repo) {
      return reactions
        .filter((r) => r.repo.toLowerCase() === repo.toLowerCase())
        .map((r) => ({ ...r }));
    },
    assertNoUnexpected() {
      assertNoneUnexpected('fake-github', [
        ...unexpected.map((r) => `${r.method} ${r.path} → ${r.status}: ${r.unexpected}`),
        ...crashes.map((err) => `the fake failed: ${err}`),
      ]);
    },
    close: server.close,
  };
}

function sameLabel(label: string, filter: string): boolean {
  const [owner, ...ref] = filter.split(':');
  const [labelOwner, ...labelRef] = label.split(':');
  return owner?.toLowerCase() === labelOwner?.toLowerCase() && ref.join(':') === labelRef.join(':');
}
