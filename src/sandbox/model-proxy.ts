// The model proxy: the one way out of an engine's sandbox. An HTTP server of Errand's on a Unix
// socket, in a directory only this process's user can enter, that forwards the model API's
// paths to the vendor with the project's key added on the way, and refuses everything else (and
// the model calls past the turn's limit, when it is given one).
// The key lives in this process only: never in the sandbox's files, arguments or environment,
// never in a log line or an error the client reads. Bodies stream both ways unbuffered, so
// server-sent events arrive chunk by chunk.
import { mkdtemp, rm } from 'node:fs/promises';
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ModelProxyOptions {
  /**
   * The vendor's base URL (http or https). Its path, if any, is put before the request's:
   * upstream `https://host/openai` and a request for `/v1/responses` go to
   * `https://host/openai/v1/responses`.
   */
  upstream: string;
  /** Added to every forwarded request, e.g. `{ 'x-api-key': key }` or `{ authorization: 'Bearer …' }`. */
  headers: Readonly<Record<string, string>>;
  /**
   * Path prefixes forwarded (e.g. `/v1/messages`): a request's path must equal one or continue
   * it after a `/`. Anything else is answered 403.
   */
  allowedPaths: readonly string[];
  /** Where the socket's private directory is made (default: the system's temporary directory). */
  parentDir?: string;
  /**
   * The model calls (POSTs to one of allowedPaths itself, not below it: counting tokens is no
   * call) forwarded at most: the next ones are answered 429 and never reach the vendor, and
   * `onExceeded` is called once, at the first of them.
   */
  callLimit?: { calls: number; onExceeded: () => void };
  /**
   * Given each forwarded answer, may return an observer that sees a copy of its body as it
   * passes (the client's is never held back for it). With it, requests ask for uncompressed
   * answers, so that the observer can read them.
   */
  observe?: (answer: ObservedAnswer) => AnswerObserver | undefined;
}

/** A forwarded answer as an observer is offered it. */
export interface ObservedAnswer {
  /** The request's path, without the query. */
  path: string;
  status: number;
  contentType: string;
  /** The answer's Content-Encoding, '' when it has none. */
  contentEncoding: string;
}

/** Sees one answer's body; `end` is called once, when the answer ended or was cut. */
export interface AnswerObserver {
  data(chunk: Buffer): void;
  end(): void;
}

export interface ModelProxy {
  /** The socket to mount into the sandbox (SandboxRun.modelProxy.socketPath). */
  readonly socketPath: string;
  /** Stops serving, cuts open streams and removes the socket's directory. */
  close(): Promise<void>;
}

/** Never forwarded from the client: credentials of its own, and hop-by-hop headers. */
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
const METHODS = new Set(['GET', 'POST', 'HEAD']);

class InvalidProxyError extends Error {
  override name = 'InvalidProxyError';
}

export async function startModelProxy(options: ModelProxyOptions): Promise<ModelProxy> {
  const upstream = parseUpstream(options.upstream);
  for (const prefix of options.allowedPaths) {
    if (!prefix.startsWith('/') || prefix.includes('?') || prefix.includes('..')) {
      throw new InvalidProxyError(
        `allowed path ${JSON.stringify(prefix)} must be a plain absolute path`,
      );
    }
  }
  const added = Object.entries(options.headers).map(([name, value]) => {
    if (!/^[A-Za-z0-9-]+$/.test(name) || /[\r\n]/.test(value)) {
      throw new InvalidProxyError(`header ${JSON.stringify(name)} is not a valid header`);
    }
    return [name.toLowerCase(), value] as const;
  });
  const dropped = new Set([...DROPPED, ...added.map(([name]) => name)]);

  const limit = options.callLimit;
  if (limit && (!Number.isInteger(limit.calls) || limit.calls < 0)) {
    throw new InvalidProxyError('callLimit.calls must be a whole number, 0 or more');
  }
  // mkdtemp makes the directory 0700: only this user may reach the socket inside.
  const dir = await mkdtemp(join(options.parentDir ?? tmpdir(), 'errand-model-'));
  const socketPath = join(dir, 'model.sock');
  let calls = 0;
  const route: Route = {
    upstream,
    added,
    dropped,
    allowed: options.allowedPaths,
    observe: options.observe,
    observed: new Map(),
  };
  const server = createServer((req, res) => {
    if (limit && req.method === 'POST' && route.allowed.includes(pathOf(req))) {
      calls++;
      if (calls > limit.calls) {
        if (calls === limit.calls + 1) limit.onExceeded();
        refuse(res, 429, `the turn has used its ${limit.calls} model calls`);
        req.resume();
        return;
      }
    }
    forward(req, res, route);
  });
  // A model's answer may take minutes to begin; the turn's own time limit bounds it.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  let closed: Promise<void> | undefined;
  return {
    socketPath,
    close() {
      closed ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await stopped;
        // An observer has seen the end of every answer before close returns: what a cut call
        // used is counted within the run, not after it.
        for (const answer of route.observed.keys()) answer.destroy();
        await Promise.all(route.observed.values());
        await rm(dir, { recursive: true, force: true });
      })();
      return closed;
    },
  };
}

