// Best-of-N end to end (docs/eval.md): the real service and worker, a real git server over
// loopback HTTP, the stateful fake of GitHub's REST API, the fake model server answering each
// model differently, and the real sandbox running the check command. The passing attempt
// becomes the job's branch and pull request, the record lists every attempt, the budget counts
// them all, ties are broken by cost and diff, a follow-up continues from the winner, an eval
// job pushes nothing, and the API refuses attempts that could not run.
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { createJob } from '../../src/jobs/create.ts';
import { isRecord } from '../../src/json.ts';
import type { FakeGitHub } from '../support/fake-github.ts';
import type { FakeLlm, RecordedRequest } from '../support/fake-llm.ts';
import { git } from '../support/git.ts';
import { untilStatus } from '../support/jobs.ts';
import { type PricedStand, startPricedStand } from '../support/priced-stand.ts';
import type { TestService } from '../support/service.ts';

/** Every model call of these tests uses this much: 1M tokens in, 100k out. */
const CALL_USAGE = { input: 1_000_000, output: 100_000 };
/** Prices per million tokens (in, out): gpt-a $1/$2, gpt-b $10/$20, gpt-c as gpt-a. */
const PRICES: Record<string, readonly [number, number]> = {
  'gpt-a': [1, 2],
  'gpt-b': [10, 20],
  'gpt-c': [1, 2],
};
/** What two calls (a write, then the summary) of a model cost. */
const cost = (model: string) => {
  const [input, output] = PRICES[model] ?? [0, 0];
  return 2 * (input + output * 0.1);
};

/** Whether a recorded chat request already carries a tool's result (the second call). */
function hasToolResult(body: unknown): boolean {
  const messages = isRecord(body) && Array.isArray(body.messages) ? body.messages : [];
  return messages.some((m) => isRecord(m) && m.role === 'tool');
}

/** The agents' scripts: per model, the file content it writes, then its summary. */
function agents(llm: FakeLlm, writes: Record<string, string>): void {
  llm.scriptAll((request: RecordedRequest) => {
    const model = isRecord(request.body) ? String(request.body.model) : '';
    const content = writes[model];
    if (content === undefined) return undefined;
    if (hasToolResult(request.body))
      return { type: 'reply', text: `Write answer.txt (${model})`, usage: CALL_USAGE };
    return {
      type: 'reply',
      toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content } }],
      usage: CALL_USAGE,
    };
  });
}

/** A field of an event's data. */
function field(data: unknown, name: string): unknown {
  return isRecord(data) ? data[name] : undefined;
}

interface Attempt {
  n: number;
  engine: string;
  model: string;
  branch: string;
  outcome: string;
  check: { exitCode: number | null; outputTail: string } | null;
  costUsd: number | null;
  diff: { files: number; lines: number };
  commitSha: string | null;
  winner: boolean;
}

