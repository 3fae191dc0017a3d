// The job lifecycle through the HTTP API, with the real queue and database and a scripted
// turn runner: ordering of follow-ups, archive aborting a running turn, retries and failures.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ExternalError } from '../../src/errors.ts';
import type { TurnInput, TurnOutput } from '../../src/jobs/runner.ts';
import { TurnFailedError } from '../../src/jobs/runner.ts';
import { afterQueuedTurns, createJob, turnsEnded, untilStatus } from '../support/jobs.ts';
import { RecordingRunner, type TurnCall, work } from '../support/runners.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

type Script = (input: TurnInput, call: TurnCall) => Promise<TurnOutput>;

// Each job's first prompt names the script its turns follow, so one service serves all tests.
const scripts: Record<string, Script> = {
  quick: async (input) => {
    await work(150, input.signal);
    return { summary: `did ${input.turn.prompt}` };
  },
  slow: async (input) => {
    await work(60_000, input.signal);
    return { summary: 'slow turn finished' };
  },
  flaky: async (input) => {
    if (input.turn.attempts === 1) {
      throw new ExternalError('model', 'model API answered 503', { transient: true });
    }
    return { summary: 'worked on the second attempt' };
  },
  broken: async () => {
    throw new TurnFailedError('the repository https://example.invalid/x.git does not exist');
  },
  down: async () => {
    throw new ExternalError('model', 'model API unreachable', { transient: true });
  },
};

function scriptOf(prompt: string): Script {
  const name = prompt.split(':')[0] ?? '';
  const script = scripts[name];
  if (!script) throw new Error(`no script '${name}'`);
  return script;
}

