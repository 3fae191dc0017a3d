// The client against a service that implements only the published Agent Job Service interface
// (the seed document's three operations): createJob, sendMessage, getJob and waitForJob must
// need nothing else. The fake answers as such a service may (no ETag, plain 200s, bodies
// without Errand's error shape) and fails the test on any request it does not implement.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';
import { type Clock, ErrandClient, ErrandError, type Job } from '../../src/client/index.ts';

const KEY = 'agent_published0000000000000000';
const PROJECT = 'proj-1';

interface Seen {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  at: number;
}

type Answer = { status: number; headers?: Record<string, string>; body?: unknown };

/**
 * The client's clock, run by the test: a wait passes at once and moves the time on by its
 * length, so the gaps between polls are exact and cost no real time. While `holding` is set,
 * a wait does not pass: it is told there, and ends only when its signal aborts.
 */
class TestClock implements Clock {
  time = Date.parse('2025-01-01T00:00:00Z');
  readonly waits: number[] = [];
  holding: (() => void) | undefined;
  now = () => this.time;
  sleep = async (ms: number, signal: AbortSignal | undefined): Promise<void> => {
    signal?.throwIfAborted();
    this.waits.push(ms);
    const holding = this.holding;
    if (holding) {
      return new Promise((_resolve, reject) => {
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
        holding();
      });
    }
    this.time += ms;
  };
}

/** The published interface over loopback: three operations, a scripted sequence of GETs. */
class PublishedService {
  readonly seen: Seen[] = [];
  readonly unexpected: string[] = [];
  /** The answers to the next GETs of the job, in order; the last one repeats. */
  gets: Answer[] = [];
  server = http.createServer((req, res) => void this.#handle(req, res));
  url = '';

  readonly clock: TestClock;

  constructor(clock: TestClock) {
    this.clock = clock;
  }

  job(status: Job['status']): Job {
    return {
      id: 'j1',
      status,
      source: { repository: 'https://example.com/repo', ref: 'agent/j1' },
      model: 'some-model',
      prLink: status === 'completed' ? 'https://example.com/pr/1' : null,
      createdAt: '2025-01-01T00:00:00Z',
      archivedAt: null,
    } as Job;
  }

  async #handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let text = '';
    for await (const chunk of req) text += chunk;
    const body = text ? JSON.parse(text) : undefined;
    const path = req.url ?? '';
    const at = this.clock.now();
    this.seen.push({ method: req.method ?? '', path, headers: req.headers, body, at });
    const send = (answer: Answer) => {
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
    };
    if (req.headers.authorization !== `Bearer ${KEY}`) return send({ status: 401, body: {} });
    const base = `/v2/agent/${PROJECT}/job`;
    if (req.method === 'POST' && path === base) {
      assert.equal(req.headers['content-type'], 'application/json');
      return send({ status: 200, body: this.job('active') });
    }
    if (req.method === 'POST' && path === `${base}/j1/message`) {
      return send({ status: 200, body: this.job('active') });
    }
    if (req.method === 'GET' && path === `${base}/j1`) {
      const answer = this.gets.length > 1 ? this.gets.shift() : this.gets[0];
      return send(answer ?? { status: 200, body: this.job('active') });
    }
    if (req.method === 'GET' && path === `${base}/missing`) {
      return send({ status: 404, body: { message: 'no such job' } });
    }
    this.unexpected.push(`${req.method} ${path}`);
    send({ status: 404, body: { message: 'not part of the published interface' } });
  }

  gaps(): number[] {
    const gets = this.seen.filter((s) => s.method === 'GET');
    return gets.slice(1).map((s, i) => s.at - (gets[i]?.at ?? 0));
  }
}

