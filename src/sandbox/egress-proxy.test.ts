// The egress proxy on its socket, with a resolver of the test's: what it decides with the real
// list of refused addresses (a name or an IP literal that is loopback, private, link-local or the
// host's own is refused; a name that does not match is never even resolved), and how it carries
// what it allows (CONNECT tunnels, plain HTTP in absolute form) to a server of the test. Every
// connection the proxy makes goes to the test's servers on 127.0.0.1, which these transport tests
// alone let it reach; the refusals are proven with the real list and servers that record any
// connection, and nothing is sent anywhere else.
import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import {
  connect,
  createServer as createTcpServer,
  isIPv4,
  type Socket,
  type Server as TcpServer,
} from 'node:net';
import { networkInterfaces } from 'node:os';
import { after, before, describe, test } from 'node:test';
import type { HostPattern } from '../projects/network.ts';
import { refusedAddresses } from './egress.ts';
import {
  decide,
  type EgressDenial,
  type EgressProxy,
  MAX_CONNECTIONS,
  MAX_DENIALS_TOLD,
  type Resolve,
  startEgressProxy,
} from './egress-proxy.ts';

const real = refusedAddresses();
const refusedForReal = (address: string) =>
  real.check(address, address.includes(':') ? 'ipv6' : 'ipv4');
/** The real list, but for 127.0.0.1, where the transport tests' servers listen. */
const refusedButTestServers = (address: string) =>
  address !== '127.0.0.1' && refusedForReal(address);

const host = (name: string, port: number | null = null): HostPattern => ({
  host: name,
  wildcard: false,
  port,
});

/** A resolver of names to given addresses, recording what it was asked. */
function resolver(names: Record<string, string[]>): Resolve & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (name: string) => {
    asked.push(name);
    const addresses = names[name];
    if (addresses === undefined)
      throw Object.assign(new Error(`no ${name}`), { code: 'ENOTFOUND' });
    return addresses;
  };
  return Object.assign(resolve, { asked });
}

