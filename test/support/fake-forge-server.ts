// What the fakes of GitHub, GitLab and Gitea share: an HTTP server on 127.0.0.1 that reads each
// request whole, can hold one until a test lets it go, and closes without leaving one held; the
// record of every request with the list of those a test should never have sent; injected
// failures; JSON bodies; pages. Each fake keeps only its forge's protocol: its routes, and its
// bodies, errors and headers as that forge says them.

import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A request as the server read it, before a fake answers it. */
export interface ForgeRequest {
  req: IncomingMessage;
  method: string;
  /** The URL as sent, on a placeholder origin: read its path and query, not its host. */
  target: URL;
  /** The body, read whole. */
  text: string;
}

/** Which request a test holds: its method, path (as sent) and body. */
export type HoldMatch = (request: { method: string; path: string; body: string }) => boolean;

export interface Hold {
  /** Resolves when the request has come (its body read); it is not answered yet. */
  arrived: Promise<void>;
  /** Lets the request go on to be answered. */
  release: () => void;
}

export interface FakeForgeServer {
  /** `http://127.0.0.1:<port>`. */
  origin: string;
  /** Holds the next request that `matches` before it is answered: a forge slow to answer. */
  holdNext(matches: HoldMatch): Hold;
  /** Closes the server, first letting every held request go. */
  close(): Promise<void>;
}

/**
 * Serves `handle` on a free loopback port. A handler that throws is the fake's own bug: `crashed`
 * hears it (to fail the test), and the request gets a 500 saying so.
 */