describe('best-of-N', () => {
  let stand: PricedStand;
  let bare: string;
  let github: FakeGitHub;
  let llm: FakeLlm;
  let svc: TestService;
  let projectId: string;

  before(async () => {
    stand = await startPricedStand('best-of', PRICES);
    ({ bare, github, llm, svc, projectId } = stand);
  });
  after(() => stand?.close());
  afterEach(() => {
    try {
      assert.deepEqual(llm.unexpected, []);
      github.assertNoUnexpected();
    } finally {
      llm.reset();
    }
  });

  // Each job runs two or three agents, their checks and a push: on a loaded machine that is
  // more than the helper's usual 20 s.
  const until = (jobId: string, status: string) =>
    untilStatus(svc, projectId, jobId, status, { failFast: true, timeoutMs: 90_000 });
  const events = async (jobId: string) =>
    (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ?? [];
  const create = async (body: Record<string, unknown>) => {
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, { body });
    assert.equal(created.status, 201, created.text);
    return created.json.id as string;
  };
  const branchFile = (branch: string) => git(bare, 'show', `refs/heads/${branch}:answer.txt`);
  const hasBranch = (branch: string) =>
    git(bare, 'for-each-ref', '--format=%(refname)', `refs/heads/${branch}`) !== '';

  test('the attempt that passes the check becomes the branch and the pull request; the record lists both', async () => {
    agents(llm, { 'gpt-a': 'wrong\n', 'gpt-b': 'right\n' });
    const jobId = await create({
      prompt: 'Write the answer',
      attempts: { count: 2, agents: [{ model: 'openai:gpt-a' }, { model: 'openai:gpt-b' }] },
      checkCommand: 'grep -q right answer.txt',
    });
    const job = await until(jobId, 'completed');
    const attempts = job.attempts as Attempt[];
    assert.equal(attempts.length, 2);
    const [a1, a2] = attempts;
    assert.deepEqual(
      attempts.map((a) => [
        a.n,
        a.engine,
        a.model,
        a.branch,
        a.outcome,
        a.check?.exitCode,
        a.winner,
      ]),
      [
        [1, 'errand', 'openai:gpt-a', `errand/${jobId}-1`, 'failed', 1, false],
        [2, 'errand', 'openai:gpt-b', `errand/${jobId}-2`, 'passed', 0, true],
      ],
    );
    assert.equal(a1?.costUsd, cost('gpt-a'));
    assert.equal(a2?.costUsd, cost('gpt-b'));
    assert.deepEqual(a2?.diff, { files: 1, lines: 1 });
    // The budget counts both attempts, each at its own model's prices.
    assert.equal(job.usage?.costUsd, cost('gpt-a') + cost('gpt-b'));
    assert.equal(job.usage?.inputTokens, 4 * CALL_USAGE.input);

    assert.equal(branchFile(`errand/${jobId}`), 'right');
    assert.equal(git(bare, 'rev-parse', `refs/heads/errand/${jobId}`), a2?.commitSha);
    // The loser's work is there to look at, on its own branch.
    assert.equal(branchFile(`errand/${jobId}-1`), 'wrong');
    assert.equal(branchFile(`errand/${jobId}-2`), 'right');
    const pulls = github.pullRequests('acme/app').filter((p) => p.head === `errand/${jobId}`);
    assert.equal(pulls.length, 1);
    assert.equal(job.prLink, pulls[0]?.htmlUrl);
    assert.equal(job.summary, 'Write answer.txt (gpt-b)');

    const log = await events(jobId);
    const started = log.filter((e) => e.type === 'attempt.started');
    const finished = log.filter((e) => e.type === 'attempt.finished');
    assert.deepEqual(
      started.map((e) => field(e.data, 'n')),
      [1, 2],
    );
    assert.deepEqual(
      finished.map((e) => `${field(e.data, 'n')} ${field(e.data, 'outcome')}`).sort(),
      ['1 failed', '2 passed'],
    );
    // Each attempt's steps reached the job's log, marked with its number.
    const steps = log.filter((e) => e.type === 'model.step');
    assert.deepEqual(steps.map((e) => Number(field(e.data, 'attemptN'))).sort(), [1, 1, 2, 2]);
    const startedAt = log.findIndex((e) => e.type === 'attempt.started');
    const finishedAt = log.findIndex((e) => e.type === 'attempt.finished');
    assert.ok(startedAt < finishedAt, 'attempt.finished before attempt.started');

    // A follow-up continues from the winner's branch.
    const winner = a2?.commitSha;
    llm.reset();
    agents(llm, { 'gpt-a': 'right, and more\n' });
    const followed = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
      body: { prompt: 'Say more' },
    });
    assert.equal(followed.status, 200, followed.text);
    await until(jobId, 'completed');
    assert.equal(branchFile(`errand/${jobId}`), 'right, and more');
    assert.equal(git(bare, 'rev-parse', `refs/heads/errand/${jobId}~1`), winner);
  });

  test('both pass: the cheaper wins, whatever its number', async () => {
    agents(llm, { 'gpt-a': 'right\n', 'gpt-b': 'right\n' });
    const jobId = await create({
      prompt: 'Write the answer',
      attempts: { count: 2, agents: [{ model: 'openai:gpt-b' }, { model: 'openai:gpt-a' }] },
      checkCommand: 'grep -q right answer.txt',
    });
    const job = await until(jobId, 'completed');
    const attempts = job.attempts as Attempt[];
    assert.deepEqual(
      attempts.map((a) => [a.model, a.outcome, a.winner]),
      [
        ['openai:gpt-b', 'passed', false],
        ['openai:gpt-a', 'passed', true],
      ],
    );
    assert.equal(
      git(bare, 'rev-parse', `refs/heads/errand/${jobId}`),
      attempts[1]?.commitSha ?? '',
    );
  });

  test('none passes at the same cost: the smallest diff wins', async () => {
    agents(llm, { 'gpt-a': 'wrong\nwrong\nwrong\n', 'gpt-c': 'wrong\n' });
    const jobId = await create({
      prompt: 'Write the answer',
      attempts: { count: 2, agents: [{ model: 'openai:gpt-a' }, { model: 'openai:gpt-c' }] },
      checkCommand: 'grep -q right answer.txt && echo fine || { echo "no right answer"; exit 3; }',
    });
    const job = await until(jobId, 'completed');
    const attempts = job.attempts as Attempt[];
    assert.deepEqual(
      attempts.map((a) => [a.outcome, a.check?.exitCode, a.diff.lines, a.costUsd, a.winner]),
      [
        ['failed', 3, 3, cost('gpt-a'), false],
        ['failed', 3, 1, cost('gpt-c'), true],
      ],
    );
    assert.equal(attempts[1]?.check?.outputTail, 'no right answer');
    assert.equal(branchFile(`errand/${jobId}`), 'wrong');
  });

  test("no attempt finishes: the turn fails naming each one's error, and what they spent counts", async () => {
    llm.scriptAll((request: RecordedRequest) => {
      const model = isRecord(request.body) ? String(request.body.model) : '';
      if (hasToolResult(request.body))
        return { type: 'error', status: 400, message: `${model} refuses the second step` };
      return {
        type: 'reply',
        toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content: 'x\n' } }],
        usage: CALL_USAGE,
      };
    });
    const jobId = await create({
      prompt: 'Write the answer',
      attempts: { count: 2, agents: [{ model: 'openai:gpt-a' }, { model: 'openai:gpt-b' }] },
      checkCommand: 'true',
    });
    const job = await untilStatus(svc, projectId, jobId, 'failed', { timeoutMs: 90_000 });
    assert.match(
      String(job.error),
      /^no attempt finished: attempt 1: .*gpt-a refuses the second step.*; attempt 2: .*gpt-b refuses the second step/,
    );
    // One step of each, at its own model's prices.
    assert.equal(job.usage?.costUsd, cost('gpt-a') / 2 + cost('gpt-b') / 2);
    assert.ok(!hasBranch(`errand/${jobId}`), 'a failed best-of turn pushed the job branch');
    const finished = (await events(jobId)).filter((e) => e.type === 'attempt.finished');
    assert.deepEqual(
      finished.map((e) => field(e.data, 'outcome')),
      ['error', 'error'],
    );
  });

  test('an eval job runs its attempts and their check, and pushes nothing', async () => {
    agents(llm, { 'gpt-a': 'right\n' });
    const { ctx } = svc.service;
    const runId = 'evr_bestoftest0000000001';
    await ctx.db
      .insertInto('eval_runs')
      .values({ id: runId, name: 'best-of test', suite: JSON.stringify({ tasks: [] }) })
      .execute();
    const project = await ctx.db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', projectId)
      .executeTakeFirstOrThrow();
    const pullsBefore = github.pullRequests('acme/app').length;
    const { job: created } = await createJob(ctx, project, {
      prompt: 'Write the answer',
      attempts: { count: 1, agents: [{ model: 'openai:gpt-a' }] },
      checkCommand: 'grep -q right answer.txt',
      evalRunId: runId,
    });
    const job = await until(created.id, 'completed');
    const attempts = job.attempts as Attempt[];
    assert.deepEqual(
      attempts.map((a) => [a.outcome, a.check?.exitCode, a.winner]),
      [['passed', 0, true]],
    );
    assert.ok(attempts[0]?.commitSha, 'the attempt made no commit');
    assert.equal(job.prLink, null);
    assert.ok(!hasBranch(`errand/${created.id}`), 'the eval job pushed its branch');
    assert.ok(!hasBranch(`errand/${created.id}-1`), "the eval job pushed its attempt's branch");
    assert.equal(github.pullRequests('acme/app').length, pullsBefore);
    const log = await events(created.id);
    assert.ok(!log.some((e) => e.type === 'push'), 'an eval job recorded a push');
  });

  test("the project's check command judges when the job names none, with the project's secrets, scrubbed; without one, unchecked", async () => {
    const secret = 'check-secret-4f1d9a7c2b';
    const put = await svc.request('PUT', `/v2/admin/projects/${projectId}/secrets/CHECK_TOKEN`, {
      body: { value: secret, exposure: 'commands' },
    });
    assert.equal(put.status, 201, put.text);
    const setCheck = (command: string | null) =>
      svc.service.ctx.db
        .updateTable('projects')
        .set({ check_command: command })
        .where('id', '=', projectId)
        .execute();
    await setCheck('echo "token is $CHECK_TOKEN"; grep -q right answer.txt');
    try {
      // The same agent twice: same cost, same diff; the lower number wins.
      agents(llm, { 'gpt-a': 'right\n' });
      const jobId = await create({ prompt: 'Write the answer', attempts: { count: 2 } });
      const job = await until(jobId, 'completed');
      const attempts = job.attempts as Attempt[];
      assert.deepEqual(
        attempts.map((a) => [a.n, a.model, a.outcome, a.check?.exitCode, a.winner]),
        [
          [1, 'openai:gpt-a', 'passed', 0, true],
          [2, 'openai:gpt-a', 'passed', 0, false],
        ],
      );
      const tail = attempts[0]?.check?.outputTail ?? '';
      // The command had the secret (exposure "commands"); its output has its name instead.
      assert.equal(tail, 'token is [secret CHECK_TOKEN]');
      assert.ok(!JSON.stringify(await events(jobId)).includes(secret), 'an event kept the secret');

      await setCheck(null);
      llm.reset();
      agents(llm, { 'gpt-a': 'right\n' });
      const unchecked = await create({ prompt: 'Write the answer', attempts: { count: 1 } });
      const done = await until(unchecked, 'completed');
      assert.deepEqual(
        (done.attempts as Attempt[]).map((a) => [a.outcome, a.check, a.winner]),
        [['unchecked', null, true]],
      );
      assert.equal(branchFile(`errand/${unchecked}`), 'right');
    } finally {
      await setCheck(null);
      await svc.request('DELETE', `/v2/admin/projects/${projectId}/secrets/CHECK_TOKEN`);
    }
  });

  test('each attempt spends at most its share of the job budget: one that would go on past it stops, the other wins', async () => {
    // $30 for the job: $15 for each of the two attempts. gpt-b asks for a tool at every step,
    // at $12 a step: its second step passes its share, and it is stopped there.
    const patched = await svc.request('PATCH', `/v2/admin/projects/${projectId}`, {
      body: { jobBudgetUsd: 30 },
    });
    assert.equal(patched.status, 200, patched.text);
    try {
      llm.scriptAll((request: RecordedRequest) => {
        const model = isRecord(request.body) ? String(request.body.model) : '';
        if (model === 'gpt-a' && hasToolResult(request.body))
          return { type: 'reply', text: 'Write answer.txt (gpt-a)', usage: CALL_USAGE };
        if (model !== 'gpt-a' && model !== 'gpt-b') return undefined;
        const content = model === 'gpt-a' ? 'right\n' : 'again\n';
        return {
          type: 'reply',
          toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content } }],
          usage: CALL_USAGE,
        };
      });
      const jobId = await create({
        prompt: 'Write the answer',
        attempts: { count: 2, agents: [{ model: 'openai:gpt-a' }, { model: 'openai:gpt-b' }] },
        checkCommand: 'grep -q right answer.txt',
      });
      const job = await until(jobId, 'completed');
      const [a1, a2] = job.attempts as (Attempt & { error: string | null })[];
      assert.deepEqual(
        [a1?.outcome, a1?.winner, a2?.outcome, a2?.winner],
        ['passed', true, 'error', false],
      );
      assert.match(String(a2?.error), /budget/);
      // The fake's record is this test's own (reset after each).
      const bSteps = llm.requests.filter((r) => isRecord(r.body) && r.body.model === 'gpt-b');
      assert.equal(bSteps.length, 2, 'gpt-b was called past its share');
      // gpt-a's two steps and gpt-b's two: within the $30, whatever gpt-b would have gone on to.
      assert.equal(job.usage?.costUsd, cost('gpt-a') + cost('gpt-b'));
      assert.ok((job.usage?.costUsd ?? Number.POSITIVE_INFINITY) <= 30);
    } finally {
      const cleared = await svc.request('PATCH', `/v2/admin/projects/${projectId}`, {
        body: { jobBudgetUsd: null },
      });
      assert.equal(cleared.status, 200, cleared.text);
    }
  });

  test('the API refuses attempts that could not run, and writes nothing', async () => {
    const count = async () =>
      Number(
        (
          await svc.service.ctx.db
            .selectFrom('jobs')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = await count();
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ attempts: { count: 0 } }, /"count" must be a whole number from 1 to 4/],
      [{ attempts: { count: 5 } }, /"count" must be a whole number from 1 to 4/],
      [
        { attempts: { count: 1, agents: [{ model: 'openai:gpt-a' }, { model: 'openai:gpt-b' }] } },
        /may not name more agents than "count"/,
      ],
      [{ attempts: { count: 2 }, mode: 'ask' }, /"attempts" needs mode "code"/],
    ];
    for (const [extra, error] of cases) {
      const res = await svc.request('POST', `/v2/agent/${projectId}/job`, {
        body: { prompt: 'Write the answer', ...extra },
      });
      assert.equal(res.status, 400, `${JSON.stringify(extra)}: ${res.text}`);
      assert.match(String(res.json.error), error);
    }
    assert.equal(await count(), before);
  });
});
