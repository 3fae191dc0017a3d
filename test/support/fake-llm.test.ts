import assert from 'node:assert/strict';
import { after, beforeEach, describe, it } from 'node:test';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, streamText, tool } from 'ai';
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

  it('refuses a structured output format the vendor would refuse, and takes the ones it takes', async () => {
    const open = { type: 'object', properties: { a: { type: 'string' } } };
    const closed = { ...open, required: ['a'], additionalProperties: false };
    const chat = (format: unknown) =>
      post(
        '/v1/chat/completions',
        JSON.stringify({
          model: 'm1',
          messages: [{ role: 'user', content: 'hi' }],
          response_format: format,
        }),
        { authorization: `Bearer ${KEY}` },
      );
    const messages = (format: unknown) =>
      post(
        '/v1/messages',
        JSON.stringify({
          model: 'm1',
          max_tokens: 9,
          messages: [{ role: 'user', content: 'hi' }],
          output_config: { format },
        }),
        { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' },
      );
    const refused: [() => Promise<{ status: number }>, RegExp][] = [
      [
        () => chat({ type: 'json_schema', json_schema: { name: 'has space', schema: closed } }),
        /json_schema name/,
      ],
      [
        () => chat({ type: 'json_schema', json_schema: { name: 'o', schema: { type: 'array' } } }),
        /root is an object/,
      ],
      [
        () => chat({ type: 'json_schema', json_schema: { name: 'o', schema: open, strict: true } }),
        /strict mode requires additionalProperties: false/,
      ],
      [
        () =>
          chat({
            type: 'json_schema',
            json_schema: {
              name: 'o',
              schema: { ...open, additionalProperties: false },
              strict: true,
            },
          }),
        /strict mode requires every property in required \(missing a\)/,
      ],
      [() => chat({ type: 'xml' }), /unknown response format xml/],
      [
        () => messages({ type: 'json_schema', schema: open }),
        /must set additionalProperties to false/,
      ],
      [() => messages({ type: 'json' }), /output_config.format must be/],
    ];
    for (const [send, problem] of refused) {
      fake.reset();
      const res = await send();
      assert.equal(res.status, 400);
      assert.match(fake.unexpected.join('\n'), problem);
    }
    fake.reset();
    fake.script(reply('{"a":"x"}'), reply('{"a":"y"}'), reply('{"a":"z"}'));
    for (const res of [
      await chat({
        type: 'json_schema',
        json_schema: { name: 'output', schema: open, strict: false },
      }),
      await chat({
        type: 'json_schema',
        json_schema: { name: 'output', schema: closed, strict: true },
      }),
      await messages({ type: 'json_schema', schema: closed }),
    ])
      assert.equal(res.status, 200);
    fake.assertDone();
  });
});

