// What the fetch-based forge providers (GitLab, Gitea/Forgejo) share: reading a repository URL,
// one JSON request with a deadline and a zod-checked answer, and turning HTTP failures into
// ForgeErrors that say what to fix. Nothing here knows a particular forge's paths.
// `readForgeRepository` and `retryAfterSeconds` are plain functions any provider may reuse.

import type { z } from 'zod';
import type { ForgeKind } from '../projects/forge.ts';
import { parseRepositoryUrl } from '../repository/url.ts';
import { parseRetryAfter } from '../retry-after.ts';
import { secretScrubber } from '../secrets/scrub.ts';
import { ForgeError } from './types.ts';

// ---------------------------------------------------------------------------------------------
// Repository URLs

export interface RepositoryLocation {
  scheme: 'https' | 'http' | 'ssh';
  /** Lower-cased host; http(s) URLs keep their port, ssh ones drop it (it says nothing about the web side). */
  host: string;
  /** The path without leading slash and `.git`, split: `['group', 'sub', 'project']`. */
  segments: string[];
  /** `segments.join('/')`. */
  path: string;
}

// Forges allow letters, digits, `_`, `-` and `.` in owner, group and project names. Being strict
// keeps `..`, `%2F` or a query string from ever reaching an API path built from the URL.
const SEGMENT = /^[A-Za-z0-9_.-]+$/;

/**
 * Reads `https://host/a/b(.git)`, `ssh://[user@]host[:port]/a/b(.git)` and `[user@]host:a/b(.git)`
 * through the one repository URL parser; plain `http://` too, for self-hosted forges on a
 * private network and loopback tests. Returns undefined for anything else, including URLs that
 * carry a password or a query string.
 */
export function readForgeRepository(url: string): RepositoryLocation | undefined {
  const parsed = parseRepositoryUrl(url);
  if (!parsed.ok) return undefined;
  const { kind, hostname, port, user, hasPassword, hasQuery, path } = parsed.url;
  if (kind === 'local' || hasPassword || hasQuery || hostname === '') return undefined;
  if (kind === 'scp') {
    // `host:/abs/path` names a folder on the server, not a project of the forge.
    if (path.startsWith('/')) return undefined;
    return location('ssh', hostname, path);
  }
  if (kind === 'ssh') return location('ssh', hostname, path);
  // A user name in an https URL is half a credential; it belongs in the forge settings.
  if (user !== undefined) return undefined;
  // The default port is no part of the host, as the web side writes it.
  const shownPort = port !== undefined && port !== (kind === 'https' ? '443' : '80');
  return location(kind, shownPort ? `${hostname}:${port}` : hostname, path);
}

