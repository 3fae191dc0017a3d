// Workers drain on SIGTERM. Real `errand worker` processes on PostgreSQL, their turns waiting
// on a fake model whose answer the test holds: a turn running when SIGTERM comes finishes and
// its job completes, the worker taking no new turn meanwhile and exiting 0; a turn still
// running when ERRAND_DRAIN_SECONDS is up goes back to the queue and another worker completes
// it at the same attempt (the hand-back used none up). And `errand serve` (embedded) drains
// its workers while its API still accepts jobs.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createEmbeddedDataDir } from '../support/databases.ts';
import { dynamic, type FakeLlm, reply, startFakeLlm } from '../support/fake-llm.ts';
import { makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { exited, killStrays, runErrand, startServe } from '../support/process.ts';
import { http, startTestService, type TestService, waitFor } from '../support/service.ts';

const MODEL_KEY = 'sk-test-drain-4e8a1c';

/** A worker process and everything it has logged so far (JSON lines on stderr). */
interface WorkerRun {
  child: ChildProcess;
  log: () => string;
}

/** Starts `errand worker` and resolves once it has said it started. */
async function startWorker(env: Record<string, string>): Promise<WorkerRun> {
  const child = runErrand(['worker'], { ...env, ERRAND_LOG_LEVEL: 'info' });
  let err = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  await waitFor(
    'the worker to start',
    async () => {
      if (child.exitCode !== null) throw new Error(`worker exited with ${child.exitCode}: ${err}`);
      return err.includes('"errand started"') || undefined;
    },
    60_000,
  );
  return { child, log: () => err };
}

/** The log lines with the message `msg` of a process that logged `log`, parsed. */
function logged(run: { log: () => string }, msg: string): Record<string, unknown>[] {
  return run
    .log()
    .split('\n')
    .filter((line) => line.includes(`"msg":"${msg}"`))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** A promise the test resolves itself: the fake model's held answer. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

describe('workers drain on SIGTERM (real worker processes)', () => {
  let tmp: string;
  let origin: Origin;
  let llm: FakeLlm;
  let svc: TestService;
  let projectId: string;
  const workers: ChildProcess[] = [];

  before(async () => {
    tmp = await makeTempDir('drain');
    origin = await makeOrigin(tmp);
    llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-test'] });
    svc = await startTestService({
      worker: false,
      env: {
        OPENAI_API_KEY: MODEL_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
      },
    });
    projectId = (await svc.createProject({ repository: origin.url })).id;
  });
  after(async () => {
    for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
    await Promise.all(workers.map((w) => exited(w)));
    await svc?.close();
    await llm?.close();
    await removeDir(tmp);
  });

  const worker = async (machine: string, drainSeconds: number) => {
    const run = await startWorker({
      ...svc.env,
      ERRAND_DATA_DIR: path.join(tmp, machine),
      ERRAND_PUBLIC_URL: svc.url,
      ERRAND_DRAIN_SECONDS: String(drainSeconds),
    });
    workers.push(run.child);
    return run;
  };
  const createJob = async (prompt: string) => {
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, { body: { prompt } });
    assert.equal(created.status, 201, created.text);
    return created.json.id as string;
  };
  const jobOf = async (jobId: string) =>
    (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json;
  const completed = (jobId: string) =>
    waitFor(
      `job ${jobId} to complete`,
      async () => {
        const job = await jobOf(jobId);
        assert.notEqual(job.status, 'failed', job.error ?? '');
        return job.status === 'completed' ? job : undefined;
      },
      60_000,
    );
  const turnEvents = async (jobId: string) =>
    ((await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ?? [])
      .filter((e) => e.type.startsWith('turn.'))
      .map((e) => ({ type: e.type, attempt: (e.data as { attempt?: number }).attempt }));
  const turnOf = (jobId: string) =>
    svc.service.ctx.db
      .selectFrom('turns')
      .select(['state', 'attempts'])
      .where('job_id', '=', jobId)
      .executeTakeFirstOrThrow();
  const attemptsOf = async (jobId: string) => (await turnOf(jobId)).attempts;
  const turnState = async (jobId: string) => (await turnOf(jobId)).state;

  test('a turn running at SIGTERM finishes, no new turn is taken, and the worker exits 0', async () => {
    const first = await worker('machine-a', 300);
    const answer = gate();
    llm.script(
      dynamic(async () => {
        await answer.opened;
        return reply('Nothing needs to change.');
      }),
    );
    const jobId = await createJob('finish across the stop');
    await llm.waitFor((r) => r.index === 0, 60_000);

    first.child.kill('SIGTERM');
    const draining = await waitFor('the worker to say it drains', async () =>
      logged(first, 'draining').at(0),
    );
    assert.equal(draining.turns, 1);
    assert.equal(draining.drainSeconds, 300);
    // Posted while the worker drains: it is not taken (the worker takes no new turns).
    const laterId = await createJob('posted during the drain');
    answer.open();

    assert.equal(await exited(first.child), 0, first.log());
    const job = await completed(jobId);
    assert.equal(job.error, null);
    assert.deepEqual(await turnEvents(jobId), [
      { type: 'turn.started', attempt: 1 },
      { type: 'turn.no_changes', attempt: undefined },
      { type: 'turn.finished', attempt: undefined },
    ]);
    assert.deepEqual(
      logged(first, 'drained').map((l) => [l.turns, l.handedBack]),
      [[1, 0]],
    );
    assert.equal(await turnState(laterId), 'queued');
    assert.deepEqual(await turnEvents(laterId), []);
    assert.equal(llm.requests.length, 1);

    // Another worker takes the later job up.
    llm.script(reply('Nothing to do here either.'));
    const second = await worker('machine-b', 300);
    await completed(laterId);
    second.child.kill('SIGTERM');
    assert.equal(await exited(second.child), 0, second.log());
    llm.assertDone();
  });

  test('a turn still running when the drain is up is handed back and completed elsewhere at the same attempt', async () => {
    llm.reset();
    const first = await worker('machine-c', 1);
    llm.script(
      // The first worker's model call is held until the worker hangs up on it.
      dynamic(async (request) => {
        await waitFor(
          'the stopping worker to hang up',
          async () => request.aborted || undefined,
          120_000,
        );
        return { type: 'error', status: 500 };
      }),
      reply('Nothing needs to change.'),
    );
    const jobId = await createJob('handed back unfinished');
    await llm.waitFor((r) => r.index === 0, 60_000);

    first.child.kill('SIGTERM');
    assert.equal(await exited(first.child), 0, first.log());
    assert.deepEqual(
      logged(first, 'drained').map((l) => [l.turns, l.handedBack]),
      [[1, 1]],
    );
    assert.equal(
      logged(first, 'turn handed back: the worker stopped before it finished').length,
      1,
    );
    assert.equal(await attemptsOf(jobId), 0, 'the handed-back attempt is given back');

    const second = await worker('machine-d', 300);
    const job = await completed(jobId);
    assert.equal(job.error, null);
    // Both starts are attempt 1: the hand-back used no attempt up (a worker killed mid-turn
    // makes the next start attempt 2).
    assert.deepEqual(await turnEvents(jobId), [
      { type: 'turn.started', attempt: 1 },
      { type: 'turn.started', attempt: 1 },
      { type: 'turn.no_changes', attempt: undefined },
      { type: 'turn.finished', attempt: undefined },
    ]);
    assert.equal(await attemptsOf(jobId), 1);
    second.child.kill('SIGTERM');
    assert.equal(await exited(second.child), 0, second.log());
    llm.assertDone();
  });
});

describe('errand serve drains its workers and answers meanwhile (a real serve process)', () => {
  test('a job posted during the drain is accepted and left queued; the running turn finishes', async () => {
    const tmp = await makeTempDir('drain-serve');
    const origin = await makeOrigin(tmp);
    const llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-test'] });
    const db = await createEmbeddedDataDir();
    try {
      const serve = await startServe(db.dataDir, [], {
        OPENAI_API_KEY: MODEL_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_LOG_LEVEL: 'info',
        ERRAND_DRAIN_SECONDS: '300',
      });
      const key = serve.adminKey;
      const project = await http(serve.url, 'POST', '/v2/admin/projects', {
        key,
        body: { name: 'drain', repository: origin.url },
      });
      assert.equal(project.status, 201, project.text);
      const answer = gate();
      llm.script(
        dynamic(async () => {
          await answer.opened;
          return reply('Nothing needs to change.');
        }),
      );
      const post = (prompt: string) =>
        http(serve.url, 'POST', `/v2/agent/${project.json.id}/job`, { key, body: { prompt } });
      const first = await post('finish across the stop');
      assert.equal(first.status, 201, first.text);
      await llm.waitFor((r) => r.index === 0, 60_000);

      serve.child.kill('SIGTERM');
      const log = { log: serve.stderr };
      const draining = await waitFor('serve to say it drains', async () =>
        logged(log, 'draining').at(0),
      );
      assert.equal(draining.turns, 1);
      const later = await post('posted during the drain');
      assert.equal(later.status, 201, later.text);
      const health = await http(serve.url, 'GET', '/healthz');
      assert.equal(health.status, 200, health.text);
      const jobPath = `/v2/agent/${project.json.id}/job/${first.json.id}`;
      assert.equal((await http(serve.url, 'GET', jobPath, { key })).json.status, 'active');
      answer.open();

      assert.equal(await exited(serve.child), 0, serve.stderr());
      assert.deepEqual(
        logged(log, 'drained').map((l) => [l.turns, l.handedBack]),
        [[1, 0]],
      );
      // The later job's turn was not taken: the fake model saw one request, the first job's.
      assert.equal(llm.requests.length, 1);
      llm.assertDone();
    } finally {
      killStrays();
      await llm.close();
      await db.drop();
      await removeDir(tmp);
    }
  });
});
