// Dead workers and retries. Real `errand worker` processes on PostgreSQL: the one holding a
// turn is killed with SIGKILL while the turn waits on the model, and another takes the turn up
// well before the configured retry delay (a dead worker's turn does not wait out the backoff
// meant for failing services), then writes the review link under ERRAND_PUBLIC_URL. A worker
// without ERRAND_PUBLIC_URL refuses to start. And real transient failures still back off, by
// the configured delay doubling, without holding a worker while they wait.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TestClock } from 'pg-boss';
import { ExternalError } from '../../src/errors.ts';
import type { TurnInput, TurnOutput } from '../../src/jobs/runner.ts';
import { dynamic, type FakeLlm, reply, startFakeLlm, toolCalls } from '../support/fake-llm.ts';
import { makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { createJob, untilStatus } from '../support/jobs.ts';
import { exited, runErrand, startWorkerProcess } from '../support/process.ts';
import { runFast } from '../support/queue-clock.ts';
import { RecordingRunner, type TurnCall } from '../support/runners.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const MODEL_KEY = 'sk-test-worker-death-5c1d9e';

/** Starts `errand worker` and resolves once it has started (its "errand started" log line). */
describe('a worker killed mid-turn (real worker processes)', () => {
  let tmp: string;
  let origin: Origin;
  let llm: FakeLlm;
  let svc: TestService;
  const workers: ChildProcess[] = [];

  before(async () => {
    tmp = await makeTempDir('worker-death');
    origin = await makeOrigin(tmp);
    llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-test'] });
    svc = await startTestService({
      worker: false,
      env: {
        OPENAI_API_KEY: MODEL_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        // Far longer than a dead worker may take to be replaced: before the fix, the queue's
        // own retry delay (this, doubled, with jitter) came on top of the heartbeat timeout.
        ERRAND_TURN_RETRY_DELAY_SECONDS: '30',
      },
    });
  });
  after(async () => {
    for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
    await Promise.all(workers.map((w) => exited(w)));
    await svc?.close();
    await llm?.close();
    await removeDir(tmp);
  });

  test('another worker takes the turn up within 20 s and links to ERRAND_PUBLIC_URL', async () => {
    const project = await svc.createProject({ repository: origin.url });
    const workerEnv = (machine: string) => ({
      ...svc.env,
      ERRAND_DATA_DIR: path.join(tmp, machine),
      ERRAND_PUBLIC_URL: svc.url,
    });
    const first = await startWorkerProcess(workerEnv('machine-a'));
    workers.push(first);
    llm.script(
      // The first worker's model call is never answered: it dies waiting on it.
      dynamic(async (request) => {
        await waitFor('the dying worker to hang up', async () => request.aborted || undefined);
        return { type: 'error', status: 500 };
      }),
      toolCalls([{ name: 'write_file', input: { path: 'NOTES.md', content: 'notes\n' } }]),
      reply('Add notes'),
    );
    const created = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      body: { prompt: 'Add notes' },
    });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    // Only the first worker runs yet, so the turn waiting on the model is its turn.
    await llm.waitFor((r) => r.index === 0, 60_000);
    const second = await startWorkerProcess(workerEnv('machine-b'));
    workers.push(second);

    const killedAt = Date.now();
    first.kill('SIGKILL');
    await exited(first);
    await llm.waitFor((r) => r.index === 1, 60_000);
    const pickedUpAfter = Date.now() - killedAt;
    // Measured 9–12 s (bench/worker-death); loose for a loaded machine, and far below the
    // 8 + 30 s it took when the queue's retry delay applied to a dead worker's turn.
    assert.ok(pickedUpAfter < 20_000, `the turn was taken up ${pickedUpAfter} ms after the kill`);

    const job = await waitFor(
      'the job to complete on the second worker',
      async () => {
        const res = await svc.request('GET', `/v2/agent/${project.id}/job/${jobId}`);
        assert.notEqual(res.json.status, 'failed', res.json.error ?? '');
        return res.json.status === 'completed' ? res.json : undefined;
      },
      60_000,
    );
    assert.equal(job.error, null);
    assert.match(job.prLink ?? '', new RegExp(`^${svc.url}/review/${jobId}\\?token=[0-9a-f]{64}$`));
    const page = await fetch(job.prLink ?? '');
    assert.equal(page.status, 200);
    const turn = await svc.service.ctx.db
      .selectFrom('turns')
      .selectAll()
      .where('job_id', '=', jobId)
      .executeTakeFirstOrThrow();
    assert.equal(turn.state, 'done');
    assert.equal(turn.attempts, 2);
    assert.equal(origin.head(`errand/${jobId}`) !== null, true);
    llm.assertDone();
  });
});

