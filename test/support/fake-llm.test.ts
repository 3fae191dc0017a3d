import assert from 'node:assert/strict';
import { after, beforeEach, describe, it } from 'node:test';
import { generateText } from 'ai';
import { resolveModel } from '../../src/agent/models.ts';
import { dynamic, type FakeLlm, httpError, reply, startFakeLlm, toolCalls } from './fake-llm.ts';

const KEY = 'test-key-123';
const fake: FakeLlm = await startFakeLlm({ apiKey: KEY, models: ['m1'] });
after(() => fake.close());
beforeEach(() => fake.reset());

const openAiBody = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], ...extra });

const post = (path: string, body: string, headers: Record<string, string>) =>
  fetch(`${fake.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });

function sseData(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => l.slice('data: '.length));
}

describe('fake LLM: strictness', () => {
  it('reports an unknown path', async () => {
    const res = await post('/v1/completions', openAiBody(), { authorization: `Bearer ${KEY}` });
    assert.equal(res.status, 404);
    assert.match(fake.unexpected.join(), /unknown endpoint/);
    assert.throws(() => fake.assertDone(), /unknown endpoint/);
  });

  it('reports a missing or wrong key for each protocol', async () => {
    fake.script(reply('never'));
    const a = await post('/v1/chat/completions', openAiBody(), { authorization: 'Bearer nope' });
    assert.equal(a.status, 401);
    const b = await post('/v1/messages', openAiBody({ max_tokens: 10 }), {
      'x-api-key': 'nope',
      'anthropic-version': '2023-06-01',
    });
    assert.equal(b.status, 401);
    assert.deepEqual(await b.json(), {
      type: 'error',
      error: { type: 'authentication_error', message: 'missing or wrong x-api-key header' },
    });
    assert.equal(fake.unexpected.length, 2);
    assert.equal(fake.pending(), 1);
  });

  it('reports an unknown model, a request beyond the script, and leftovers', async () => {
    const auth = { authorization: `Bearer ${KEY}` };
    const r1 = await post('/v1/chat/completions', openAiBody({ model: 'other' }), auth);
    assert.equal(r1.status, 400);
    const r2 = await post('/v1/chat/completions', openAiBody(), auth);
    assert.equal(r2.status, 500);
    assert.match(
      fake.unexpected.join('\n'),
      /unknown model "other"[\s\S]*more requests than scripted/,
    );
    fake.reset();
    fake.script(reply('left over'));
    assert.throws(() => fake.assertDone(), /1 scripted answer\(s\) never requested/);
  });

  it('refuses conversations a real vendor would refuse', async () => {
    fake.script(reply('x'), reply('y'));
    const dangling = [
      { role: 'user', content: 'hi' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
      },
      { role: 'user', content: 'and?' },
    ];
    const r1 = await post(
      '/v1/chat/completions',
      JSON.stringify({ model: 'm1', messages: dangling }),
      { authorization: `Bearer ${KEY}` },
    );
    assert.equal(r1.status, 400);
    const r2 = await post(
      '/v1/messages',
      JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: 'a' }] }),
      { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' },
    );
    assert.equal(r2.status, 400);
    assert.match(fake.unexpected.join('\n'), /c1 have no result[\s\S]*max_tokens is required/);
  });
});

describe('fake LLM: protocols', () => {
  it('streams OpenAI chunks with tool-call deltas, usage and [DONE]', async () => {
    fake.script(
      toolCalls([{ id: 'call_x', name: 'read', input: { path: 'a.txt' } }], {
        text: 'Let me look',
      }),
    );
    const res = await post(
      '/v1/chat/completions',
      openAiBody({ stream: true, stream_options: { include_usage: true } }),
      { authorization: `Bearer ${KEY}` },
    );
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const data = sseData(await res.text());
    assert.equal(data.at(-1), '[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    assert.equal(text, 'Let me look');
    const args = chunks
      .flatMap((c) => c.choices[0]?.delta?.tool_calls ?? [])
      .map((t: { function: { arguments: string } }) => t.function.arguments)
      .join('');
    assert.deepEqual(JSON.parse(args), { path: 'a.txt' });
    assert.equal(chunks.at(-2).choices[0].finish_reason, 'tool_calls');
    assert.deepEqual(chunks.at(-1).choices, []);
    assert.equal(
      chunks.at(-1).usage.total_tokens,
      chunks.at(-1).usage.prompt_tokens + chunks.at(-1).usage.completion_tokens,
    );
    fake.assertDone();
  });

  it('streams Anthropic events in the documented order', async () => {
    fake.script(toolCalls([{ name: 'read', input: { path: 'a' } }], { text: 'Looking' }));
    const res = await post(
      '/v1/messages',
      JSON.stringify({
        model: 'm1',
        max_tokens: 100,
        stream: true,
        messages: [{ role: 'user', content: 'hi' }],
      }),
      { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' },
    );
    const events = (await res.text())
      .split('\n')
      .filter((l) => l.startsWith('event: '))
      .map((l) => l.slice(7));
    assert.deepEqual(
      events.filter((e) => e !== 'content_block_delta' && e !== 'ping'),
      [
        'message_start',
        'content_block_start',
        'content_block_stop',
        'content_block_start',
        'content_block_stop',
        'message_delta',
        'message_stop',
      ],
    );
    fake.assertDone();
  });

  for (const protocol of ['openai', 'anthropic'] as const) {
    it(`answers non-streaming ${protocol} requests the SDK understands`, async () => {
      fake.script(reply('plain answer', { usage: { input: 7, output: 3 } }));
      const model = resolveModel(`${protocol}:m1`, {
        [protocol]: { apiKey: KEY, baseURL: `${fake.url}/v1` },
      });
      const result = await generateText({ model, prompt: 'hi', maxOutputTokens: 50 });
      assert.equal(result.text, 'plain answer');
      assert.equal(result.usage.inputTokens, 7);
      assert.equal(result.usage.outputTokens, 3);
      assert.equal(fake.requests[0]?.stream, false);
      fake.assertDone();
    });
  }
});

describe('fake LLM: scripting', () => {
  it('answers with vendor-format errors and headers', async () => {
    fake.script(httpError(429, { message: 'slow down', headers: { 'retry-after': '7' } }));
    const res = await post('/v1/chat/completions', openAiBody(), {
      authorization: `Bearer ${KEY}`,
    });
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('retry-after'), '7');
    assert.deepEqual(await res.json(), {
      error: { message: 'slow down', type: 'requests', param: null, code: 'rate_limit_exceeded' },
    });
    fake.assertDone();
  });

  it('lets a dynamic item answer from the request', async () => {
    fake.script(
      dynamic((req) => {
        const body = req.body as { messages: Array<{ content: string }> };
        return reply(`you said: ${body.messages[0]?.content}`);
      }),
    );
    const res = await post('/v1/chat/completions', openAiBody(), {
      authorization: `Bearer ${KEY}`,
    });
    const json = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    assert.equal(json.choices[0]?.message.content, 'you said: hi');
    assert.equal(fake.requests[0]?.headers.authorization, `Bearer ${KEY}`);
    fake.assertDone();
  });

  it('notices a client that disconnects in the middle of a slow stream', async () => {
    fake.script(reply('one two three four five six seven eight', { chunkDelayMs: 50 }));
    const res = await post(
      '/v1/chat/completions',
      openAiBody({ stream: true, stream_options: { include_usage: true } }),
      { authorization: `Bearer ${KEY}` },
    );
    const reader = res.body?.getReader();
    assert.ok(reader);
    await reader.read();
    await reader.cancel();
    const seen = await fake.waitFor((r) => r.aborted);
    assert.equal(seen.completed, false);
    fake.assertDone();
  });
});
