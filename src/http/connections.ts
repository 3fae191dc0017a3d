// The HTTP server below Fastify: how long a client may take to send a request, and Errand's
// {"error", "code", "requestId"} answer to every error raised before a route runs. Node's parser
// (malformed requests, oversized headers, timeouts), Node's check of the Expect header and
// Fastify's router (a path that is not valid percent-encoding, an over-long path parameter)
// would otherwise answer with their own bodies, or none.
import {
  type IncomingMessage,
  type ServerOptions as NodeServerOptions,
  type Server,
  type ServerResponse,
  STATUS_CODES,
} from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type {
  FastifyError,
  FastifyReply,
  FastifyRequest,
  FastifyServerOptions,
  HookHandlerDoneFunction,
} from 'fastify';
import type { Config } from '../config.ts';
import { AppError, toAppError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { sendError } from './errors.ts';

/**
 * How often Node looks for requests past their headers or request timeout. Node's default,
 * 30 s, would let a stalled request live up to 30 s past its limit; a pass over the open
 * connections each second costs next to nothing.
 */
const CHECK_INTERVAL_MS = 1000;

type ClientError = Error & { code?: string; reason?: string };

export type ServerOptions = Pick<
  FastifyServerOptions,
  'requestTimeout' | 'keepAliveTimeout' | 'connectionTimeout'
> & { http: NodeServerOptions };

/** Fastify's and Node's options for the timeouts of `config`. */
export function serverOptions(timeouts: Config['httpTimeouts']): ServerOptions {
  const requestTimeout = timeouts.requestSeconds * 1000;
  return {
    // Until the whole request, body included, is received; then a 408.
    requestTimeout,
    // An idle kept-alive connection is closed after this long without a response.
    keepAliveTimeout: timeouts.keepAliveSeconds * 1000,
    // A socket with no traffic at all: one that never sends a byte, or a client that stops
    // reading its response. Twice the request timeout, so that a stalled body gets its 408
    // first and a slow route is not cut off.
    connectionTimeout: 2 * requestTimeout,
    http: {
      // Node checks headersTimeout <= requestTimeout when the server is made; Fastify sets
      // requestTimeout only afterwards.
      requestTimeout,
      headersTimeout: timeouts.headersSeconds * 1000,
      connectionsCheckingInterval: CHECK_INTERVAL_MS,
      // Node would answer a missing Host with an empty 400; requireHost answers in JSON.
      requireHostHeader: false,
    },
  };
}

/** The error a client caused at the level of HTTP itself, before any route ran. */
function clientErrorToAppError(err: ClientError, timeouts: Config['httpTimeouts']): AppError {
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new AppError(
        'request_timeout',
        `the request did not arrive in time (headers within ${timeouts.headersSeconds} s, the whole request within ${timeouts.requestSeconds} s)`,
      );
    case 'HPE_HEADER_OVERFLOW':
      return new AppError('header_too_large', 'the request line and headers are too large');
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new AppError('payload_too_large', 'the chunk extensions of the body are too large');
    default:
      // llhttp's reasons are fixed texts ("Duplicate Content-Length", "Invalid method
      // encountered"): they say what was wrong without echoing the request.
      return new AppError(
        'bad_request',
        err.reason ? `malformed HTTP request: ${err.reason}` : 'malformed HTTP request',
      );
  }
}

