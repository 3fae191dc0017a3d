// The typed client against a real Errand (in this process) with a project
// key: every call, waitForJob's 304s, typed errors with Errand's codes and request ids, and the
// live stream, including a connection cut mid-stream through a TCP proxy that the client
// resumes with Last-Event-ID (no gap, no duplicate).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Clock, ErrandClient, ErrandError, type JobEvent } from '../../src/client/index.ts';
import {
  TurnFailedError,
  type TurnInput,
  type TurnOutput,
  type TurnRunner,
} from '../../src/jobs/runner.ts';
import { SCRIPTED_ENV } from '../support/route-cases.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';
import { startTcpProxy } from '../support/tcp-proxy.ts';

/**
 * Turns by their prompt's first word: `complete` finishes, `fail` fails, `gate` waits for the
 * test to emit steps and finish it.
 */
class ScriptRunner implements TurnRunner {
  readonly #gated = new Map<string, { input: TurnInput; finish: () => void }>();

  run(input: TurnInput): Promise<TurnOutput> {
    const word = input.turn.prompt.split(/\s/)[0];
    if (word === 'complete') return Promise.resolve({ summary: 'done' });
    if (word === 'fail') return Promise.reject(new TurnFailedError('the agent gave up'));
    return new Promise((resolve, reject) => {
      this.#gated.set(`${input.job.id}/${input.turn.seq}`, {
        input,
        finish: () => resolve({ summary: 'gate opened' }),
      });
      input.signal.addEventListener('abort', () => reject(new Error('aborted')));
    });
  }

  started(jobId: string, seq = 1): Promise<{ input: TurnInput; finish: () => void }> {
    return waitFor(`turn ${seq} of ${jobId}`, async () => this.#gated.get(`${jobId}/${seq}`));
  }

  async step(jobId: string, step: string, seq = 1): Promise<void> {
    await (await this.started(jobId, seq)).input.emit('command.started', {
      command: step,
      cwd: '.',
    });
  }

  async finish(jobId: string, seq = 1): Promise<void> {
    (await this.started(jobId, seq)).finish();
  }
}

interface Exchange {
  method: string;
  url: string;
  status: number;
  request: Headers;
}

/** The global fetch, with a log of what was asked and answered (status 0: no answer). */
function recordingFetch(log: Exchange[]): typeof fetch {
  return async (input, init) => {
    const entry = {
      method: init?.method ?? 'GET',
      url: String(input),
      status: 0,
      request: new Headers(init?.headers),
    };
    try {
      const response = await fetch(input, init);
      entry.status = response.status;
      return response;
    } finally {
      log.push(entry);
    }
  };
}

