import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../config.ts';
import type { Resolve } from '../../net/address.ts';
import { type AttemptOptions, postWebhook } from './deliver.ts';
import { signHeaders } from './sign.ts';

const SECRET = `whsec_${Buffer.from('a key of thirty-two bytes, really').toString('base64')}`;
const BODY = JSON.stringify({ type: 'job.completed' });
const headers = () => signHeaders([SECRET], 'msg_test', Math.floor(Date.now() / 1000), BODY);

interface Seen {
  path: string;
  body: string;
  headers: IncomingMessage['headers'];
}

/** A loopback server whose answer each test sets; it records requests and connections. */
let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end();
const seen: Seen[] = [];
const sockets: Socket[] = [];
let connections = 0;
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    seen.push({
      path: req.url ?? '',
      body: Buffer.concat(chunks).toString(),
      headers: req.headers,
    });
    handler(req, res);
  });
});
server.on('connection', (socket: Socket) => {
  connections++;
  sockets.push(socket);
});
let port = 0;

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
after(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => server.close(resolve));
});

function reset(next: typeof handler): void {
  handler = next;
  seen.length = 0;
  connections = 0;
}

const local: AttemptOptions = {
  timeoutMs: 2000,
  allowPrivate: true,
  userAgent: 'Errand-Webhooks/test',
};

describe('postWebhook', () => {
  test('POSTs the body with the signature, type and agent; a 2xx is delivered', async () => {
    reset((_req, res) => res.writeHead(202).end('thanks'));
    const h = headers();
    const result = await postWebhook(`http://127.0.0.1:${port}/in?a=1`, BODY, h, local);
    assert.equal(result.ok, true);
    assert.equal(result.status, 202);
    assert.equal(result.error, null);
    assert.ok(result.latencyMs >= 0 && result.latencyMs < 2000);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.path, '/in?a=1');
    assert.equal(seen[0]?.body, BODY);
    assert.equal(seen[0]?.headers['content-type'], 'application/json');
    assert.equal(seen[0]?.headers['user-agent'], 'Errand-Webhooks/test');
    assert.equal(seen[0]?.headers['webhook-id'], 'msg_test');
    assert.equal(seen[0]?.headers['webhook-signature'], h['webhook-signature']);
  });

  test('a redirect is a failed attempt, and is not followed', async () => {
    reset((req, res) => {
      if (req.url === '/moved') res.writeHead(302, { location: '/target' }).end();
      else res.writeHead(200).end();
    });
    const result = await postWebhook(`http://127.0.0.1:${port}/moved`, BODY, headers(), local);
    assert.deepEqual(
      [result.ok, result.status, result.error],
      [false, 302, 'answered 302 (redirects are not followed)'],
    );
    assert.deepEqual(
      seen.map((s) => s.path),
      ['/moved'],
    );
  });

  test('a non-2xx answer is a failure with its status', async () => {
    reset((_req, res) => res.writeHead(500).end('boom'));
    const result = await postWebhook(`http://127.0.0.1:${port}/`, BODY, headers(), local);
    assert.deepEqual([result.ok, result.status, result.error], [false, 500, 'answered 500']);
  });

  test('at most a few KB of the answer are read: an endless body does not hold the attempt', async () => {
    let closed = false;
    let sawClose = () => {};
    const closing = new Promise<void>((resolve) => {
      sawClose = resolve;
    });
    reset((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(1024, 'x');
      const timer = setInterval(() => res.write(chunk), 1);
      res.on('close', () => {
        closed = true;
        clearInterval(timer);
        sawClose();
      });
    });
    const result = await postWebhook(`http://127.0.0.1:${port}/`, BODY, headers(), {
      ...local,
      timeoutMs: 5000,
    });
    assert.equal(result.ok, true);
    assert.ok(result.latencyMs < 1000, `took ${result.latencyMs} ms`);
    // The server sees the close when the client's end of it arrives: wait for that, not a
    // fixed time, and give up after the attempt's own bound.
    await Promise.race([closing, sleep(5000, undefined, { ref: false })]);
    assert.ok(closed, 'the connection was closed');
  });

  test('a refused connection says so', async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const s = createServer();
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const result = await postWebhook(`http://127.0.0.1:${closedPort}/`, BODY, headers(), local);
    assert.deepEqual([result.ok, result.status, result.error], [false, null, 'connection refused']);
  });

  test('the default bound is 10 s: a receiver that never answers is cut then, not before', async (t) => {
    const config = loadConfig({});
    assert.equal(config.webhooks.timeoutMs, 10_000);
    // The attempt's timer runs on a fake clock: the request is real, the ten seconds are not.
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const arrived = new Promise<void>((resolve) => reset(() => resolve()));
    let settled = false;
    const attempt = postWebhook(`http://127.0.0.1:${port}/`, BODY, headers(), {
      ...local,
      timeoutMs: config.webhooks.timeoutMs,
    }).finally(() => {
      settled = true;
    });
    await arrived;
    t.mock.timers.tick(9_999);
    await new Promise<void>((resolve) => setImmediate(resolve));
    assert.equal(settled, false, 'cut before its bound');
    t.mock.timers.tick(1);
    const result = await attempt;
    assert.deepEqual(
      [result.ok, result.status, result.error],
      [false, null, 'timed out after 10 s'],
    );
  });
});

