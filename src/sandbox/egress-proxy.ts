// The egress proxy: the one way out of a sandbox whose project allows a list of hosts. An HTTP
// proxy of Errand's on a Unix socket, in a directory only this process's user can enter, that the
// sandbox reaches through its forwarder (HTTP_PROXY=http://127.0.0.1:<port>) and nothing else. It
// takes CONNECT and absolute-form plain HTTP to a host a pattern allows, resolves the name itself,
// refuses it when any of its addresses is not public or is one of the host's own networks, and
// connects to the address it checked (never resolving again: a name cannot rebind between check
// and connect). A refusal answers 403 and is told to the run once per host and port, so the user
// learns what to add. TLS passes through untouched: the proxy never sees a request inside a tunnel,
// and it logs and reports nothing of any request but its host and port.
import { lookup } from 'node:dns/promises';
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { connect, isIP, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { type HostPattern, isAllowed, normalHost } from '../projects/network.ts';
import { refusedAddresses } from './egress.ts';
import { listenPrivately } from './private-socket.ts';

/** Why a request was refused, as the run is told it. */
type DenialReason = 'not allowed' | 'private address';

/** A refused request: its host (as the request named it, normalised) and port. */
export interface EgressDenial {
  host: string;
  port: number;
  reason: DenialReason;
}

/** Every address of a name, in the resolver's order. */
export type Resolve = (host: string) => Promise<string[]>;

export interface EgressProxyOptions {
  /** The hosts allowed (a project's patterns, parsed: projects/network.ts). */
  allow: readonly HostPattern[];
  /** Told of each refusal, once per host and port, at most MAX_DENIALS_TOLD times a run. */
  onDenied: (denial: EgressDenial) => void;
  /** Resolves a name (default: the system's resolver, every address). */
  resolve?: Resolve;
  /**
   * Whether an address may not be reached (default: the never-public ranges and the host's own
   * networks, read as the proxy starts: egress.ts).
   */
  refused?: (address: string) => boolean;
  /** Where the socket's private directory is made (default: the system's temporary directory). */
  parentDir?: string;
}

export interface EgressProxy {
  /** The socket to mount into the sandbox (SandboxRun's forwarder). */
  readonly socketPath: string;
  /** Stops serving and cuts every tunnel and request still open; removes the socket. */
  close(): Promise<void>;
}

/** Tunnels and forwarded requests open at once; one more is answered 503. */
export const MAX_CONNECTIONS = 64;
/** A tunnel or request with no byte either way for this long is cut. */
const IDLE_MS = 120_000;
/** How long one address may take to accept a connection before the next is tried. */
const CONNECT_TIMEOUT_MS = 15_000;
/** Distinct refusals told to the run, at most: a command cannot flood the job's events. */
export const MAX_DENIALS_TOLD = 32;
/** The methods forwarded as plain HTTP (CONNECT is a tunnel of its own). */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Never forwarded either way: hop-by-hop headers, and the proxy's own credentials. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Where a request may go: the addresses to try in order, or why it may not. */
export type Decision = { addresses: string[] } | { refused: DenialReason } | { failed: string };

/**
 * Whether a request for `host` (as normalHost gives it) at `port` may go out, and where: a pattern
 * must allow it (`defaultPort` is a pattern's port when it names none: 443 for CONNECT, 80 for
 * plain HTTP), and every address it has must be public and none of the host's own.
 */
export async function decide(
  host: string,
  port: number,
  defaultPort: number,
  allow: readonly HostPattern[],
  resolve: Resolve,
  refused: (address: string) => boolean,
): Promise<Decision> {
  if (!isAllowed(allow, host, port, defaultPort)) return { refused: 'not allowed' };
  let addresses: string[];
  if (isIP(host) !== 0) addresses = [host];
  else {
    try {
      addresses = await resolve(host);
    } catch (err) {
      return { failed: `${host} could not be resolved (${errorCode(err)})` };
    }
    if (addresses.length === 0) return { failed: `${host} has no address` };
  }
  // Any one refused refuses them all: which one a client would get is not the proxy's to guess.
  if (addresses.some(refused)) return { refused: 'private address' };
  return { addresses };
}

const systemResolve: Resolve = async (host) =>
  (await lookup(host, { all: true, order: 'verbatim' })).map((a) => a.address);

interface Proxy {
  allow: readonly HostPattern[];
  resolve: Resolve;
  refused: (address: string) => boolean;
  deny: (denial: EgressDenial) => void;
  /** Connections counted against MAX_CONNECTIONS; false when there is no room. */
  enter: () => boolean;
  leave: () => void;
  /** Every socket open, both sides, cut at close. */
  sockets: Set<Duplex>;
}

export async function startEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const blocked = options.refused === undefined ? refusedAddresses() : undefined;
  const told = new Set<string>();
  let open = 0;
  const proxy: Proxy = {
    allow: options.allow,
    resolve: options.resolve ?? systemResolve,
    refused:
      options.refused ??
      ((address) => blocked?.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4') ?? true),
    deny: (denial) => {
      const key = `${denial.host} ${denial.port}`;
      if (told.has(key) || told.size >= MAX_DENIALS_TOLD) return;
      told.add(key);
      options.onDenied(denial);
    },
    enter: () => {
      if (open >= MAX_CONNECTIONS) return false;
      open++;
      return true;
    },
    leave: () => {
      open--;
    },
    sockets: new Set(),
  };
  const server = createServer({ requestTimeout: 0, headersTimeout: 30_000 }, (req, res) => {
    // A failure of the proxy's own ends that one request, never the proxy.
    forward(proxy, req, res).catch(() => res.destroy());
  });
  // Inactivity, not length: a large download keeps its connection as long as bytes flow.
  server.timeout = IDLE_MS;
  server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    tunnel(proxy, req, socket as Socket, head).catch(() => socket.destroy());
  });
  // A protocol switch (a WebSocket over plain HTTP) is not forwarded; over TLS it is a tunnel.
  server.on('upgrade', (_req: IncomingMessage, socket: Duplex) => {
    answerRaw(socket, 501, 'the egress proxy does not forward protocol upgrades over plain HTTP');
  });
  server.on('clientError', (_err, socket: Duplex) => {
    answerRaw(socket, 400, 'the egress proxy could not read the request');
  });
  return listenPrivately(server, {
    prefix: 'errand-egress-',
    name: 'egress.sock',
    parentDir: options.parentDir,
    cut: () => {
      for (const socket of proxy.sockets) socket.destroy();
    },
  });
}

