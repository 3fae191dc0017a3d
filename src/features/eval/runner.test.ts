// Eval runs moved on by the worker, with a scripted TurnRunner standing in for the turn pipeline
// (the queue, the job core and the database are the real ones). Each scripted turn answers as
// a best-of-N turn of one attempt would (`attempts` and `spent`), per task, agent and repeat,
// so that the run's pass rates, costs, steps, tokens and intervals can be worked out by hand.
// Also: the concurrency is never exceeded, a cancel stops the run, a create the project refuses
// and a job that fails become errors with their reason, and a run's jobs stay out of the
// project's job list.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { RecordingRunner, work } from '../../../test/support/runners.ts';
import { startTestService, type TestService, waitFor } from '../../../test/support/service.ts';
import type { AttemptResult } from '../../db/schema.ts';
import { TurnFailedError, type TurnOutput } from '../../jobs/runner.ts';
import { advanceRun } from './runner.ts';
import type { EvalRunRecord } from './types.ts';

const A = 'anthropic:claude-sonnet-4-5';
const B = 'anthropic:claude-haiku-4-5';

/** What a scripted attempt does: its outcome, check, cost and steps. */
interface Script {
  outcome: AttemptResult['outcome'];
  exit?: number;
  output?: string;
  error?: string;
  costUsd: number;
  steps: number;
}

/** Per task, agent's model and repeat. */
const SCRIPTS: Record<string, Script> = {
  [`alpha ${A} 1`]: { outcome: 'passed', exit: 0, costUsd: 0.1, steps: 2 },
  [`alpha ${A} 2`]: { outcome: 'passed', exit: 0, costUsd: 0.2, steps: 4 },
  [`beta ${A} 1`]: { outcome: 'passed', exit: 0, costUsd: 0.3, steps: 6 },
  [`beta ${A} 2`]: {
    outcome: 'failed',
    exit: 1,
    output: 'ok 1 - parses\nnot ok 2 - beta keeps order\n1 test failed',
    costUsd: 0.4,
    steps: 8,
  },
  [`alpha ${B} 1`]: { outcome: 'passed', exit: 0, costUsd: 0.01, steps: 1 },
  [`alpha ${B} 2`]: {
    outcome: 'failed',
    exit: 2,
    output: 'alpha: wrong answer',
    costUsd: 0.02,
    steps: 1,
  },
  [`beta ${B} 1`]: { outcome: 'no_changes', costUsd: 0.03, steps: 1 },
  [`beta ${B} 2`]: {
    outcome: 'error',
    error: 'the agent stopped: out of turns',
    costUsd: 0.04,
    steps: 1,
  },
};

const round4 = (n: number | null | undefined) => Math.round((n ?? Number.NaN) * 1e4) / 1e4;

