import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TokenUsage } from '../jobs/usage.ts';
import type { ObservedAnswer } from '../sandbox/model-proxy.ts';
import type { ModelApi } from '../sandbox/model-request.ts';
import { type MeteredCall, meterAnswer, type StepReport, TurnMeter } from './meter.ts';

const SSE = 'text/event-stream; charset=utf-8';
const JSON_TYPE = 'application/json';
const REQUEST = { bytes: 4000, maxOutputTokens: 500, removed: [] };

const answerOf = (api: ModelApi, contentType: string, extra: Partial<ObservedAnswer> = {}) => ({
  api,
  status: 200,
  contentType,
  contentEncoding: '',
  request: REQUEST,
  ...extra,
});

/** Feeds `body` to a meter in pieces of `size` bytes; what `done` got, and how often. */
function meter(
  answer: ObservedAnswer,
  body: string,
  size = 7,
): { calls: number; call: MeteredCall | undefined } {
  const seen: MeteredCall[] = [];
  const observer = meterAnswer(answer, (call) => seen.push(call));
  const bytes = Buffer.from(body);
  for (let i = 0; i < bytes.length; i += size) observer.data(bytes.subarray(i, i + size));
  observer.end();
  observer.end();
  return { calls: seen.length, call: seen[0] };
}

const tokens = (input: number, output: number, cacheRead = 0, cacheWrite = 0): TokenUsage => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: cacheRead,
  cacheWriteTokens: cacheWrite,
});

const events = (...items: [string, unknown][]) =>
  items.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join('');

const messageStart = events([
  'message_start',
  {
    type: 'message_start',
    message: {
      id: 'msg_1',
      usage: {
        input_tokens: 3,
        cache_creation_input_tokens: 100,
        cache_read_input_tokens: 50,
        output_tokens: 1,
      },
    },
  },
]);

describe('the model call meter', () => {
  it('Anthropic, streamed: input and cache counts from message_start, output from the last message_delta', () => {
    const body =
      messageStart +
      events(
        ['ping', { type: 'ping' }],
        [
          'content_block_delta',
          { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'naïve ✓' } },
        ],
        ['message_delta', { type: 'message_delta', delta: {}, usage: { output_tokens: 7 } }],
        ['message_stop', { type: 'message_stop' }],
      );
    // One byte at a time too: events and characters split anywhere.
    for (const size of [1, 7, body.length]) {
      assert.deepEqual(meter(answerOf('messages', SSE), body, size), {
        calls: 1,
        call: { tokens: tokens(153, 7, 50, 100), source: 'answer', status: 200 },
      });
    }
  });

  it('Anthropic, whole: the usage of the JSON answer', () => {
    const body = JSON.stringify({
      type: 'message',
      content: [{ type: 'text', text: 'hi' }],
      usage: { input_tokens: 10, output_tokens: 2, cache_read_input_tokens: 5 },
    });
    assert.deepEqual(meter(answerOf('messages', JSON_TYPE), body).call, {
      tokens: tokens(15, 2, 5),
      source: 'answer',
      status: 200,
    });
  });

  it('OpenAI Responses, streamed: the usage of response.completed (cached tokens counted in input)', () => {
    const body = events(
      ['response.created', { type: 'response.created', response: { id: 'r', usage: null } }],
      ['response.output_text.delta', { type: 'response.output_text.delta', delta: 'Done' }],
      [
        'response.completed',
        {
          type: 'response.completed',
          response: {
            id: 'r',
            usage: {
              input_tokens: 100,
              input_tokens_details: { cached_tokens: 60 },
              output_tokens: 9,
              output_tokens_details: { reasoning_tokens: 4 },
            },
          },
        },
      ],
    );
    assert.deepEqual(meter(answerOf('responses', SSE), body).call?.tokens, tokens(100, 9, 60));
  });

  it('chat completions, streamed with CRLF: the last chunk with usage before [DONE]', () => {
    const chunk = (data: unknown) => `data: ${JSON.stringify(data)}\r\n\r\n`;
    const body = [
      chunk({ choices: [{ delta: { content: 'a' } }], usage: null }),
      chunk({ choices: [{ delta: { content: 'b' } }], usage: null }),
      chunk({
        choices: [],
        usage: {
          prompt_tokens: 40,
          completion_tokens: 6,
          prompt_tokens_details: { cached_tokens: 32 },
        },
      }),
      'data: [DONE]\r\n\r\n',
    ].join('');
    assert.deepEqual(meter(answerOf('chat', SSE), body, 3).call, {
      tokens: tokens(40, 6, 32),
      source: 'answer',
      status: 200,
    });
  });

  it('a stream cut before its final usage is an estimate: the input it named, the output its request allowed', () => {
    assert.deepEqual(meter(answerOf('messages', SSE), messageStart.slice(0, -1)).call, {
      tokens: tokens(153, 500, 50, 100),
      source: 'estimate',
      status: 200,
    });
  });

  it('an answer that named nothing readable is priced as one token per byte of its request and the output it allowed', () => {
    const estimate = { tokens: tokens(4000, 500), source: 'estimate', status: 200 };
    // A Responses stream cut before response.completed, a truncated JSON answer, a chat stream
    // without its usage chunk, a compressed body, an answer too large to read.
    const cases: [ObservedAnswer, string][] = [
      [answerOf('responses', SSE), 'event: x\ndata: {"type":"x"}\n\ndata: {tru'],
      [answerOf('messages', JSON_TYPE), '{"type":"mess'],
      [answerOf('chat', SSE), 'data: {"choices":[]}\n\ndata: [DONE]\n\n'],
      [
        answerOf('messages', JSON_TYPE, { contentEncoding: 'gzip' }),
        '{"usage":{"input_tokens":1}}',
      ],
      [
        answerOf('messages', JSON_TYPE),
        `{"usage":{"input_tokens":1},"x":"${'a'.repeat(17 * 1024 * 1024)}"}`,
      ],
    ];
    for (const [answer, body] of cases) {
      assert.deepEqual(
        meter(answer, body, 1024 * 1024),
        { calls: 1, call: estimate },
        body.slice(0, 40),
      );
    }
    // No answer at all, for a request that set no output limit (Codex sets none): 128k.
    assert.deepEqual(
      meter(
        answerOf('responses', '', {
          status: 0,
          request: { bytes: 9, maxOutputTokens: undefined, removed: [] },
        }),
        '',
      ).call,
      { tokens: tokens(9, 128_000), source: 'estimate', status: 0 },
    );
  });

  it("the vendor's error statuses use nothing, whatever their body says", () => {
    for (const status of [400, 401, 429, 500, 529, 302]) {
      assert.deepEqual(
        meter(answerOf('messages', JSON_TYPE, { status }), '{"usage":{"input_tokens":99}}').call,
        { tokens: tokens(0, 0), source: 'error', status },
      );
    }
  });
});

