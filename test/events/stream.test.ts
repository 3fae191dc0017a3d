// The live stream: GET …/job/{id}/events with Accept: text/event-stream. Events in order with
// their seq as id, status changes with the job's record, resuming with no gap and no duplicate,
// the end after a terminal event, other API processes, keep-alives, the per-key limit, slow
// readers, shutdown, revoked keys and personal tokens, and a lost LISTEN connection.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import type { EventRecord } from '../../src/events/log.ts';
import { recordProgress } from '../../src/jobs/lifecycle.ts';
import type { TurnInput, TurnOutput, TurnRunner } from '../../src/jobs/runner.ts';
import type { JobRecord } from '../../src/records/job.ts';
import { upsertUser } from '../../src/users/service.ts';
import { createToken, revokeToken } from '../../src/users/tokens.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';
import { openSse, type SseEvent, type SseStream } from '../support/sse.ts';

/** Turns that wait for the test: it emits their events and lets them finish. */
class GatedRunner implements TurnRunner {
  readonly #turns = new Map<string, { input: TurnInput; finish: (o: TurnOutput) => void }>();

  run(input: TurnInput): Promise<TurnOutput> {
    return new Promise((resolve, reject) => {
      this.#turns.set(`${input.job.id}/${input.turn.seq}`, { input, finish: resolve });
      input.signal.addEventListener('abort', () => reject(new Error('aborted')));
    });
  }

  started(jobId: string, seq = 1): Promise<TurnInput> {
    return waitFor(`turn ${seq} of ${jobId} to start`, async () => {
      return this.#turns.get(`${jobId}/${seq}`)?.input;
    });
  }

  async emit(jobId: string, step: string, seq = 1): Promise<void> {
    await (await this.started(jobId, seq)).emit('command.started', { command: step, cwd: '.' });
  }

  async finish(jobId: string, seq = 1): Promise<void> {
    await this.started(jobId, seq);
    this.#turns.get(`${jobId}/${seq}`)?.finish({ summary: `turn ${seq} done` });
  }
}

const parse = (e: SseEvent) => JSON.parse(e.data) as EventRecord;

interface Fixture {
  svc: TestService;
  runner: GatedRunner;
  projectId: string;
  key: string;
}

async function fixture(svc: TestService, runner: GatedRunner): Promise<Fixture> {
  const project = await svc.createProject();
  const { key } = await svc.createProjectKey(project.id);
  return { svc, runner, projectId: project.id, key };
}

async function createJob(fx: Fixture, prompt = 'work'): Promise<string> {
  const res = await fx.svc.request('POST', `/v2/agent/${fx.projectId}/job`, {
    key: fx.key,
    body: { prompt },
  });
  assert.equal(res.status, 201, res.text);
  return res.json.id as string;
}

function eventsUrl(fx: Fixture, jobId: string, query = '', base = fx.svc.url): string {
  return `${base}/v2/agent/${fx.projectId}/job/${jobId}/events${query}`;
}

async function listed(fx: Fixture, jobId: string): Promise<EventRecord[]> {
  const res = await fx.svc.request('GET', `/v2/agent/${fx.projectId}/job/${jobId}/events`, {
    key: fx.key,
  });
  return res.json.events ?? [];
}

