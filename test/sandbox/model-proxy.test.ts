// The model proxy and the sandbox's way to it: a fake model API on loopback (failing the test on
// any request it did not expect), the proxy adding the key and dropping the client's own, other
// paths refused, streamed answers passed on chunk by chunk, and, from inside a real sandbox, the
// forwarder on 127.0.0.1 as the only way out, with the key in no file, argument or environment
// the sandbox can see and the forwarder gone with the sandbox.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import {
  createServer,
  type IncomingHttpHeaders,
  request,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type ModelProxy, startModelProxy } from '../../src/sandbox/model-proxy.ts';
import { filesContaining, makeTempDir, removeDir } from '../support/git.ts';
import { childrenRunning, run, skip } from './support.ts';

const KEY = `sk-ant-proxy-${randomBytes(16).toString('hex')}`;
const ALLOWED = ['/v1/messages', '/v1/responses', '/v1/models'];

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** The fake model API: /v1/messages answers JSON, /v1/responses streams two events. */
class FakeModelApi {
  readonly seen: Seen[] = [];
  readonly unexpected: string[] = [];
  #server: Server | undefined;
  #release: (() => void) | undefined;
  url = '';

  async start(): Promise<void> {
    this.#server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => {
        body += chunk;
      });
      req.on('end', () => {
        this.seen.push({
          method: req.method ?? '',
          url: req.url ?? '',
          headers: req.headers,
          body,
        });
        this.#answer(req.method ?? '', req.url ?? '', res);
      });
    });
    await new Promise<void>((resolve) => this.#server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  #answer(method: string, url: string, res: ServerResponse): void {
    if (method === 'POST' && url === '/v1/messages/count_tokens') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"input_tokens":3}');
    } else if (method === 'POST' && url === '/v1/messages') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'message', content: [{ type: 'text', text: 'hello' }] }));
    } else if (method === 'POST' && url === '/v1/responses') {
      // The second event waits until the client has read the first: a proxy that collected the
      // body before passing it on would never deliver it, and the run would time out.
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write('event: one\ndata: {"n":1}\n\n');
      new Promise<void>((resolve) => {
        this.#release = resolve;
      }).then(() => res.end('event: two\ndata: {"n":2}\n\n'));
    } else {
      this.unexpected.push(`${method} ${url}`);
      res.writeHead(500);
      res.end('unexpected request');
    }
  }

  /** Lets the streamed answer send its second event. */
  release(): void {
    this.#release?.();
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server?.closeAllConnections();
      this.#server?.close(() => resolve());
    });
  }
}

/** One request to the proxy's socket; `onChunk` sees each piece of the answer as it comes. */
function viaSocket(
  socketPath: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  onChunk?: (chunk: string) => void,
): Promise<{ status: number; body: string; chunks: string[] }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, headers }, (res) => {
      const chunks: string[] = [];
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        chunks.push(chunk);
        onChunk?.(chunk);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: chunks.join(''), chunks }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(method === 'POST' ? '{"model":"m"}' : undefined);
  });
}

