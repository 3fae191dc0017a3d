// The per-agent statistics of an eval run against numbers worked out by hand: the Wilson score
// interval (z = 1.96) at 3/4, 0/4 and 4/4, medians of odd and even counts, and the table's
// rules (error counts as finished and not passed; an unknown cost makes the total unknown).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { agentStats, median, type ResultFigures, wilsonInterval } from './stats.ts';

const round4 = (n: number | undefined) => Math.round((n ?? Number.NaN) * 1e4) / 1e4;

describe('eval statistics', () => {
  test('the Wilson interval, worked out by hand', () => {
    // 3/4: p = 0.75, z²/n = 0.9604; centre = (0.75 + 0.4802) / 1.9604 = 0.62753;
    // half = 1.96 / 1.9604 · √(0.046875 + 0.060025) = 0.32689.
    const threeOfFour = wilsonInterval(3, 4);
    assert.equal(round4(threeOfFour?.low), 0.3006);
    assert.equal(round4(threeOfFour?.high), 0.9544);
    // 0/4: centre = half = 0.4802 / 1.9604 = 0.24495: from 0 to 0.4899.
    assert.deepEqual(
      [round4(wilsonInterval(0, 4)?.low), round4(wilsonInterval(0, 4)?.high)],
      [0, 0.4899],
    );
    // 4/4 mirrors it.
    assert.deepEqual(
      [round4(wilsonInterval(4, 4)?.low), round4(wilsonInterval(4, 4)?.high)],
      [0.5101, 1],
    );
    assert.equal(wilsonInterval(0, 0), null);
  });

  test('the median of an odd and an even count', () => {
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.equal(median([]), null);
  });

  test('an agent table: error is finished and not passed, pending is not finished', () => {
    const r = (over: Partial<ResultFigures>): ResultFigures => ({
      agent: 'errand/anthropic:claude-sonnet-4-5',
      state: 'passed',
      costUsd: 0.1,
      durationMs: 1000,
      steps: 3,
      inputTokens: 100,
      outputTokens: 10,
      ...over,
    });
    const [a, b] = agentStats([
      r({ costUsd: 0.1, durationMs: 1000, steps: 2 }),
      r({ state: 'failed', costUsd: 0.3, durationMs: 4000, steps: 6 }),
      r({ state: 'error', costUsd: 0.2, durationMs: 2000, steps: 4 }),
      r({ costUsd: 0.4, durationMs: 3000, steps: 8 }),
      r({
        state: 'pending',
        costUsd: null,
        durationMs: null,
        steps: null,
        inputTokens: null,
        outputTokens: null,
      }),
      r({ agent: 'codex/openai:gpt-5', costUsd: null }),
    ]);
    assert.equal(a?.agent, 'errand/anthropic:claude-sonnet-4-5');
    assert.equal(a?.engine, 'errand');
    assert.equal(a?.model, 'anthropic:claude-sonnet-4-5');
    assert.equal(a?.runs, 5);
    assert.equal(a?.finished, 4);
    assert.equal(a?.passed, 2);
    assert.equal(a?.passRate, 0.5);
    assert.equal(round4(a?.interval?.low), 0.15);
    assert.equal(round4(a?.interval?.high), 0.85);
    assert.equal(a?.medianCostUsd, 0.25);
    assert.equal(a?.totalCostUsd, 1);
    assert.equal(a?.medianDurationMs, 2500);
    assert.equal(a?.medianSteps, 5);
    assert.equal(a?.inputTokens, 400);
    assert.equal(a?.outputTokens, 40);
    // One finished result of unknown cost: no total, no median.
    assert.equal(b?.agent, 'codex/openai:gpt-5');
    assert.equal(b?.totalCostUsd, null);
    assert.equal(b?.medianCostUsd, null);
    assert.equal(b?.passRate, 1);
  });

  test('an agent with nothing finished has no rate, interval or cost', () => {
    const [a] = agentStats([
      {
        agent: 'x/y:z',
        state: 'running',
        costUsd: null,
        durationMs: null,
        steps: null,
        inputTokens: null,
        outputTokens: null,
      },
    ]);
    assert.equal(a?.finished, 0);
    assert.equal(a?.passRate, null);
    assert.equal(a?.interval, null);
    assert.equal(a?.totalCostUsd, null);
    assert.equal(a?.inputTokens, 0);
  });
});