describe('job lifecycle', () => {
  let svc: TestService;
  let projectId: string;
  const runner = new RecordingRunner(async (input, call) => {
    const first = await svc.service.ctx.db
      .selectFrom('turns')
      .select('prompt')
      .where('job_id', '=', input.job.id)
      .where('seq', '=', 1)
      .executeTakeFirstOrThrow();
    return scriptOf(first.prompt)(input, call);
  });

  before(async () => {
    svc = await startTestService({
      runner,
      env: { ERRAND_TURN_RETRIES: '2', ERRAND_CONCURRENCY: '4' },
    });
    projectId = (await svc.createProject()).id;
  });
  after(async () => {
    await svc?.close();
  });

  const create = (prompt: string) => createJob(svc, projectId, prompt);
  const message = async (jobId: string, prompt: string) => {
    const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
      body: { prompt },
    });
    assert.equal(res.status, 200, res.text);
    return res;
  };
  const getJob = async (jobId: string) =>
    (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json;
  const until = (jobId: string, status: string, timeoutMs?: number) =>
    untilStatus(svc, projectId, jobId, status, timeoutMs ? { timeoutMs } : {});
  const turns = (jobId: string) =>
    svc.service.ctx.db
      .selectFrom('turns')
      .selectAll()
      .where('job_id', '=', jobId)
      .orderBy('seq')
      .execute();
  const events = async (jobId: string) =>
    (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ?? [];

  test('three follow-ups sent at once run one at a time, in order', async () => {
    const jobId = await create('quick: first');
    await message(jobId, 'quick: second');
    await message(jobId, 'quick: third');
    await message(jobId, 'quick: fourth');
    const job = await until(jobId, 'completed');
    assert.equal(job.turns, 4);
    const calls = runner.calls.filter((c) => c.jobId === jobId);
    assert.deepEqual(
      calls.map((c) => c.prompt),
      ['quick: first', 'quick: second', 'quick: third', 'quick: fourth'],
    );
    for (let i = 1; i < calls.length; i++) {
      const prev = calls[i - 1];
      const cur = calls[i];
      assert.ok(
        prev?.endedAt !== undefined && cur !== undefined && prev.endedAt <= cur.startedAt,
        'turns overlapped',
      );
    }
    assert.deepEqual(
      (await turns(jobId)).map((t) => [t.seq, t.state, t.summary]),
      [
        [1, 'done', 'did quick: first'],
        [2, 'done', 'did quick: second'],
        [3, 'done', 'did quick: third'],
        [4, 'done', 'did quick: fourth'],
      ],
    );
  });

  test('turns of different jobs run in parallel', async () => {
    const before = runner.maxRunning;
    const ids = await Promise.all([create('quick: a'), create('quick: b'), create('quick: c')]);
    for (const id of ids) await until(id, 'completed');
    assert.ok(
      Math.max(before, runner.maxRunning) >= 2,
      `at most ${runner.maxRunning} turn ran at once`,
    );
  });

  test('archive during a running turn aborts it within 5 s, and nothing runs after', async () => {
    const jobId = await create('slow: take your time');
    await message(jobId, 'slow: queued behind');
    const call = await waitFor('the turn to start', async () =>
      runner.calls.find((c) => c.jobId === jobId),
    );
    const endedArchived = await turnsEnded(svc, 'archived');
    const archivedAt = Date.now();
    const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/archive`);
    assert.equal(res.status, 200);
    assert.equal(res.json.status, 'archived');
    assert.ok(res.json.archivedAt);
    await waitFor('the turn to stop', async () => (call.endedAt ? true : undefined), 5_000);
    assert.equal(call.aborted, true);
    assert.ok((call.endedAt ?? Infinity) - archivedAt < 5_000);
    // The sentinel: the worker has let go of the aborted turn, then a job queued after that
    // has run two turns; a queued turn of the archived job would have been taken before them.
    await waitFor('the worker to let go of the aborted turn', async () =>
      (await turnsEnded(svc, 'archived')) > endedArchived ? true : undefined,
    );
    await afterQueuedTurns(svc, projectId, ['quick: sentinel', 'quick: sentinel follow-up']);
    assert.equal(
      runner.calls.filter((c) => c.jobId === jobId).length,
      1,
      'a turn ran after the archive',
    );
    assert.deepEqual(
      (await turns(jobId)).map((t) => t.state),
      ['cancelled', 'cancelled'],
    );
    const job = await getJob(jobId);
    assert.equal(job.status, 'archived');
    const refused = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
      body: { prompt: 'slow: more' },
    });
    assert.equal(refused.status, 409);
  });

  test('a transient error is retried and the job completes', async () => {
    const jobId = await create('flaky: try twice');
    const job = await until(jobId, 'completed');
    assert.equal(job.error, null);
    const [turn] = await turns(jobId);
    assert.equal(turn?.attempts, 2);
    assert.equal(turn?.summary, 'worked on the second attempt');
    const log = await events(jobId);
    assert.deepEqual(
      log.map((e) => e.type),
      [
        'job.created',
        'turn.started',
        'turn.retrying',
        'turn.started',
        'turn.finished',
        'job.completed',
      ],
    );
    // A retry is no change of the job's status; its completion carries the completed record.
    assert.deepEqual(log.at(-1)?.data, { job });
  });

  test('an unrecoverable error fails the job with its message, without retries', async () => {
    const jobId = await create('broken: go');
    const job = await until(jobId, 'failed');
    assert.equal(job.error, 'the repository https://example.invalid/x.git does not exist');
    const [turn] = await turns(jobId);
    assert.equal(turn?.attempts, 1);
    assert.equal(turn?.state, 'failed');
  });

  test('a transient error that persists fails the job after the configured retries', async () => {
    const jobId = await create('down: go');
    const job = await until(jobId, 'failed', 30_000);
    assert.equal(job.error, 'model API unreachable');
    const [turn] = await turns(jobId);
    assert.equal(turn?.attempts, 3);
  });

  test('a follow-up reactivates a failed job and runs', async () => {
    const jobId = await create('broken: first');
    await until(jobId, 'failed');
    const res = await message(jobId, 'broken: again');
    assert.equal(res.json.status, 'active');
    const job = await until(jobId, 'failed');
    assert.equal(job.turns, 2);
    assert.deepEqual(
      (await turns(jobId)).map((t) => t.state),
      ['failed', 'failed'],
    );
    const changes = (await events(jobId)).filter((e) => e.type.startsWith('job.'));
    assert.deepEqual(
      changes.map((e) => e.type),
      ['job.created', 'job.failed', 'job.reactivated', 'job.failed'],
    );
    // The reactivation carries the record the follow-up answered with.
    assert.deepEqual(changes[2]?.data, { job: res.json });
    assert.deepEqual(changes[3]?.data, { job });
  });

  test('a follow-up to a completed job makes it active, then completed again', async () => {
    const jobId = await create('quick: one');
    await until(jobId, 'completed');
    const res = await message(jobId, 'quick: two');
    assert.equal(res.json.status, 'active');
    const job = await until(jobId, 'completed');
    assert.equal(runner.calls.filter((c) => c.jobId === jobId).length, 2);
    const changes = (await events(jobId)).filter((e) => e.type.startsWith('job.'));
    assert.deepEqual(
      changes.map((e) => e.type),
      ['job.created', 'job.completed', 'job.reactivated', 'job.completed'],
    );
    assert.deepEqual(changes[2]?.data, { job: res.json });
    assert.deepEqual(changes[3]?.data, { job });
  });
});