describe('client against the published interface only', () => {
  const clock = new TestClock();
  const fake = new PublishedService(clock);
  let client: ErrandClient;

  before(async () => {
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
    client = new ErrandClient({ baseUrl: fake.url, apiKey: KEY, projectId: PROJECT, clock });
  });
  beforeEach(() => {
    fake.seen.length = 0;
    fake.gets = [];
    clock.waits.length = 0;
    clock.holding = undefined;
  });
  after(async () => {
    fake.server.closeAllConnections();
    await new Promise((resolve) => fake.server.close(resolve));
    assert.deepEqual(fake.unexpected, [], 'the client used only the published operations');
  });

  test('createJob, sendMessage and getJob send the published requests', async () => {
    const created = await client.createJob({ prompt: 'fix the bug' });
    assert.equal(created.id, 'j1');
    assert.equal(created.status, 'active');
    const sent = await client.sendMessage('j1', 'and the tests', { idempotencyKey: 'k-1' });
    assert.equal(sent.status, 'active');
    fake.gets = [{ status: 200, body: fake.job('completed') }];
    const got = await client.getJob('j1');
    assert.equal(got.prLink, 'https://example.com/pr/1');
    assert.deepEqual(
      fake.seen.map((s) => [s.method, s.path, s.body]),
      [
        ['POST', `/v2/agent/${PROJECT}/job`, { prompt: 'fix the bug' }],
        ['POST', `/v2/agent/${PROJECT}/job/j1/message`, { prompt: 'and the tests' }],
        ['GET', `/v2/agent/${PROJECT}/job/j1`, undefined],
      ],
    );
    assert.equal(fake.seen[1]?.headers['idempotency-key'], 'k-1');
    assert.equal(fake.seen[0]?.headers['idempotency-key'], undefined);
    for (const s of fake.seen) assert.equal(s.headers['user-agent'], 'errand-client');
  });

  test('waitForJob polls with growing gaps while nothing changes, and resolves on completed', async () => {
    const active = { status: 200, body: fake.job('active') };
    fake.gets = [active, active, active, active, { status: 200, body: fake.job('completed') }];
    const changes: string[] = [];
    const job = await client.waitForJob('j1', { onChange: (j) => changes.push(j.status) });
    assert.equal(job.status, 'completed');
    assert.deepEqual(changes, ['active', 'completed'], 'onChange once per change');
    // No ETag from this server: no If-None-Match either, and the same record counts as no change.
    assert.ok(fake.seen.every((s) => s.headers['if-none-match'] === undefined));
    // 0.5 s after the first read (a change), then doubling while the record stays the same.
    assert.deepEqual(fake.gaps(), [500, 1000, 2000, 4000]);
    assert.deepEqual(clock.waits, [500, 1000, 2000, 4000]);
  });

  test('waitForJob honours Retry-After on 429 and 503, and a change resets the backoff', async () => {
    fake.gets = [
      { status: 200, body: fake.job('active') },
      { status: 429, headers: { 'retry-after': '2' }, body: { message: 'slow down' } },
      { status: 503, headers: { 'retry-after': '1' } },
      { status: 200, body: { ...fake.job('active'), model: 'changed' } },
      { status: 200, body: fake.job('completed') },
    ];
    const job = await client.waitForJob('j1');
    assert.equal(job.status, 'completed');
    // 0.5 s after the first read; 2 s and 1 s as the 429 and 503 said; 0.5 s after the change.
    assert.deepEqual(fake.gaps(), [500, 2000, 1000, 500]);
  });

  test('waitForJob times out with a clear error', async () => {
    const started = clock.now();
    const err = await client.waitForJob('j1', { timeoutMs: 1200 }).then(
      () => assert.fail('resolved'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ErrandError);
    assert.equal(err.code, 'timeout');
    assert.equal(err.status, 0);
    assert.match(err.message, /job j1 is still active after 1200 ms/);
    // The last wait is cut to end at the deadline, where the client gives up without a read.
    assert.deepEqual(clock.waits, [500, 700]);
    assert.equal(clock.now() - started, 1200);
    assert.equal(fake.seen.length, 2);
  });

  test('waitForJob stops when the signal aborts, with its reason', async () => {
    const controller = new AbortController();
    // The signal aborts while the client waits for its second poll.
    clock.holding = () => controller.abort(new Error('user gave up'));
    await assert.rejects(client.waitForJob('j1', { signal: controller.signal }), {
      message: 'user gave up',
    });
    assert.equal(fake.seen.length, 1);
    // The sentinel: a second wait, started now, reads the job completed at once; had the
    // aborted wait polled again, that poll would be counted before or beside this one.
    clock.holding = undefined;
    fake.gets = [{ status: 200, body: fake.job('completed') }];
    assert.equal((await client.waitForJob('j1')).status, 'completed');
    assert.equal(fake.seen.length, 2, 'no poll after the abort');
  });

  test('an error body that is not Errand’s still gives a code from the status', async () => {
    const err = await client.getJob('missing').catch((e: unknown) => e);
    assert.ok(err instanceof ErrandError);
    assert.equal(err.status, 404);
    assert.equal(err.code, 'not_found');
    assert.equal(err.requestId, undefined);
    const unauthorized = await new ErrandClient({ baseUrl: fake.url, apiKey: 'wrong' })
      .getJob('j1', { projectId: PROJECT })
      .catch((e: unknown) => e);
    assert.ok(unauthorized instanceof ErrandError);
    assert.equal(unauthorized.code, 'unauthorized');
    assert.ok(!unauthorized.message.includes(KEY), 'no key in messages');
  });

  test('waitForJob against a server that is not there fails at once with network_error', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const nowhere = new ErrandClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: KEY });
    const err = await nowhere.waitForJob('j1', { projectId: PROJECT }).catch((e: unknown) => e);
    assert.ok(err instanceof ErrandError);
    assert.equal(err.code, 'network_error');
    assert.equal(err.status, 0);
    assert.match(err.message, /cannot reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
  });

  test('bad options are refused before any request', async () => {
    assert.throws(() => new ErrandClient({ baseUrl: 'nowhere', apiKey: KEY }), /baseUrl must be/);
    assert.throws(() => new ErrandClient({ baseUrl: fake.url, apiKey: ' ' }), /apiKey is required/);
    const noProject = new ErrandClient({ baseUrl: fake.url, apiKey: KEY });
    await assert.rejects(noProject.getJob('j1'), /no projectId/);
    assert.equal(fake.seen.length, 0);
  });
});