interface Route {
  upstream: URL;
  added: readonly (readonly [string, string])[];
  dropped: ReadonlySet<string>;
  allowed: readonly string[];
  observe: ModelProxyOptions['observe'];
  /** Answers an observer watches, each with the promise of its end. */
  observed: Map<IncomingMessage, Promise<void>>;
}

function forward(req: IncomingMessage, res: ServerResponse, route: Route): void {
  const target = req.url ?? '/';
  if (!METHODS.has(req.method ?? '') || !allowedPath(pathOf(req), route.allowed)) {
    refuse(res, 403, `the model proxy forwards only ${route.allowed.join(', ')}`);
    req.resume();
    return;
  }
  const base = route.upstream.pathname.replace(/\/+$/, '');
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers as IncomingHttpHeaders)) {
    if (value !== undefined && !route.dropped.has(name)) headers[name] = value;
  }
  for (const [name, value] of route.added) headers[name] = value;
  headers.host = route.upstream.host;
  if (route.observe) delete headers['accept-encoding'];
  const send = route.upstream.protocol === 'https:' ? httpsRequest : httpRequest;
  let answered = false;
  const outgoing = send(
    {
      protocol: route.upstream.protocol,
      hostname: route.upstream.hostname.replace(/^\[|\]$/g, ''),
      port: route.upstream.port || undefined,
      method: req.method,
      path: `${base}${target}`,
      headers,
    },
    (answer) => {
      const out: OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(answer.headers)) {
        if (value !== undefined && !RESPONSE_DROPPED.has(name)) out[name] = value;
      }
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
      // Each chunk written as it comes (with backpressure, never collected): the client sees
      // server-sent events as they are sent.
      res.flushHeaders();
      const observer = route.observe?.({
        path: pathOf(req),
        status: answer.statusCode ?? 502,
        contentType: String(answer.headers['content-type'] ?? ''),
        contentEncoding: String(answer.headers['content-encoding'] ?? ''),
      });
      if (observer) {
        answer.on('data', (chunk: Buffer) => observer.data(chunk));
        const ended = new Promise<void>((resolve) => {
          answer.once('close', () => {
            route.observed.delete(answer);
            observer.end();
            resolve();
          });
        });
        route.observed.set(answer, ended);
      }
      answer.on('end', () => {
        answered = true;
      });
      answer.on('error', () => res.destroy());
      answer.pipe(res);
    },
  );
  outgoing.on('error', (err: NodeJS.ErrnoException) => {
    // The error's code only: a message could quote the request, and the request holds the key.
    if (!res.headersSent)
      refuse(res, 502, `the model API could not be reached (${err.code ?? 'error'})`);
    else res.destroy();
  });
  req.on('error', () => outgoing.destroy());
  // The client went away (the engine killed, the proxy closed): so does the upstream request.
  res.on('close', () => {
    if (!answered) outgoing.destroy();
  });
  req.pipe(outgoing);
}

function pathOf(req: IncomingMessage): string {
  return (req.url ?? '/').split('?', 1)[0] ?? '';
}

function allowedPath(path: string, allowed: readonly string[]): boolean {
  // No dot segments or encoded separators a server upstream might resolve past the prefix.
  if (!path.startsWith('/') || /\/\.{1,2}(\/|$)|%2e|%2f|%5c|\\/i.test(path)) return false;
  return allowed.some(
    (prefix) => path === prefix || path.startsWith(`${prefix.replace(/\/+$/, '')}/`),
  );
}

function refuse(res: ServerResponse, status: number, message: string): void {
  const body = JSON.stringify({ error: { type: 'errand_model_proxy', message } });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
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