describe('live event stream', () => {
  const runner = new GatedRunner();
  let fx: Fixture;
  before(async () => {
    const svc = await startTestService({
      runner,
      env: {
        ERRAND_CONCURRENCY: '16',
        ERRAND_STREAMS_PER_KEY: '3',
        ERRAND_STREAM_KEEPALIVE_SECONDS: '0.2',
        ERRAND_METRICS_TOKEN: 'metrics-token-for-the-stream-tests',
      },
    });
    fx = await fixture(svc, runner);
  });
  after(async () => {
    await fx?.svc.close();
  });

  test("a job's events in order, each as id, event and data, until it completes", async () => {
    const jobId = await createJob(fx);
    const stream = await openSse(eventsUrl(fx, jobId), { key: fx.key });
    assert.equal(stream.status, 200);
    assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
    assert.equal(stream.headers['cache-control'], 'no-store');
    assert.ok(stream.headers['x-request-id']);
    await stream.take(2);
    await fx.runner.emit(jobId, 'one');
    await fx.runner.emit(jobId, 'two');
    await stream.take(4);
    await fx.runner.finish(jobId);
    await stream.ended;
    const types = stream.events.map((e) => e.event);
    assert.deepEqual(types, [
      'job.created',
      'turn.started',
      'command.started',
      'command.started',
      'turn.finished',
      'job.completed',
    ]);
    // The stream's events are the log's, byte for byte as JSON, with the seq as the id.
    const log = await listed(fx, jobId);
    assert.deepEqual(stream.events.map(parse), log);
    assert.deepEqual(
      stream.events.map((e) => e.id),
      log.map((e) => String(e.seq)),
    );
    // Status changes carry the job's record as it was.
    const created = parse(stream.events[0] as SseEvent).data as { job: JobRecord };
    assert.equal(created.job.id, jobId);
    assert.equal(created.job.status, 'active');
    const completed = parse(stream.events[5] as SseEvent).data as { job: JobRecord };
    assert.equal(completed.job.status, 'completed');
    const now = await fx.svc.request('GET', `/v2/agent/${fx.projectId}/job/${jobId}`, {
      key: fx.key,
    });
    assert.deepEqual(completed.job, now.json);
  });

  test('Last-Event-ID and ?after= resume with no gap and no duplicate; Last-Event-ID wins', async () => {
    const jobId = await createJob(fx);
    await fx.runner.emit(jobId, 'a');
    await fx.runner.emit(jobId, 'b');
    const log = await listed(fx, jobId);
    assert.equal(log.length, 4);
    const second = log[1] as EventRecord;
    const byHeader = await openSse(eventsUrl(fx, jobId, '?after=0'), {
      key: fx.key,
      headers: { 'last-event-id': String(second.seq) },
    });
    const byQuery = await openSse(eventsUrl(fx, jobId, `?after=${second.seq}`), {
      key: fx.key,
    });
    for (const stream of [byHeader, byQuery]) await stream.take(2);
    await fx.runner.emit(jobId, 'c');
    await fx.runner.finish(jobId);
    for (const stream of [byHeader, byQuery]) {
      await stream.ended;
      assert.deepEqual(
        stream.events.map(parse),
        (await listed(fx, jobId)).filter((e) => e.seq > second.seq),
      );
    }
  });

  test('a terminal job: the rest of its log then the end; nothing left is a 204', async () => {
    const jobId = await createJob(fx);
    await fx.runner.finish(jobId);
    await waitFor('the job to complete', async () =>
      (await listed(fx, jobId)).some((e) => e.type === 'job.completed') ? true : undefined,
    );
    const log = await listed(fx, jobId);
    const replay = await openSse(eventsUrl(fx, jobId), { key: fx.key });
    assert.equal(replay.status, 200);
    await replay.ended;
    assert.deepEqual(replay.events.map(parse), log);
    const last = (log.at(-1) as EventRecord).seq;
    const done = await openSse(eventsUrl(fx, jobId), {
      key: fx.key,
      headers: { 'last-event-id': String(last) },
    });
    // 204 tells a browser's EventSource not to reconnect.
    assert.equal(done.status, 204);
    assert.equal(done.body, '');
  });

  test('a follow-up reactivates the job: a new stream follows it to its end', async () => {
    const jobId = await createJob(fx);
    await fx.runner.finish(jobId);
    const first = await openSse(eventsUrl(fx, jobId), { key: fx.key });
    await first.ended;
    const lastId = first.events.at(-1)?.id as string;
    const res = await fx.svc.request('POST', `/v2/agent/${fx.projectId}/job/${jobId}/message`, {
      key: fx.key,
      body: { prompt: 'more' },
    });
    assert.equal(res.status, 200, res.text);
    const next = await openSse(eventsUrl(fx, jobId), {
      key: fx.key,
      headers: { 'last-event-id': lastId },
    });
    assert.equal(next.status, 200);
    await fx.runner.finish(jobId, 2);
    await next.ended;
    assert.deepEqual(
      next.events.map((e) => e.event),
      ['job.reactivated', 'turn.started', 'turn.finished', 'job.completed'],
    );
  });

  test('archiving ends the stream after job.archived', async () => {
    const jobId = await createJob(fx);
    await fx.runner.started(jobId);
    const stream = await openSse(eventsUrl(fx, jobId), { key: fx.key });
    await stream.take(2);
    const res = await fx.svc.request('POST', `/v2/agent/${fx.projectId}/job/${jobId}/archive`, {
      key: fx.key,
    });
    assert.equal(res.status, 200, res.text);
    await stream.ended;
    assert.equal(stream.events.at(-1)?.event, 'job.archived');
    const data = parse(stream.events.at(-1) as SseEvent).data as { job: JobRecord };
    assert.equal(data.job.status, 'archived');
  });

  test('comments keep an idle stream open', async () => {
    const jobId = await createJob(fx);
    const stream = await openSse(eventsUrl(fx, jobId), { key: fx.key });
    await waitFor('two keep-alive comments', async () =>
      stream.comments.filter((c) => c === 'keep-alive').length >= 2 ? true : undefined,
    );
    stream.close();
    await fx.runner.finish(jobId);
  });

  test('refusals are JSON errors: bad Last-Event-ID, unknown job, other project, no key', async () => {
    const jobId = await createJob(fx);
    const bad = await openSse(eventsUrl(fx, jobId), {
      key: fx.key,
      headers: { 'last-event-id': 'x1' },
    });
    assert.equal(bad.status, 400);
    assert.equal(JSON.parse(bad.body).code, 'bad_request');
    assert.match(JSON.parse(bad.body).error, /Last-Event-ID/);
    const missing = await openSse(eventsUrl(fx, 'job_00000000000000000000'), { key: fx.key });
    assert.equal(missing.status, 404);
    const other = await fixture(fx.svc, fx.runner);
    const foreign = await openSse(eventsUrl(fx, jobId), { key: other.key });
    assert.equal(foreign.status, 403);
    const anonymous = await openSse(eventsUrl(fx, jobId));
    assert.equal(anonymous.status, 401);
    await fx.runner.finish(jobId);
  });

  test('open streams per key are limited (429); closing one frees its place', async () => {
    const { key } = await fx.svc.createProjectKey(fx.projectId);
    const jobId = await createJob(fx);
    const open: SseStream[] = [];
    for (let i = 0; i < 3; i++) {
      const stream = await openSse(eventsUrl(fx, jobId), { key });
      assert.equal(stream.status, 200);
      open.push(stream);
    }
    const refused = await openSse(eventsUrl(fx, jobId), { key });
    assert.equal(refused.status, 429);
    assert.equal(JSON.parse(refused.body).code, 'rate_limited');
    assert.match(JSON.parse(refused.body).error, /ERRAND_STREAMS_PER_KEY/);
    // Another key is counted on its own.
    const otherKey = await openSse(eventsUrl(fx, jobId), { key: fx.key });
    assert.equal(otherKey.status, 200);
    open[0]?.close();
    const again = await waitFor('a place to free up', async () => {
      const stream = await openSse(eventsUrl(fx, jobId), { key });
      if (stream.status === 200) return stream;
      return undefined;
    });
    for (const stream of [...open, otherKey, again]) stream.close();
    await fx.runner.finish(jobId);
  });

  test('a revoked key loses its streams', async () => {
    const { id, key } = await fx.svc.createProjectKey(fx.projectId);
    const jobId = await createJob(fx);
    const stream = await openSse(eventsUrl(fx, jobId), { key });
    assert.equal(stream.status, 200);
    const res = await fx.svc.request('POST', `/v2/admin/keys/${id}/revoke`);
    assert.equal(res.status, 200, res.text);
    await stream.ended;
    await fx.runner.finish(jobId);
  });

  test('a personal token loses its streams when revoked or its user is deactivated', async () => {
    const ctx = fx.svc.service.ctx;
    const user = await upsertUser(
      ctx.db,
      {
        issuer: 'https://idp.example.test',
        subject: 'streamer',
        email: null,
        emailVerified: false,
        name: null,
        groups: [],
      },
      false,
    );
    await ctx.db
      .insertInto('project_roles')
      .values({ project_id: fx.projectId, grantee_kind: 'user', grantee: user.id, role: 'viewer' })
      .execute();
    const token = async () =>
      createToken(ctx.db, user.id, {
        name: 'stream',
        expiresInDays: 1,
        projectIds: null,
        readOnly: true,
      });
    const [revoked, kept] = [await token(), await token()];
    const jobId = await createJob(fx);
    const first = await openSse(eventsUrl(fx, jobId), { key: revoked.token });
    const second = await openSse(eventsUrl(fx, jobId), { key: kept.token });
    assert.equal(first.status, 200);
    assert.equal(second.status, 200);
    await revokeToken(ctx.db, user.id, revoked.row.id);
    await first.ended;
    await ctx.db
      .updateTable('users')
      .set({ deactivated_at: new Date() })
      .where('id', '=', user.id)
      .execute();
    await second.ended;
    await fx.runner.finish(jobId);
  });

  test('a reader that takes nothing holds back at most a batch, then gets every event', async () => {
    const jobId = await createJob(fx);
    const stream = await openSse(eventsUrl(fx, jobId), { key: fx.key });
    await stream.take(2);
    stream.response?.pause();
    const ctx = fx.svc.service.ctx;
    const padding = 'x'.repeat(4_000);
    const count = 6_000;
    // 24 MB of events, written by one statement as a running turn would write them.
    await sql`
        INSERT INTO events (job_id, turn, type, data)
        SELECT ${jobId}, 1, 'command.finished', jsonb_build_object(
          'command', n::text, 'exitCode', 0, 'timedOut', false, 'outputTail', ${padding}::text)
        FROM generate_series(1, ${count}) AS n`.execute(ctx.db);
    await recordProgress(ctx, jobId, 1, 'command.finished', {
      command: 'last',
      exitCode: 0,
      timedOut: false,
      outputTail: '',
    });
    const buffered = async () => {
      const res = await fetch(`${fx.svc.url}/metrics`, {
        headers: { authorization: 'Bearer metrics-token-for-the-stream-tests' },
      });
      const line = (await res.text())
        .split('\n')
        .find((l) => l.startsWith('errand_event_stream_buffered_bytes '));
      return Number(line?.split(' ')[1]);
    };
    // The sentinel: a second stream that resumes just before the last event gets it. A job's
    // streams are written from one read at a time, from the lowest cursor among those not held
    // back; so the second stream gets the last event only once the paused one is held back or
    // has been written everything.
    const { seq: lastSeq } = await ctx.db
      .selectFrom('events')
      .select('seq')
      .where('job_id', '=', jobId)
      .orderBy('seq', 'desc')
      .limit(1)
      .executeTakeFirstOrThrow();
    const witness = await openSse(eventsUrl(fx, jobId, `?after=${Number(lastSeq) - 1}`), {
      key: fx.key,
    });
    const [witnessed] = await witness.take(1, 60_000);
    assert.equal(witnessed?.id, String(lastSeq));
    witness.close();
    const held = await buffered();
    // One batch (500 events of ~4 KB) at most, not the 24 MB written.
    assert.ok(held < 3_000_000, `${held} bytes held for a paused reader`);
    stream.response?.resume();
    await stream.take(2 + count + 1, 60_000);
    const seqs = stream.events.map((e) => Number(e.id));
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
    );
    assert.equal(new Set(seqs).size, seqs.length);
    assert.deepEqual(
      stream.events.slice(2).map((e) => (parse(e).data as { command: string }).command),
      [...Array.from({ length: count }, (_, i) => String(i + 1)), 'last'],
    );
    stream.close();
    await fx.runner.finish(jobId);
  });
});

