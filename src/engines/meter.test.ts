import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TokenUsage } from '../jobs/usage.ts';
import { meterAnswer } from './meter.ts';

const SSE = 'text/event-stream; charset=utf-8';
const JSON_TYPE = 'application/json';

/** Feeds `body` to a meter in pieces of `size` bytes; what `done` got, and how often. */
function meter(
  path: string,
  body: string,
  contentType: string,
  size = 7,
): { calls: number; tokens: TokenUsage | undefined } {
  const seen: (TokenUsage | undefined)[] = [];
  const observer = meterAnswer({ path, status: 200, contentType, contentEncoding: '' }, (tokens) =>
    seen.push(tokens),
  );
  assert.ok(observer, 'no observer for a metered answer');
  const bytes = Buffer.from(body);
  for (let i = 0; i < bytes.length; i += size) observer.data(bytes.subarray(i, i + size));
  observer.end();
  observer.end();
  return { calls: seen.length, tokens: seen[0] };
}

const events = (...items: [string, unknown][]) =>
  items.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join('');

describe('the model call meter', () => {
  it('Anthropic, streamed: input and cache counts from message_start, output from the last message_delta', () => {
    const body = events(
      [
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
      ],
      ['ping', { type: 'ping' }],
      [
        'content_block_delta',
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'naïve ✓' } },
      ],
      ['message_delta', { type: 'message_delta', delta: {}, usage: { output_tokens: 4 } }],
      ['message_delta', { type: 'message_delta', delta: {}, usage: { output_tokens: 7 } }],
      ['message_stop', { type: 'message_stop' }],
    );
    // One byte at a time too: events and characters split anywhere.
    for (const size of [1, 7, body.length]) {
      assert.deepEqual(meter('/v1/messages', body, SSE, size), {
        calls: 1,
        tokens: { inputTokens: 153, outputTokens: 7, cacheReadTokens: 50, cacheWriteTokens: 100 },
      });
    }
  });

  it('Anthropic, whole: the usage of the JSON answer', () => {
    const body = JSON.stringify({
      type: 'message',
      content: [{ type: 'text', text: 'hi' }],
      usage: { input_tokens: 10, output_tokens: 2, cache_read_input_tokens: 5 },
    });
    assert.deepEqual(meter('/v1/messages', body, JSON_TYPE).tokens, {
      inputTokens: 15,
      outputTokens: 2,
      cacheReadTokens: 5,
      cacheWriteTokens: 0,
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
    assert.deepEqual(meter('/v1/responses', body, SSE).tokens, {
      inputTokens: 100,
      outputTokens: 9,
      cacheReadTokens: 60,
      cacheWriteTokens: 0,
    });
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
    assert.deepEqual(meter('/v1/chat/completions', body, SSE, 3).tokens, {
      inputTokens: 40,
      outputTokens: 6,
      cacheReadTokens: 32,
      cacheWriteTokens: 0,
    });
  });

  it('a stream cut after message_start counts what it named; one that named nothing is undefined', () => {
    const cut = events([
      'message_start',
      { type: 'message_start', message: { usage: { input_tokens: 20, output_tokens: 1 } } },
    ]).slice(0, -1);
    assert.deepEqual(meter('/v1/messages', cut, SSE), {
      calls: 1,
      tokens: { inputTokens: 20, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 },
    });
    assert.deepEqual(meter('/v1/responses', 'event: x\ndata: {"type":"x"}\n\ndata: {tru', SSE), {
      calls: 1,
      tokens: undefined,
    });
    assert.deepEqual(meter('/v1/messages', '{"type":"mess', JSON_TYPE), {
      calls: 1,
      tokens: undefined,
    });
  });

  it('no observer for other paths, error answers or compressed bodies', () => {
    const base = { path: '/v1/messages', status: 200, contentType: SSE, contentEncoding: '' };
    const none = () => assert.fail('done called');
    assert.equal(meterAnswer({ ...base, path: '/v1/models' }, none), undefined);
    assert.equal(meterAnswer({ ...base, status: 429 }, none), undefined);
    assert.equal(meterAnswer({ ...base, contentEncoding: 'gzip' }, none), undefined);
    assert.ok(meterAnswer({ ...base, contentEncoding: 'identity' }, none));
  });
});
