// The model proxy: the one way out of an engine's sandbox. An HTTP server of Errand's on a Unix
// socket, in a directory only this process's user can enter, that forwards an exact list of the
// model API's endpoints to the vendor with the project's key added, and refuses everything else.
// Each call's body is read (bounded) and written anew (model-request.ts: scrubbed of the turn's
// secrets, the job's model, only the tools the engine runs itself, nothing the vendor would do
// for it); a call waits for one of a few slots, is admitted by the turn (its step limit, its
// budgets) just before it goes out, and its answer is observed to the end, so that every call
// forwarded is counted and metered. The key lives in this process only: never in the sandbox's
// files, arguments or environment, never in a log line or an error the client reads. Answers
// stream back unbuffered, so server-sent events arrive chunk by chunk.
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import {
  type ModelApi,
  type PreparedBody,
  type ProxyRefusal,
  prepareBody,
  type Removed,
} from './model-request.ts';
import { listenPrivately } from './private-socket.ts';

/** One endpoint forwarded: a POST with a JSON body, to exactly this path. */
export interface ProxyEndpoint {
  path: string;
  api: ModelApi;
  /** Query strings forwarded as they are, each exactly (e.g. `beta=true`); none is always fine. */
  queries?: readonly string[];
}

/**
 * Each vendor's endpoints, and nothing below or beside them: batches, files, models, admin
 * paths are refused. The pinned engines call nothing else (no model listing at start either);
 * Claude Code adds `?beta=true` to the Messages API.
 */
export const ENDPOINTS = {
  anthropic: [
    { path: '/v1/messages', api: 'messages', queries: ['beta=true'] },
    { path: '/v1/messages/count_tokens', api: 'count_tokens', queries: ['beta=true'] },
  ],
  openai: [
    { path: '/v1/responses', api: 'responses' },
    { path: '/v1/chat/completions', api: 'chat' },
  ],
  chat: [{ path: '/v1/chat/completions', api: 'chat' }],
} as const satisfies Record<string, readonly ProxyEndpoint[]>;

/** A call as the turn is asked to admit it. */
export interface ProxyCall {
  api: ModelApi;
  /** Whether the vendor bills it: every model call but counting tokens. */
  billable: boolean;
}

export interface ModelProxyOptions {
  /**
   * The vendor's base URL (http or https). Its path, if any, is put before the endpoint's:
   * upstream `https://host/openai` and `/v1/responses` go to `https://host/openai/v1/responses`.
   */
  upstream: string;
  /** Added to every forwarded request, e.g. `{ 'x-api-key': key }` or `{ authorization: 'Bearer …' }`. */
  headers: Readonly<Record<string, string>>;
  /** The endpoints forwarded (ENDPOINTS); any other request is answered 403. */
  endpoints: readonly ProxyEndpoint[];
  /** The job's model as the vendor names it: every forwarded body's `model` is this one. */
  model: string;
  /**
   * Calls forwarded at once (1 to MAX_IN_FLIGHT; default DEFAULT_IN_FLIGHT). Further calls wait
   * for a slot in arrival order, MAX_WAITING at most (more are answered 429).
   */
  inFlight?: number;
  /**
   * Asked as each call is about to be forwarded (its slot held, its body read): a refusal is
   * answered instead and nothing reaches the vendor.
   */
  admit: (call: ProxyCall) => ProxyRefusal | undefined;
  /**
   * Given each billable call forwarded, as its answer begins (or, when the request went out and
   * no answer came, at once): an observer that sees a copy of the answer's body as it passes
   * (the client's is never held back for it) and is told once when it ended or was cut. The
   * call's slot is held until then. Requests ask for uncompressed answers, so that it can read
   * them.
   */
  observe: (answer: ObservedAnswer) => AnswerObserver;
  /** Where the socket's private directory is made (default: the system's temporary directory). */
  parentDir?: string;
  /**
   * Applied to every string of a request's body before it is forwarded (keys too): the turn's
   * secrets scrubbed, so that no value an engine's shell printed reaches the model.
   */
  scrub?: (text: string) => string;
}

