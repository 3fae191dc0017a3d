// One request to Errand: the address and key checked once, the key only in the Authorization
// header, a failure to connect or a refusal turned into an ErrandError. Global fetch only.
import { ErrandError, errorFromResponse } from './errors.ts';

export interface ClientOptions {
  /** Where the service is, e.g. http://127.0.0.1:8080 (a path prefix is kept). */
  baseUrl: string;
  /** An API key: Errand's project key or admin key. Sent only as the Authorization header. */
  apiKey: string;
  /** The project of every call that does not name one. */
  projectId?: string;
  /** For tests and proxies; the global fetch by default. */
  fetch?: typeof fetch;
  /** For tests: the time the waits between polls and retries run on; the system's by default. */
  clock?: Clock;
  userAgent?: string;
}

/** Time as the client waits on it (waitForJob's polls and timeout, events' reconnections). */
export interface Clock {
  /** Milliseconds since the epoch, as Date.now(). */
  now(): number;
  /** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal: AbortSignal | undefined): Promise<void>;
}

export interface CallInit {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** What the call was, for messages: "createJob". */
  what: string;
}

const DEFAULT_USER_AGENT = 'errand-client';

export class Transport {
  /** The base URL without a trailing slash. */
  readonly base: string;
  readonly #apiKey: string;
  readonly #fetch: typeof fetch;
  readonly #userAgent: string;
  readonly clock: Clock;

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
    this.base = url.href.replace(/\/+$/, '');
    this.#apiKey = options.apiKey.trim();
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
    this.clock = options.clock ?? systemClock;
  }

  /** Sends a request; a success (or 304) is returned unread, anything else thrown. */
  async request(path: string, init: CallInit): Promise<Response> {
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
      response = await this.#fetch(`${this.base}${path}`, {
        method: init.method,
        headers,
        ...(body === undefined ? {} : { body }),
        ...(init.signal ? { signal: init.signal } : {}),
      });
    } catch (err) {
      if (init.signal?.aborted) throw err;
      throw networkError(init.what, this.base, err);
    }
    if (response.ok || response.status === 304) return response;
    throw await errorFromResponse(response, init.what);
  }

  /** The answer's body as JSON; a body that is not is an `invalid_response`. */
  async json(response: Response, what: string): Promise<unknown> {
    let text: string;
    try {
      text = await response.text();
    } catch (err) {
      throw networkError(what, this.base, err);
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

  /** A request whose answer is JSON: request and json in one. */
  async call(path: string, init: CallInit): Promise<{ value: unknown; status: number }> {
    const response = await this.request(path, init);
    return { value: await this.json(response, init.what), status: response.status };
  }
}

/** A failure to reach the server, with the reason Node gives (ECONNREFUSED, ENOTFOUND…). */
export function networkError(what: string, base: string, err: unknown): ErrandError {
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

const systemClock: Clock = { now: () => Date.now(), sleep };
