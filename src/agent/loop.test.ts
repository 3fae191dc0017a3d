import assert from 'node:assert/strict';
import { after, beforeEach, describe, it } from 'node:test';
import { type ModelMessage, tool } from 'ai';
import { z } from 'zod';
import {
  dynamic,
  type FakeLlm,
  httpError,
  reply,
  startFakeLlm,
  toolCalls,
} from '../../test/support/fake-llm.ts';
import type { TokenUsage } from '../jobs/usage.ts';
import { type AgentEvent, type AgentTurnInput, BudgetExceededError, runAgentTurn } from './loop.ts';
import { ModelError } from './model-errors.ts';
import { resolveModel } from './models.ts';
import { describeToolOutput } from './tool-output.ts';
import { createRepoTools } from './tools/index.ts';
import { makeRepo } from './tools/testing.ts';

const KEY = 'fake-key-for-tests';
const fake: FakeLlm = await startFakeLlm({ apiKey: KEY, models: ['model-a'] });
after(() => fake.close());
beforeEach(() => fake.reset());

// The SDK honours retry-after-ms, which keeps its backoff out of the test run time.
const retrySoon = { headers: { 'retry-after-ms': '1' } };

type Protocol = 'openai' | 'anthropic';

function setup(protocol: Protocol, overrides: Partial<AgentTurnInput> = {}) {
  const events: AgentEvent[] = [];
  const files: Record<string, string> = { 'README.md': '# Demo' };
  const input: AgentTurnInput = {
    model: resolveModel(`${protocol}:model-a`, {
      [protocol]: { apiKey: KEY, baseURL: `${fake.url}/v1` },
    }),
    system: 'You are a test agent.',
    history: [],
    prompt: 'Update the README title',
    tools: {
      read_file: tool({
        description: 'Read a file',
        inputSchema: z.object({ path: z.string() }),
        execute: async ({ path }) => {
          const content = files[path];
          if (content === undefined) throw new Error(`no such file: ${path}`);
          return content;
        },
      }),
    },
    budgets: { maxSteps: 5, maxOutputTokens: 1000, timeoutMs: 10_000 },
    signal: new AbortController().signal,
    onEvent: (e) => {
      events.push(e);
    },
    ...overrides,
  };
  return { input, events };
}

function messagesOf(body: unknown): unknown[] {
  return (body as { messages: unknown[] }).messages;
}

