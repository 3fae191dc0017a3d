// ErrandClient: the job API as typed calls, for Node programs (the CLI and the MCP server use
// it too). createJob, sendMessage, getJob and waitForJob use only the published Agent Job
// Service operations, so they work against any service of that interface; listJobs,
// archiveJob and events are Errand's. Global fetch only: no dependency, nothing outside
// src/client/ (the package's build of errand/client enforces it).
import { ErrandError, errorFromResponse } from './errors.ts';
import type { components, paths } from './openapi.ts';
import { sseMessages } from './sse.ts';

/** The agent job record. */
export type Job = components['schemas']['AgentJob'];
export type JobStatus = Job['status'];
/** One entry of a job's progress log. */
export type JobEvent =
  paths['/v2/agent/{projectId}/job/{id}/events']['get']['responses'][200]['content']['application/json']['events'][number];
/** A job's input at creation. */
export type CreateJobInput = NonNullable<
  paths['/v2/agent/{projectId}/job']['post']['requestBody']
>['content']['application/json'];

/** Where polling stops: the job will not change without a new prompt. */
export const TERMINAL_STATUSES: readonly JobStatus[] = Object.freeze([
  'completed',
  'failed',
  'archived',
]);

/** The events that leave a job terminal; Errand ends the live stream after one of them. */
const TERMINAL_EVENTS: ReadonlySet<string> = new Set([
  'job.completed',
  'job.failed',
  'job.archived',
]);

export interface ClientOptions {
  /** Where the service is, e.g. http://127.0.0.1:8080 (a path prefix is kept). */
  baseUrl: string;
  /** An API key: Errand's project key or admin key. Sent only as the Authorization header. */
  apiKey: string;
  /** The project of every call that does not name one. */
  projectId?: string;
  /** For tests and proxies; the global fetch by default. */
  fetch?: typeof fetch;
  userAgent?: string;
}

export interface CallOptions {
  projectId?: string;
  signal?: AbortSignal;
}

export interface WaitOptions extends CallOptions {
  /** Give up (ErrandError code `timeout`) after this long; no limit by default. */
  timeoutMs?: number;
  /** Called with the job when first read and each time it changes. */
  onChange?: (job: Job) => void;
}

export interface EventsOptions extends CallOptions {
  /** Start after this seq (0: from the beginning). */
  after?: number;
}

/** Polling: the first wait, the longest, and how long a failing connection is retried. */
const POLL_FIRST_MS = 500;
const POLL_MAX_MS = 5000;
/** A live stream that cannot be opened again this many times in a row is given up. */
const STREAM_RECONNECTS = 10;

const DEFAULT_USER_AGENT = 'errand-client';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function checkJob(value: unknown, what: string, status: number): Job {
  if (
    !isRecord(value) ||
    typeof value.id !== 'string' ||
    typeof value.status !== 'string' ||
    !['active', 'completed', 'failed', 'archived'].includes(value.status)
  )
    throw new ErrandError(`${what}: the answer is not a job record`, {
      code: 'invalid_response',
      status,
    });
  return value as Job;
}

function checkEvent(value: unknown, status: number): JobEvent {
  if (!isRecord(value) || typeof value.seq !== 'number' || typeof value.type !== 'string')
    throw new ErrandError('events: a streamed event is not an event record', {
      code: 'invalid_response',
      status,
    });
  return value as JobEvent;
}

interface RequestInit {
  method: 'GET' | 'POST';
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** What the call was, for messages: "createJob". */
  what: string;
}

export class ErrandClient {
  readonly #base: string;
  readonly #apiKey: string;
  readonly #projectId: string | undefined;
  readonly #fetch: typeof fetch;
  readonly #userAgent: string;

