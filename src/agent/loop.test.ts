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
import {
  type AgentEvent,
  type AgentTurnInput,
  BudgetExceededError,
  describeToolOutput,
  ModelError,
  runAgentTurn,
} from './loop.ts';
import { resolveModel } from './models.ts';
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
      assert.deepEqual(result.usage, { inputTokens: 250, outputTokens: 50, totalTokens: 300 });
      assert.deepEqual(
        result.responseMessages.map((m) => m.role),
        ['assistant', 'tool', 'assistant'],
      );
      assert.deepEqual(result.turnMessages[0], {
        role: 'user',
        content: 'Update the README title',
      });
      assert.deepEqual(result.turnMessages.slice(1), result.responseMessages);

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
        usage: { inputTokens: 100, outputTokens: 20, totalTokens: 120 },
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
      const { input, events } = setup(protocol, { tools: createRepoTools(repo.ctx) });
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
      fake.script(httpError(400, { message: 'prompt is too long: 300000 tokens' }));
      await assert.rejects(runAgentTurn(setup(protocol).input), {
        name: 'ModelError',
        transient: false,
        status: 400,
        message: `the model provider rejected the request for model '${protocol}:model-a' (400): prompt is too long: 300000 tokens`,
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
      fake.script(reply('word '.repeat(200), { chunkDelayMs: 20 }));
      const controller = new AbortController();
      const { input } = setup(protocol, { signal: controller.signal });
      const turn = runAgentTurn(input);
      await fake.waitFor((r) => r.status === 200);
      await new Promise((r) => setTimeout(r, 100));
      const abortedAt = Date.now();
      controller.abort();
      await assert.rejects(turn, { name: 'AbortError' });
      // The stream has seconds left to run (200 words, 20 ms apart): promptly is well before.
      assert.ok(Date.now() - abortedAt < 1_500, 'rejected promptly');
      const seen = await fake.waitFor((r) => r.aborted, 1000);
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
        reply('word '.repeat(100), { chunkDelayMs: 20 }),
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