/** Polls `predicate` until it holds (an answer's close comes just after the client's end). */
async function waitUntil(predicate: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !predicate(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(predicate(), 'the condition never held');
}

let api: FakeModelApi;
let proxy: ModelProxy;
before(async () => {
  api = new FakeModelApi();
  await api.start();
  proxy = await startModelProxy({
    upstream: api.url,
    headers: { 'x-api-key': KEY },
    allowedPaths: ALLOWED,
  });
});
after(async () => {
  await proxy?.close();
  await api?.close();
});

describe('the model proxy', () => {
  test('adds the key, drops the client credentials, passes the answer back', async () => {
    const before = api.seen.length;
    const r = await viaSocket(proxy.socketPath, 'POST', '/v1/messages', {
      'content-type': 'application/json',
      'x-api-key': 'client-key',
      authorization: 'Bearer client-token',
      'anthropic-version': '2023-06-01',
    });
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.body), {
      type: 'message',
      content: [{ type: 'text', text: 'hello' }],
    });
    const [seen, ...more] = api.seen.slice(before);
    assert.deepEqual(more, []);
    assert.equal(seen?.url, '/v1/messages');
    assert.equal(seen?.headers['x-api-key'], KEY);
    assert.equal(seen?.headers.authorization, undefined);
    assert.equal(seen?.headers['anthropic-version'], '2023-06-01');
    assert.equal(seen?.body, '{"model":"m"}');
    assert.deepEqual(api.unexpected, []);
  });

  test('other paths, dot segments and other methods are refused with 403 and never forwarded', async () => {
    const before = api.seen.length;
    for (const [method, path] of [
      ['POST', '/v1/complete'],
      ['GET', '/'],
      ['POST', '/v1/messagesX'],
      ['POST', '/v1/messages/../../admin'],
      ['POST', '/v1/messages/%2e%2e/admin'],
      ['DELETE', '/v1/messages'],
    ] as const) {
      const r = await viaSocket(proxy.socketPath, method, path);
      assert.equal(r.status, 403, `${method} ${path}`);
      assert.match(
        r.body,
        /the model proxy forwards only \/v1\/messages, \/v1\/responses, \/v1\/models/,
      );
    }
    assert.equal(api.seen.length, before);
    assert.deepEqual(api.unexpected, []);
  });

  test('a streamed answer arrives chunk by chunk', { timeout: 10_000 }, async () => {
    const r = await viaSocket(proxy.socketPath, 'POST', '/v1/responses', {}, (chunk) => {
      if (chunk.includes('event: one')) api.release();
    });
    assert.equal(r.status, 200);
    assert.ok(r.chunks.length >= 2, `one chunk: ${JSON.stringify(r.chunks)}`);
    assert.match(r.chunks[0] ?? '', /^event: one\n/);
    assert.match(r.body, /event: two\ndata: \{"n":2\}\n\n$/);
  });

  test('an unreachable model API is a 502 that names no key', async () => {
    const closed = new FakeModelApi();
    await closed.start();
    const url = closed.url;
    await closed.close();
    const dead = await startModelProxy({
      upstream: url,
      headers: { authorization: `Bearer ${KEY}` },
      allowedPaths: ALLOWED,
    });
    try {
      const r = await viaSocket(dead.socketPath, 'POST', '/v1/messages');
      assert.equal(r.status, 502);
      assert.match(r.body, /the model API could not be reached \(ECONNREFUSED\)/);
      assert.ok(!r.body.includes(KEY));
    } finally {
      await dead.close();
    }
    await assert.rejects(stat(dead.socketPath), { code: 'ENOENT' });
  });

  test('the socket sits in a directory only this user may enter', async () => {
    const mode = (await stat(dirname(proxy.socketPath))).mode & 0o777;
    assert.equal(mode, 0o700);
  });

  test('bad options are refused before anything listens', async () => {
    await assert.rejects(
      startModelProxy({ upstream: 'ftp://x', headers: {}, allowedPaths: ALLOWED }),
      /upstream must be an absolute http or https URL/,
    );
    await assert.rejects(
      startModelProxy({
        upstream: api.url,
        headers: { 'x-api-key': 'a\r\nb' },
        allowedPaths: ALLOWED,
      }),
      /not a valid header/,
    );
    await assert.rejects(
      startModelProxy({ upstream: api.url, headers: {}, allowedPaths: ['v1'] }),
      /must be a plain absolute path/,
    );
    await assert.rejects(
      startModelProxy({
        upstream: api.url,
        headers: {},
        allowedPaths: ALLOWED,
        callLimit: { calls: -1, onExceeded: () => {} },
      }),
      /callLimit.calls must be a whole number/,
    );
  });

  test('an observer sees a copy of each answer; requests then ask for it uncompressed', async () => {
    const observed: { path: string; status: number; body: string; ends: number }[] = [];
    const observing = await startModelProxy({
      upstream: api.url,
      headers: { 'x-api-key': KEY },
      allowedPaths: ALLOWED,
      observe: (answer) => {
        const seen = { path: answer.path, status: answer.status, body: '', ends: 0 };
        observed.push(seen);
        return {
          data: (chunk) => {
            seen.body += chunk.toString('utf8');
          },
          end: () => {
            seen.ends++;
          },
        };
      },
    });
    try {
      const before = api.seen.length;
      const r = await viaSocket(observing.socketPath, 'POST', '/v1/messages', {
        'accept-encoding': 'gzip, br',
      });
      assert.equal(r.status, 200);
      await waitUntil(() => observed[0]?.ends === 1);
      assert.deepEqual(observed, [{ path: '/v1/messages', status: 200, body: r.body, ends: 1 }]);
      assert.equal(api.seen[before]?.headers['accept-encoding'], undefined);
      assert.deepEqual(api.unexpected, []);
    } finally {
      await observing.close();
    }
  });

  test('close waits until the observer has seen the end of an answer it cut', {
    timeout: 10_000,
  }, async () => {
    const ends: string[] = [];
    const observing = await startModelProxy({
      upstream: api.url,
      headers: { 'x-api-key': KEY },
      allowedPaths: ALLOWED,
      observe: () => {
        let body = '';
        return {
          data: (chunk) => {
            body += chunk.toString('utf8');
          },
          end: () => {
            ends.push(body);
          },
        };
      },
    });
    let firstChunk: () => void = () => {};
    const first = new Promise<void>((resolve) => {
      firstChunk = resolve;
    });
    // The fake holds its second event back: the answer is open when the proxy closes.
    const cut = viaSocket(observing.socketPath, 'POST', '/v1/responses', {}, firstChunk).catch(
      (err: NodeJS.ErrnoException) => err.code,
    );
    await first;
    await observing.close();
    assert.deepEqual(ends, ['event: one\ndata: {"n":1}\n\n']);
    assert.equal(await cut, 'ECONNRESET');
    api.release();
  });

  test('a call limit forwards that many model calls; the next are 429 and never reach the vendor', async () => {
    let exceeded = 0;
    const limited = await startModelProxy({
      upstream: api.url,
      headers: { 'x-api-key': KEY },
      allowedPaths: ALLOWED,
      callLimit: {
        calls: 2,
        onExceeded: () => {
          exceeded++;
        },
      },
    });
    try {
      const before = api.seen.length;
      // A refused path is no model call, and neither is counting tokens.
      assert.equal((await viaSocket(limited.socketPath, 'POST', '/v1/complete')).status, 403);
      for (let i = 0; i < 3; i++) {
        const counted = await viaSocket(limited.socketPath, 'POST', '/v1/messages/count_tokens');
        assert.equal(counted.status, 200, counted.body);
      }
      for (const expected of [200, 200, 429, 429]) {
        const r = await viaSocket(limited.socketPath, 'POST', '/v1/messages');
        assert.equal(r.status, expected, r.body);
        if (expected === 429) {
          assert.match(r.body, /the turn has used its 2 model calls/);
          assert.ok(!r.body.includes(KEY));
        }
      }
      assert.equal(exceeded, 1);
      assert.equal(api.seen.length - before, 5);
      assert.deepEqual(api.unexpected, []);
    } finally {
      await limited.close();
    }
  });
});