/** A forwarded call's answer as an observer is offered it. */
export interface ObservedAnswer {
  api: ModelApi;
  /** The vendor's status; 0 when the request went out and no answer came. */
  status: number;
  contentType: string;
  /** The answer's Content-Encoding, '' when it has none. */
  contentEncoding: string;
  /**
   * The request as forwarded: its size, the output tokens it allowed when it set a limit, and
   * what the proxy removed from it (tools the vendor would run, parameters that make it act).
   */
  request: { bytes: number; maxOutputTokens: number | undefined; removed: readonly Removed[] };
}

/** Sees one answer's body; `end` is called once, when the answer ended or was cut. */
export interface AnswerObserver {
  data(chunk: Buffer): void;
  end(): void;
}

export interface ModelProxy {
  /** The socket to mount into the sandbox (SandboxRun.modelProxy.socketPath). */
  readonly socketPath: string;
  /** Stops serving, cuts open calls, waits until each was observed to its end, removes the socket. */
  close(): Promise<void>;
}

/** At most this many calls of a turn at the vendor at once, whatever the options say. */
const MAX_IN_FLIGHT = 4;
/**
 * Two: every pinned engine waits for each answer before its next call, and what it may run
 * beside (a side request of Claude Code's, a subagent) gets one slot; a third call waits.
 */
export const DEFAULT_IN_FLIGHT = 2;
/** Calls waiting for a slot at most; one more is answered 429 at once. */
export const MAX_WAITING = 16;
/** A request body is read up to this size (Anthropic's own limit for the Messages API). */
export const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** Never forwarded from the client: credentials of its own, hop-by-hop and body headers. */
const DROPPED = new Set([
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'api-key',
  'x-goog-api-key',
  'cookie',
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'content-length',
  'content-encoding',
  'accept-encoding',
]);
const RESPONSE_DROPPED = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'trailer',
  'upgrade',
  'set-cookie',
]);

class InvalidProxyError extends Error {
  override name = 'InvalidProxyError';
}

interface Route {
  upstream: URL;
  added: readonly (readonly [string, string])[];
  dropped: ReadonlySet<string>;
  endpoints: readonly ProxyEndpoint[];
  model: string;
  admit: ModelProxyOptions['admit'];
  observe: ModelProxyOptions['observe'];
  scrub: ((text: string) => string) | undefined;
  slots: Slots;
}

export async function startModelProxy(options: ModelProxyOptions): Promise<ModelProxy> {
  const route = routeOf(options);
  /** Every request being handled, settled once its call was observed to the end. */
  const handling = new Set<Promise<void>>();
  const server = createServer((req, res) => {
    const handled = handle(req, res, route).catch(() => {
      // The client went away while its body was read: nothing was forwarded.
      res.destroy();
    });
    handling.add(handled);
    handled.finally(() => handling.delete(handled));
  });
  // A model's answer may take minutes to begin; the turn's own time limit bounds it.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  return listenPrivately(server, {
    prefix: 'errand-model-',
    name: 'model.sock',
    parentDir: options.parentDir,
    cut: () => route.slots.close(),
    // Every call's observer has seen its end before close returns: what a cut call used is
    // counted within the run, not after it.
    drain: () => Promise.all(handling),
  });
}

function routeOf(options: ModelProxyOptions): Route {
  const upstream = parseUpstream(options.upstream);
  for (const endpoint of options.endpoints) {
    if (!/^(\/[A-Za-z0-9_.-]+)+$/.test(endpoint.path) || /\/\.\.?(\/|$)/.test(endpoint.path)) {
      throw new InvalidProxyError(
        `endpoint ${JSON.stringify(endpoint.path)} must be a plain absolute path`,
      );
    }
  }
  const added = Object.entries(options.headers).map(([name, value]) => {
    if (!/^[A-Za-z0-9-]+$/.test(name) || /[\r\n]/.test(value)) {
      throw new InvalidProxyError(`header ${JSON.stringify(name)} is not a valid header`);
    }
    return [name.toLowerCase(), value] as const;
  });
  const inFlight = options.inFlight ?? DEFAULT_IN_FLIGHT;
  if (!Number.isInteger(inFlight) || inFlight < 1 || inFlight > MAX_IN_FLIGHT) {
    throw new InvalidProxyError(`inFlight must be a whole number from 1 to ${MAX_IN_FLIGHT}`);
  }
  if (options.model === '') throw new InvalidProxyError('model must be named');
  return {
    upstream,
    added,
    dropped: new Set([...DROPPED, ...added.map(([name]) => name)]),
    endpoints: options.endpoints,
    model: options.model,
    admit: options.admit,
    observe: options.observe,
    scrub: options.scrub,
    slots: new Slots(inFlight),
  };
}