describe('live event stream across processes', () => {
  const runner = new GatedRunner();
  let worker: TestService;
  let api: TestService;
  let fx: Fixture;
  before(async () => {
    worker = await startTestService({ runner });
    // A second service on the same database with no worker: the API process a client reaches.
    api = await startTestService({
      database: worker.database,
      adminKey: worker.adminKey,
      worker: false,
    });
    fx = await fixture(worker, runner);
  });
  after(async () => {
    await api?.stop();
    await worker?.close();
  });

  test("an event a worker writes reaches another process's stream within a second", async () => {
    const jobId = await createJob(fx);
    await runner.started(jobId);
    const stream = await openSse(eventsUrl(fx, jobId, '', api.url), { key: fx.key });
    await stream.take(2);
    const latencies: number[] = [];
    for (let i = 0; i < 5; i++) {
      const sent = Date.now();
      await runner.emit(jobId, `step ${i}`);
      await stream.take(3 + i, 2_000);
      latencies.push(Date.now() - sent);
    }
    assert.ok(Math.max(...latencies) < 1_000, `latencies ${latencies.join(', ')} ms`);
    await runner.finish(jobId);
    await stream.ended;
    assert.equal(stream.events.at(-1)?.event, 'job.completed');
  });

  test('a lost LISTEN connection is replaced and what was missed is sent', async () => {
    const jobId = await createJob(fx);
    await runner.started(jobId);
    const stream = await openSse(eventsUrl(fx, jobId, '', api.url), { key: fx.key });
    await stream.take(2);
    const admin = new pg.Client({ connectionString: api.database.databaseUrl });
    await admin.connect();
    try {
      const killed = await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE query = 'LISTEN errand_events' AND datname = current_database()`,
      );
      assert.ok((killed.rowCount ?? 0) >= 1, 'no LISTEN connection found');
    } finally {
      await admin.end();
    }
    // Written while the API process may not be listening: the resync after it reconnects
    // reads it.
    await runner.emit(jobId, 'while away');
    await stream.take(3, 15_000);
    await runner.finish(jobId);
    await stream.ended;
    assert.deepEqual(
      stream.events.map((e) => e.event),
      ['job.created', 'turn.started', 'command.started', 'turn.finished', 'job.completed'],
    );
  });

  test('stopping an API process ends its streams cleanly', async () => {
    const other = await startTestService({
      database: worker.database,
      adminKey: worker.adminKey,
      worker: false,
    });
    const jobId = await createJob(fx);
    const stream = await openSse(eventsUrl(fx, jobId, '', other.url), { key: fx.key });
    await stream.take(1);
    const started = Date.now();
    await other.stop();
    await stream.ended;
    assert.ok(Date.now() - started < 5_000, 'the stop waited for the stream');
    await runner.finish(jobId);
  });
});