describe('the model proxy from inside the sandbox', { skip }, () => {
  let root: string;
  let checkout: string;
  let home: string;
  let tools: string;
  before(async () => {
    if (skip) return;
    root = await makeTempDir('sandbox-proxy');
    checkout = join(root, 'checkout');
    home = join(root, 'home');
    tools = join(root, 'engine');
    await mkdir(join(checkout, '.git'), { recursive: true });
    await mkdir(home);
    await mkdir(tools);
    await writeFile(join(tools, 'engine.sh'), 'echo engine-ran\n');
  });
  after(async () => {
    if (root) await removeDir(root);
  });

  test('the forwarder is the way out; the key is nowhere inside; nothing is left', async () => {
    const before = api.seen.length;
    const lines: string[] = [];
    const port = 4318;
    const base = `http://127.0.0.1:${port}`;
    // Everything the sandbox holds that a key could hide in, printed for the test to search:
    // every process's arguments and environment, every file in its writable places.
    const dump = [
      'for p in /proc/[0-9]*; do echo "== $p"; tr "\\0" " " < $p/cmdline; echo; tr "\\0" "\\n" < $p/environ; done',
      // (The socket is no file to read: reading it fails with ENXIO.)
      'find /tmp /dev/shm /run /workspace "$HOME" \\( -path /workspace/.git -o -path /run/errand/model.sock \\) -prune -o -type f -print -exec cat {} + 2>&1',
    ].join('; ');
    const r = await run(
      checkout,
      [
        'echo state > "$HOME/engine-state"',
        `sh ${join(tools, 'engine.sh')}`,
        `touch ${join(tools, 'planted')} 2>&1 || echo engine-dir-read-only`,
        `curl -sS -H 'x-api-key: client-key' -H 'authorization: Bearer client-token' --data '{}' "$ANTHROPIC_BASE_URL/v1/messages"; echo`,
        `curl -sS -o /dev/null -w 'other=%{http_code}\\n' "$ANTHROPIC_BASE_URL/v1/complete"`,
        `curl -sSN --data '{}' "$ANTHROPIC_BASE_URL/v1/responses"`,
        dump,
      ].join('; '),
      {
        modelProxy: { socketPath: proxy.socketPath, port },
        env: { ANTHROPIC_BASE_URL: base },
        home,
        readOnlyBinds: [tools],
        onStdoutLine: (line) => {
          lines.push(line);
          if (line === 'event: one') api.release();
        },
      },
    );
    assert.equal(r.exitCode, 0, `${r.output}\n${r.stderr}`);
    assert.ok(lines.includes('engine-ran'));
    assert.ok(lines.includes('engine-dir-read-only'));
    assert.ok(
      lines.some((l) => l.includes('"text":"hello"')),
      r.output,
    );
    assert.ok(lines.includes('other=403'));
    // The stream: its second event came only after the first line was read here.
    const one = lines.indexOf('event: one');
    assert.ok(one >= 0 && lines[one + 3] === 'event: two', r.output);
    // The fake saw exactly the two allowed requests, with the key and not the client's.
    const seen = api.seen.slice(before);
    assert.deepEqual(
      seen.map((s) => `${s.method} ${s.url}`),
      ['POST /v1/messages', 'POST /v1/responses'],
    );
    for (const s of seen) {
      assert.equal(s.headers['x-api-key'], KEY);
      assert.equal(s.headers.authorization, undefined);
    }
    assert.deepEqual(api.unexpected, []);

    // The dump covered what it claims (the forwarder's process, the environment, HOME's
    // file), and the key is in none of it, nor in what the sandbox wrote on the host.
    const text = lines.join('\n');
    assert.match(text, /errand forwarder/);
    assert.match(text, new RegExp(`ANTHROPIC_BASE_URL=${base}`));
    assert.match(text, /^\/tmp\/home\/engine-state$/m);
    assert.match(text, /^state$/m);
    assert.ok(!text.includes(KEY), 'the key is visible inside the sandbox');
    assert.ok(!(r.stderr ?? '').includes(KEY));
    assert.equal(await readFile(join(home, 'engine-state'), 'utf8'), 'state\n');
    assert.deepEqual(await filesContaining(root, KEY), []);
    // The forwarder died with the sandbox.
    assert.deepEqual(await childrenRunning('errand forwarder'), []);
  });

  test('a missing socket or a bad port is refused before anything runs', async () => {
    await assert.rejects(
      run(checkout, 'echo never', {
        modelProxy: { socketPath: join(root, 'no-such.sock'), port: 4318 },
      }),
      /the model proxy socket does not exist/,
    );
    await assert.rejects(
      run(checkout, 'echo never', { modelProxy: { socketPath: proxy.socketPath, port: 70_000 } }),
      /port must be a whole number from 1 to 65535/,
    );
  });
});