/** `host:port` of a CONNECT (an IPv6 address in brackets), or undefined. */
function authority(target: string): { host: string; port: number } | undefined {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^:[\]/@\s]+):([1-9]\d{0,4})$/.exec(target);
  const port = Number(match?.[2]);
  if (!match || port > 65_535) return undefined;
  return { host: normalHost(match[1] ?? ''), port };
}

/** A CONNECT: checked, connected to a checked address, then bytes both ways until either ends. */
async function tunnel(proxy: Proxy, req: IncomingMessage, client: Socket, head: Buffer) {
  proxy.sockets.add(client);
  client.once('close', () => proxy.sockets.delete(client));
  client.on('error', () => client.destroy());
  const target = authority(req.url ?? '');
  if (target === undefined) {
    return answerRaw(client, 400, 'CONNECT needs host:port');
  }
  if (!proxy.enter()) return answerRaw(client, 503, tooMany());
  client.once('close', proxy.leave);
  const decision = await decide(
    target.host,
    target.port,
    443,
    proxy.allow,
    proxy.resolve,
    proxy.refused,
  );
  if ('refused' in decision) {
    proxy.deny({ ...target, reason: decision.refused });
    return answerRaw(client, 403, refusal(target.host, target.port, decision.refused));
  }
  if ('failed' in decision) return answerRaw(client, 502, decision.failed);
  if (client.destroyed) return;
  const upstream = await connectFirst(decision.addresses, target.port);
  if ('error' in upstream) {
    return answerRaw(
      client,
      502,
      `${target.host}:${target.port} could not be reached (${upstream.error})`,
    );
  }
  const server = upstream.socket;
  proxy.sockets.add(server);
  server.once('close', () => proxy.sockets.delete(server));
  if (client.destroyed) return server.destroy();
  for (const socket of [client, server]) {
    socket.setTimeout(IDLE_MS, () => {
      client.destroy();
      server.destroy();
    });
  }
  server.on('error', () => client.destroy());
  client.on('error', () => server.destroy());
  client.once('close', () => server.destroy());
  server.once('close', () => client.destroy());
  client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  if (head.length > 0) server.write(head);
  client.pipe(server);
  server.pipe(client);
}

/** The first of `addresses` (all checked) that takes a connection at `port`. */
async function connectFirst(
  addresses: readonly string[],
  port: number,
): Promise<{ socket: Socket } | { error: string }> {
  let error = 'no address';
  for (const address of addresses) {
    const attempt = await new Promise<{ socket: Socket } | { error: string }>((resolve) => {
      const socket = connect({ host: address, port });
      socket.setTimeout(CONNECT_TIMEOUT_MS, () => {
        socket.destroy();
        resolve({ error: 'ETIMEDOUT' });
      });
      socket.once('connect', () => {
        socket.setTimeout(0);
        resolve({ socket });
      });
      socket.once('error', (err) => resolve({ error: errorCode(err) }));
    });
    if ('socket' in attempt) return attempt;
    error = attempt.error;
  }
  return { error };
}