describe('fake LLM: what Errand never sends', () => {
  const openAi = { authorization: `Bearer ${KEY}` };
  const anthropic = { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' };
  const messages = [{ role: 'user', content: 'hi' }];
  const cases: [string, Record<string, string>, Record<string, unknown>, RegExp][] = [
    [
      '/v1/messages',
      anthropic,
      { max_tokens: 9, messages, tools: [{ type: 'web_search_20250305', name: 'web_search' }] },
      /a tool the vendor runs: "web_search_20250305"/,
    ],
    [
      '/v1/messages',
      anthropic,
      { max_tokens: 9, messages, mcp_servers: [{ type: 'url', url: 'https://x.example' }] },
      /mcp_servers: the vendor would act on it/,
    ],
    ['/v1/messages', anthropic, { max_tokens: 9, messages, speed: 'fast' }, /a premium speed/],
    [
      '/v1/messages',
      anthropic,
      {
        max_tokens: 9,
        messages: [
          { role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x' } }] },
        ],
      },
      /content the vendor would fetch/,
    ],
    [
      '/v1/responses',
      openAi,
      { input: 'hi', tools: [{ type: 'tool_search' }] },
      /a tool the vendor runs: "tool_search"/,
    ],
    [
      '/v1/responses',
      openAi,
      {
        input: [
          {
            type: 'tool_search_output',
            call_id: 'c',
            tools: [{ type: 'mcp', server_url: 'https://x.example' }],
          },
        ],
      },
      /a tool the vendor runs: "mcp"/,
    ],
    ['/v1/responses', openAi, { input: 'hi', previous_response_id: 'r' }, /previous_response_id/],
    ['/v1/responses', openAi, { input: 'hi', service_tier: 'priority' }, /a premium tier/],
    [
      '/v1/chat/completions',
      openAi,
      { messages, web_search_options: {} },
      /web_search_options: the vendor would act on it/,
    ],
    [
      '/v1/chat/completions',
      openAi,
      {
        messages: [
          { role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x' } }] },
        ],
      },
      /content the vendor would fetch/,
    ],
  ];

  it('reports a request that asks the vendor to act for the client, for each protocol', async () => {
    for (const [path, headers, body, problem] of cases) {
      fake.reset();
      const r = await post(path, JSON.stringify({ model: 'm1', ...body }), headers);
      assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}`);
      assert.match(fake.unexpected.join('\n'), problem);
    }
  });

  it('answers the client-run tools of each protocol, and inline content', async () => {
    fake.script(reply('a'), reply('b'), reply('c'));
    const image = 'data:image/png;base64,iVBORw0KGgo=';
    const r1 = await post(
      '/v1/messages',
      JSON.stringify({
        model: 'm1',
        max_tokens: 9,
        messages,
        tools: [
          { name: 'Read', input_schema: { type: 'object' } },
          { type: 'bash_20250124', name: 'bash' },
        ],
      }),
      anthropic,
    );
    const r2 = await post(
      '/v1/responses',
      JSON.stringify({
        model: 'm1',
        input: [{ role: 'user', content: [{ type: 'input_image', image_url: image }] }],
        tools: [
          { type: 'function', name: 'f', parameters: {} },
          { type: 'custom', name: 'apply_patch' },
          { type: 'tool_search', execution: 'client' },
        ],
      }),
      openAi,
    );
    const r3 = await post(
      '/v1/chat/completions',
      JSON.stringify({
        model: 'm1',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: image } }] }],
        tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
      }),
      openAi,
    );
    assert.deepEqual([r1.status, r2.status, r3.status], [200, 200, 200]);
    fake.assertDone();
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

describe('fake LLM: the OpenAI Responses API', () => {
  const responses = () => createOpenAI({ apiKey: KEY, baseURL: `${fake.url}/v1` }).responses('m1');
  const responsesBody = (extra: Record<string, unknown> = {}) =>
    JSON.stringify({ model: 'm1', input: [{ role: 'user', content: 'hi' }], ...extra });

  it('streams text and a function call the SDK reads, with usage', async () => {
    fake.script(
      toolCalls([{ id: 'call_r', name: 'read', input: { path: 'a.txt' } }], {
        text: 'Let me look',
        usage: { input: 11, output: 4, cacheRead: 3 },
      }),
    );
    const result = streamText({
      model: responses(),
      prompt: 'hi',
      tools: {
        read: tool({
          inputSchema: jsonSchema<{ path: string }>({
            type: 'object',
            properties: { path: { type: 'string' } },
            required: ['path'],
          }),
        }),
      },
    });
    assert.equal(await result.text, 'Let me look');
    const calls = await result.toolCalls;
    assert.equal(calls[0]?.toolCallId, 'call_r');
    assert.deepEqual(calls[0]?.input, { path: 'a.txt' });
    const usage = await result.usage;
    assert.equal(usage.inputTokens, 11);
    assert.equal(usage.outputTokens, 4);
    assert.equal(usage.inputTokenDetails?.cacheReadTokens, 3);
    assert.equal(fake.requests[0]?.protocol, 'responses');
    assert.equal(fake.requests[0]?.stream, true);
    fake.assertDone();
  });

  it('answers a non-streaming request', async () => {
    fake.script(reply('plain answer', { usage: { input: 7, output: 3 } }));
    const result = await generateText({ model: responses(), prompt: 'hi' });
    assert.equal(result.text, 'plain answer');
    assert.equal(result.usage.inputTokens, 7);
    fake.assertDone();
  });

  it('streams a freeform (custom) tool call as its text, in the documented order', async () => {
    fake.script(toolCalls([{ name: 'apply_patch', input: '*** Begin Patch\n*** End Patch\n' }]));
    const res = await post(
      '/v1/responses',
      responsesBody({ stream: true, tools: [{ type: 'custom', name: 'apply_patch' }] }),
      { authorization: `Bearer ${KEY}` },
    );
    const events = sseData(await res.text()).map((d) => JSON.parse(d));
    const types = events
      .map((e: { type: string }) => e.type)
      .filter((t: string) => !t.endsWith('.delta'));
    assert.deepEqual(types, [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.custom_tool_call_input.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const done = events.find((e: { type: string }) => e.type === 'response.output_item.done');
    assert.equal(done.item.type, 'custom_tool_call');
    assert.equal(done.item.input, '*** Begin Patch\n*** End Patch\n');
    assert.deepEqual(
      events.map((e: { sequence_number: number }) => e.sequence_number),
      events.map((_: unknown, i: number) => i),
    );
    fake.assertDone();
  });

  it('answers a client-run tool search, then a call of a function of the namespace it found', async () => {
    const search = { type: 'tool_search', execution: 'client', parameters: { type: 'object' } };
    fake.script(
      toolCalls([{ id: 'call_s', name: 'tool_search', input: { query: 'inspect' } }]),
      toolCalls([{ id: 'call_f', namespace: 'mcp__probe', name: 'inspect', input: {} }]),
      toolCalls([{ namespace: 'mcp__other', name: 'inspect', input: {} }]),
    );
    const first = await post('/v1/responses', responsesBody({ tools: [search] }), {
      authorization: `Bearer ${KEY}`,
    });
    const [searchCall] = ((await first.json()) as { output: Record<string, unknown>[] }).output;
    assert.deepEqual(searchCall, {
      type: 'tool_search_call',
      id: searchCall?.id,
      execution: 'client',
      call_id: 'call_s',
      status: 'completed',
      arguments: { query: 'inspect' },
    });
    const found = {
      type: 'tool_search_output',
      call_id: 'call_s',
      execution: 'client',
      status: 'completed',
      tools: [
        {
          type: 'namespace',
          name: 'mcp__probe',
          tools: [{ type: 'function', name: 'inspect', parameters: { type: 'object' } }],
        },
      ],
    };
    const input = [{ role: 'user', content: 'hi' }, searchCall, found];
    const second = await post('/v1/responses', responsesBody({ tools: [search], input }), {
      authorization: `Bearer ${KEY}`,
    });
    const [call] = ((await second.json()) as { output: Record<string, unknown>[] }).output;
    assert.equal(call?.type, 'function_call');
    assert.equal(call?.namespace, 'mcp__probe');
    assert.equal(call?.name, 'inspect');
    // A namespace no tool search found is not offered.
    const third = await post('/v1/responses', responsesBody({ tools: [search], input }), {
      authorization: `Bearer ${KEY}`,
    });
    assert.equal(third.status, 500);
    assert.match(
      fake.unexpected.join(),
      /scripted a call of inspect, which the request does not offer/,
    );
    fake.reset();
  });

  it('refuses a call of a tool the request does not offer, and an output for an unknown call', async () => {
    fake.script(toolCalls([{ name: 'shell', input: { cmd: 'ls' } }]));
    const a = await post('/v1/responses', responsesBody({ stream: true }), {
      authorization: `Bearer ${KEY}`,
    });
    assert.equal(a.status, 500);
    assert.match(
      fake.unexpected.join(),
      /scripted a call of shell, which the request does not offer/,
    );
    fake.reset();
    const b = await post(
      '/v1/responses',
      responsesBody({
        input: [
          { role: 'user', content: 'hi' },
          { type: 'function_call_output', call_id: 'call_nope', output: 'x' },
        ],
      }),
      { authorization: `Bearer ${KEY}` },
    );
    assert.equal(b.status, 400);
    assert.match(fake.unexpected.join(), /function_call_output for unknown call_id call_nope/);
    fake.reset();
  });
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

  it('holds a stalled stream open after its chunks until the client closes it', async () => {
    fake.script(reply('one two three four', { stallAfter: 2 }));
    const res = await post(
      '/v1/chat/completions',
      openAiBody({ stream: true, stream_options: { include_usage: true } }),
      { authorization: `Bearer ${KEY}` },
    );
    const reader = res.body?.getReader();
    assert.ok(reader);
    let text = '';
    while (!text.includes('two')) {
      const { value, done } = await reader.read();
      assert.equal(done, false, 'the stream ended before its stall');
      text += new TextDecoder().decode(value);
    }
    const stalled = await fake.waitFor((r) => r.stalled);
    assert.equal(stalled.aborted, false);
    await reader.cancel();
    const seen = await fake.waitFor((r) => r.aborted);
    assert.equal(seen.completed, false);
    fake.assertDone();
  });
});

const windowed: FakeLlm = await startFakeLlm({
  apiKey: KEY,
  models: ['m1', 'm2'],
  contextWindow: { m1: 2_000, m2: 100_000 },
});
after(() => windowed.close());

describe('fake LLM: context window and prompt caches', () => {
  beforeEach(() => windowed.reset());

  const auth = {
    openai: { authorization: `Bearer ${KEY}` },
    anthropic: { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' },
  };
  const send = (protocol: 'openai' | 'anthropic', body: Record<string, unknown>) =>
    fetch(`${windowed.url}${protocol === 'openai' ? '/v1/chat/completions' : '/v1/messages'}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth[protocol] },
      body: JSON.stringify(body),
    });

  it('refuses a prompt past the window as OpenAI does, without taking a scripted answer', async () => {
    windowed.script(reply('never'));
    const messages = [{ role: 'user', content: 'x'.repeat(8_000) }];
    const res = await send('openai', { model: 'm1', messages, max_tokens: 100 });
    assert.equal(res.status, 400);
    const tokens = windowed.requests[0]?.promptTokens ?? 0;
    assert.equal(tokens, Math.ceil(JSON.stringify(messages[0]).length / 4));
    assert.deepEqual(await res.json(), {
      error: {
        message: `This model's maximum context length is 2000 tokens. However, you requested ${tokens + 100} tokens (${tokens} in the messages, 100 in the completion). Please reduce the length of the messages or completion.`,
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    });
    assert.equal(windowed.requests[0]?.overflow, true);
    assert.equal(windowed.pending(), 1);
    // Not expected by the test: reported.
    assert.match(windowed.unexpected.join(), /pass the 2000-token window/);
  });

  it('refuses as Anthropic does, for the prompt alone or with its max_tokens', async () => {
    windowed.expectOverflows(2);
    const long = await send('anthropic', {
      model: 'm1',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'y'.repeat(9_000) }],
    });
    assert.equal(long.status, 400);
    const tokens = windowed.requests[0]?.promptTokens;
    assert.deepEqual(await long.json(), {
      type: 'error',
      error: {
        type: 'invalid_request_error',
        message: `prompt is too long: ${tokens} tokens > 2000 maximum`,
      },
    });
    const room = await send('anthropic', {
      model: 'm1',
      max_tokens: 1_900,
      messages: [{ role: 'user', content: 'y'.repeat(1_000) }],
    });
    assert.equal(room.status, 400);
    const body = (await room.json()) as { error: { message: string } };
    assert.match(
      body.error.message,
      /^input length and `max_tokens` exceed context limit: \d+ \+ 1900 > 2000/,
    );
    windowed.assertDone();
  });

  it("reports OpenAI's cached tokens: the common prefix with the key's previous request, in steps of 128 past 1,024", async () => {
    const base = [{ role: 'user', content: 'z'.repeat(20_000) }];
    const next = [...base, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'more' }];
    windowed.script(reply('a'), reply('b'), reply('c'), reply('d'));
    const usage = async (body: Record<string, unknown>) =>
      (
        (await (await send('openai', { model: 'm2', ...body })).json()) as {
          usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
        }
      ).usage;
    const first = await usage({ messages: base, prompt_cache_key: 'job-1' });
    assert.equal(first.prompt_tokens_details.cached_tokens, 0);
    const second = await usage({ messages: next, prompt_cache_key: 'job-1' });
    const shared = Math.floor((JSON.stringify(base).length - 1) / 4);
    const expected = 1024 + Math.floor((shared - 1024) / 128) * 128;
    assert.equal(second.prompt_tokens_details.cached_tokens, expected);
    assert.ok(second.prompt_tokens > expected);
    // Another key has its own cache; the same key's cache moved on to the last request.
    assert.equal(
      (await usage({ messages: base, prompt_cache_key: 'job-2' })).prompt_tokens_details
        .cached_tokens,
      0,
    );
    assert.equal(
      (await usage({ messages: next, prompt_cache_key: 'job-1' })).prompt_tokens_details
        .cached_tokens,
      Math.min(
        1024 + Math.floor((Math.floor(JSON.stringify(next).length / 4) - 1024) / 128) * 128,
        windowed.requests[3]?.promptTokens ?? 0,
      ),
    );
    windowed.assertDone();
  });

  it("reports Anthropic's cache only up to the request's breakpoints", async () => {
    const system = [
      { type: 'text', text: 's'.repeat(8_000), cache_control: { type: 'ephemeral' } },
    ];
    const turn = (extra: unknown[] = [], mark = true) => [
      {
        role: 'user',
        content: [
          {
            type: 'text',
            text: 'q'.repeat(8_000),
            ...(mark ? { cache_control: { type: 'ephemeral' } } : {}),
          },
        ],
      },
      ...extra,
    ];
    windowed.script(reply('1'), reply('2'), reply('3'), reply('4'));
    type AnthropicUsage = {
      input_tokens: number;
      cache_read_input_tokens: number;
      cache_creation_input_tokens: number;
    };
    const usage = async (messages: unknown[], sys: unknown = system) =>
      (
        (await (
          await send('anthropic', { model: 'm2', max_tokens: 10, system: sys, messages })
        ).json()) as {
          usage: AnthropicUsage;
        }
      ).usage;
    // No breakpoint: nothing cached, nothing written.
    const none = await usage(turn([], false), 's'.repeat(8_000));
    assert.deepEqual([none.cache_read_input_tokens, none.cache_creation_input_tokens], [0, 0]);
    // Breakpoints on the system prompt and the message: both prefixes written.
    const first = await usage(turn());
    assert.equal(first.cache_read_input_tokens, 0);
    const total = windowed.requests[1]?.promptTokens ?? 0;
    assert.ok(first.cache_creation_input_tokens > 3_000);
    assert.equal(first.input_tokens + first.cache_creation_input_tokens, total);
    // The same prefix and more after it, marked at the end: the earlier breakpoint is read
    // back (within 20 blocks of the new one) and the rest written.
    const more = turn([
      { role: 'assistant', content: [{ type: 'text', text: 'fine' }] },
      {
        role: 'user',
        content: [{ type: 'text', text: 'r'.repeat(6_000), cache_control: { type: 'ephemeral' } }],
      },
    ]);
    const second = await usage(more);
    assert.equal(second.cache_read_input_tokens, first.cache_creation_input_tokens);
    assert.ok(second.cache_creation_input_tokens > 1_400);
    // Without the breakpoint at the end, only the system prompt's prefix is read.
    const third = await usage(turn([], false));
    assert.ok(third.cache_read_input_tokens > 1_900 && third.cache_read_input_tokens < 2_100);
    assert.equal(third.cache_creation_input_tokens, 0);
    windowed.assertDone();
  });

  it('the SDK reads the cached tokens of both protocols into its usage', async () => {
    for (const protocol of ['openai', 'anthropic'] as const) {
      windowed.reset();
      windowed.script(reply('one'), reply('two'));
      const model = resolveModel(`${protocol}:m2`, {
        [protocol]: { apiKey: KEY, baseURL: `${windowed.url}/v1` },
      });
      const cache = { anthropic: { cacheControl: { type: 'ephemeral' } } };
      const messages = [
        { role: 'user' as const, content: 'w'.repeat(12_000), providerOptions: cache },
      ];
      await generateText({
        model,
        messages,
        maxOutputTokens: 10,
        providerOptions: { openai: { promptCacheKey: 'k' } },
      });
      const again = await generateText({
        model,
        messages,
        maxOutputTokens: 10,
        providerOptions: { openai: { promptCacheKey: 'k' } },
      });
      const details = again.usage.inputTokenDetails;
      assert.ok((details.cacheReadTokens ?? 0) >= 2_944, `${protocol}: ${JSON.stringify(details)}`);
      assert.equal(again.usage.inputTokens, windowed.requests[1]?.promptTokens);
      windowed.assertDone();
    }
  });

  it('answers what the queue has no item for from scriptAll, and reports what it returns nothing for', async () => {
    windowed.scriptAll((r) =>
      JSON.stringify(r.body).includes('known') ? reply('from scriptAll') : undefined,
    );
    const ok = await send('openai', {
      model: 'm2',
      messages: [{ role: 'user', content: 'known' }],
    });
    assert.equal(ok.status, 200);
    const other = await send('openai', {
      model: 'm2',
      messages: [{ role: 'user', content: 'other' }],
    });
    assert.equal(other.status, 500);
    assert.match(windowed.unexpected.join(), /the script has no answer for this request/);
  });
});