for (const protocol of ['openai', 'anthropic'] as const) {
  describe(`runAgentTurn over ${protocol}`, () => {
    it('runs a tool loop and returns the summary, messages, usage and events', async () => {
      fake.script(
        toolCalls([{ name: 'read_file', input: { path: 'README.md' } }], {
          usage: { input: 100, output: 20 },
        }),
        reply('Retitle the README\n\nChanged the heading.', { usage: { input: 150, output: 30 } }),
      );
      const { input, events } = setup(protocol);
      const result = await runAgentTurn(input);

      assert.equal(result.summary, 'Retitle the README\n\nChanged the heading.');
      assert.equal(result.steps, 2);
      assert.equal(result.finishReason, 'stop');
      assert.deepEqual(result.usage, {
        inputTokens: 250,
        outputTokens: 50,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
      });
      assert.deepEqual(
        result.responseMessages.map((m) => m.role),
        ['assistant', 'tool', 'assistant'],
      );
      assert.deepEqual(result.turnMessages[0], {
        role: 'user',
        content: 'Update the README title',
      });
      // As they came, the last one marked with the provider's count of tokens per character
      // (the next turn's first estimate starts from it).
      const [last, ...before] = result.turnMessages.slice(1).reverse();
      assert.deepEqual(before.reverse(), result.responseMessages.slice(0, -1));
      const { providerOptions, ...rest } = last ?? {};
      assert.deepEqual(rest, result.responseMessages.at(-1));
      const perChar = providerOptions?.errand?.tokensPerChar;
      assert.ok(typeof perChar === 'number' && perChar > 0, JSON.stringify(providerOptions));

      const [call, res, step1, step2] = events;
      assert.ok(call?.type === 'tool.call' && res?.type === 'tool.result');
      assert.equal(res.id, call.id, 'a result names the call it answers');
      assert.deepEqual(
        [call.name, call.summary, res.name, res.ok, res.summary],
        ['read_file', 'read_file README.md', 'read_file', true, '# Demo'],
      );
      assert.deepEqual(step1, {
        type: 'model.step',
        step: 1,
        finishReason: 'tool-calls',
        usage: { inputTokens: 100, outputTokens: 20, cacheReadTokens: 0, cacheWriteTokens: 0 },
      });
      assert.equal(step2?.type === 'model.step' && step2.step, 2);

      // The second request carried the system prompt, the prompt, the call and its result.
      const second = JSON.stringify(fake.requests[1]?.body);
      assert.match(second, /You are a test agent\./);
      assert.match(second, /Update the README title/);
      assert.match(second, /# Demo/);
      fake.assertDone();
    });

    it('sends the earlier turns as history on the next turn', async () => {
      fake.script(
        toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]),
        reply('First turn done'),
        dynamic((req) => {
          const text = JSON.stringify(messagesOf(req.body));
          const sawAll = ['Update the README title', '# Demo', 'First turn done', 'And now?'].every(
            (s) => text.includes(s),
          );
          return reply(sawAll ? 'I remember everything' : 'I forgot');
        }),
      );
      const first = await runAgentTurn(setup(protocol).input);
      const history: ModelMessage[] = [...first.turnMessages];
      const second = await runAgentTurn(setup(protocol, { history, prompt: 'And now?' }).input);
      assert.equal(second.summary, 'I remember everything');
      // user, assistant (call), tool result, assistant, user; OpenAI has the system prompt first.
      const sent = messagesOf(fake.requests[2]?.body);
      assert.equal(sent.length, protocol === 'openai' ? 6 : 5);
      fake.assertDone();
    });

    it('feeds a failing tool back to the model and carries on', async () => {
      fake.script(
        toolCalls([{ name: 'read_file', input: { path: 'missing.txt' } }]),
        dynamic((req) =>
          reply(JSON.stringify(req.body).includes('no such file: missing.txt') ? 'ok' : 'bad'),
        ),
      );
      const { input, events } = setup(protocol);
      const result = await runAgentTurn(input);
      assert.equal(result.summary, 'ok');
      const res = events.find((e) => e.type === 'tool.result');
      assert.deepEqual(res && { ...res, id: '' }, {
        type: 'tool.result',
        id: '',
        name: 'read_file',
        ok: false,
        summary: 'no such file: missing.txt',
      });
      fake.assertDone();
    });

    it("takes a file tool's event from its structured result and sends the model its text", async (t) => {
      const repo = await makeRepo(t, { 'README.md': '# Demo\n' });
      fake.script(
        toolCalls([
          { name: 'read_file', input: { path: 'missing.txt' } },
          { name: 'read_file', input: { path: 'README.md' } },
        ]),
        dynamic((req) => {
          const body = JSON.stringify(req.body);
          const sawBoth =
            body.includes("Error: 'missing.txt' does not exist") && body.includes('1\\t# Demo');
          return reply(sawBoth ? 'ok' : 'bad');
        }),
      );
      const { input, events } = setup(protocol, { tools: createRepoTools(repo.run) });
      const result = await runAgentTurn(input);
      assert.equal(result.summary, 'ok');
      const results = events.flatMap((e) =>
        e.type === 'tool.result' ? [[e.name, e.ok, e.summary]] : [],
      );
      assert.deepEqual(results, [
        ['read_file', false, "'missing.txt' does not exist"],
        ['read_file', true, "'README.md' lines 1-1 of 1"],
      ]);
      fake.assertDone();
    });

    it('fails at once with a non-transient ModelError on 401', async () => {
      fake.script(httpError(401, { message: 'invalid key sk-abcdefghijkl' }));
      const envVar = protocol === 'openai' ? 'OPENAI_API_KEY' : 'ANTHROPIC_API_KEY';
      await assert.rejects(runAgentTurn(setup(protocol).input), (err: unknown) => {
        assert.ok(err instanceof ModelError);
        assert.equal(err.transient, false);
        assert.equal(err.status, 401);
        assert.equal(
          err.message,
          `the model provider refused the credentials (401) for model '${protocol}:model-a'; check ${envVar}`,
        );
        return true;
      });
      assert.equal(fake.requests.length, 1);
      fake.assertDone();
    });

    it('says which model was not found on 404', async () => {
      fake.script(httpError(404, { message: 'model: model-a' }));
      await assert.rejects(runAgentTurn(setup(protocol).input), {
        name: 'ModelError',
        transient: false,
        message: `model '${protocol}:model-a' not found at the provider (404); check the model id and the provider's base URL`,
      });
      assert.equal(fake.requests.length, 1);
    });

    it('quotes the provider on other 4xx answers', async () => {
      fake.script(httpError(400, { message: 'temperature: must be at most 1' }));
      await assert.rejects(runAgentTurn(setup(protocol).input), {
        name: 'ModelError',
        transient: false,
        status: 400,
        message: `the model provider rejected the request for model '${protocol}:model-a' (400): temperature: must be at most 1`,
      });
    });

    it('succeeds after the SDK retried two 5xx answers', async () => {
      fake.script(httpError(500, retrySoon), httpError(503, retrySoon), reply('done'));
      const result = await runAgentTurn(setup(protocol).input);
      assert.equal(result.summary, 'done');
      assert.equal(fake.requests.length, 3);
      fake.assertDone();
    });

    it('gives up with a transient ModelError when the retries run out', async () => {
      fake.script(
        httpError(429, retrySoon),
        httpError(429, retrySoon),
        httpError(429, { headers: { 'retry-after': '30', 'retry-after-ms': '1' } }),
      );
      await assert.rejects(runAgentTurn(setup(protocol, { maxRetries: 2 }).input), {
        name: 'ModelError',
        transient: true,
        status: 429,
        retryAfterSeconds: 1,
        message: `the model provider rate-limited model '${protocol}:model-a' (429) after 3 attempts; the turn can be retried later`,
      });
      assert.equal(fake.requests.length, 3);
      fake.assertDone();
    });

    it('reports a stream broken off by the provider as transient', async () => {
      fake.script(reply('one two three four', { streamErrorAfter: 2 }));
      await assert.rejects(runAgentTurn(setup(protocol).input), (err: unknown) => {
        assert.ok(err instanceof ModelError);
        assert.equal(err.transient, true);
        assert.match(err.message, new RegExp(`model '${protocol}:model-a'`));
        return true;
      });
      fake.assertDone();
    });

    it('stops promptly on abort and closes the stream', async () => {
      // The stream stops after a few words and would stay open for good: only the abort ends it.
      fake.script(reply('word '.repeat(200), { stallAfter: 5 }));
      const controller = new AbortController();
      const { input } = setup(protocol, { signal: controller.signal });
      const turn = runAgentTurn(input);
      await Promise.race([fake.waitFor((r) => r.stalled, 20_000), turn]);
      controller.abort();
      await assert.rejects(turn, { name: 'AbortError' });
      const seen = await fake.waitFor((r) => r.aborted, 5_000);
      assert.equal(seen.completed, false);
      fake.assertDone();
    });

    it('throws BudgetExceededError when the steps run out mid-task', async () => {
      fake.script(
        toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]),
        toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]),
      );
      const { input } = setup(protocol, {
        budgets: { maxSteps: 2, maxOutputTokens: 1000, timeoutMs: 10_000 },
      });
      await assert.rejects(runAgentTurn(input), (err: unknown) => {
        assert.ok(err instanceof BudgetExceededError);
        assert.equal(err.budget, 'steps');
        assert.equal(
          err.message,
          'the turn used its 2 steps without finishing; raise ERRAND_MAX_STEPS or split the task',
        );
        // The work so far is kept so a follow-up can continue from it.
        assert.deepEqual(
          err.partial.responseMessages.map((m) => m.role),
          ['assistant', 'tool', 'assistant', 'tool'],
        );
        assert.equal(err.partial.steps, 2);
        return true;
      });
      fake.assertDone();
    });

    it('throws BudgetExceededError when a reply hits the output-token limit', async () => {
      fake.script(reply('a long answer cut', { finish: 'length' }));
      await assert.rejects(runAgentTurn(setup(protocol).input), {
        name: 'BudgetExceededError',
        budget: 'outputTokens',
        message:
          "the model's reply reached the 1000-token output limit before it finished; raise ERRAND_MAX_OUTPUT_TOKENS or ask for a smaller change",
      });
      const body = fake.requests[0]?.body as { max_tokens?: number } | undefined;
      assert.equal(body?.max_tokens, 1000);
    });

    it('throws BudgetExceededError when the time runs out, keeping finished steps', async () => {
      fake.script(
        toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]),
        // A stream that stalls for good: the time budget is what ends it.
        reply('word '.repeat(100), { stallAfter: 3 }),
      );
      const { input } = setup(protocol, {
        budgets: { maxSteps: 5, maxOutputTokens: 1000, timeoutMs: 300 },
      });
      await assert.rejects(runAgentTurn(input), (err: unknown) => {
        assert.ok(err instanceof BudgetExceededError);
        assert.equal(err.budget, 'time');
        assert.equal(
          err.message,
          'the turn ran out of its 300 ms time budget; raise ERRAND_TURN_TIMEOUT_SECONDS or split the task',
        );
        assert.deepEqual(
          err.partial.turnMessages.map((m) => m.role),
          ['user', 'assistant', 'tool'],
        );
        return true;
      });
      await fake.waitFor((r) => r.aborted);
      fake.assertDone();
    });
  });
}