/** Plain HTTP in absolute form (`GET http://host/path`): checked, then sent to a checked address. */
async function forward(proxy: Proxy, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let url: URL | undefined;
  try {
    url = /^http:\/\//i.test(req.url ?? '') ? new URL(req.url ?? '') : undefined;
  } catch {
    url = undefined;
  }
  if (url === undefined || url.username !== '' || url.password !== '') {
    return answer(
      req,
      res,
      400,
      'the egress proxy takes CONNECT host:port, or an http:// URL without credentials',
    );
  }
  const method = req.method ?? '';
  if (!METHODS.has(method)) {
    return answer(
      req,
      res,
      405,
      `the egress proxy forwards ${[...METHODS].join(', ')} and CONNECT`,
    );
  }
  if (!proxy.enter()) return answer(req, res, 503, tooMany());
  res.once('close', proxy.leave);
  const host = normalHost(url.hostname);
  const port = url.port === '' ? 80 : Number(url.port);
  const decision = await decide(host, port, 80, proxy.allow, proxy.resolve, proxy.refused);
  if ('refused' in decision) {
    proxy.deny({ host, port, reason: decision.refused });
    return answer(req, res, 403, refusal(host, port, decision.refused));
  }
  if ('failed' in decision) return answer(req, res, 502, decision.failed);
  const upstream = await connectFirst(decision.addresses, port);
  if ('error' in upstream) {
    return answer(req, res, 502, `${host}:${port} could not be reached (${upstream.error})`);
  }
  const socket = upstream.socket;
  // The client went away while the proxy connected: so does this connection.
  if (res.destroyed) return void socket.destroy();
  proxy.sockets.add(socket);
  socket.once('close', () => proxy.sockets.delete(socket));
  const headers: OutgoingHttpHeaders = withoutHopByHop(req.headers);
  // The Host the URL names: the one the checked address was found for.
  headers.host = url.host;
  const outgoing = httpRequest(
    {
      method,
      path: `${url.pathname}${url.search}`,
      headers,
      // The connection already made to the checked address: nothing is resolved again.
      createConnection: () => socket,
    },
    (reply) => {
      res.writeHead(reply.statusCode ?? 502, reply.statusMessage, withoutHopByHop(reply.headers));
      reply.pipe(res);
      reply.on('error', () => res.destroy());
    },
  );
  outgoing.setTimeout(IDLE_MS, () => outgoing.destroy());
  outgoing.on('error', (err) => {
    if (res.headersSent) res.destroy();
    else answer(req, res, 502, `${host}:${port} could not be reached (${errorCode(err)})`);
  });
  res.once('close', () => {
    if (!res.writableFinished) outgoing.destroy();
  });
  req.pipe(outgoing);
}

/** The headers without the hop-by-hop ones, and without those the Connection header names. */
function withoutHopByHop(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((name) => name.trim().toLowerCase()),
  );
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name) && !named.has(name)) out[name] = value;
  }
  return out;
}

function refusal(host: string, port: number, reason: DenialReason): string {
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  return reason === 'not allowed'
    ? `${where} is not in the project's network allowlist`
    : `${where} resolves to a loopback, private, link-local or reserved address, or one of the host's own: refused whatever the allowlist says`;
}

function tooMany(): string {
  return `more than ${MAX_CONNECTIONS} connections through the egress proxy at once`;
}

/** An answer of the proxy's own, in plain text; the connection closes after it. */
function answer(req: IncomingMessage, res: ServerResponse, status: number, text: string): void {
  req.resume();
  if (res.headersSent || res.destroyed) return;
  const body = `errand egress proxy: ${text}\n`;
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  });
  res.end(body);
}

/** The same on a raw socket (a CONNECT's, before any tunnel). */
function answerRaw(socket: Duplex, status: number, text: string): void {
  if (socket.destroyed) return;
  const body = `errand egress proxy: ${text}\n`;
  const reason =
    {
      400: 'Bad Request',
      403: 'Forbidden',
      501: 'Not Implemented',
      502: 'Bad Gateway',
      503: 'Service Unavailable',
    }[status] ?? 'Error';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** An error's code only (ECONNREFUSED): a message could quote more than the proxy means to say. */
function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'error';
}