export async function startFakeForgeServer(
  handle: (request: ForgeRequest, res: ServerResponse) => Promise<void> | void,
  crashed: (err: unknown) => void,
): Promise<FakeForgeServer> {
  const holds: {
    matches: HoldMatch;
    arrive: () => void;
    released: Promise<void>;
    release: () => void;
    taken: boolean;
  }[] = [];
  const serve = async (req: IncomingMessage, res: ServerResponse) => {
    const text = await readBody(req);
    const method = req.method ?? 'GET';
    const target = new URL(req.url ?? '/', 'http://fake');
    const hold = holds.find(
      (h) => !h.taken && h.matches({ method, path: target.pathname, body: text }),
    );
    if (hold) {
      hold.taken = true;
      hold.arrive();
      await hold.released;
    }
    await handle({ req, method, target, text }, res);
  };
  const server = createServer((req, res) => {
    serve(req, res).catch((err: unknown) => {
      crashed(err);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ message: `the fake crashed: ${String(err)}` }));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    holdNext(matches) {
      let arrive = () => {};
      let release = () => {};
      const arrived = new Promise<void>((resolve) => {
        arrive = resolve;
      });
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      holds.push({ matches, arrive, released, release, taken: false });
      return { arrived, release };
    },
    async close() {
      for (const hold of holds.splice(0)) hold.release();
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** A request as GitLab's and Gitea's fakes record it. */
export interface RecordedForgeRequest {
  method: string;
  /** Decoded path below the host, e.g. `/api/v4/projects/group/sub/project/merge_requests`. */
  path: string;
  /** The path as sent, its escapes kept. */
  rawPath: string;
  query: Record<string, string>;
  headers: Record<string, string | string[] | undefined>;
  /** The JSON body, parsed. */
  body: unknown;
  status: number;
}

/** A failure a test asked for: the next request gets it whatever it asked. */
export interface InjectedFailure {
  status: number;
  headers: Record<string, string>;
  /** The answer's body; the forge's own error body when absent. */
  body: unknown;
}

/** How one forge says what every forge says: not found, a body that is not JSON, a failure. */
export interface ForgeDialect {
  /** The fake's name in its messages, e.g. `fake GitLab`. */
  name: string;
  /** The content type of its JSON answers. */
  contentType: string;
  /** Where its API lives, e.g. `/api/v4`: a request elsewhere is one a test should not send. */
  apiPrefix: string;
  /** Its 404 body. */
  notFound(): unknown;
  /** Its answer to a body that is not JSON. */
  notJson(err: unknown): { status: number; body: unknown };
  /** Its body for an injected failure that brings none. */
  failure(status: number): unknown;
}

/** One request being answered: what a fake's routes read, and how they answer. */
export interface ForgeExchange {
  req: IncomingMessage;
  target: URL;
  record: RecordedForgeRequest;
  /** Answers with `body`: JSON, or plain text when it is a string. */
  send(status: number, body: unknown, headers?: Record<string, string>): void;
  /** Notes a request a test should not have sent, and goes on. */
  problem(text: string): void;
  /** Notes a request a test should not have sent, and answers it 404. */
  refuse(text: string): void;
}

export interface RecordingForge {
  origin: string;
  requests: RecordedForgeRequest[];
  unexpected: string[];
  failNext(status: number, headers?: Record<string, string>, body?: unknown): void;
  holdNext(matches: HoldMatch): Hold;
  assertNoUnexpected(): void;
  /** Forgets requests, problems and failures still queued. */
  forget(): void;
  close(): Promise<void>;
}

/**
 * A fake that records every request, reads JSON bodies the forge's way and answers injected
 * failures before `route` sees the request; `route` answers the rest below `apiPrefix`.
 */
export async function startRecordingForge(
  dialect: ForgeDialect,
  route: (exchange: ForgeExchange) => void,
): Promise<RecordingForge> {
  let requests: RecordedForgeRequest[] = [];
  let unexpected: string[] = [];
  let failures: InjectedFailure[] = [];
  const server = await startFakeForgeServer(
    ({ req, method, target, text }, res) => {
      const record: RecordedForgeRequest = {
        method,
        path: safeDecode(target.pathname),
        rawPath: target.pathname,
        query: Object.fromEntries(target.searchParams),
        headers: { ...req.headers },
        body: undefined,
        status: 0,
      };
      requests.push(record);
      const exchange: ForgeExchange = {
        req,
        target,
        record,
        send(status, body, headers = {}) {
          record.status = status;
          const plain = typeof body === 'string';
          res.writeHead(status, {
            'content-type': plain ? 'text/plain' : dialect.contentType,
            ...headers,
          });
          res.end(plain ? body : JSON.stringify(body));
        },
        problem(text) {
          unexpected.push(`${method} ${target.pathname}${target.search}: ${text}`);
        },
        refuse(text) {
          exchange.problem(text);
          exchange.send(404, dialect.notFound());
        },
      };
      if (text.length > 0) {
        if (!String(req.headers['content-type'] ?? '').startsWith('application/json'))
          return exchange.refuse('body without content-type application/json');
        try {
          record.body = JSON.parse(text);
        } catch (err) {
          const answer = dialect.notJson(err);
          return exchange.send(answer.status, answer.body);
        }
      }
      const failure = failures.shift();
      if (failure)
        return exchange.send(
          failure.status,
          failure.body ?? dialect.failure(failure.status),
          failure.headers,
        );
      if (!target.pathname.startsWith(`${dialect.apiPrefix}/`))
        return exchange.refuse(`not an API path (${dialect.apiPrefix})`);
      route(exchange);
    },
    (err) => unexpected.push(`fake failed: ${String(err)}`),
  );
  return {
    origin: server.origin,
    get requests() {
      return requests;
    },
    get unexpected() {
      return unexpected;
    },
    failNext(status, headers = {}, body = undefined) {
      failures.push({ status, headers, body });
    },
    holdNext: server.holdNext,
    assertNoUnexpected() {
      assertNoneUnexpected(dialect.name, unexpected);
    },
    forget() {
      requests = [];
      unexpected = [];
      failures = [];
    },
    close: server.close,
  };
}

/** Throws, listing them, when a fake saw requests a test should never have sent. */
export function assertNoneUnexpected(name: string, lines: readonly string[]): void {
  if (lines.length === 0) return;
  throw new Error(
    `${name} saw unexpected requests (${lines.length}):\n${lines.map((l) => `  ${l}`).join('\n')}`,
  );
}

/**
 * One page of `items` as `?page=` and a size parameter ask: pages count from 1, a size that is
 * not a positive number is `size.default`, one above `size.max` is `size.max`.
 */
export function pageOf<T>(
  items: readonly T[],
  query: { get(name: string): string | null },
  size: { param: string; default: number; max: number },
): { items: T[]; page: number; perPage: number } {
  const asked = Number(query.get(size.param) ?? size.default);
  const perPage = Math.min(size.max, asked > 0 ? asked : size.default);
  const page = Math.max(1, Number(query.get('page') ?? 1) || 1);
  return { items: items.slice((page - 1) * perPage, page * perPage), page, perPage };
}

/**
 * A forge's clock for the times it writes (created, updated): a second further at each call
 * from 2025-01-01, so "recently updated" orders are well defined.
 */
export function tickingClock(): () => string {
  let clock = Date.parse('2025-01-01T00:00:00Z');
  return () => {
    clock += 1000;
    return new Date(clock).toISOString();
  };
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function safeDecode(text: string): string {
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
