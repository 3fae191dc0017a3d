// What a job costs, through a real service and its worker, with turns a scripted runner plays:
// each attempt's tokens are priced with the model catalog (the data package's list prices, and
// the operator's ERRAND_MODEL_CATALOG over them) and summed on the turn, the job record and the
// project's month, failed and retried attempts included; an unknown price stays unknown; the
// dashboard's job and project pages show it.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SESSION_COOKIE, signIn } from '../../src/dashboard/sessions.ts';
import { ExternalError } from '../../src/errors.ts';
import { TurnFailedError, type TurnInput, type TurnOutput } from '../../src/jobs/runner.ts';
import { monthUsage } from '../../src/jobs/spend.ts';
import type { TokenUsage } from '../../src/jobs/usage.ts';
import { untilStatus } from '../support/jobs.ts';
import { RecordingRunner } from '../support/runners.ts';
import { type ApiBody, startTestService, type TestService } from '../support/service.ts';

/** One model step: 1M input tokens (600k of them cached, 100k written to the cache), 50k out. */
const STEP: TokenUsage = {
  inputTokens: 1_000_000,
  outputTokens: 50_000,
  cacheReadTokens: 600_000,
  cacheWriteTokens: 100_000,
};
const LOCAL = 'openai-compatible:local-coder';
const MYSTERY = 'openai-compatible:mystery';

/**
 * The prompt's first word: `steps N` takes N steps and finishes; `fail` takes a step and fails
 * for good; `flaky` takes a step and fails in a way worth retrying on its first attempt, and
 * takes a step and finishes on the next.
 */
function runner(): RecordingRunner {
  const step = async (input: TurnInput, n: number) => {
    // An engine's step as the pipeline records it; the worker prices the tokens itself.
    await input.emit('model.step', { step: n, usage: { ...STEP, costUsd: null } });
  };
  return new RecordingRunner(async (input): Promise<TurnOutput> => {
    const [word, count = '1'] = input.turn.prompt.split(/\s+/);
    if (word === 'fail') {
      await step(input, 1);
      throw new TurnFailedError('the budget of this test ran out');
    }
    if (word === 'flaky') {
      await step(input, 1);
      if (input.turn.attempts === 1)
        throw new ExternalError('model', 'the model answered 529', { transient: true });
      return { summary: 'done on the second attempt' };
    }
    const steps = Number(count);
    for (let n = 1; n <= steps; n++) await step(input, n);
    // The output's own count: here what the steps said, as the agent's loop sums them.
    const usage = {
      inputTokens: STEP.inputTokens * steps,
      outputTokens: STEP.outputTokens * steps,
      cacheReadTokens: STEP.cacheReadTokens * steps,
      cacheWriteTokens: STEP.cacheWriteTokens * steps,
    };
    return { summary: `took ${steps} steps`, usage };
  });
}