describe('postWebhook: where it may connect', () => {
  const strict: AttemptOptions = { ...local, allowPrivate: false };

  test('private IP literals are refused before connecting, in every form', async () => {
    reset((_req, res) => res.end());
    for (const [url, error] of [
      [`https://127.0.0.1:${port}/`, 'address 127.0.0.1 is loopback'],
      [`https://2130706433:${port}/`, 'address 127.0.0.1 is loopback'],
      [`https://[::1]:${port}/`, 'address ::1 is loopback'],
      [
        `https://[::ffff:127.0.0.1]:${port}/`,
        'address ::ffff:7f00:1 is loopback (IPv4-mapped 127.0.0.1)',
      ],
      ['https://169.254.169.254/latest/meta-data/', 'address 169.254.169.254 is cloud metadata'],
      [`http://127.0.0.1:${port}/`, 'the webhook url must use https:// (not http://)'],
      [`https://user:pw@127.0.0.1:${port}/`, 'the webhook url must not contain credentials'],
    ] as const) {
      const result = await postWebhook(url, BODY, headers(), strict);
      assert.deepEqual([result.ok, result.status, result.error], [false, null, error], url);
    }
    assert.equal(connections, 0, 'no connection was made');
  });

  test('a name is resolved once per attempt, checked, and connected to at the checked address', async () => {
    reset((_req, res) => res.writeHead(200).end());
    // A name that answers a public address first and a private one after (DNS rebinding):
    // whichever answer the check sees is the one connected to.
    let lookups = 0;
    const rebinding: Resolve = async () => {
      lookups++;
      return [{ address: lookups === 1 ? '93.184.216.34' : '127.0.0.1', family: 4 }];
    };
    const refused = await postWebhook(`https://evil.example.test:${port}/`, BODY, headers(), {
      ...strict,
      timeoutMs: 300,
      resolve: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    assert.equal(refused.error, 'host evil.example.test resolves to address 127.0.0.1 is loopback');
    assert.equal(connections, 0);

    // With private targets allowed, the name reaches the loopback server through the lookup.
    const allowed = await postWebhook(`http://receiver.example.test:${port}/x`, BODY, headers(), {
      ...local,
      resolve: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    assert.equal(allowed.ok, true);
    assert.equal(seen[0]?.headers.host, `receiver.example.test:${port}`);

    // The public first answer is what the connection is made to (not a second, private one).
    reset((_req, res) => res.writeHead(200).end());
    const rebound = await postWebhook(`https://rebind.example.test:${port}/`, BODY, headers(), {
      ...strict,
      timeoutMs: 300,
      resolve: rebinding,
    });
    assert.equal(lookups, 1, 'one resolution per attempt');
    assert.equal(rebound.ok, false);
    assert.equal(connections, 0, 'the loopback server was never reached');
  });

  test('a name that does not resolve is a failed attempt', async () => {
    const result = await postWebhook('https://nowhere.example.test/', BODY, headers(), {
      ...strict,
      resolve: async () => {
        throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
      },
    });
    assert.deepEqual(
      [result.ok, result.status, result.error],
      [false, null, 'host nowhere.example.test does not resolve'],
    );
  });
});
