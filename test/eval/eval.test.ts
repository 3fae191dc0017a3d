// An eval run end to end (docs/eval.md): the real service and worker, a real git server over
// loopback HTTP, the fake model server answering each model differently per task, and the real
// sandbox running each task's check on the finished attempt. Two agents on two tasks: one
// model writes the right answer to both, the other the same answer to both (right for one
// task only); the run's pass rates, costs, tokens and intervals come out as worked out by hand
// from the models' prices, and nothing is pushed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { EvalRunRecord } from '../../src/features/eval/types.ts';
import { isRecord } from '../../src/json.ts';
import type { FakeGitHub } from '../support/fake-github.ts';
import type { FakeLlm, RecordedRequest } from '../support/fake-llm.ts';
import { git } from '../support/git.ts';
import { type PricedStand, startPricedStand } from '../support/priced-stand.ts';
import { type TestService, waitFor } from '../support/service.ts';

/** Every model call uses this much: 1M tokens in, 100k out. */
const CALL_USAGE = { input: 1_000_000, output: 100_000 };
/** Prices per million tokens (in, out). */
const PRICES: Record<string, readonly [number, number]> = { 'gpt-a': [1, 2], 'gpt-b': [10, 20] };

/** Whether a chat request already carries a tool's result (the agent's second call). */
function hasToolResult(body: unknown): boolean {
  const messages = isRecord(body) && Array.isArray(body.messages) ? body.messages : [];
  return messages.some((m) => isRecord(m) && m.role === 'tool');
}

describe('eval run, end to end', () => {
  let stand: PricedStand;
  let bare: string;
  let github: FakeGitHub;
  let llm: FakeLlm;
  let svc: TestService;
  let projectId: string;

  before(async () => {
    stand = await startPricedStand('eval', PRICES);
    ({ bare, github, llm, svc, projectId } = stand);
  });
  after(() => stand?.close());

  test('two agents that differ per task: pass rates, costs and intervals as by hand', async () => {
    // gpt-b writes each task's word; gpt-a writes "alpha" whatever the task.
    llm.scriptAll((request: RecordedRequest) => {
      const model = isRecord(request.body) ? String(request.body.model) : '';
      const text = JSON.stringify(request.body);
      const task = text.includes('TASK-BETA') ? 'beta' : text.includes('TASK-ALPHA') ? 'alpha' : '';
      if (!(model in PRICES) || task === '') return undefined;
      if (hasToolResult(request.body))
        return { type: 'reply', text: `Wrote answer.txt (${model})`, usage: CALL_USAGE };
      const content = model === 'gpt-b' ? `${task}\n` : 'alpha\n';
      return {
        type: 'reply',
        toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content } }],
        usage: CALL_USAGE,
      };
    });
    const started = await svc.request('POST', '/v2/admin/evals', {
      body: {
        name: 'end to end',
        tasks: ['alpha', 'beta'].map((word) => ({
          id: word,
          project: projectId,
          prompt: `TASK-${word.toUpperCase()}: write the word ${word} to answer.txt`,
          check: `grep -qx ${word} answer.txt`,
        })),
        agents: [{ model: 'openai:gpt-a' }, { model: 'openai:gpt-b' }],
        concurrency: 2,
      },
    });
    assert.equal(started.status, 201, started.text);
    const runId = (JSON.parse(started.text) as EvalRunRecord).id;
    const run = await waitFor(
      'the run to finish',
      async () => {
        const res = await svc.request('GET', `/v2/admin/evals/${runId}`);
        const record = JSON.parse(res.text) as EvalRunRecord;
        return record.state === 'finished' ? record : undefined;
      },
      150_000,
    );
    assert.deepEqual(llm.unexpected, []);
    github.assertNoUnexpected();

    const states = Object.fromEntries(
      run.results.map((r) => [`${r.task} ${r.agent}`, [r.state, r.checkExit]]),
    );
    assert.deepEqual(states, {
      'alpha errand/openai:gpt-a': ['passed', 0],
      'alpha errand/openai:gpt-b': ['passed', 0],
      'beta errand/openai:gpt-a': ['failed', 1],
      'beta errand/openai:gpt-b': ['passed', 0],
    });
    // Each job: two calls of 1M in and 100k out. gpt-a: 2 × ($1 + $0.20) = $2.40;
    // gpt-b: 2 × ($10 + $2) = $24.
    for (const r of run.results) {
      assert.equal(r.costUsd, r.agent.endsWith('gpt-a') ? 2.4 : 24);
      assert.equal(r.inputTokens, 2 * CALL_USAGE.input);
      assert.equal(r.outputTokens, 2 * CALL_USAGE.output);
      assert.equal(r.steps, 2);
      assert.ok((r.durationMs ?? 0) > 0);
    }
    const [a, b] = run.agents;
    const round4 = (n: number | undefined) => Math.round((n ?? Number.NaN) * 1e4) / 1e4;
    // gpt-a: 1 of 2; Wilson (1/2) = 0.0945–0.9055; $4.80 in all.
    assert.equal(a?.agent, 'errand/openai:gpt-a');
    assert.deepEqual([a?.finished, a?.passed, a?.passRate], [2, 1, 0.5]);
    assert.deepEqual([round4(a?.interval?.low), round4(a?.interval?.high)], [0.0945, 0.9055]);
    assert.deepEqual([a?.medianCostUsd, a?.totalCostUsd, a?.medianSteps], [2.4, 4.8, 2]);
    // gpt-b: 2 of 2; Wilson (2/2) = 0.3424–1; $48 in all.
    assert.equal(b?.agent, 'errand/openai:gpt-b');
    assert.deepEqual([b?.finished, b?.passed, b?.passRate], [2, 2, 1]);
    assert.deepEqual([round4(b?.interval?.low), round4(b?.interval?.high)], [0.3424, 1]);
    assert.deepEqual([b?.medianCostUsd, b?.totalCostUsd], [24, 48]);
    assert.deepEqual(
      [b?.inputTokens, b?.outputTokens],
      [4 * CALL_USAGE.input, 4 * CALL_USAGE.output],
    );

    // An eval pushes nothing: no branch of any of its jobs on the server, no pull request.
    assert.equal(git(bare, 'for-each-ref', '--format=%(refname)', 'refs/heads/errand/'), '');
    assert.equal(github.pullRequests('acme/app').length, 0);
  });
});