function location(
  scheme: RepositoryLocation['scheme'],
  host: string,
  rawPath: string,
): RepositoryLocation | undefined {
  const path = rawPath
    .replace(/^\//, '')
    .replace(/\/+$/, '')
    .replace(/\.git$/, '');
  const segments = path.split('/');
  if (!segments.every((s) => SEGMENT.test(s) && s !== '.' && s !== '..')) return undefined;
  return { scheme, host, segments, path: segments.join('/') };
}

/**
 * The repository path relative to a forge installed under a sub-path (`https://host/gitlab/…`
 * with its API at `https://host/gitlab/api/v4`): the API URL's prefix is removed when the
 * repository is on the same host and starts with it.
 */
export function pathBelowBase(repo: RepositoryLocation, api: URL, apiSuffix: string): string[] {
  const base = baseSegments(api, apiSuffix);
  if (base.length === 0 || repo.host.split(':')[0] !== api.hostname.toLowerCase()) {
    return repo.segments;
  }
  const prefixed = base.every((s, i) => repo.segments[i]?.toLowerCase() === s.toLowerCase());
  return prefixed && repo.segments.length > base.length
    ? repo.segments.slice(base.length)
    : repo.segments;
}

function baseSegments(api: URL, apiSuffix: string): string[] {
  const path = api.pathname.replace(/\/+$/, '');
  const base = path.endsWith(apiSuffix) ? path.slice(0, -apiSuffix.length) : path;
  return base.split('/').filter((s) => s !== '');
}

/**
 * Checks a configured API URL and completes it: a bare `https://host` (or `https://host/sub`)
 * gets the forge's API path appended, since that is where every instance serves it.
 */
export function normalizeApiUrl(
  forge: ForgeKind,
  name: string,
  apiUrl: string,
  apiSuffix: string,
): URL {
  let url: URL | undefined;
  try {
    url = new URL(apiUrl.trim());
  } catch {
    url = undefined;
  }
  if (
    !url ||
    (url.protocol !== 'https:' && url.protocol !== 'http:') ||
    url.username ||
    url.password ||
    url.search ||
    url.hash
  ) {
    throw new ForgeError(
      forge,
      `The ${name} API URL must be an http(s) URL without credentials or query, e.g. https://${name.toLowerCase()}.example.com${apiSuffix}`,
      { transient: false },
    );
  }
  const path = url.pathname.replace(/\/+$/, '');
  url.pathname = path.endsWith(apiSuffix) ? path : `${path}${apiSuffix}`;
  return url;
}

// ---------------------------------------------------------------------------------------------
// Waiting times

const MAX_WAIT_SECONDS = 24 * 60 * 60;

/** `Retry-After` in seconds, at most a day; undefined when absent. */
export function retryAfterSeconds(headers: Headers, now: number = Date.now()): number | undefined {
  const seconds = parseRetryAfter(headers.get('retry-after'), now);
  return seconds === undefined ? undefined : clampWait(seconds);
}

/**
 * Seconds until a rate-limit window resets: `RateLimit-Reset` or `X-RateLimit-Reset`. GitLab
 * and GitHub send a Unix time, the IETF draft delay-seconds; they are told apart by size. Only
 * meaningful on a rate-limited answer: GitLab.com sends these headers on every response.
 */
export function rateLimitResetSeconds(
  headers: Headers,
  now: number = Date.now(),
): number | undefined {
  const value = (headers.get('ratelimit-reset') ?? headers.get('x-ratelimit-reset'))?.trim();
  if (!value || !/^\d+$/.test(value)) return undefined;
  const seconds = Number(value);
  // Seconds since 1970 are above 10^9 since 2001; a delay that long is not a delay.
  return clampWait(seconds > 1e9 ? Math.ceil(seconds - now / 1000) : seconds);
}

function clampWait(seconds: number): number {
  return Math.min(MAX_WAIT_SECONDS, Math.max(0, seconds));
}

// ---------------------------------------------------------------------------------------------
// Requests

export interface ForgeHttpOptions {
  forge: ForgeKind;
  /** For messages: "GitLab", "Gitea". */
  name: string;
  /** The normalized API base (see normalizeApiUrl). */
  apiUrl: URL;
  /** Authentication headers; their values are treated as secrets. */
  headers: Record<string, string>;
  fetch: typeof globalThis.fetch;
  /** The repository as shown in messages, e.g. `group/sub/project`. */
  repository: string;
  /** What the forge calls a repository: "project" on GitLab. Default: "repository". */
  repositoryNoun?: string;
  /** Names the permission a 403 is missing, e.g. "the token needs the api scope". */
  permissions: string;
  /** What a 401 should make the user do. */
  tokenHelp: string;
  /** Extra strings never to show, besides the header values (e.g. the raw token). */
  secrets: string[];
  timeoutMs?: number;
}

interface ForgeRequest<T> {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH';
  /** Below the API base, already percent-encoded, e.g. `/projects/a%2Fb/merge_requests`. */
  path: string;
  query?: Record<string, string | number>;
  body?: unknown;
  schema: z.ZodType<T>;
  /** For messages: "open a merge request" in "GitLab refused to open a merge request". */
  action: string;
  /** The message for a 404 when the thing missing is not the repository itself. */
  notFound?: string;
  signal?: AbortSignal | undefined;
}

interface ForgeResponse<T> {
  status: number;
  headers: Headers;
  data: T;
}

export interface ForgeHttp {
  request<T>(spec: ForgeRequest<T>): Promise<ForgeResponse<T>>;
  /** Removes every secret from a text that is about to go into a message. */
  scrub(text: string): string;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_DETAIL = 300;

export function createForgeHttp(options: ForgeHttpOptions): ForgeHttp {
  const { forge, name } = options;
  // Longest first, so a header value is replaced whole before the token inside it.
  const scrub = secretScrubber([...options.secrets, ...Object.values(options.headers)], {
    minLength: 4,
  });
  const origin = options.apiUrl.origin;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;

  async function request<T>(spec: ForgeRequest<T>): Promise<ForgeResponse<T>> {
    const url = new URL(`${options.apiUrl.pathname}${spec.path}`, options.apiUrl);
    for (const [key, value] of Object.entries(spec.query ?? {})) {
      url.searchParams.set(key, String(value));
    }
    // Messages and causes name the call by method and path only: the query may hold a branch
    // name but never a credential, and paths are built from the checked repository URL.
    const call = `${spec.method} ${url.pathname}`;
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = spec.signal ? AbortSignal.any([spec.signal, deadline]) : deadline;
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': 'errand',
      ...options.headers,
    };
    if (spec.body !== undefined) headers['content-type'] = 'application/json';

    let response: Response;
    let text: string;
    try {
      response = await options.fetch(url, {
        method: spec.method,
        headers,
        ...(spec.body === undefined ? {} : { body: JSON.stringify(spec.body) }),
        // A redirect would carry the token to wherever it points (custom headers survive
        // cross-origin redirects); the user fixes the API URL instead.
        redirect: 'manual',
        signal,
      });
      text = await response.text();
    } catch (err) {
      if (spec.signal?.aborted) throw spec.signal.reason;
      if (deadline.aborted) {
        throw new ForgeError(
          forge,
          `${name} did not answer within ${Math.round(timeoutMs / 1000)} s while trying to ${spec.action} in ${options.repository}`,
          { transient: true, cause: new Error(`${call}: timed out`) },
        );
      }
      const reason = scrub(networkReason(err));
      throw new ForgeError(
        forge,
        `${name} at ${origin} could not be reached to ${spec.action}: ${reason}`,
        { transient: true, cause: new Error(`${call}: ${reason}`) },
      );
    }

    if (response.status >= 200 && response.status < 300) {
      const parsed = spec.schema.safeParse(parseJson(text));
      if (!parsed.success) {
        throw new ForgeError(
          forge,
          `${name} answered ${call} with something that is not its API's JSON: check the API URL (${options.apiUrl.href})`,
          {
            transient: false,
            status: response.status,
            cause: new Error(`${call}: unexpected body`),
          },
        );
      }
      return { status: response.status, headers: response.headers, data: parsed.data };
    }
    throw failure(spec, call, response, text);
  }

  function failure(spec: ForgeRequest<unknown>, call: string, response: Response, text: string) {
    const { status } = response;
    const detail = scrub(errorDetail(parseJson(text)));
    const said = detail ? ` ${name} said: "${detail}"` : '';
    const retryAfter = retryAfterSeconds(response.headers);
    const fail = (message: string, transient: boolean, wait?: number) =>
      new ForgeError(forge, message, {
        transient,
        status,
        cause: new Error(`${call} answered ${status}`),
        ...(wait === undefined ? {} : { retryAfterSeconds: wait }),
      });
    const where = `in ${options.repository}`;

    const limited =
      status === 429 ||
      (status === 403 &&
        (retryAfter !== undefined || response.headers.get('ratelimit-remaining') === '0'));
    if (limited) {
      // Without a hint, a minute: the window most GitLab and reverse-proxy limits count in.
      const after = retryAfter ?? rateLimitResetSeconds(response.headers) ?? 60;
      return fail(
        `${name} rate limit reached (${status}) while trying to ${spec.action} ${where}: retry in ${after} s.${said}`,
        true,
        after,
      );
    }
    if (status >= 500 || status === 408) {
      return fail(
        `${name} failed to ${spec.action} ${where} (${status}): try again later.${said}`,
        true,
        retryAfter,
      );
    }
    if (status === 401) {
      return fail(
        `${name} refused the token (401) while trying to ${spec.action} ${where}: it is wrong, expired or revoked. ${options.tokenHelp}${said}`,
        false,
      );
    }
    if (status === 403) {
      return fail(
        `${name} refused to ${spec.action} ${where} (403): ${options.permissions}.${said}`,
        false,
      );
    }
    if (status === 404) {
      // With what the forge said: a 404 may mean something else (GitLab's award given already).
      return fail(
        `${
          spec.notFound ??
          `${name} ${options.repositoryNoun ?? 'repository'} ${options.repository} not found at ${origin} (404), or the token cannot see it: check the repository URL and the token's access.`
        }${said}`,
        false,
      );
    }
    if (status >= 300 && status < 400) {
      const to = redirectTarget(response.headers.get('location'), response.url);
      return fail(
        `${name} redirected ${call} (${status})${to ? ` to ${to}` : ''}: set the ${name} API URL to the address it redirects to.`,
        false,
      );
    }
    return fail(`${name} refused to ${spec.action} ${where} (${status}).${said}`, false);
  }

  return { request, scrub };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The human part of a forge's error body, shortened. GitLab sends `message` as a string, a
 * list, or field → list; `error` / `error_description` for OAuth scope failures. Gitea sends
 * `message` and sometimes `errors`.
 */
export function errorDetail(body: unknown): string {
  if (typeof body !== 'object' || body === null) return '';
  const record = body as Record<string, unknown>;
  const parts: string[] = [];
  const add = (value: unknown, label?: string): void => {
    if (typeof value === 'string' && value.trim() !== '') {
      parts.push(label ? `${label} ${value}` : value);
    } else if (Array.isArray(value)) {
      for (const item of value) add(item, label);
    } else if (typeof value === 'object' && value !== null) {
      for (const [key, inner] of Object.entries(value)) add(inner, key);
    }
  };
  add(record.message);
  add(record.errors);
  add(record.error);
  add(record.error_description);
  const joined = [...new Set(parts)].join('; ').replace(/\s+/g, ' ').trim();
  return joined.length > MAX_DETAIL ? `${joined.slice(0, MAX_DETAIL)}…` : joined;
}

function networkReason(err: unknown): string {
  // undici reports "fetch failed" and puts the system error (ECONNREFUSED, ENOTFOUND, a TLS
  // failure) in `cause`.
  const cause = err instanceof Error ? err.cause : undefined;
  if (cause instanceof Error) {
    const code = (cause as Error & { code?: unknown }).code;
    return typeof code === 'string' ? `${code} (${cause.message})` : cause.message;
  }
  return err instanceof Error ? err.message : 'unknown network error';
}

function redirectTarget(location: string | null, base: string): string | undefined {
  if (!location) return undefined;
  try {
    const url = new URL(location, base || undefined);
    return `${url.origin}${url.pathname}`;
  } catch {
    return undefined;
  }
}