/** One request: matched, given a slot, read, prepared, admitted, forwarded and observed. */
async function handle(req: IncomingMessage, res: ServerResponse, route: Route): Promise<void> {
  const endpoint = endpointOf(req, route.endpoints);
  if (!endpoint) {
    const list = route.endpoints.map((e) => `POST ${e.path}`).join(', ');
    return refuse(req, res, 403, 'endpoint_not_allowed', `the model proxy forwards only ${list}`);
  }
  const encoding = String(req.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (encoding !== 'identity') {
    return refuse(req, res, 415, 'body_encoded', 'the model proxy reads only uncompressed bodies');
  }
  if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) return tooLarge(req, res);
  const slot = await route.slots.take(res);
  if (slot === 'full') {
    return refuse(
      req,
      res,
      429,
      'too_many_calls',
      `the turn has ${route.slots.size} model calls in flight and ${MAX_WAITING} waiting; retry later`,
    );
  }
  if (slot === 'ended') return;
  try {
    const raw = await readBody(req);
    if (raw === undefined) return tooLarge(req, res);
    const prepared = prepareBody(endpoint.api, raw, route.model, route.scrub);
    if ('code' in prepared)
      return refuse(req, res, prepared.status, prepared.code, prepared.message);
    const billable = endpoint.api !== 'count_tokens';
    const refusal = route.admit({ api: endpoint.api, billable });
    if (refusal) return refuse(req, res, refusal.status, refusal.code, refusal.message);
    await forward(req, res, route, endpoint, prepared);
  } finally {
    route.slots.release();
  }
}

/** The endpoint a request is for: its method, path and query each exactly one of the list's. */
function endpointOf(
  req: IncomingMessage,
  endpoints: readonly ProxyEndpoint[],
): (ProxyEndpoint & { query: string }) | undefined {
  if (req.method !== 'POST') return undefined;
  const target = req.url ?? '';
  const mark = target.indexOf('?');
  // Compared as sent, never decoded or normalised: `/v1/messages/`, `/v1/./messages` and
  // `/v1/messages/%2e%2e/x` are other paths, and so refused.
  const path = mark === -1 ? target : target.slice(0, mark);
  const query = mark === -1 ? '' : target.slice(mark + 1);
  const endpoint = endpoints.find(
    (e) => e.path === path && (query === '' || (e.queries ?? []).includes(query)),
  );
  return endpoint && { ...endpoint, query };
}

/**
 * The body, or undefined past MAX_BODY_BYTES (the rest is left to the refusal, which drains it
 * and closes the connection); rejects when the client goes away first.
 */
function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      else {
        req.off('data', onData);
        resolve(undefined);
      }
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
    // After 'end' this changes nothing; before it, the body never came whole.
    req.once('close', () => reject(new Error('the client went away')));
  });
}