describe('errand worker without ERRAND_PUBLIC_URL', () => {
  test('refuses to start, saying what to set, with exit code 1', async () => {
    // Nothing listens on port 9: the refusal must come before any connection is tried.
    const dataDir = await makeTempDir('no-public-url');
    after(() => removeDir(dataDir));
    const child = runErrand(['worker'], {
      DATABASE_URL: 'postgres://errand@127.0.0.1:9/errand',
      ERRAND_PUBLIC_URL: '',
      ERRAND_DATA_DIR: dataDir,
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await exited(child);
    assert.equal(code, 1);
    assert.equal(stdout, '');
    assert.match(stderr, /^errand: errand worker needs ERRAND_PUBLIC_URL: /);
    assert.doesNotMatch(stderr, /\n\s+at /, 'a stack trace was printed');
  });
});

describe('transient failures back off', () => {
  let svc: TestService;
  let projectId: string;
  // The queue's time, run ten times faster than real time: the backoffs pass in a tenth of
  // theirs, and the gaps are measured on it.
  const clock = new TestClock();
  let stopClock: (() => Promise<void>) | undefined;
  const scripts: Record<string, (input: TurnInput) => Promise<TurnOutput>> = {
    down: async () => {
      throw new ExternalError('model', 'model API answered 503', { transient: true });
    },
    limited: async (input) => {
      if (input.turn.attempts === 1)
        throw new ExternalError('model', 'model API answered 429', {
          transient: true,
          retryAfterSeconds: 8,
        });
      return { summary: 'worked after the rate limit' };
    },
    quick: async () => ({ summary: 'quick' }),
  };
  const runner = new RecordingRunner(
    async (input) => {
      const script = scripts[input.turn.prompt];
      if (!script) throw new Error(`no script '${input.turn.prompt}'`);
      return script(input);
    },
    () => clock.now(),
  );

  before(async () => {
    svc = await startTestService({
      clock,
      runner,
      env: {
        ERRAND_TURN_RETRY_DELAY_SECONDS: '3',
        ERRAND_TURN_RETRIES: '2',
        // One turn at a time: a worker waiting out a backoff would block every other job.
        ERRAND_CONCURRENCY: '1',
      },
    });
    projectId = (await svc.createProject()).id;
    stopClock = runFast(clock);
  });
  after(async () => {
    await stopClock?.();
    await svc?.close();
  });

  const create = (prompt: string) => createJob(svc, projectId, prompt);
  const until = (jobId: string, status: string) =>
    untilStatus(svc, projectId, jobId, status, { timeoutMs: 60_000 });
  const callsOf = (jobId: string): TurnCall[] => runner.calls.filter((c) => c.jobId === jobId);
  /** From the end of each attempt to the start of the next. */
  const gaps = (calls: TurnCall[]) =>
    calls.slice(1).map((c, i) => c.startedAt - (calls[i]?.endedAt ?? Number.NaN));

  test('retries wait the configured delay, doubled each time, and free the worker', async () => {
    const jobId = await create('down');
    const retrying = async () =>
      (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events?.filter(
        (e) => e.type === 'turn.retrying',
      ) ?? [];
    await waitFor('the first retry to be scheduled', async () =>
      (await retrying()).length > 0 ? true : undefined,
    );
    // One turn at a time: this job runs during the backoff only if the backoff holds no
    // worker (a worker sleeping it out would take the older job's retry first).
    const other = await create('quick');
    await until(other, 'completed');
    const job = await until(jobId, 'failed');
    assert.equal(job.error, 'model API answered 503');
    const calls = callsOf(jobId);
    assert.equal(calls.length, 3);
    const [otherCall] = callsOf(other);
    assert.ok(
      otherCall && otherCall.startedAt < (calls[1]?.startedAt ?? 0),
      'the other job waited for the backoff',
    );
    const [first, second] = gaps(calls);
    // From below only, on the queue's clock: a retry may start late, never early.
    assert.ok((first ?? 0) >= 3_000, `the first retry came ${first} ms after the failure`);
    assert.ok((second ?? 0) >= 6_000, `the second retry came ${second} ms after the failure`);
    const delays = (await retrying()).map(
      (e) => (e.data as { retryInSeconds: number }).retryInSeconds,
    );
    assert.equal(delays.length, 2);
    assert.ok((delays[0] ?? 0) >= 3 && (delays[0] ?? 0) <= 4, `delays ${delays}`);
    assert.ok((delays[1] ?? 0) >= 6 && (delays[1] ?? 0) <= 8, `delays ${delays}`);
  });

  test("a service's Retry-After longer than the backoff is waited out", async () => {
    const jobId = await create('limited');
    const job = await until(jobId, 'completed');
    assert.equal(job.error, null);
    const [gap] = gaps(callsOf(jobId));
    assert.ok((gap ?? 0) >= 8_000, `the retry came ${gap} ms after the failure`);
  });
});