describe('fake LLM: images', () => {
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
  const b64 = png.toString('base64');
  const anthropic = { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' };
  const openai = { authorization: `Bearer ${KEY}` };
  const anthropicBody = (content: unknown[], role = 'user') =>
    JSON.stringify({ model: 'm1', max_tokens: 10, messages: [{ role, content }] });
  const openAiImage = (url: string) =>
    openAiBody({
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }],
    });

  it("records an image in each vendor's shape, decoded", async () => {
    fake.script(reply('a'), reply('b'), reply('c'));
    const image = { type: 'base64', media_type: 'image/png', data: b64 };
    const a = await post(
      '/v1/messages',
      anthropicBody([{ type: 'image', source: image }]),
      anthropic,
    );
    assert.equal(a.status, 200);
    const o = await post(
      '/v1/chat/completions',
      openAiImage(`data:image/png;base64,${b64}`),
      openai,
    );
    assert.equal(o.status, 200);
    const responses = JSON.stringify({
      model: 'm1',
      input: [
        {
          role: 'user',
          content: [{ type: 'input_image', image_url: `data:image/png;base64,${b64}` }],
        },
      ],
    });
    assert.equal((await post('/v1/responses', responses, openai)).status, 200);
    assert.deepEqual(
      fake.requests.map((r) => r.images.map((i) => [i.mediaType, i.bytes.equals(png)])),
      [[['image/png', true]], [['image/png', true]], [['image/png', true]]],
    );
    fake.assertDone();
  });

  it('refuses what a vendor refuses: a type its bytes deny, bad base64, a URL, an assistant image, another shape', async () => {
    const cases: [string, string, Record<string, string>, RegExp][] = [
      [
        '/v1/messages',
        anthropicBody([
          { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: b64 } },
        ]),
        anthropic,
        /does not match the provided media type image\/jpeg/,
      ],
      [
        '/v1/messages',
        anthropicBody([
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: `${b64}\n` } },
        ]),
        anthropic,
        /not valid base64/,
      ],
      [
        '/v1/messages',
        anthropicBody([
          { type: 'image', source: { type: 'base64', media_type: 'image/svg+xml', data: b64 } },
        ]),
        anthropic,
        /media type "image\/svg\+xml" is not supported/,
      ],
      [
        '/v1/messages',
        anthropicBody([{ type: 'image_url', image_url: { url: `data:image/png;base64,${b64}` } }]),
        anthropic,
        /not a anthropic image/,
      ],
      ['/v1/chat/completions', openAiImage('https://example.com/x.png'), openai, /fetch/],
      [
        '/v1/chat/completions',
        openAiImage(`data:image/png,${b64}`),
        openai,
        /not a base64 data URL/,
      ],
      [
        '/v1/chat/completions',
        openAiBody({
          messages: [
            { role: 'user', content: 'hi' },
            {
              role: 'assistant',
              content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${b64}` } }],
            },
          ],
        }),
        openai,
        /an image in a assistant message/,
      ],
    ];
    for (const [path, body, headers, problem] of cases) {
      fake.reset();
      const res = await post(path, body, headers);
      assert.equal(res.status, 400, `${path}: ${problem}`);
      assert.match(fake.unexpected.join(), problem);
    }
  });
});