/** Sends the prepared call and passes its answer back; settles once the observer saw its end. */
function forward(
  req: IncomingMessage,
  res: ServerResponse,
  route: Route,
  endpoint: ProxyEndpoint & { query: string },
  prepared: PreparedBody,
): Promise<void> {
  const billable = endpoint.api !== 'count_tokens';
  const base = route.upstream.pathname.replace(/\/+$/, '');
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers as IncomingHttpHeaders)) {
    if (value !== undefined && !route.dropped.has(name)) headers[name] = value;
  }
  for (const [name, value] of route.added) headers[name] = value;
  headers.host = route.upstream.host;
  headers['content-type'] = 'application/json';
  headers['content-length'] = prepared.body.length;
  const observed = (status: number, answer?: IncomingMessage): AnswerObserver | undefined =>
    billable
      ? route.observe({
          api: endpoint.api,
          status,
          contentType: String(answer?.headers['content-type'] ?? ''),
          contentEncoding: String(answer?.headers['content-encoding'] ?? ''),
          request: {
            bytes: prepared.body.length,
            maxOutputTokens: prepared.maxOutputTokens,
            removed: prepared.removed,
          },
        })
      : undefined;
  const send = route.upstream.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((settle) => {
    let sent = false;
    let answered = false;
    let ended = false;
    const outgoing = send(
      {
        protocol: route.upstream.protocol,
        hostname: route.upstream.hostname.replace(/^\[|\]$/g, ''),
        port: route.upstream.port || undefined,
        method: 'POST',
        path: `${base}${endpoint.path}${endpoint.query ? `?${endpoint.query}` : ''}`,
        headers,
      },
      (answer) => {
        answered = true;
        const out: OutgoingHttpHeaders = {};
        for (const [name, value] of Object.entries(answer.headers)) {
          if (value !== undefined && !RESPONSE_DROPPED.has(name)) out[name] = value;
        }
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
        // Each chunk written as it comes (with backpressure, never collected): the client sees
        // server-sent events as they are sent.
        res.flushHeaders();
        const observer = observed(answer.statusCode ?? 502, answer);
        if (observer) answer.on('data', (chunk: Buffer) => observer.data(chunk));
        answer.once('close', () => {
          observer?.end();
          settle();
        });
        answer.on('end', () => {
          ended = true;
        });
        answer.on('error', () => res.destroy());
        answer.pipe(res);
      },
    );
    outgoing.on('finish', () => {
      sent = true;
    });
    outgoing.on('error', (err: NodeJS.ErrnoException) => {
      // The error's code only: a message could quote the request, and the request holds the key.
      if (res.headersSent) res.destroy();
      else {
        const why = `the model API could not be reached (${err.code ?? 'error'})`;
        refuse(req, res, 502, 'vendor_unreachable', why);
      }
    });
    outgoing.on('close', () => {
      if (answered) return;
      // No answer: a request that went out may have been worked on, and is observed as such.
      if (sent) observed(0)?.end();
      settle();
    });
    // The client went away (the engine killed, the proxy closed): so does the upstream call.
    res.on('close', () => {
      if (!ended) outgoing.destroy();
    });
    outgoing.end(prepared.body);
  });
}

function tooLarge(req: IncomingMessage, res: ServerResponse): void {
  refuse(req, res, 413, 'body_too_large', `the body is larger than ${MAX_BODY_BYTES} bytes`);
}

/**
 * Answers in the shape both vendors' clients read (`error.type`, `error.message`), and closes
 * the connection once answered: what is left of the request body is drained, never used.
 */
function refuse(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
): void {
  req.resume();
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify({
    type: 'error',
    error: { type: 'errand_model_proxy', code, message },
  });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  });
  res.end(body);
}

/** The calls in flight, at most `size`; the ones past it wait in arrival order. */
class Slots {
  readonly size: number;
  #free: number;
  readonly #waiting: ((granted: boolean) => void)[] = [];
  #closed = false;

  constructor(size: number) {
    this.size = size;
    this.#free = size;
  }

  /** A slot held ('taken'); none, since MAX_WAITING calls wait already ('full'); or the client or the proxy went away first ('ended'). */
  take(res: ServerResponse): Promise<'taken' | 'full' | 'ended'> {
    if (this.#closed) return Promise.resolve('ended');
    if (this.#free > 0) {
      this.#free--;
      return Promise.resolve('taken');
    }
    if (this.#waiting.length >= MAX_WAITING) return Promise.resolve('full');
    return new Promise((resolve) => {
      const waiter = (granted: boolean) => {
        res.off('close', gone);
        resolve(granted ? 'taken' : 'ended');
      };
      const gone = () => {
        const at = this.#waiting.indexOf(waiter);
        if (at !== -1) this.#waiting.splice(at, 1);
        resolve('ended');
      };
      this.#waiting.push(waiter);
      res.once('close', gone);
    });
  }

  release(): void {
    const next = this.#waiting.shift();
    if (next) next(true);
    else this.#free++;
  }

  /** The waiting calls end without a slot; none is given from now on. */
  close(): void {
    this.#closed = true;
    for (const waiter of this.#waiting.splice(0)) waiter(false);
  }
}

function parseUpstream(value: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidProxyError('upstream must be an absolute http or https URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidProxyError('upstream must be an absolute http or https URL');
  }
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
    throw new InvalidProxyError(
      'upstream must be a base URL without credentials, query or fragment',
    );
  }
  return url;
}