function rawResponse(err: AppError, requestId: string): string {
  const body = JSON.stringify({ error: err.message, code: err.code, requestId });
  return [
    `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    `X-Request-Id: ${requestId}`,
    '',
    body,
  ].join('\r\n');
}

/**
 * Answers the errors that come before Fastify's request handling. Needs the ids Fastify gives
 * requests (`nextId`), so that every answer carries one of the same form.
 */
export class ClientErrors {
  /**
   * Each connection's responses from the first unfinished one on, in order (pipelined requests
   * queue theirs behind it): enough to know whether a raw answer would cut into one.
   */
  private readonly responses = new WeakMap<Socket, ServerResponse[]>();
  /** Every open connection, so that a stop can end those that carry no request. */
  private readonly sockets = new Set<Socket>();
  private readonly nextId: () => string;
  private readonly timeouts: Config['httpTimeouts'];
  private readonly log: Logger;

  constructor(nextId: () => string, timeouts: Config['httpTimeouts'], log: Logger) {
    this.nextId = nextId;
    this.timeouts = timeouts;
    this.log = log;
  }

  /** Fastify's clientErrorHandler: Node's parser failed, or a request took too long. */
  readonly onClientError = (err: ClientError, socket: Socket): void => {
    // A reset connection has no one to answer.
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const appError = clientErrorToAppError(err, this.timeouts);
    const requestId = this.nextId();
    // Only codes: the raw packet Node attaches to parse errors may hold an Authorization header.
    this.log.debug(
      { requestId, code: err.code, status: appError.status },
      'client error before a route',
    );
    if (socket.writable && !this.answered(socket)) socket.write(rawResponse(appError, requestId));
    socket.destroy();
  };

  /**
   * Whether a raw answer would corrupt what `socket` already carries: a response being sent
   * (the first unfinished one, whose headers went out), or a response already sent for a
   * request whose body is still arriving (a 401 before the body, then the body stalls: the
   * client must not get a second answer).
   */
  private answered(socket: Socket): boolean {
    const queue = this.responses.get(socket);
    if (queue === undefined) return false;
    if (queue.find((res) => !res.writableFinished)?.headersSent) return true;
    const last = queue.at(-1);
    return last?.headersSent === true && !last.req.complete;
  }

  /** Fastify's frameworkErrors: the router refused the path before any hook ran. */
  readonly onFrameworkError = (
    err: FastifyError,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void => {
    // No route, so no onSend hook: the header the hook would add is set here.
    reply.header('X-Request-Id', request.id);
    let appError: AppError;
    if (err.code === 'FST_ERR_BAD_URL')
      appError = new AppError('bad_request', 'the request path is not valid percent-encoded UTF-8');
    else if (err.code === 'FST_ERR_MAX_PARAM_LENGTH')
      // Every path parameter is an id; one this long names nothing, like any malformed id.
      appError = new AppError('not_found', 'not found: a path segment is longer than any id');
    else appError = toAppError(err);
    sendError(reply, request, appError);
  };

  /** Listens on the Node server for what Fastify does not see. */
  /**
   * Ends the connections that carry no request now: those between requests and those that
   * never sent one. Node's own close ends only the first kind; a connection opened and left
   * silent (a client's spare) would hold a stop for the whole connection timeout. Connections
   * with a request in flight are left to finish it.
   */
  closeIdle(): void {
    for (const socket of this.sockets) {
      const queue = this.responses.get(socket);
      if (queue === undefined || queue.every((res) => res.writableFinished)) socket.destroy();
    }
  }

  attach(server: Server): void {
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const queue = this.responses.get(req.socket);
      if (queue === undefined) {
        this.responses.set(req.socket, [res]);
        return;
      }
      while (queue[0]?.writableFinished) queue.shift();
      queue.push(res);
    });
    // Errand is not a proxy; without a listener Node would close the connection unanswered.
    server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
      const err = new AppError('not_found', 'no route for CONNECT: this server is not a proxy');
      if (socket.writable) socket.write(rawResponse(err, this.nextId()));
      socket.destroy();
    });
    // Any Expect but 100-continue (which Node answers itself); Node's own 417 has no body.
    server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
      const err = new AppError(
        'expectation_failed',
        'the only Expect this server meets is "100-continue"',
      );
      const requestId = this.nextId();
      const body = JSON.stringify({ error: err.message, code: err.code, requestId });
      res.writeHead(err.status, {
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        Connection: 'close',
        'X-Request-Id': requestId,
      });
      res.end(body);
    });
  }
}

/** An onRequest hook: HTTP/1.1 requires a Host header (Node's own check answers without a body). */
export function requireHost(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  if (request.headers.host === undefined && request.raw.httpVersion === '1.1')
    done(new AppError('bad_request', 'an HTTP/1.1 request must have a Host header'));
  else done();
}