async function expectError(promise: Promise<unknown>): Promise<ErrandError> {
  const err = await promise.then(
    () => assert.fail('expected an ErrandError'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ErrandError, `not an ErrandError: ${String(err)}`);
  return err;
}

/** Runs the stream into an array, so the test can wait for events while it flows. */
/**
 * A clock twenty times as fast as the wall's: waitForJob's waits (0.5 s, doubling) take a
 * twentieth of their time against the real service, in the same order and proportions.
 */
function fastClock(factor = 20): Clock {
  const start = Date.now();
  return {
    now: () => start + (Date.now() - start) * factor,
    sleep: (ms, signal) =>
      sleep(ms / factor, undefined, signal ? { signal } : {}).catch((err: unknown) => {
        throw signal?.aborted ? signal.reason : err;
      }),
  };
}

function collect(stream: AsyncIterable<JobEvent>) {
  const events: JobEvent[] = [];
  const done = (async () => {
    for await (const event of stream) events.push(event);
  })();
  const until = (count: number) =>
    waitFor(`${count} events (have ${events.length})`, async () =>
      events.length >= count ? events : undefined,
    );
  return { events, done, until };
}

describe('typed client against Errand', () => {
  const runner = new ScriptRunner();
  let svc: TestService;
  let projectId: string;
  let key: string;
  let client: ErrandClient;
  const log: Exchange[] = [];

  before(async () => {
    svc = await startTestService({ runner, env: SCRIPTED_ENV });
    projectId = (await svc.createProject()).id;
    key = (await svc.createProjectKey(projectId)).key;
    client = new ErrandClient({
      baseUrl: svc.url,
      apiKey: key,
      projectId,
      fetch: recordingFetch(log),
      clock: fastClock(),
    });
  });
  after(async () => {
    await svc.close();
  });

  test('createJob and waitForJob: polls with If-None-Match, Errand answers 304, resolves on completed', async () => {
    const job = await client.createJob({ prompt: 'gate one' });
    assert.equal(job.status, 'active');
    assert.equal(job.projectId, projectId);
    log.length = 0;
    const changes: string[] = [];
    const waiting = client.waitForJob(job.id, { onChange: (j) => changes.push(j.status) });
    await waitFor('a 304', async () => log.find((e) => e.status === 304));
    await runner.finish(job.id);
    const done = await waiting;
    assert.equal(done.status, 'completed');
    assert.equal(done.id, job.id);
    // Each change once: the record may change while active (the turn starting), never twice
    // in a row the same.
    assert.equal(changes[0], 'active');
    assert.equal(changes.at(-1), 'completed');
    assert.ok(changes.slice(0, -1).every((status) => status === 'active'));
    const conditional = log.filter((e) => e.request.has('if-none-match'));
    assert.ok(conditional.length >= 1);
    assert.ok(log.every((e) => e.method === 'GET' && e.url.endsWith(`/job/${job.id}`)));
    assert.equal(log[0]?.request.get('authorization'), `Bearer ${key}`);
  });

  test('createJob with an Idempotency-Key is made once; model and baseRef are sent', async () => {
    const first = await client.createJob(
      { prompt: 'complete once', model: 'anthropic:claude-sonnet-4-5', baseRef: 'main' },
      { idempotencyKey: 'once' },
    );
    const again = await client.createJob(
      { prompt: 'complete once', model: 'anthropic:claude-sonnet-4-5', baseRef: 'main' },
      { idempotencyKey: 'once' },
    );
    assert.equal(again.id, first.id);
    assert.equal(first.model, 'anthropic:claude-sonnet-4-5');
    assert.equal(first.source.baseRef, 'main');
  });

  test('createJob sends attempts and checkCommand (best-of-N); the record carries the attempts', async () => {
    const job = await client.createJob({
      prompt: 'complete in two tries',
      attempts: {
        count: 2,
        agents: [{ engine: 'errand' }, { model: 'anthropic:claude-opus-4-1' }],
      },
      checkCommand: 'npm test',
    });
    const turn = await svc.service.ctx.db
      .selectFrom('turns')
      .select('best_of')
      .where('job_id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(turn.best_of, {
      count: 2,
      agents: [{ engine: 'errand' }, { model: 'anthropic:claude-opus-4-1' }],
    });
    const row = await svc.service.ctx.db
      .selectFrom('jobs')
      .select('check_command')
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.check_command, 'npm test');
    const done = await client.waitForJob(job.id);
    assert.equal(done.status, 'completed');
    // A refused count is the API's error, typed.
    const refused = await expectError(
      client.createJob({ prompt: 'complete', attempts: { count: 5 } }),
    );
    assert.equal(refused.status, 400);
    assert.match(refused.message, /"count" must be a whole number from 1 to 4/);
  });

  test('sendMessage makes a completed job active again; a failed turn resolves as failed', async () => {
    const job = await client.createJob({ prompt: 'complete first' });
    assert.equal((await client.waitForJob(job.id)).status, 'completed');
    const again = await client.sendMessage(job.id, 'fail now');
    assert.equal(again.status, 'active');
    const failed = await client.waitForJob(job.id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.turns, 2);
    assert.match(failed.error ?? '', /the agent gave up/);
  });

  test('listJobs walks every page, newest first, and filters by status', async () => {
    const other = await svc.createProject({ name: 'listing' });
    const otherKey = (await svc.createProjectKey(other.id)).key;
    const pages: Exchange[] = [];
    const lister = new ErrandClient({
      baseUrl: svc.url,
      apiKey: otherKey,
      fetch: recordingFetch(pages),
      clock: fastClock(),
    });
    const created: string[] = [];
    for (let i = 0; i < 5; i++)
      created.push(
        (await lister.createJob({ prompt: `complete ${i}` }, { projectId: other.id })).id,
      );
    await Promise.all(created.map((id) => lister.waitForJob(id, { projectId: other.id })));
    const held = await lister.createJob({ prompt: 'gate listed' }, { projectId: other.id });
    pages.length = 0;
    const listed: string[] = [];
    for await (const job of lister.listJobs({ projectId: other.id, pageSize: 2 }))
      listed.push(job.id);
    assert.deepEqual(listed, [held.id, ...created.reverse()]);
    assert.equal(pages.length, 3, 'three pages of two');
    assert.ok(pages.every((p) => new URL(p.url).searchParams.get('limit') === '2'));
    const active: string[] = [];
    for await (const job of lister.listJobs({ projectId: other.id, status: 'active' }))
      active.push(job.id);
    assert.deepEqual(active, [held.id]);
    await lister.archiveJob(held.id, { projectId: other.id });
  });

  test('archiveJob: the job is archived, and waitForJob resolves with it at once', async () => {
    const job = await client.createJob({ prompt: 'gate archive' });
    await runner.started(job.id);
    const archived = await client.archiveJob(job.id);
    assert.equal(archived.status, 'archived');
    assert.ok(archived.archivedAt);
    // At once: with its first poll, not after a poll interval (the next would be 0.5 s on).
    const polls = () =>
      log.filter((e) => e.method === 'GET' && e.url.endsWith(`/job/${job.id}`)).length;
    const pollsBefore = polls();
    const started = Date.now();
    assert.equal((await client.waitForJob(job.id)).status, 'archived');
    assert.equal(polls() - pollsBefore, 1, 'waitForJob polled more than once');
    assert.ok(Date.now() - started < 1000);
  });

  test("errors carry Errand's code, status and request id", async () => {
    const missing = await expectError(client.getJob('job_00000000000000000000'));
    assert.equal(missing.status, 404);
    assert.equal(missing.code, 'not_found');
    assert.match(missing.requestId ?? '', /^req_/);
    const prompt = await expectError(client.createJob({ prompt: '   ' }));
    assert.equal(prompt.status, 400);
    assert.equal(prompt.code, 'invalid_prompt');
    assert.match(prompt.message, /non-space/);
    const badKey = new ErrandClient({ baseUrl: svc.url, apiKey: `${key}x`, projectId });
    const unauthorized = await expectError(badKey.getJob('job_00000000000000000000'));
    assert.equal(unauthorized.status, 401);
    assert.equal(unauthorized.code, 'unauthorized');
    assert.ok(!unauthorized.message.includes(key));
    const otherProject = (await svc.createProject({ name: 'not yours' })).id;
    const forbidden = await expectError(
      client.createJob({ prompt: 'complete' }, { projectId: otherProject }),
    );
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.code, 'forbidden');
    const archived = await client.createJob({ prompt: 'complete' });
    await client.archiveJob(archived.id);
    const conflict = await expectError(client.sendMessage(archived.id, 'more'));
    assert.equal(conflict.status, 409);
    assert.equal(conflict.code, 'conflict');
    assert.equal(conflict.transient, false);
  });

  test('transient: what waiting may mend, not a refusal a forge answered through Errand', () => {
    const error = (status: number, code: string) => new ErrandError('x', { status, code });
    for (const [status, code] of [
      [429, 'rate_limited'],
      [502, 'bad_gateway'],
      [503, 'unavailable'],
      [504, 'gateway_timeout'],
      [0, 'network_error'],
    ] as const)
      assert.equal(error(status, code).transient, true, code);
    assert.equal(error(502, 'forge_failed').transient, false);
    assert.equal(error(400, 'bad_request').transient, false);
  });

  test('events: the whole log in order, then the stream ends after the terminal event', async () => {
    const job = await client.createJob({ prompt: 'gate events' });
    const stream = collect(client.events(job.id));
    await runner.step(job.id, 'one');
    await stream.until(3);
    await runner.step(job.id, 'two');
    await runner.finish(job.id);
    await stream.done;
    const listed = await svc.request('GET', `/v2/agent/${projectId}/job/${job.id}/events`, {
      key,
    });
    assert.deepEqual(stream.events, listed.json.events);
    assert.equal(stream.events.at(-1)?.type, 'job.completed');
    assert.deepEqual(
      stream.events.filter((e) => e.type === 'command.started').map((e) => e.data),
      [
        { command: 'one', cwd: '.' },
        { command: 'two', cwd: '.' },
      ],
    );
    // Nothing after the last: Errand answers 204 and the loop ends without an event.
    const last = stream.events.at(-1)?.seq ?? 0;
    const rest: JobEvent[] = [];
    for await (const event of client.events(job.id, { after: last })) rest.push(event);
    assert.deepEqual(rest, []);
    // From the middle: exactly the events after it.
    const tail: JobEvent[] = [];
    const second = stream.events[1]?.seq ?? 0;
    for await (const event of client.events(job.id, { after: second })) tail.push(event);
    assert.deepEqual(tail, stream.events.slice(2));
  });

  test('events resume after the connection is cut mid-stream: no gap, no duplicate', async () => {
    const port = Number(new URL(svc.url).port);
    const proxy = await startTcpProxy({ host: '127.0.0.1', port });
    const exchanges: Exchange[] = [];
    const proxied = new ErrandClient({
      baseUrl: `http://127.0.0.1:${proxy.port}`,
      apiKey: key,
      projectId,
      fetch: recordingFetch(exchanges),
    });
    try {
      const job = await client.createJob({ prompt: 'gate cut' });
      // Short waits between attempts, so that several are refused during the cut.
      const stream = collect(proxied.events(job.id, { retryDelay: { firstMs: 20, maxMs: 100 } }));
      await runner.step(job.id, 'before the cut');
      const before = await stream.until(3);
      const seen = before.length;
      // The connection drops, and reconnecting is refused for a while.
      await proxy.down('refuse');
      await runner.step(job.id, 'during the cut 1');
      await runner.step(job.id, 'during the cut 2');
      const refused = () => exchanges.filter((e) => e.status === 0).length;
      await waitFor('three refused attempts to reopen the stream', async () =>
        refused() >= 3 ? true : undefined,
      );
      await proxy.up();
      await stream.until(seen + 2);
      await runner.step(job.id, 'after the cut');
      await runner.finish(job.id);
      await stream.done;
      const listed = await svc.request('GET', `/v2/agent/${projectId}/job/${job.id}/events`, {
        key,
      });
      assert.deepEqual(stream.events, listed.json.events, 'every event once, in order');
      const seqs = stream.events.map((e) => e.seq);
      assert.deepEqual(
        seqs,
        [...new Set(seqs)].sort((a, b) => a - b),
        'increasing, no repeat',
      );
      assert.deepEqual(
        stream.events.filter((e) => e.type === 'command.started').map((e) => e.data),
        [
          { command: 'before the cut', cwd: '.' },
          { command: 'during the cut 1', cwd: '.' },
          { command: 'during the cut 2', cwd: '.' },
          { command: 'after the cut', cwd: '.' },
        ],
      );
      assert.equal(stream.events.at(-1)?.type, 'job.completed');
      const opened = exchanges.filter((e) => e.status === 200);
      assert.ok(opened.length >= 2, 'the stream was opened again');
      assert.equal(opened[0]?.request.get('last-event-id'), '0');
      assert.equal(
        opened[1]?.request.get('last-event-id'),
        String(stream.events[seen - 1]?.seq),
        'reopened after the last event seen before the cut',
      );
      assert.ok(refused() >= 3, 'a refused attempt during the cut was retried');
    } finally {
      await proxy.close();
    }
  });

  test('events: aborting the signal, or leaving the loop, ends it quietly and closes the stream', async () => {
    const openStreams = async () =>
      (await svc.service.ctx.metrics.eventStreams.get()).values[0]?.value ?? 0;
    // Through a proxy closed at the end: after an abort, Node's fetch opens a spare connection
    // that sends nothing, which would hold the service's stop until its connection timeout.
    const proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(svc.url).port) });
    const proxied = new ErrandClient({
      baseUrl: `http://127.0.0.1:${proxy.port}`,
      apiKey: key,
      projectId,
    });
    try {
      const job = await client.createJob({ prompt: 'gate abort' });
      const controller = new AbortController();
      const stream = collect(proxied.events(job.id, { signal: controller.signal }));
      await stream.until(2);
      assert.equal(await openStreams(), 1);
      controller.abort();
      await stream.done;
      await waitFor('the aborted stream to close', async () =>
        (await openStreams()) === 0 ? true : undefined,
      );
      // A step recorded now never reaches the aborted stream. The sentinel: a new stream,
      // opened before the step, gets it; the aborted one would have had it by then.
      let first: JobEvent | undefined;
      let step: JobEvent | undefined;
      for await (const event of proxied.events(job.id)) {
        if (first === undefined) {
          first = event;
          await runner.step(job.id, 'unseen');
        }
        if (event.type === 'command.started') {
          step = event;
          break;
        }
      }
      assert.deepEqual(step?.data, { command: 'unseen', cwd: '.' });
      assert.ok(stream.events.every((e) => e.type !== 'command.started'));
      assert.equal(first?.type, 'job.created');
      await waitFor('the stream left early to close', async () =>
        (await openStreams()) === 0 ? true : undefined,
      );
      await client.archiveJob(job.id);
    } finally {
      await proxy.close();
    }
  });
});

describe('typed client against Errand: rate limits', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService({
      runner: new ScriptRunner(),
      env: { ERRAND_RATE_LIMIT_CREATE: '1' },
    });
  });
  after(async () => {
    await svc.close();
  });

  test('a 429 carries rate_limited and Retry-After as retryAfterSeconds', async () => {
    const projectId = (await svc.createProject()).id;
    const client = new ErrandClient({
      baseUrl: svc.url,
      apiKey: (await svc.createProjectKey(projectId)).key,
      projectId,
    });
    await client.createJob({ prompt: 'complete' });
    const limited = await expectError(client.createJob({ prompt: 'complete' }));
    assert.equal(limited.status, 429);
    assert.equal(limited.code, 'rate_limited');
    assert.ok(
      limited.retryAfterSeconds !== undefined && limited.retryAfterSeconds > 0,
      `retryAfterSeconds ${limited.retryAfterSeconds}`,
    );
    assert.match(limited.requestId ?? '', /^req_/);
  });
});