describe("a turn's model calls", () => {
  /** A meter with $1 per 1000 output tokens; what it reported and how often it stopped. */
  function turn(options: Partial<ConstructorParameters<typeof TurnMeter>[0]> = {}) {
    const steps: StepReport[] = [];
    let stops = 0;
    const meter = new TurnMeter({
      maxSteps: 3,
      job: undefined,
      month: undefined,
      priced: (t) => ({ ...t, costUsd: t.outputTokens / 1000 }),
      onStep: (s) => steps.push(s),
      onStop: () => {
        stops++;
      },
      ...options,
    });
    /** One call admitted and answered with `output` tokens. */
    const answered = (output: number) => {
      const o = meter.observe(answerOf('messages', JSON_TYPE));
      o.data(Buffer.from(JSON.stringify({ usage: { input_tokens: 10, output_tokens: output } })));
      o.end();
    };
    return { meter, steps, stops: () => stops, answered };
  }
  const billable = { api: 'messages', billable: true } as const;
  const counting = { api: 'count_tokens', billable: false } as const;

  it('admits as many model calls as the step limit, then refuses every call and stops the turn once', () => {
    const { meter, stops } = turn();
    for (let i = 0; i < 3; i++) {
      assert.equal(meter.admit(billable), undefined);
      // Counting tokens is no step.
      assert.equal(meter.admit(counting), undefined);
    }
    assert.equal(meter.stopped, undefined);
    const refusal = {
      status: 429,
      code: 'step_limit',
      message:
        'the turn used its 3 model calls without finishing; raise ERRAND_MAX_STEPS or split the task',
    };
    assert.deepEqual(meter.admit(billable), refusal);
    assert.deepEqual(meter.admit(counting), refusal);
    assert.deepEqual(meter.admit(billable), refusal);
    assert.equal(stops(), 1);
    assert.equal(meter.stopped, refusal.message);
  });

  it("stops the turn when an answer spends the job's budget, and admits nothing after it", () => {
    const { meter, steps, stops, answered } = turn({
      maxSteps: 50,
      job: { limitUsd: 1, spentUsd: 0.5 },
    });
    assert.equal(meter.admit(billable), undefined);
    answered(300);
    assert.equal(stops(), 0);
    assert.equal(meter.admit(billable), undefined);
    assert.equal(meter.admit(billable), undefined);
    // Two were in flight: the first spends the budget, the second still counts.
    answered(300);
    assert.equal(stops(), 1);
    answered(100);
    assert.equal(stops(), 1);
    const message =
      "the job reached its budget of $1.00 (it has spent $1.20); raise the project's jobBudgetUsd or split the task";
    assert.deepEqual(meter.admit(billable), { status: 429, code: 'budget_spent', message });
    assert.deepEqual(meter.admit(counting), { status: 429, code: 'budget_spent', message });
    assert.equal(meter.stopped, message);
    assert.deepEqual(
      steps.map((s) => [s.step, s.usage.costUsd]),
      [
        [1, 0.3],
        [2, 0.3],
        [3, 0.1],
      ],
    );
    assert.deepEqual(meter.usage, tokens(30, 700));
  });

  it("refuses the first call when the project's month is spent already, in its own words", () => {
    const { meter, stops } = turn({ month: { limitUsd: 20, spentUsd: 20 } });
    assert.deepEqual(meter.admit(billable), {
      status: 429,
      code: 'budget_spent',
      message:
        "the project reached its monthly budget of $20.00 (it has spent $20.00 this month); raise the project's monthlyBudgetUsd or wait for the next month",
    });
    assert.equal(stops(), 1);
  });

  it('counts an estimate against the budget, and says it is one; an unknown price counts nothing', () => {
    const { meter, steps, stops } = turn({ job: { limitUsd: 0.4, spentUsd: 0 } });
    assert.equal(meter.admit(billable), undefined);
    // Cut before any usage: the 500 output tokens the request allowed, $0.50.
    meter.observe(answerOf('messages', SSE)).end();
    assert.equal(stops(), 1);
    assert.equal(steps[0]?.estimated, true);
    assert.equal(steps[0]?.usage.costUsd, 0.5);

    const unpriced = turn({
      job: { limitUsd: 0.4, spentUsd: 0 },
      priced: (t) => ({ ...t, costUsd: null }),
    });
    assert.equal(unpriced.meter.admit(billable), undefined);
    unpriced.answered(1000);
    assert.equal(unpriced.meter.admit(billable), undefined);
    assert.equal(unpriced.stops(), 0);
  });

  it('reports a call the vendor refused as a step that used nothing, with its status', () => {
    const { meter, steps } = turn();
    assert.equal(meter.admit(billable), undefined);
    meter.observe(answerOf('messages', JSON_TYPE, { status: 529 })).end();
    assert.deepEqual(steps, [{ step: 1, usage: { ...tokens(0, 0), costUsd: 0 }, status: 529 }]);
  });
});