describe('egress proxy: the decision, with the real list of refused addresses', () => {
  const names = resolver({
    'registry.npmjs.org': ['198.51.100.7', '2001:db8::7'],
    'loopback.example.org': ['127.0.0.1'],
    'mixed.example.org': ['198.51.100.7', '10.1.2.3'],
    'mapped.example.org': ['::ffff:127.0.0.1'],
    'metadata.example.org': ['169.254.169.254'],
    // What DNS64 or a hostile resolver may answer: an IPv4 address a gateway carries to.
    'nat64.example.org': ['64:ff9b::a9fe:a9fe'],
    'sixtofour.example.org': ['2002:7f00:1::1'],
    'nat64-public.example.org': ['64:ff9b::808:808'],
    'empty.example.org': [],
  });
  const allow = [
    host('registry.npmjs.org'),
    host('loopback.example.org'),
    host('mixed.example.org'),
    host('mapped.example.org'),
    host('metadata.example.org'),
    host('nat64.example.org'),
    host('sixtofour.example.org'),
    host('nat64-public.example.org'),
    host('empty.example.org'),
    host('missing.example.org'),
    // IP literals a saved pattern could never hold (the project service refuses them), to show
    // the proxy refuses them by itself too.
    host('10.1.2.3', 443),
    host('::1', 443),
    host('203.0.113.9'),
  ];
  const decided = (name: string, port = 443) =>
    decide(name, port, 443, allow, names, refusedForReal);

  test('a public name is allowed, with each of its addresses in order', async () => {
    assert.deepEqual(await decided('registry.npmjs.org'), {
      addresses: ['198.51.100.7', '2001:db8::7'],
    });
    assert.deepEqual(await decided('203.0.113.9'), { addresses: ['203.0.113.9'] });
  });

  test('a name no pattern allows is refused before it is resolved', async () => {
    const before = names.asked.length;
    assert.deepEqual(await decided('evil.example.com'), { refused: 'not allowed' });
    assert.deepEqual(await decided('registry.npmjs.org', 8443), { refused: 'not allowed' });
    assert.equal(names.asked.length, before, 'a name that is not allowed was resolved');
  });

  test('a name resolving to loopback, link-local or, among others, a private address is refused', async () => {
    assert.deepEqual(await decided('loopback.example.org'), { refused: 'private address' });
    assert.deepEqual(await decided('mixed.example.org'), { refused: 'private address' });
    assert.deepEqual(await decided('mapped.example.org'), { refused: 'private address' });
    assert.deepEqual(await decided('metadata.example.org'), { refused: 'private address' });
  });

  test('a name resolving to a refused IPv4 address in its NAT64 or 6to4 form is refused; a public one is not', async () => {
    // 64:ff9b::a9fe:a9fe is the metadata address through a NAT64 gateway; 2002:7f00:1:: is
    // loopback through 6to4.
    assert.deepEqual(await decided('nat64.example.org'), { refused: 'private address' });
    assert.deepEqual(await decided('sixtofour.example.org'), { refused: 'private address' });
    assert.deepEqual(await decided('nat64-public.example.org'), {
      addresses: ['64:ff9b::808:808'],
    });
  });

  test('an IP literal in a refused range is refused even where a pattern names it', async () => {
    assert.deepEqual(await decided('10.1.2.3'), { refused: 'private address' });
    assert.deepEqual(await decided('::1'), { refused: 'private address' });
  });

  test("the host's own addresses are refused", async () => {
    const own = Object.values(networkInterfaces())
      .flat()
      .filter((a) => a !== undefined && !a.internal)
      .map((a) => (a?.family === 'IPv6' ? a.address.replace(/%.*$/, '') : (a?.address ?? '')));
    for (const address of own) {
      const d = await decide(address, 443, 443, [host(address, 443)], names, refusedForReal);
      assert.deepEqual(d, { refused: 'private address' }, address);
    }
    // And each IPv4 one through NAT64: the gateway would carry it to the host.
    for (const address of own.filter((a) => isIPv4(a))) {
      const [a = 0, b = 0, c = 0, d = 0] = address.split('.').map(Number);
      const nat64 = `64:ff9b::${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
      const decision = await decide(nat64, 443, 443, [host(nat64, 443)], names, refusedForReal);
      assert.deepEqual(decision, { refused: 'private address' }, nat64);
    }
  });

  test('a name that does not resolve, or to nothing, is a failure, not a refusal', async () => {
    assert.deepEqual(await decided('missing.example.org'), {
      failed: 'missing.example.org could not be resolved (ENOTFOUND)',
    });
    assert.deepEqual(await decided('empty.example.org'), {
      failed: 'empty.example.org has no address',
    });
  });
});

/**
 * A CONNECT through the proxy's socket: the status line's code, what came up to the end of the
 * head (with any of the body that came with it), and the socket to go on with.
 */
async function connectThrough(
  socketPath: string,
  target: string,
): Promise<{ status: number; head: string; socket: Socket }> {
  const socket = connect(socketPath);
  await once(socket, 'connect');
  socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  let text = '';
  while (!text.includes('\r\n\r\n')) {
    const [chunk] = (await Promise.race([
      once(socket, 'data'),
      once(socket, 'end').then(() => [Buffer.alloc(0)]),
    ])) as [Buffer];
    if (chunk.length === 0) break;
    text += chunk.toString('latin1');
  }
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  return { status, head: text, socket };
}

/** The rest of what a socket sends, until it ends. */
async function rest(socket: Socket): Promise<string> {
  let text = '';
  if (socket.closed) return text;
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
  });
  await once(socket, 'close');
  return text;
}

/** A plain HTTP request through the proxy, in absolute form. */
async function httpThrough(
  socketPath: string,
  requestLine: string,
  headers: Record<string, string> = {},
  body = '',
): Promise<{ status: number; text: string }> {
  const socket = connect(socketPath);
  await once(socket, 'connect');
  const lines = [
    requestLine,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    'Connection: close',
    '',
    '',
  ];
  socket.write(lines.join('\r\n') + body);
  const text = await rest(socket);
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text };
}

describe('egress proxy: carrying what it allows, to servers of the test on 127.0.0.1', () => {
  let echo: TcpServer;
  let echoPort: number;
  let echoed = 0;
  // The echo server's ends of the tunnels: one closes only after the proxy let go of its tunnel.
  const echoOpen = new Set<Socket>();
  const echoChanged = new EventEmitter();
  const untilEchoOpen = async (n: number) => {
    while (echoOpen.size !== n) await once(echoChanged, 'change');
  };
  let web: Server;
  let webPort: number;
  const seen: { method: string; url: string; headers: IncomingHttpHeaders; body: string }[] = [];
  let proxy: EgressProxy;
  const denied: EgressDenial[] = [];
  const names = resolver({});

  before(async () => {
    echo = createTcpServer((socket) => {
      echoed++;
      echoOpen.add(socket);
      echoChanged.emit('change');
      socket.once('close', () => {
        echoOpen.delete(socket);
        echoChanged.emit('change');
      });
      socket.pipe(socket);
    });
    echo.listen(0, '127.0.0.1');
    await once(echo, 'listening');
    echoPort = (echo.address() as { port: number }).port;
    web = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString('utf8');
      });
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        res.end(`served ${req.method} ${req.url}`);
      });
    });
    web.listen(0, '127.0.0.1');
    await once(web, 'listening');
    webPort = (web.address() as { port: number }).port;
    const known: Record<string, string[]> = {
      'registry.npmjs.org': ['127.0.0.1'],
      'plain.example.org': ['127.0.0.1'],
    };
    proxy = await startEgressProxy({
      allow: [
        host('registry.npmjs.org', echoPort),
        host('plain.example.org', webPort),
        host('rebound.example.org', echoPort),
      ],
      onDenied: (d) => denied.push(d),
      resolve: async (name) => {
        names.asked.push(name);
        // The one name the real list refuses here: it resolves to the test's own server.
        if (name === 'rebound.example.org') return ['10.9.8.7'];
        const addresses = known[name];
        if (addresses === undefined) throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' });
        return addresses;
      },
      refused: refusedButTestServers,
    });
  });
  after(async () => {
    await proxy.close();
    echo.close();
    web.close();
  });

  test('CONNECT to an allowed host and port opens a tunnel that carries bytes both ways', async () => {
    const { status, head, socket } = await connectThrough(
      proxy.socketPath,
      `registry.npmjs.org:${echoPort}`,
    );
    assert.equal(status, 200, head);
    socket.write('hello through the tunnel');
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    assert.equal(chunk.toString(), 'hello through the tunnel');
    socket.end();
    await once(socket, 'close');
  });

  test('CONNECT to a host not allowed, or an allowed host at another port, is 403, told once', async () => {
    const before = echoed;
    denied.length = 0;
    for (let i = 0; i < 3; i++) {
      const { status, head, socket } = await connectThrough(
        proxy.socketPath,
        `evil.example.com:${echoPort}`,
      );
      assert.equal(status, 403);
      assert.match(
        head + (await rest(socket)),
        new RegExp(`evil\\.example\\.com:${echoPort} is not in the project's network allowlist`),
      );
    }
    const other = await connectThrough(proxy.socketPath, 'registry.npmjs.org:443');
    assert.equal(other.status, 403);
    other.socket.destroy();
    assert.deepEqual(denied, [
      { host: 'evil.example.com', port: echoPort, reason: 'not allowed' },
      { host: 'registry.npmjs.org', port: 443, reason: 'not allowed' },
    ]);
    assert.equal(echoed, before, 'a refused CONNECT reached the server');
    assert.ok(!names.asked.includes('evil.example.com'), 'a name not allowed was resolved');
  });

  test('CONNECT to an allowed name that resolves to a refused address is 403, and nothing is connected', async () => {
    const before = echoed;
    denied.length = 0;
    const { status, head, socket } = await connectThrough(
      proxy.socketPath,
      `rebound.example.org:${echoPort}`,
    );
    assert.equal(status, 403);
    assert.match(
      head + (await rest(socket)),
      /resolves to a loopback, private, link-local or reserved address/,
    );
    assert.deepEqual(denied, [
      { host: 'rebound.example.org', port: echoPort, reason: 'private address' },
    ]);
    assert.equal(echoed, before);
  });

  test('a malformed CONNECT target is 400 and told nothing', async () => {
    denied.length = 0;
    for (const target of [
      'registry.npmjs.org',
      'registry.npmjs.org:0',
      'registry.npmjs.org:99999',
      'user@registry.npmjs.org:443',
    ]) {
      const { status, socket } = await connectThrough(proxy.socketPath, target);
      assert.equal(status, 400, target);
      socket.destroy();
    }
    assert.deepEqual(denied, []);
  });

  test("plain HTTP to an allowed host is forwarded with the URL's Host and without hop-by-hop headers", async () => {
    seen.length = 0;
    const r = await httpThrough(
      proxy.socketPath,
      `GET http://plain.example.org:${webPort}/pkg?x=1 HTTP/1.1`,
      {
        Host: 'somewhere.else',
        'Proxy-Authorization': 'Basic c2VjcmV0',
        'Proxy-Connection': 'keep-alive',
        Authorization: 'Bearer for-the-registry',
        'X-Custom': 'kept',
      },
    );
    assert.equal(r.status, 200, r.text);
    assert.match(r.text, /served GET \/pkg\?x=1$/);
    assert.equal(seen.length, 1);
    const got = seen[0]?.headers ?? {};
    assert.equal(got.host, `plain.example.org:${webPort}`);
    assert.equal(got['proxy-authorization'], undefined);
    assert.equal(got['proxy-connection'], undefined);
    assert.equal(got.authorization, 'Bearer for-the-registry');
    assert.equal(got['x-custom'], 'kept');
    assert.equal(got['x-forwarded-for'], undefined);
    assert.equal(got.via, undefined);
  });

  test('plain HTTP: a POST body is carried', async () => {
    seen.length = 0;
    const body = 'a body of the request';
    const r = await httpThrough(
      proxy.socketPath,
      `POST http://plain.example.org:${webPort}/upload HTTP/1.1`,
      { Host: 'plain.example.org', 'Content-Length': String(body.length) },
      body,
    );
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(
      seen.map((s) => [s.method, s.url, s.body]),
      [['POST', '/upload', body]],
    );
  });

  test('plain HTTP refusals: not allowed (403), origin form (400), a method not forwarded (405)', async () => {
    seen.length = 0;
    denied.length = 0;
    const notAllowed = await httpThrough(
      proxy.socketPath,
      'GET http://evil.example.com/ HTTP/1.1',
      { Host: 'evil.example.com' },
    );
    assert.equal(notAllowed.status, 403);
    assert.match(
      notAllowed.text,
      /evil\.example\.com:80 is not in the project's network allowlist/,
    );
    const origin = await httpThrough(proxy.socketPath, 'GET /pkg HTTP/1.1', {
      Host: 'plain.example.org',
    });
    assert.equal(origin.status, 400);
    const credentials = await httpThrough(
      proxy.socketPath,
      `GET http://u:p@plain.example.org:${webPort}/ HTTP/1.1`,
      { Host: 'plain.example.org' },
    );
    assert.equal(credentials.status, 400);
    const trace = await httpThrough(
      proxy.socketPath,
      `TRACE http://plain.example.org:${webPort}/ HTTP/1.1`,
      { Host: 'plain.example.org' },
    );
    assert.equal(trace.status, 405);
    assert.deepEqual(seen, []);
    assert.deepEqual(denied, [{ host: 'evil.example.com', port: 80, reason: 'not allowed' }]);
  });

  test(`past ${MAX_CONNECTIONS} connections at once, one more is 503; closing the proxy cuts the tunnels`, async () => {
    const open: Socket[] = [];
    for (let i = 0; i < MAX_CONNECTIONS; i++) {
      const t = await connectThrough(proxy.socketPath, `registry.npmjs.org:${echoPort}`);
      assert.equal(t.status, 200);
      open.push(t.socket);
    }
    const extra = await connectThrough(proxy.socketPath, `registry.npmjs.org:${echoPort}`);
    assert.equal(extra.status, 503);
    extra.socket.destroy();
    // One ends: its room is free again. The proxy counts a tunnel out as its client's side
    // closes, before it closes the server's side: the echo server seeing one fewer is the fact.
    await untilEchoOpen(MAX_CONNECTIONS);
    open.pop()?.destroy();
    await untilEchoOpen(MAX_CONNECTIONS - 1);
    const again = await connectThrough(proxy.socketPath, `registry.npmjs.org:${echoPort}`);
    assert.equal(again.status, 200);
    open.push(again.socket);
    const closed = open.map((s) => once(s, 'close'));
    await proxy.close();
    await Promise.all(closed);
  });
});

describe('egress proxy: refusals told', () => {
  test(`at most ${MAX_DENIALS_TOLD} distinct refusals a run, each once`, async () => {
    const denied: EgressDenial[] = [];
    const proxy = await startEgressProxy({
      allow: [],
      onDenied: (d) => denied.push(d),
      resolve: resolver({}),
    });
    try {
      for (let i = 0; i < MAX_DENIALS_TOLD + 5; i++) {
        const { status, socket } = await connectThrough(proxy.socketPath, `h${i}.example.com:443`);
        assert.equal(status, 403);
        socket.destroy();
      }
      const { socket } = await connectThrough(proxy.socketPath, 'h0.example.com:443');
      socket.destroy();
      assert.equal(denied.length, MAX_DENIALS_TOLD);
      assert.deepEqual(denied[0], { host: 'h0.example.com', port: 443, reason: 'not allowed' });
    } finally {
      await proxy.close();
    }
  });
});