describe('runAgentTurn: edges', () => {
  it('reports an unreachable provider as transient', async () => {
    const { input } = setup('openai', {
      model: resolveModel('openai:model-a', {
        openai: { apiKey: KEY, baseURL: 'http://127.0.0.1:1/v1' },
      }),
      maxRetries: 0,
    });
    await assert.rejects(runAgentTurn(input), (err: unknown) => {
      assert.ok(err instanceof ModelError);
      assert.equal(err.transient, true);
      assert.equal(err.status, undefined);
      assert.match(
        err.message,
        /^could not get an answer from the model provider for model 'openai:model-a'/,
      );
      return true;
    });
  });

  it('stops the turn when the event sink fails', async () => {
    fake.script(toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]));
    const sinkDown = new Error('database is down');
    const { input } = setup('anthropic', {
      onEvent: () => {
        throw sinkDown;
      },
    });
    await assert.rejects(runAgentTurn(input), (err) => err === sinkDown);
    assert.equal(fake.requests.length, 1);
    fake.assertDone();
  });

  it('does not call the model when already cancelled', async () => {
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(runAgentTurn(setup('openai', { signal: controller.signal }).input), {
      name: 'AbortError',
    });
    assert.equal(fake.requests.length, 0);
  });

  it('uses the given summarizers for events', async () => {
    fake.script(toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]), reply('done'));
    const { input, events } = setup('openai', {
      summarizeArgs: (name, args) => `${name}(${(args as { path: string }).path})`,
      summarizeResult: (_name, output) => ({ ok: true, summary: `${String(output).length} chars` }),
    });
    await runAgentTurn(input);
    assert.deepEqual(
      events.filter((e) => e.type !== 'model.step').map((e) => ('summary' in e ? e.summary : '')),
      ['read_file(README.md)', '6 chars'],
    );
    fake.assertDone();
  });

  it('reads a tool\'s "Error:" output as a failure and keeps contents out of events', () => {
    assert.deepEqual(describeToolOutput('Error: ../x is outside the repository'), {
      ok: false,
      summary: '../x is outside the repository',
    });
    assert.deepEqual(describeToolOutput('SECRET=1\nline two\nline three'), {
      ok: true,
      summary: '3 lines',
    });
    assert.deepEqual(describeToolOutput('Deleted "a.txt".'), {
      ok: true,
      summary: 'Deleted "a.txt".',
    });
    assert.deepEqual(describeToolOutput({ files: 2 }), { ok: true, summary: '{"files":2}' });
  });

  it("takes a structured tool result's ok flag and title, never its text", () => {
    const text = 'Error: looks like an error but the tool says it is fine\nSECRET=1';
    assert.deepEqual(describeToolOutput({ ok: true, title: 'read a.txt', text }), {
      ok: true,
      summary: 'read a.txt',
    });
    assert.deepEqual(describeToolOutput({ ok: false, title: "'x' does not exist", text: 'x' }), {
      ok: false,
      summary: "'x' does not exist",
    });
  });
});