describe('eval runner', () => {
  let svc: TestService;
  // Turns by the run's results they are the jobs of; set once the service is up.
  let lookup: (jobId: string) => Promise<{ task: string; repeat: number } | undefined> = async () =>
    undefined;
  const runner = new RecordingRunner(async (input): Promise<TurnOutput> => {
    const prompt = input.turn.prompt;
    if (prompt.startsWith('hold')) {
      await work(120_000, input.signal);
      return { summary: 'held' };
    }
    if (prompt.startsWith('fail')) throw new TurnFailedError('the repository could not be cloned');
    if (prompt.startsWith('complete')) {
      await work(100, input.signal);
      return { summary: 'done' };
    }
    const result = await lookup(input.job.id);
    const script = result && SCRIPTS[`${result.task} ${input.job.model} ${result.repeat}`];
    if (!script) throw new TurnFailedError(`no script for ${prompt} ${input.job.model}`);
    // Long enough for two jobs of a run to overlap, however the queue orders them.
    await work(250, input.signal);
    for (let step = 1; step <= script.steps; step++)
      await input.emit('model.step', {
        step,
        usage: {
          inputTokens: 1000,
          outputTokens: 100,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          costUsd: null,
        },
      });
    const tokens = {
      inputTokens: 1000 * script.steps,
      outputTokens: 100 * script.steps,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    };
    const attempt: AttemptResult = {
      n: 1,
      engine: 'errand',
      model: input.job.model,
      branch: `errand/${input.job.id}-1`,
      outcome: script.outcome,
      check:
        script.exit === undefined
          ? null
          : { exitCode: script.exit, outputTail: script.output ?? '', durationMs: 40 },
      costUsd: script.costUsd,
      diff: { files: 1, lines: 3 },
      commitSha: null,
      error: script.error ?? null,
      winner: script.outcome === 'passed',
    };
    return {
      summary: 'attempted',
      usage: tokens,
      spent: { ...tokens, costUsd: script.costUsd },
      attempts: [attempt],
    };
  });

  before(async () => {
    svc = await startTestService({
      runner,
      // Eight creates an hour per project: the refusal test makes its ninth.
      env: { ERRAND_CONCURRENCY: '32', ERRAND_RATE_LIMIT_CREATE: '8' },
    });
    lookup = (jobId) =>
      svc.service.ctx.db
        .selectFrom('eval_results')
        .select(['task', 'repeat'])
        .where('job_id', '=', jobId)
        .executeTakeFirst();
  });
  after(() => svc.close());

  const start = async (body: Record<string, unknown>): Promise<EvalRunRecord> => {
    const res = await svc.request('POST', '/v2/admin/evals', { body });
    assert.equal(res.status, 201, res.text);
    return JSON.parse(res.text) as EvalRunRecord;
  };
  const get = async (id: string): Promise<EvalRunRecord> => {
    const res = await svc.request('GET', `/v2/admin/evals/${id}`);
    assert.equal(res.status, 200, res.text);
    return JSON.parse(res.text) as EvalRunRecord;
  };
  const until = (id: string, state: EvalRunRecord['state'], timeoutMs = 60_000) =>
    waitFor(
      `run ${id} ${state}`,
      async () => {
        const run = await get(id);
        return run.state === state ? run : undefined;
      },
      timeoutMs,
    );

  test('two agents on two tasks, twice: the numbers worked out by hand, two at a time', async () => {
    const project = await svc.createProject({ name: 'eval target' });
    const task = (id: string) => ({
      id,
      project: project.id,
      prompt: `solve ${id}`,
      check: 'npm test',
    });
    const made = await start({
      name: 'hand-computed',
      tasks: [task('alpha'), task('beta')],
      agents: [
        { engine: 'errand', model: A },
        { engine: 'errand', model: B },
      ],
      repeat: 2,
      concurrency: 2,
    });
    const run = await until(made.id, 'finished');
    assert.notEqual(run.finishedAt, null);
    assert.equal(runner.maxRunning, 2, 'two at a time, never more');

    const [a, b] = run.agents;
    // A: 3 of 4 passed; Wilson (3/4) = 0.3006–0.9544; costs 0.1, 0.2, 0.3, 0.4.
    assert.equal(a?.agent, `errand/${A}`);
    assert.deepEqual([a?.runs, a?.finished, a?.passed, a?.passRate], [4, 4, 3, 0.75]);
    assert.deepEqual([round4(a?.interval?.low), round4(a?.interval?.high)], [0.3006, 0.9544]);
    assert.equal(a?.medianCostUsd, 0.25);
    assert.equal(a?.totalCostUsd, 1);
    assert.equal(a?.medianSteps, 5);
    assert.deepEqual([a?.inputTokens, a?.outputTokens], [20_000, 2_000]);
    // B: 1 of 4 passed (a failed check, no changes and an error are not passes);
    // Wilson (1/4) = 0.0456–0.6994; costs 0.01, 0.02, 0.03, 0.04.
    assert.equal(b?.agent, `errand/${B}`);
    assert.deepEqual([b?.runs, b?.finished, b?.passed, b?.passRate], [4, 4, 1, 0.25]);
    assert.deepEqual([round4(b?.interval?.low), round4(b?.interval?.high)], [0.0456, 0.6994]);
    assert.equal(b?.medianCostUsd, 0.025);
    assert.equal(b?.totalCostUsd, 0.1);
    assert.equal(b?.medianSteps, 1);
    assert.deepEqual([b?.inputTokens, b?.outputTokens], [4_000, 400]);
    for (const agent of run.agents) {
      assert.ok((agent.medianDurationMs ?? 0) >= 250, 'a turn takes its scripted time at least');
    }

    const byKey = new Map(run.results.map((r) => [`${r.task} ${r.agent} ${r.repeat}`, r]));
    const failed = byKey.get(`beta errand/${A} 2`);
    assert.equal(failed?.state, 'failed');
    assert.equal(failed?.checkExit, 1);
    assert.equal(failed?.tail, 'ok 1 - parses\nnot ok 2 - beta keeps order\n1 test failed');
    assert.equal(failed?.costUsd, 0.4);
    assert.equal(failed?.steps, 8);
    assert.equal(byKey.get(`alpha errand/${B} 2`)?.checkExit, 2);
    assert.equal(byKey.get(`beta errand/${B} 1`)?.state, 'failed');
    const error = byKey.get(`beta errand/${B} 2`);
    assert.equal(error?.state, 'error');
    assert.equal(error?.tail, 'the agent stopped: out of turns');
    assert.equal(byKey.get(`alpha errand/${A} 1`)?.tail, null);

    // The run's jobs are real jobs, tagged with the run, made by its creator, one per result.
    const jobs = await svc.service.ctx.db
      .selectFrom('jobs')
      .select(['id', 'eval_run_id', 'created_by', 'check_command', 'model'])
      .where('project_id', '=', project.id)
      .execute();
    assert.equal(jobs.length, 8);
    assert.deepEqual(new Set(jobs.map((j) => j.id)), new Set(run.results.map((r) => r.jobId)));
    for (const job of jobs) {
      assert.equal(job.eval_run_id, run.id);
      assert.equal(job.check_command, 'npm test');
      assert.equal(job.created_by?.kind, 'key');
    }
    // They do not mix with the project's own work.
    const list = await svc.request('GET', `/v2/agent/${project.id}/jobs`);
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(list.json.jobs, []);
    const tagged = await svc.request(
      'GET',
      `/v2/agent/${project.id}/jobs?evalRun=${run.id}&limit=100`,
    );
    assert.equal(tagged.status, 200, tagged.text);
    assert.equal(tagged.json.jobs?.length, 8);
  });

  test('cancel: pending results cancelled, running jobs archived, nothing more started', async () => {
    const project = await svc.createProject({ name: 'eval cancelled' });
    const made = await start({
      tasks: ['one', 'two', 'three'].map((id) => ({
        id,
        project: project.id,
        prompt: `hold ${id}`,
        check: 'true',
      })),
      concurrency: 2,
    });
    const running = await waitFor('two turns running', async () => {
      const turns = await svc.service.ctx.db
        .selectFrom('turns')
        .innerJoin('jobs', 'jobs.id', 'turns.job_id')
        .select('jobs.id')
        .where('jobs.eval_run_id', '=', made.id)
        .where('turns.state', '=', 'running')
        .execute();
      return turns.length === 2 ? turns : undefined;
    });
    const res = await svc.request('POST', `/v2/admin/evals/${made.id}/cancel`);
    assert.equal(res.status, 200, res.text);
    const cancelled = JSON.parse(res.text) as EvalRunRecord;
    assert.equal(cancelled.state, 'cancelled');
    assert.deepEqual(
      cancelled.results.map((r) => r.state),
      ['cancelled', 'cancelled', 'cancelled'],
    );
    assert.equal(cancelled.results[2]?.jobId, null, 'the third never started');
    const jobs = await svc.service.ctx.db
      .selectFrom('jobs')
      .select(['id', 'status'])
      .where('eval_run_id', '=', made.id)
      .execute();
    assert.deepEqual(new Set(jobs.map((j) => j.id)), new Set(running.map((t) => t.id)));
    assert.ok(jobs.every((j) => j.status === 'archived'));
    // What a sweep does (every running run moved on) starts nothing more on a cancelled run.
    await advanceRun(svc.service.ctx, made.id);
    const later = await get(made.id);
    assert.deepEqual(later, cancelled);
  });

  test('a create the project refuses and a job that fails are errors, with why', async () => {
    const project = await svc.createProject({ name: 'eval refused' });
    const tasks = [
      { id: 'broken', project: project.id, prompt: 'fail here', check: 'true' },
      ...Array.from({ length: 8 }, (_, i) => ({
        id: `t${i}`,
        project: project.id,
        prompt: `complete ${i}`,
        check: 'true',
      })),
    ];
    const made = await start({ tasks, concurrency: 16 });
    const run = await until(made.id, 'finished');
    const broken = run.results[0];
    assert.equal(broken?.state, 'error');
    assert.match(broken?.tail ?? '', /could not be cloned/);
    // Eight creates an hour: the ninth is refused, and said so.
    const refused = run.results.filter((r) => r.jobId === null);
    assert.equal(refused.length, 1);
    assert.equal(refused[0]?.state, 'error');
    assert.match(refused[0]?.tail ?? '', /^rate_limited: /);
    // Scripted turns that make no attempt: an error each, not a pass.
    const rest = run.results.filter((r) => r.jobId !== null && r.task !== 'broken');
    assert.equal(rest.length, 7);
    assert.ok(
      rest.every((r) => r.state === 'error' && r.tail === 'the job finished without an attempt'),
    );
    assert.deepEqual([run.agents[0]?.finished, run.agents[0]?.passed], [9, 0]);
  });
});