describe('what jobs cost', () => {
  let svc: TestService;
  let dir: string;

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'errand-costs-'));
    const catalog = path.join(dir, 'catalog.json');
    await writeFile(
      catalog,
      JSON.stringify({
        // Over the package: a cache write at $4/M instead of the list's $3.75/M.
        'anthropic:claude-sonnet-4-5': { cacheWriteUsdPerMTok: 4 },
        [LOCAL]: {
          contextTokens: 32_768,
          inputUsdPerMTok: 0.5,
          outputUsdPerMTok: 2,
          cacheReadUsdPerMTok: 0.05,
          cacheWriteUsdPerMTok: 0.5,
        },
      }),
    );
    svc = await startTestService({
      runner: runner(),
      env: {
        ERRAND_MODEL_CATALOG: catalog,
        ERRAND_OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:9/v1',
      },
    });
  });
  after(async () => {
    await svc?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const create = async (projectId: string, prompt: string, model?: string) => {
    const res = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt, ...(model ? { model } : {}) },
    });
    assert.equal(res.status, 201, res.text);
    return res.json.id ?? '';
  };
  const events = async (projectId: string, jobId: string) =>
    (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events as {
      type: string;
      turn: number | null;
      data: Record<string, unknown>;
    }[];
  const page = async (pathname: string) => {
    const { id } = await signIn(svc.service.ctx.db, svc.adminKey);
    const res = await fetch(`${svc.url}${pathname}`, {
      headers: { cookie: `${SESSION_COOKIE}=${id}` },
    });
    assert.equal(res.status, 200);
    return res.text();
  };
  const times = (usage: TokenUsage, n: number) => ({
    inputTokens: usage.inputTokens * n,
    outputTokens: usage.outputTokens * n,
    cacheReadTokens: usage.cacheReadTokens * n,
    cacheWriteTokens: usage.cacheWriteTokens * n,
  });

  test("known prices: the package's, under the operator's file; a failed turn's spend counts too", async () => {
    const project = await svc.createProject({ name: 'priced' });
    const jobId = await create(project.id, 'steps 2');
    const done = await untilStatus(svc, project.id, jobId, 'completed', { failFast: true });
    // A step: 300k uncached input at $3/M, 600k cached at $0.30/M, 100k cache writes at the
    // file's $4/M, 50k output at $15/M: $0.90 + $0.18 + $0.40 + $0.75 = $2.23.
    assert.deepEqual(done.usage, { ...times(STEP, 2), costUsd: 4.46 });
    const finished = (await events(project.id, jobId)).find((e) => e.type === 'turn.finished');
    assert.deepEqual(finished?.data.usage, { ...times(STEP, 2), costUsd: 4.46 });

    const sent = await svc.request('POST', `/v2/agent/${project.id}/job/${jobId}/message`, {
      body: { prompt: 'fail after a step' },
    });
    assert.equal(sent.status, 200, sent.text);
    const failed = await untilStatus(svc, project.id, jobId, 'failed');
    assert.equal(failed.error, 'the budget of this test ran out');
    assert.deepEqual(failed.usage, { ...times(STEP, 3), costUsd: 6.69 });
    const turnFailed = (await events(project.id, jobId)).find((e) => e.type === 'turn.failed');
    assert.deepEqual(turnFailed?.data, {
      error: 'the budget of this test ran out',
      usage: { ...STEP, costUsd: 2.23 },
    });
    const month = (await monthUsage(svc.service.ctx, [project.id])).get(project.id);
    assert.deepEqual(month?.usage, { ...times(STEP, 3), costUsd: 6.69 });

    // The dashboard: the job's usage and each turn's; the project's month on its pages.
    const jobPage = await page(`/projects/${project.id}/jobs/${jobId}`);
    assert.match(
      jobPage,
      /<dd id="job-usage">3,000,000 tokens in \(1,800,000 cached\), 150,000 out; \$6\.69 <span class="muted">\(estimated at list prices\)<\/span><\/dd>/,
    );
    assert.match(jobPage, /; 1,000,000 tokens in \(600,000 cached\), 50,000 out; \$2\.23<\/p>/);
    assert.match(
      await page(`/projects/${project.id}/jobs`),
      /Spent in \d{4}-\d{2} \(UTC\): \$6\.69, estimated at list prices\./,
    );
    assert.match(await page('/projects'), /<td data-label="Spent this month"[^>]*>\$6\.69<\/td>/);
  });

  test("a failed attempt that is tried again adds to the turn's usage", async () => {
    const project = await svc.createProject({ name: 'retried' });
    const jobId = await create(project.id, 'flaky');
    const done = await untilStatus(svc, project.id, jobId, 'completed', { failFast: true });
    // Both attempts paid for their step; the second output said nothing of its own usage, so
    // its steps count.
    assert.deepEqual(done.usage, { ...times(STEP, 2), costUsd: 4.46 });
    const retrying = (await events(project.id, jobId)).find((e) => e.type === 'turn.retrying');
    assert.deepEqual(retrying?.data.usage, { ...STEP, costUsd: 2.23 });
  });

  test("a model priced by the operator's file alone; a model priced by neither costs null, never a guess", async () => {
    const project = await svc.createProject({ name: 'local models' });
    const local = await create(project.id, 'steps 1', LOCAL);
    const priced = await untilStatus(svc, project.id, local, 'completed', { failFast: true });
    // 300k uncached at $0.50/M, 600k cached at $0.05/M, 100k written at $0.50/M, 50k out at $2/M.
    assert.deepEqual(priced.usage, { ...STEP, costUsd: 0.33 });
    assert.equal(svc.service.ctx.models.info(LOCAL).contextTokens, 32_768);

    const mystery = await create(project.id, 'steps 1', MYSTERY);
    const unknown = await untilStatus(svc, project.id, mystery, 'completed', { failFast: true });
    assert.deepEqual(unknown.usage, { ...STEP, costUsd: null });
    const month = (await monthUsage(svc.service.ctx, [project.id])).get(project.id);
    assert.equal(month?.costUsd, 0.33, 'the known part');
    assert.equal(month?.unpriced, 1);
    assert.equal(month?.usage.costUsd, null);
    assert.match(
      await page(`/projects/${project.id}/jobs/${mystery}`),
      /1,000,000 tokens in \(600,000 cached\), 50,000 out; cost unknown \(no price for the model\)/,
    );
    assert.match(
      await page(`/projects/${project.id}/jobs`),
      /\$0\.3300 \(and 1 turn of a model without a known price\)/,
    );
  });

  test('a job record whose turns cost nothing yet: zeros, and a cost of 0', async () => {
    const project = await svc.createProject({ name: 'idle' });
    const jobId = await create(project.id, 'steps 0');
    const done: ApiBody = await untilStatus(svc, project.id, jobId, 'completed', {
      failFast: true,
    });
    assert.deepEqual(done.usage, {
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      costUsd: 0,
    });
  });
});