  constructor(options: ClientOptions) {
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch {
      throw new TypeError(`baseUrl must be an http(s) URL, got ${JSON.stringify(options.baseUrl)}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new TypeError(`baseUrl must be an http(s) URL, got ${JSON.stringify(options.baseUrl)}`);
    if (typeof options.apiKey !== 'string' || options.apiKey.trim() === '')
      throw new TypeError('apiKey is required');
    this.#base = url.href.replace(/\/+$/, '');
    this.#apiKey = options.apiKey.trim();
    this.#projectId = options.projectId;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
  }

  /** Creates a job; the agent works in the background (poll it, or waitForJob). */
  async createJob(
    input: { prompt: string; model?: string; baseRef?: string },
    options: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<Job> {
    const body: CreateJobInput = { prompt: input.prompt };
    if (input.model !== undefined) body.model = input.model;
    if (input.baseRef !== undefined) body.baseRef = input.baseRef;
    const response = await this.#request(this.#projectPath(options), {
      method: 'POST',
      body,
      headers: idempotency(options.idempotencyKey),
      signal: options.signal,
      what: 'createJob',
    });
    return checkJob(await this.#json(response, 'createJob'), 'createJob', response.status);
  }

  /** Sends a follow-up prompt; the job becomes active again. */
  async sendMessage(
    jobId: string,
    prompt: string,
    options: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<Job> {
    const response = await this.#request(`${this.#jobPath(jobId, options)}/message`, {
      method: 'POST',
      body: { prompt },
      headers: idempotency(options.idempotencyKey),
      signal: options.signal,
      what: 'sendMessage',
    });
    return checkJob(await this.#json(response, 'sendMessage'), 'sendMessage', response.status);
  }

  async getJob(jobId: string, options: CallOptions = {}): Promise<Job> {
    const response = await this.#request(this.#jobPath(jobId, options), {
      method: 'GET',
      signal: options.signal,
      what: 'getJob',
    });
    return checkJob(await this.#json(response, 'getJob'), 'getJob', response.status);
  }

  /** The project's jobs, newest first, read a page at a time as the loop asks for more. */
  async *listJobs(
    options: CallOptions & { status?: JobStatus; pageSize?: number } = {},
  ): AsyncGenerator<Job, void, undefined> {
    const base = `/v2/agent/${encodeURIComponent(this.#project(options))}/jobs`;
    let cursor: string | null = null;
    do {
      const query = new URLSearchParams();
      if (options.pageSize !== undefined) query.set('limit', String(options.pageSize));
      if (options.status !== undefined) query.set('status', options.status);
      if (cursor !== null) query.set('cursor', cursor);
      const response = await this.#request(`${base}?${query}`, {
        method: 'GET',
        signal: options.signal,
        what: 'listJobs',
      });
      const page = await this.#json(response, 'listJobs');
      if (!isRecord(page) || !Array.isArray(page.jobs))
        throw new ErrandError('listJobs: the answer is not a page of jobs', {
          code: 'invalid_response',
          status: response.status,
        });
      for (const job of page.jobs) yield checkJob(job, 'listJobs', response.status);
      cursor = typeof page.nextCursor === 'string' ? page.nextCursor : null;
    } while (cursor !== null);
  }

  /** Archives the job (terminal): queued turns are cancelled, a running one stopped. */
  async archiveJob(jobId: string, options: CallOptions = {}): Promise<Job> {
    const response = await this.#request(`${this.#jobPath(jobId, options)}/archive`, {
      method: 'POST',
      signal: options.signal,
      what: 'archiveJob',
    });
    return checkJob(await this.#json(response, 'archiveJob'), 'archiveJob', response.status);
  }

  /**
   * The live stream; resumes after a dropped connection (Last-Event-ID), ends when the server
   * ends it (terminal) or the signal aborts.
   *
   * Each event is yielded once, in seq order: a reconnection asks for the events after the
   * last one seen. A stream that ends without a terminal event (a server restarting, say) is
   * opened again; a 204 (nothing left of a terminal job) ends the loop. Aborting ends the loop
   * without an error; an answer that is not a stream (404, 401…) throws.
   */
  async *events(
    jobId: string,
    options: EventsOptions = {},
  ): AsyncGenerator<JobEvent, void, undefined> {
    const path = `${this.#jobPath(jobId, options)}/events`;
    let last = options.after ?? 0;
    let failures = 0;
    let delay = POLL_FIRST_MS;
    // Ends the request when the loop is left early (break, return) as well as on abort.
    const local = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, local.signal]) : local.signal;
    try {
      for (;;) {
        if (signal.aborted) return;
        let response: Response;
        try {
          response = await this.#request(`${path}?after=${last}`, {
            method: 'GET',
            headers: { accept: 'text/event-stream', 'last-event-id': String(last) },
            signal,
            what: 'events',
          });
        } catch (err) {
          if (signal.aborted) return;
          if (!(err instanceof ErrandError) || !err.transient || ++failures > STREAM_RECONNECTS)
            throw err;
          await this.#pause(err, delay, signal);
          delay = Math.min(delay * 2, POLL_MAX_MS);
          continue;
        }
        if (response.status === 204) return;
        const type = response.headers.get('content-type') ?? '';
        if (!type.startsWith('text/event-stream') || !response.body) {
          await response.body?.cancel();
          throw new ErrandError(`events: expected an event stream, got ${type || 'no body'}`, {
            code: 'invalid_response',
            status: response.status,
          });
        }
        let terminal = false;
        let progressed = false;
        try {
          for await (const message of sseMessages(response.body)) {
            let parsed: unknown;
            try {
              parsed = JSON.parse(message.data);
            } catch {
              throw new ErrandError('events: a streamed event is not JSON', {
                code: 'invalid_response',
                status: response.status,
              });
            }
            const event = checkEvent(parsed, response.status);
            if (event.seq <= last) continue;
            last = event.seq;
            failures = 0;
            delay = POLL_FIRST_MS;
            terminal = TERMINAL_EVENTS.has(event.type);
            progressed = true;
            yield event;
          }
        } catch (err) {
          if (signal.aborted) return;
          if (err instanceof ErrandError) throw err;
          // The connection dropped mid-stream: open it again after the last event seen.
          if (++failures > STREAM_RECONNECTS) throw networkError('events', this.#base, err);
          await sleep(delay, signal).catch(() => {});
          delay = Math.min(delay * 2, POLL_MAX_MS);
          continue;
        }
        if (terminal) return;
        // Ended without a terminal event (a server stopping, say): open it again, at once if
        // it brought events, else after a pause, so that a server that keeps ending streams
        // is not asked again and again.
        if (progressed) continue;
        if (++failures > STREAM_RECONNECTS)
          throw new ErrandError(
            `events: the stream of job ${jobId} ended ${STREAM_RECONNECTS} times in a row with no event`,
            { code: 'invalid_response', status: response.status },
          );
        await sleep(delay, signal).catch(() => {});
        delay = Math.min(delay * 2, POLL_MAX_MS);
      }
    } finally {
      local.abort();
    }
  }

  /**
   * Polls GET with If-None-Match, backs off, honours Retry-After; resolves on
   * completed/failed/archived.
   *
   * Waits 0.5 s after a change, doubling to 5 s while nothing changes (a 304, or the same
   * record from a server that ignores If-None-Match). A 429 or 503 waits as long as its
   * Retry-After says; a lost connection is retried once the job has been read. Rejects with
   * code `timeout` after timeoutMs, and with the signal's reason when it aborts.
   */
  async waitForJob(jobId: string, options: WaitOptions = {}): Promise<Job> {
    const path = this.#jobPath(jobId, options);
    const deadline =
      options.timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + options.timeoutMs;
    const timer = new AbortController();
    const timeout =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => timer.abort(), Math.max(0, options.timeoutMs));
    const signal = options.signal ? AbortSignal.any([options.signal, timer.signal]) : timer.signal;
    let etag: string | undefined;
    let seen: string | undefined;
    let job: Job | undefined;
    let delay = POLL_FIRST_MS;
    try {
      for (;;) {
        let wait = delay;
        try {
          const response = await this.#request(path, {
            method: 'GET',
            headers: etag ? { 'if-none-match': etag } : {},
            signal,
            what: 'waitForJob',
          });
          if (response.status === 304 && job) {
            delay = Math.min(delay * 2, POLL_MAX_MS);
          } else {
            const text = JSON.stringify(await this.#json(response, 'waitForJob'));
            job = checkJob(JSON.parse(text), 'waitForJob', response.status);
            etag = response.headers.get('etag') ?? undefined;
            if (text !== seen) {
              seen = text;
              delay = POLL_FIRST_MS;
              options.onChange?.(job);
            } else {
              delay = Math.min(delay * 2, POLL_MAX_MS);
            }
            if (TERMINAL_STATUSES.includes(job.status)) return job;
          }
          wait = delay;
        } catch (err) {
          if (options.signal?.aborted) throw options.signal.reason;
          if (timer.signal.aborted) throw timedOut(jobId, options.timeoutMs, job);
          // Before the first answer a lost connection is most likely a wrong URL: say so now.
          if (!(err instanceof ErrandError) || !err.transient || (!job && err.status === 0))
            throw err;
          wait = err.retryAfterSeconds !== undefined ? err.retryAfterSeconds * 1000 : delay;
          delay = Math.min(delay * 2, POLL_MAX_MS);
        }
        if (Date.now() + wait > deadline) wait = Math.max(0, deadline - Date.now());
        try {
          await sleep(wait, signal);
        } catch (err) {
          if (options.signal?.aborted) throw options.signal.reason;
          if (timer.signal.aborted) throw timedOut(jobId, options.timeoutMs, job);
          throw err;
        }
        if (Date.now() >= deadline) throw timedOut(jobId, options.timeoutMs, job);
      }
    } finally {
      clearTimeout(timeout);
    }
  }

  #project(options: CallOptions): string {
    const project = options.projectId ?? this.#projectId;
    if (!project)
      throw new TypeError('no projectId: pass projectId to the ErrandClient or to the call');
    return project;
  }

  #projectPath(options: CallOptions): string {
    return `/v2/agent/${encodeURIComponent(this.#project(options))}/job`;
  }

  #jobPath(jobId: string, options: CallOptions): string {
    if (typeof jobId !== 'string' || jobId === '') throw new TypeError('jobId is required');
    return `${this.#projectPath(options)}/${encodeURIComponent(jobId)}`;
  }

  /** Sends a request; a success (or 304) is returned unread, anything else thrown. */
  async #request(path: string, init: RequestInit): Promise<Response> {
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.#apiKey}`,
      'user-agent': this.#userAgent,
      accept: 'application/json',
      ...init.headers,
    };
    let body: string | undefined;
    if (init.body !== undefined) {
      body = JSON.stringify(init.body);
      headers['content-type'] = 'application/json';
    }
    let response: Response;
    try {
      response = await this.#fetch(`${this.#base}${path}`, {
        method: init.method,
        headers,
        ...(body === undefined ? {} : { body }),
        ...(init.signal ? { signal: init.signal } : {}),
      });
    } catch (err) {
      if (init.signal?.aborted) throw err;
      throw networkError(init.what, this.#base, err);
    }
    if (response.ok || response.status === 304) return response;
    throw await errorFromResponse(response, init.what);
  }

  async #json(response: Response, what: string): Promise<unknown> {
    let text: string;
    try {
      text = await response.text();
    } catch (err) {
      throw networkError(what, this.#base, err);
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new ErrandError(`${what}: the answer is not JSON (${response.status})`, {
        code: 'invalid_response',
        status: response.status,
      });
    }
  }

  /** Waits before trying again: the server's Retry-After when it gave one. */
  async #pause(err: ErrandError, delay: number, signal: AbortSignal): Promise<void> {
    const ms = err.retryAfterSeconds !== undefined ? err.retryAfterSeconds * 1000 : delay;
    await sleep(ms, signal).catch(() => {});
  }
}

function idempotency(key: string | undefined): Record<string, string> {
  return key === undefined ? {} : { 'idempotency-key': key };
}

/** A failure to reach the server, with the reason Node gives (ECONNREFUSED, ENOTFOUND…). */
function networkError(what: string, base: string, err: unknown): ErrandError {
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  const detail =
    cause instanceof Error
      ? ((cause as Error & { code?: unknown }).code?.toString() ?? cause.message)
      : String(cause);
  return new ErrandError(`${what}: cannot reach ${base} (${detail})`, {
    code: 'network_error',
    status: 0,
    cause: err,
  });
}

function timedOut(jobId: string, timeoutMs: number | undefined, job: Job | undefined): ErrandError {
  return new ErrandError(
    `waitForJob: job ${jobId} is still ${job?.status ?? 'unread'} after ${timeoutMs} ms`,
    { code: 'timeout', status: 0 },
  );
}
