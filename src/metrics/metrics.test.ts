// /metrics as an operator scrapes it, and the log lines a request and a turn leave: on a real
// service with a scripted turn runner.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase } from '../../test/support/databases.ts';
import { assertError } from '../../test/support/route-cases.ts';
import { RecordingRunner } from '../../test/support/runners.ts';
import {
  http,
  startTestService,
  type TestService,
  testEnv,
  waitFor,
} from '../../test/support/service.ts';
import { loadConfig } from '../config.ts';
import { TurnFailedError } from '../jobs/runner.ts';
import { createLogger } from '../log.ts';
import { startService } from '../service.ts';
import { Metrics } from './metrics.ts';

const TOKEN = 'metrics-token-0123456789abcdef';

/** The value of the first sample line `series` starts (exact name and labels), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('metrics and logs', () => {
  let svc: TestService;
  let logged = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged += chunk.toString();
      done();
    },
  });
  const lines = () =>
    logged
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  // Prompts starting with "fail" fail for good; the rest finish at once.
  const runner = new RecordingRunner(async (input) => {
    await input.emit('workspace.ready', { base: 'a1', head: 'a1', continued: false });
    if (input.turn.prompt.startsWith('fail')) throw new TurnFailedError('scripted failure');
    await input.emit('turn.no_changes', {});
    return { summary: 'done' };
  });

  before(async () => {
    svc = await startTestService({
      runner,
      log: createLogger('info', sink),
      env: { ERRAND_METRICS_TOKEN: TOKEN, ERRAND_METRICS_PORT: '0' },
    });
  });
  after(async () => {
    await svc?.close();
  });

  const scrape = async (url = `${svc.url}/metrics`) => {
    const res = await http(url.replace(/\/metrics$/, ''), 'GET', '/metrics', { key: TOKEN });
    assert.equal(res.status, 200, res.text);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    return res.text;
  };

  const runJob = async (projectId: string, prompt: string, status: string) => {
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, { body: { prompt } });
    assert.equal(created.status, 201, created.text);
    await waitFor(`the job to be ${status}`, async () => {
      const res = await svc.request('GET', `/v2/agent/${projectId}/job/${created.json.id}`);
      return res.json.status === status ? true : undefined;
    });
    return created.json.id as string;
  };

  test('a scrape shows requests by route, jobs by status, the queue, turns and the process', async () => {
    const project = await svc.createProject();
    await runJob(project.id, 'finish', 'completed');
    await runJob(project.id, 'fail for good', 'failed');
    const text = await scrape();
    const created = sample(
      text,
      `errand_http_requests_total{method="POST",route="/v2/agent/:projectId/job",status="201"}`,
    );
    assert.ok((created ?? 0) >= 2, `POST job requests: ${created}`);
    assert.ok(
      (sample(
        text,
        `errand_http_request_duration_seconds_count{method="POST",route="/v2/agent/:projectId/job",status="201"}`,
      ) ?? 0) >= 2,
    );
    // Ids never become labels: one series per route template, however many jobs.
    assert.doesNotMatch(text, /route="[^"]*(job|prj)_[0-9A-Za-z]{20}/);
    assert.ok((sample(text, 'errand_jobs{status="completed"}') ?? 0) >= 1);
    assert.ok((sample(text, 'errand_jobs{status="failed"}') ?? 0) >= 1);
    assert.equal(sample(text, 'errand_jobs{status="archived"}'), 0);
    assert.equal(sample(text, 'errand_turns_queued'), 0);
    assert.equal(sample(text, 'errand_turn_oldest_queued_age_seconds'), 0);
    assert.ok((sample(text, 'errand_turns_total{outcome="done"}') ?? 0) >= 1);
    assert.ok((sample(text, 'errand_turns_total{outcome="failed"}') ?? 0) >= 1);
    assert.ok((sample(text, 'errand_turn_duration_seconds_count{outcome="done"}') ?? 0) >= 1);
    assert.equal(sample(text, 'errand_database_up'), 1);
    assert.notEqual(sample(text, 'errand_workspace_bytes{kind="jobs"}'), undefined);
    assert.notEqual(sample(text, 'errand_workspaces{kind="mirrors"}'), undefined);
    assert.ok((sample(text, 'errand_process_resident_memory_bytes') ?? 0) > 0);
    assert.notEqual(sample(text, 'errand_nodejs_eventloop_lag_seconds'), undefined);
    assert.ok(!text.includes(TOKEN), 'the scrape shows the token');
  });

  test('a turn still queued shows in the queue gauges', async () => {
    // The job row and its queued turn, written as the API writes them, but with no queue
    // entry: no worker takes it, so it stays queued while the scrape reads it. Younger than
    // the 15 s after which the sweeper would settle a turn without a queue entry.
    const project = await svc.createProject();
    const { db } = svc.service.ctx;
    await db
      .insertInto('jobs')
      .values({
        id: 'job_QueuedForMetrics0000',
        project_id: project.id,
        status: 'active',
        repository: project.repository,
        ref: project.ref,
        branch: 'errand/job_QueuedForMetrics0000',
        model: 'anthropic:claude-sonnet-4-5',
        pr_link: null,
        pr_number: null,
        error: null,
        turn_count: 1,
        review_diff: null,
        created_at: new Date(),
        updated_at: new Date(),
        archived_at: null,
      })
      .execute();
    await db
      .insertInto('turns')
      .values({
        job_id: 'job_QueuedForMetrics0000',
        seq: 1,
        prompt: 'waits',
        state: 'queued',
        created_at: new Date(Date.now() - 10_000),
      })
      .execute();
    try {
      const text = await scrape();
      assert.equal(sample(text, 'errand_turns_queued'), 1);
      const age = sample(text, 'errand_turn_oldest_queued_age_seconds') ?? 0;
      assert.ok(age >= 8 && age < 600, `oldest queued age ${age}`);
    } finally {
      await db.deleteFrom('turns').where('job_id', '=', 'job_QueuedForMetrics0000').execute();
      await db.deleteFrom('jobs').where('id', '=', 'job_QueuedForMetrics0000').execute();
    }
  });

  test('the API port serves /metrics only with the token', async () => {
    assertError(await http(svc.url, 'GET', '/metrics', {}), 401, 'unauthorized');
    assertError(
      await http(svc.url, 'GET', '/metrics', { key: 'metrics-token-0123456789abcdeX' }),
      401,
      'unauthorized',
    );
    assertError(await svc.request('GET', '/metrics'), 401, 'unauthorized');
  });

  test('the listener of ERRAND_METRICS_PORT serves the same metrics, behind the token too', async () => {
    const url = svc.service.metricsUrl;
    assert.ok(url, 'no metrics listener');
    assert.notEqual(new URL(url).port, new URL(svc.url).port);
    const text = await scrape(url);
    assert.match(text, /^errand_http_requests_total\{/m);
    const base = url.replace(/\/metrics$/, '');
    const refused = await http(base, 'GET', '/metrics', {});
    assert.equal(refused.status, 401);
    assert.equal(JSON.parse(refused.text).code, 'unauthorized');
    assert.equal((await http(base, 'GET', '/v2/admin/projects', { key: TOKEN })).status, 404);
  });

  test('the listener of ERRAND_METRICS_PORT answers GET /healthz without the token, as the API does', async () => {
    const base = (svc.service.metricsUrl ?? assert.fail('no metrics listener')).replace(
      /\/metrics$/,
      '',
    );
    const api = await http(svc.url, 'GET', '/healthz', {});
    const res = await http(base, 'GET', '/healthz', {});
    assert.equal(res.status, 200, res.text);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.deepEqual(JSON.parse(res.text), JSON.parse(api.text));
    assert.deepEqual(JSON.parse(res.text), { ok: true });
    // The token opens /metrics only: /healthz is the same with a wrong one.
    assert.equal((await http(base, 'GET', '/healthz', { key: 'not-the-token' })).status, 200);
    assert.equal((await http(base, 'GET', '/metrics', {})).status, 401);
    const post = await http(base, 'POST', '/healthz', {});
    assert.equal(post.status, 404);
    assert.equal(JSON.parse(post.text).error, 'only GET /metrics and GET /healthz are served here');
  });

  test('one log line per request: route, status, latency and requestId, and no key', async () => {
    logged = '';
    const res = await svc.request('GET', '/v2/admin/projects');
    assert.equal(res.status, 200);
    const requestId = res.headers.get('x-request-id');
    const mine = lines().filter((l) => l.requestId === requestId);
    assert.equal(mine.length, 1, logged);
    const [line] = mine;
    assert.equal(line?.msg, 'request');
    assert.equal(line?.route, '/v2/admin/projects');
    assert.equal(line?.method, 'GET');
    assert.equal(line?.status, 200);
    assert.equal(typeof line?.ms, 'number');
    // The key with its last character changed (to another one: a key may end in x).
    const last = svc.adminKey.endsWith('x') ? 'y' : 'x';
    const refused = await http(svc.url, 'GET', '/v2/admin/projects', {
      key: `${svc.adminKey.slice(0, -1)}${last}`,
    });
    assert.equal(refused.status, 401);
    assert.ok(!logged.includes(svc.adminKey), 'a key reached the log');
    assert.ok(!logged.includes(svc.adminKey.slice(7, 20)), 'part of a key reached the log');
    assert.ok(!logged.includes(TOKEN), 'the metrics token reached the log');
  });

  test('one log line per turn with its outcome and durations', async () => {
    const project = await svc.createProject();
    logged = '';
    const done = await runJob(project.id, 'finish', 'completed');
    const failed = await runJob(project.id, 'fail again', 'failed');
    const ended = (jobId: string) =>
      lines().filter((l) => l.msg === 'turn ended' && l.jobId === jobId);
    const [ok] = ended(done);
    assert.equal(ended(done).length, 1, logged);
    assert.equal(ok?.outcome, 'done');
    assert.equal(ok?.turn, 1);
    assert.equal(typeof ok?.totalMs, 'number');
    const phases = ok?.phasesMs as Record<string, number>;
    assert.equal(typeof phases.workspace, 'number');
    assert.equal(typeof phases.agent, 'number');
    const [bad] = ended(failed);
    assert.equal(ended(failed).length, 1, logged);
    assert.equal(bad?.outcome, 'failed');
    assert.match(JSON.stringify(bad?.err), /scripted failure/);
  });
});

describe('model metrics', () => {
  test('a step counts its tokens by kind, its cost by model, or a call without a known price', async () => {
    const metrics = new Metrics();
    const tokens = {
      inputTokens: 1000,
      outputTokens: 10,
      cacheReadTokens: 800,
      cacheWriteTokens: 100,
    };
    metrics.modelStep('anthropic:claude-sonnet-4-5', { ...tokens, costUsd: 0.5 });
    metrics.modelStep('anthropic:claude-sonnet-4-5', { ...tokens, costUsd: 0.25 });
    metrics.modelStep('openai-compatible:qwen2.5-coder:7b', { ...tokens, costUsd: null });
    const { body } = await metrics.render();
    const anthropic = 'provider="anthropic"';
    assert.equal(sample(body, `errand_model_calls_total{${anthropic}}`), 2);
    assert.equal(sample(body, `errand_model_tokens_total{${anthropic},kind="input"}`), 2000);
    assert.equal(sample(body, `errand_model_tokens_total{${anthropic},kind="output"}`), 20);
    assert.equal(sample(body, `errand_model_tokens_total{${anthropic},kind="cache_read"}`), 1600);
    assert.equal(sample(body, `errand_model_tokens_total{${anthropic},kind="cache_write"}`), 200);
    assert.equal(
      sample(body, `errand_model_cost_usd_total{${anthropic},model="claude-sonnet-4-5"}`),
      0.75,
    );
    const local = 'provider="openai-compatible",model="qwen2.5-coder:7b"';
    assert.equal(sample(body, `errand_model_unpriced_calls_total{${local}}`), 1);
    assert.equal(sample(body, `errand_model_cost_usd_total{${local}}`), undefined);
  });
});

describe('a worker process alone', () => {
  test('answers GET /healthz on its metrics listener, with no API and no token', async () => {
    const database = await createTestDatabase();
    const env = testEnv(database, {
      ERRAND_METRICS_HOST: '127.0.0.1',
      ERRAND_METRICS_PORT: '0',
      ERRAND_METRICS_TOKEN: TOKEN,
      ERRAND_PUBLIC_URL: 'http://127.0.0.1:9',
    });
    const service = await startService(loadConfig(env), {
      api: false,
      worker: true,
      runner: new RecordingRunner(async () => ({ summary: 'unused' })),
    });
    try {
      assert.equal(service.url, undefined, 'a worker serves no API');
      const base = (service.metricsUrl ?? assert.fail('no metrics listener')).replace(
        /\/metrics$/,
        '',
      );
      const res = await http(base, 'GET', '/healthz', {});
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(JSON.parse(res.text), { ok: true });
      assert.equal((await http(base, 'GET', '/metrics', {})).status, 401);
    } finally {
      await service.stop();
      await database.drop();
    }
  });
});
