// A remote MCP server (`{"url", "headers"}`) reached by the service, never by the sandbox: the
// MCP SDK's client over Streamable HTTP, on a fetch of our own that connects only to addresses
// the webhook rules allow (checked by the lookup that connects, at every request, so a name
// cannot change its answer between check and connect), follows no redirect off the server's
// origin, bounds each answer and each wait for one. The old HTTP+SSE transport (deprecated in
// the 2025-03-26 protocol) is not tried: a server that speaks only it fails with a clear reason.
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike, Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { errorMessage } from '../../errors.ts';
import { errandVersion } from '../../version.ts';
import {
  bareHost,
  checkedLookup,
  type Resolve,
  resolveAll,
  resolveSafe,
  UnsafeTargetError,
} from '../webhooks/index.ts';

/** A remote server's setting, opened (its `${secret:NAME}` replaced by values). */
export interface RemoteServer {
  url: string;
  headers?: Record<string, string> | undefined;
}

export interface ConnectOptions {
  /** ERRAND_WEBHOOK_ALLOW_PRIVATE: loopback and private addresses allowed (tests, labs). */
  allowPrivate: boolean;
  /** Ends the connection attempt and, later, the connection (the turn's end). */
  signal?: AbortSignal | undefined;
  /** Bound on the handshake, and on any wait for an answer's head. Default 20 s. */
  timeoutMs?: number | undefined;
  /** Most bytes of one HTTP answer (a JSON body or a whole event stream). Default 4 MiB. */
  maxAnswerBytes?: number | undefined;
  resolve?: Resolve | undefined;
}

const DEFAULT_TIMEOUT_MS = 20_000;
const DEFAULT_MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/** Most characters of a reason a server's failure is given as (it may quote the server). */
const MAX_REASON_CHARS = 500;

/** A connection refused or failed, with a reason fit for an event (no header value in it). */
export class McpConnectError extends Error {
  override name = 'McpConnectError';
}

function reasonOf(err: unknown): string {
  const text =
    err instanceof StreamableHTTPError && err.code !== undefined
      ? `HTTP ${err.code}: ${err.message}`
      : errorMessage(err);
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > MAX_REASON_CHARS ? `${line.slice(0, MAX_REASON_CHARS)}…` : line;
}

/**
 * A fetch for the SDK's transport: node:http(s) on a fresh connection per request, to checked
 * addresses only, with the answer's head awaited at most `timeoutMs` and its body cut (an
 * error, not a silent truncation) past `maxAnswerBytes`. It never follows a redirect itself.
 */
export function checkedFetch(opts: ConnectOptions): FetchLike {
  const resolve = opts.resolve ?? resolveAll;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxBytes = opts.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
  return async (input, init) => {
    const url = new URL(String(input));
    if (url.protocol !== 'https:' && !(opts.allowPrivate && url.protocol === 'http:'))
      throw new UnsafeTargetError(`the server's URL must use https:// (not ${url.protocol}//)`);
    const host = bareHost(url);
    // Node connects to an IP literal without a lookup: it is checked here instead.
    if (isIP(host) !== 0) await resolveSafe(host, opts.allowPrivate, resolve);
    const body = init?.body;
    if (body !== undefined && body !== null && typeof body !== 'string')
      throw new TypeError('only string bodies are sent to an MCP server');
    const signal = init?.signal ?? undefined;
    signal?.throwIfAborted();
    const send = url.protocol === 'https:' ? https.request : http.request;
    return new Promise<Response>((settle, fail) => {
      const request = send(url, {
        method: init?.method ?? 'GET',
        agent: false,
        lookup: checkedLookup(opts.allowPrivate, resolve),
        headers: Object.fromEntries(new Headers(init?.headers ?? {}).entries()),
        ...(signal ? { signal } : {}),
      });
      const timer = setTimeout(
        () => request.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)),
        timeoutMs,
      );
      request.on('error', (err) => {
        clearTimeout(timer);
        fail(err);
      });
      request.on('response', (response) => {
        clearTimeout(timer);
        const headers = new Headers();
        for (let i = 0; i + 1 < response.rawHeaders.length; i += 2)
          headers.append(response.rawHeaders[i] ?? '', response.rawHeaders[i + 1] ?? '');
        const status = response.statusCode ?? 0;
        if (status < 200 || status > 599) {
          response.destroy();
          fail(new Error(`the server answered with status ${status}`));
          return;
        }
        const empty = status === 204 || status === 205 || status === 304 || init?.method === 'HEAD';
        if (empty) response.resume();
        settle(
          new Response(empty ? null : boundedBody(response, maxBytes), {
            status,
            statusText: response.statusMessage ?? '',
            headers,
          }),
        );
      });
      request.end(body ?? undefined);
    });
  };
}