describe('runAgentTurn: the context window, prompt caches and the job budget', () => {
  const isSummary = (body: unknown) =>
    JSON.stringify(body).includes('You write the working notes of a software engineering agent');
  /** Earlier turns whose long answers (which masking cannot shorten) fill the window. */
  const longHistory = (): ModelMessage[] =>
    [1, 2, 3].flatMap((t): ModelMessage[] => [
      { role: 'user', content: `Earlier prompt ${t}` },
      { role: 'assistant', content: `Answer ${t}: ${'a'.repeat(8_000)}` },
    ]);

  for (const protocol of ['openai', 'anthropic'] as const) {
    it(`${protocol}: answers a refusal for length by compacting and sending the step again, once`, async (t) => {
      // The catalog says 50k tokens; the server holds 6k (an operator's local model, say).
      const small = await startFakeLlm({
        apiKey: KEY,
        models: ['model-a'],
        contextWindow: 6_000,
        allowOverflows: 1,
      });
      t.after(() => small.close());
      small.script(
        dynamic((req) =>
          isSummary(req.body) ? reply('Notes: answers 1-3 were given.') : undefined,
        ),
        dynamic((req) =>
          JSON.stringify(req.body).includes('Notes: answers 1-3') ? reply('Done again') : undefined,
        ),
      );
      const { input, events } = setup(protocol, {
        model: resolveModel(`${protocol}:model-a`, {
          [protocol]: { apiKey: KEY, baseURL: `${small.url}/v1` },
        }),
        history: longHistory(),
        prompt: 'And now the fourth',
        conversation: { windowTokens: 50_000 },
      });
      const result = await runAgentTurn(input);
      assert.equal(result.summary, 'Done again');
      assert.deepEqual(
        small.requests.map((r) => r.overflow),
        [true, false, false],
      );
      const compacted = events.find((e) => e.type === 'context.compacted');
      assert.ok(compacted?.type === 'context.compacted');
      assert.equal(compacted.reason, 'overflow');
      assert.ok(compacted.usage.inputTokens > 0);
      // The retried request fits the window the refusal named, with room for the reply.
      const retried = small.requests[2];
      const maxTokens = (retried?.body as { max_tokens?: number } | undefined)?.max_tokens ?? 0;
      assert.ok((retried?.promptTokens ?? 0) + maxTokens <= 6_000);
      // The turn stores the compacted conversation, every prompt in it word for word.
      const [first] = result.turnMessages;
      assert.equal(first?.providerOptions?.errand?.fromStart, true);
      const stored = JSON.stringify(result.turnMessages);
      for (const p of [
        'Earlier prompt 1',
        'Earlier prompt 2',
        'Earlier prompt 3',
        'And now the fourth',
      ])
        assert.ok(stored.includes(p), p);
      assert.ok(!stored.includes('a'.repeat(8_000)), 'the long answers are summarised');
      // Usage counts the summary's call too.
      assert.equal(
        result.usage.inputTokens,
        (small.requests[1]?.promptTokens ?? 0) + (retried?.promptTokens ?? 0),
      );
      small.assertDone();
    });
  }

  it('fails with a ModelError naming the window when nothing is left to compact', async (t) => {
    const tiny = await startFakeLlm({
      apiKey: KEY,
      models: ['model-a'],
      contextWindow: 200,
      allowOverflows: 1,
    });
    t.after(() => tiny.close());
    const { input } = setup('openai', {
      model: resolveModel('openai:model-a', { openai: { apiKey: KEY, baseURL: `${tiny.url}/v1` } }),
      prompt: `A prompt far longer than the window: ${'p'.repeat(2_000)}`,
    });
    await assert.rejects(runAgentTurn(input), (err: unknown) => {
      assert.ok(err instanceof ModelError);
      assert.equal(err.transient, false);
      assert.match(err.message, /refused the request as longer than its context window/);
      assert.match(err.message, /maximum context length is 200 tokens/);
      assert.match(err.message, /ERRAND_MODEL_CATALOG/);
      return true;
    });
    assert.equal(tiny.requests.length, 1);
    tiny.assertDone();
  });

  it('openai: sends the job as the prompt cache key and reports the cached tokens of each step', async () => {
    fake.script(
      toolCalls([{ name: 'read_file', input: { path: 'big.txt' } }]),
      toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]),
      reply('Read both'),
    );
    const files = { 'big.txt': 'b'.repeat(12_000) };
    const { input, events } = setup('openai', {
      conversation: { cacheKey: 'job_abc' },
      tools: {
        read_file: tool({
          description: 'Read a file',
          inputSchema: z.object({ path: z.string() }),
          execute: async ({ path }) => (files as Record<string, string>)[path] ?? '# Demo',
        }),
      },
    });
    const result = await runAgentTurn(input);
    const bodies = fake.requests.map((r) => r.body as { prompt_cache_key?: string });
    assert.deepEqual(
      bodies.map((b) => b.prompt_cache_key),
      ['job_abc', 'job_abc', 'job_abc'],
    );
    const steps = events.flatMap((e) => (e.type === 'model.step' ? [e.usage] : []));
    // The third request repeats the second whole (3,000 tokens of file): OpenAI serves that
    // prefix from its cache, in steps of 128 tokens past 1,024.
    assert.deepEqual(
      steps.map((u) => u.cacheReadTokens),
      fake.requests.map((r) => r.cacheReadTokens),
    );
    assert.equal(steps[0]?.cacheReadTokens, 0);
    const third = steps[2]?.cacheReadTokens ?? 0;
    assert.ok(
      third >= (fake.requests[1]?.promptTokens ?? 0) - 128 && third % 128 === 0,
      `${third}`,
    );
    assert.equal(
      result.usage.cacheReadTokens,
      steps.reduce((n, u) => n + u.cacheReadTokens, 0),
    );
    fake.assertDone();
  });

  it('anthropic: marks cache breakpoints on the system prompt and the conversation, and reads them back', async () => {
    fake.script(
      toolCalls([{ name: 'read_file', input: { path: 'big.txt' } }]),
      toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]),
      reply('Read both'),
    );
    const { input, events } = setup('anthropic', {
      history: [
        { role: 'user', content: `An earlier prompt ${'e'.repeat(6_000)}` },
        { role: 'assistant', content: 'An earlier answer' },
      ],
      tools: {
        read_file: tool({
          description: 'Read a file',
          inputSchema: z.object({ path: z.string() }),
          execute: async ({ path }) => (path === 'big.txt' ? 'b'.repeat(12_000) : '# Demo'),
        }),
      },
    });
    await runAgentTurn(input);
    type Block = { cache_control?: unknown };
    type Body = { system: Block[]; messages: Array<{ role: string; content: Block[] }> };
    for (const request of fake.requests) {
      const body = request.body as Body;
      assert.deepEqual(body.system.at(-1)?.cache_control, { type: 'ephemeral' });
      const marked = body.messages.flatMap((m, i) =>
        m.content.filter((b) => b.cache_control !== undefined).map(() => i),
      );
      // The last message, and the one that ended the request before (read back from it).
      const lastAssistant = body.messages.findLastIndex((m) => m.role === 'assistant');
      assert.deepEqual(
        marked,
        [lastAssistant - 1, body.messages.length - 1].filter((i) => i >= 0),
      );
    }
    const steps = events.flatMap((e) => (e.type === 'model.step' ? [e.usage] : []));
    // The first request writes its prefix (the earlier turn); the next ones read what the one
    // before wrote and write what they add.
    assert.ok((steps[0]?.cacheWriteTokens ?? 0) > 1_024, JSON.stringify(steps));
    assert.ok((steps[1]?.cacheReadTokens ?? 0) >= (steps[0]?.cacheWriteTokens ?? 0));
    assert.ok((steps[2]?.cacheReadTokens ?? 0) > (steps[1]?.cacheReadTokens ?? 0));
    for (const u of steps) assert.ok(u.inputTokens >= u.cacheReadTokens + u.cacheWriteTokens);
    fake.assertDone();
  });

  it('stops the turn once the job has spent its budget, like a turn out of steps', async () => {
    fake.script(
      toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]),
      toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]),
    );
    const priced: TokenUsage[] = [];
    const { input } = setup('openai', {
      budget: {
        limitUsd: 0.01,
        spentUsd: 0.004,
        costOf: (usage) => {
          priced.push(usage);
          return 0.003;
        },
      },
    });
    await assert.rejects(runAgentTurn(input), (err: unknown) => {
      assert.ok(err instanceof BudgetExceededError);
      assert.equal(err.budget, 'cost');
      assert.equal(
        err.message,
        "the job reached its budget of $0.0100 (it has spent $0.0100); raise the project's jobBudgetUsd or split the task",
      );
      assert.equal(err.partial.steps, 2);
      return true;
    });
    assert.equal(priced.length, 2);
    assert.equal(fake.requests.length, 2);
    fake.assertDone();
  });

  it('makes no model call when the job has spent its budget already', async () => {
    const { input } = setup('anthropic', {
      budget: { limitUsd: 1, spentUsd: 1.5, costOf: () => 0.1 },
    });
    await assert.rejects(runAgentTurn(input), {
      name: 'BudgetExceededError',
      budget: 'cost',
      message:
        "the job reached its budget of $1.00 (it has spent $1.50); raise the project's jobBudgetUsd or split the task",
    });
    assert.equal(fake.requests.length, 0);
  });
});