describe('what the proxy removed', () => {
  it("is told once a turn, each on the step of the first call it was removed from, the vendor's refusals included", () => {
    const steps: StepReport[] = [];
    const meter = new TurnMeter({
      maxSteps: 10,
      job: undefined,
      month: undefined,
      priced: (t) => ({ ...t, costUsd: 0 }),
      onStep: (s) => steps.push(s),
      onStop: () => {},
    });
    const call = (removed: ObservedAnswer['request']['removed'], status = 200) => {
      const o = meter.observe(
        answerOf('responses', JSON_TYPE, { status, request: { ...REQUEST, removed } }),
      );
      o.data(Buffer.from(JSON.stringify({ usage: { input_tokens: 1, output_tokens: 1 } })));
      o.end();
    };
    call(['mcp', 'web_search']);
    call(['web_search']);
    call(['service_tier', 'web_search'], 529);
    call([]);
    call(['mcp', 'service_tier', 'web_search']);
    assert.deepEqual(
      steps.map((s) => [s.step, s.removed]),
      [
        [1, ['mcp', 'web_search']],
        [2, undefined],
        [3, ['service_tier']],
        [4, undefined],
        [5, undefined],
      ],
    );
    assert.ok(!('removed' in (steps[1] ?? {})), 'a step with nothing new says nothing');
  });
});