/** An answer's body as a web stream that errors once it passes `maxBytes`. */
function boundedBody(response: http.IncomingMessage, maxBytes: number): ReadableStream<Uint8Array> {
  let read = 0;
  let done = false;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      const end = (err?: Error) => {
        if (done) return;
        done = true;
        if (err) controller.error(err);
        else controller.close();
      };
      response.on('data', (chunk: Buffer) => {
        if (done) return;
        read += chunk.length;
        if (read > maxBytes) {
          end(new Error(`the server's answer is longer than ${maxBytes} bytes`));
          response.destroy();
          return;
        }
        controller.enqueue(new Uint8Array(chunk));
        if ((controller.desiredSize ?? 1) <= 0) response.pause();
      });
      response.on('end', () => end());
      response.on('error', (err) => end(err));
      response.on('close', () => end(new Error('the connection closed before the answer ended')));
    },
    pull() {
      response.resume();
    },
    cancel() {
      done = true;
      response.destroy();
    },
  });
}

/**
 * An MCP client on `transport`, initialized within `timeoutMs` (or failing with
 * McpConnectError); the transport is closed when the client cannot connect, and the client
 * when `signal` aborts.
 */
async function connectClient(
  transport: Transport,
  opts: Pick<ConnectOptions, 'signal' | 'timeoutMs'>,
): Promise<Client> {
  const client = new Client({ name: 'errand', version: errandVersion() }, { capabilities: {} });
  const signal = opts.signal;
  try {
    signal?.throwIfAborted();
    await client.connect(transport, {
      timeout: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      ...(signal ? { signal } : {}),
    });
  } catch (err) {
    await client.close().catch(() => undefined);
    await transport.close().catch(() => undefined);
    throw new McpConnectError(reasonOf(err));
  }
  signal?.addEventListener('abort', () => void client.close().catch(() => undefined), {
    once: true,
  });
  return client;
}

/**
 * Connects to a remote server: its URL checked against the address rules now (and by every
 * request's lookup), its headers sent with every request and nowhere else.
 */
export async function connectRemote(
  name: string,
  server: RemoteServer,
  opts: ConnectOptions,
): Promise<Client> {
  let url: URL;
  try {
    url = new URL(server.url);
    if (url.protocol !== 'https:' && !(opts.allowPrivate && url.protocol === 'http:'))
      throw new UnsafeTargetError(
        'its URL must use https:// (http:// only with ERRAND_WEBHOOK_ALLOW_PRIVATE=true)',
      );
    await resolveSafe(bareHost(url), opts.allowPrivate, opts.resolve ?? resolveAll);
  } catch (err) {
    throw new McpConnectError(
      `server "${name}" is not allowed: ${err instanceof TypeError ? 'its URL is not valid' : reasonOf(err)}`,
    );
  }
  const transport = new StreamableHTTPClientTransport(url, {
    fetch: checkedFetch(opts),
    ...(server.headers ? { requestInit: { headers: server.headers } } : {}),
  });
  try {
    return await connectClient(transport, opts);
  } catch (err) {
    throw new McpConnectError(`server "${name}" did not connect: ${reasonOf(err)}`);
  }
}
