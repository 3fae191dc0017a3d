import assert from 'node:assert/strict';
import { after, beforeEach, describe, it } from 'node:test';
import { APICallError, type ModelMessage, type UserModelMessage } from 'ai';
import pg from 'pg';
import { testServerUrl } from '../../test/support/databases.ts';
import { dynamic, type FakeLlm, reply, startFakeLlm } from '../../test/support/fake-llm.ts';
import {
  Conversation,
  type ConversationOptions,
  DEFAULT_WINDOW_TOKENS,
  headAndTail,
  isWindowOverflow,
  jobHistory,
  overflowFacts,
  windowPolicy,
} from './conversation.ts';
import { resolveModel } from './models.ts';

const KEY = 'fake-key-for-conversation-tests';
const fake: FakeLlm = await startFakeLlm({ apiKey: KEY, models: ['m'] });
after(() => fake.close());
beforeEach(() => fake.reset());

const signal = new AbortController().signal;
const user = (text: string): UserModelMessage => ({ role: 'user', content: text });

/** One step of the agent: a read_file call and its result of `chars` characters. */
function read(id: string, chars: number, path = `src/${id}.ts`): ModelMessage[] {
  return [
    {
      role: 'assistant',
      content: [{ type: 'tool-call', toolCallId: id, toolName: 'read_file', input: { path } }],
    },
    {
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: id,
          toolName: 'read_file',
          output: { type: 'text', value: `${id}:`.padEnd(chars, 'x') },
        },
      ],
    },
  ];
}

function options(
  opts: {
    windowTokens?: number;
    history?: ModelMessage[];
    prompt?: string;
    protocol?: 'openai' | 'anthropic';
    managed?: boolean;
  } = {},
): ConversationOptions {
  const protocol = opts.protocol ?? 'openai';
  return {
    model: resolveModel(`${protocol}:m`, {
      [protocol]: { apiKey: KEY, baseURL: `${fake.url}/v1` },
    }),
    system: 'You are a test agent.',
    tools: {},
    history: opts.history ?? [],
    user: user(opts.prompt ?? 'Do the task'),
    windowTokens: opts.windowTokens,
    maxOutputTokens: 1_000,
    managed: opts.managed ?? true,
    cacheKey: 'job_1',
    maxRetries: 0,
    describeCall: (name, input) => `${name} ${(input as { path?: string })?.path ?? ''}`.trim(),
  };
}

const conversationOf = (opts: Parameters<typeof options>[0] & { windowTokens: number }) =>
  new Conversation(options(opts));

/** The tool results of a request's messages, by call id. */
function results(messages: readonly ModelMessage[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of messages) {
    if (m.role !== 'tool') continue;
    for (const p of m.content) {
      if (p.type === 'tool-result' && p.output.type === 'text')
        out.set(p.toolCallId, p.output.value);
    }
  }
  return out;
}

describe('windowPolicy', () => {
  it('derives every threshold from the window', () => {
    assert.deepEqual(windowPolicy(200_000, 16_000), {
      windowTokens: 200_000,
      outputTokens: 16_000,
      resultCapTokens: 25_000,
      keepToolTokens: 20_000,
      maskAt: 100_000,
      compactAt: 160_000,
      keepAfterCompaction: 50_000,
    });
    // A large window: masking and the kept results stop growing with it.
    const large = windowPolicy(1_000_000, 32_000);
    assert.deepEqual(
      [large.maskAt, large.keepToolTokens, large.compactAt],
      [128_000, 20_000, 800_000],
    );
    // A model the catalog does not know: 128k tokens, the window of most open-weight models.
    const unknown = new Conversation({ ...options(), windowTokens: undefined });
    assert.equal(unknown.policy.windowTokens, DEFAULT_WINDOW_TOKENS);
    assert.equal(DEFAULT_WINDOW_TOKENS, 128_000);
    // A small window: the reply gets at most a quarter of it, and compaction leaves room for it.
    const small = windowPolicy(8_000, 16_000);
    assert.equal(small.outputTokens, 2_000);
    assert.equal(small.compactAt, 5_700);
  });
});

describe('Conversation: caps and masks', () => {
  it('caps a long tool result to its head and tail, saying which lines to read for the rest', () => {
    const lines = Array.from(
      { length: 5_000 },
      (_, i) => `${String(i + 1).padStart(4)}\tline ${i + 1}`,
    );
    const capped = headAndTail(lines.join('\n'), 20_000, 'read_file');
    assert.ok(capped.length <= 20_000, String(capped.length));
    assert.ok(capped.startsWith('   1\tline 1\n'));
    assert.ok(capped.endsWith('5000\tline 5000'));
    const note = capped.match(/\[… ([\d,]+) lines, [\d,]+ characters left out here[^\]]*\]/);
    assert.ok(note, capped.slice(11_000, 12_500));
    const [, first, last] = capped.match(/startLine (\d+) and endLine (\d+)/) ?? [];
    assert.ok(capped.includes(`\n${String(Number(first) - 1).padStart(4)}\tline `));
    assert.ok(capped.includes(`\n${String(Number(last) + 1).padStart(4)}\tline `));
    assert.equal(Number(last) - Number(first) + 1, Number(note[1]?.replace(',', '')));
    // Another tool's output just says how much was left out.
    assert.match(
      headAndTail('y'.repeat(50_000), 2_000, 'search'),
      /\[… 1 lines, [\d,]+ characters left out here to fit the model's context window …\]/,
    );
  });

  it("masks old tool results in batches once a request passes half the window, never the latest step's", async () => {
    // 100k window: masking at 50k tokens, keeping the last 10k tokens of results.
    const conversation = conversationOf({ windowTokens: 100_000 });
    const requests: ModelMessage[][] = [];
    requests.push((await conversation.prepare([], signal)).messages);
    for (let i = 1; i <= 30; i++) {
      // 7,000 characters: 2,000 tokens at the conversation's first guess of 3.5 characters a token.
      requests.push((await conversation.prepare(read(`c${i}`, 7_000), signal)).messages);
      assert.ok(
        conversation.estimate() <= 50_000 + 2_100,
        `request ${i}: ${conversation.estimate()} tokens`,
      );
      assert.ok(
        results(requests[i] ?? [])
          .get(`c${i}`)
          ?.startsWith(`c${i}:xxx`),
        'latest kept',
      );
    }
    // Between batches each request extends the one before: the cached prefix holds.
    let batches = 0;
    for (let i = 1; i < requests.length; i++) {
      const before = JSON.stringify(requests[i - 1]).slice(0, -1);
      if (!JSON.stringify(requests[i]).startsWith(before)) batches++;
    }
    assert.ok(batches >= 1 && batches <= 2, `${batches} batches`);
    // Right after the batch: the most recent results, 10k tokens of them and the latest step.
    const batch = requests.findIndex(
      (r, i) =>
        i > 0 && !JSON.stringify(r).startsWith(JSON.stringify(requests[i - 1]).slice(0, -1)),
    );
    const justMasked = [...results(requests[batch] ?? []).entries()];
    const keptThen = justMasked.filter(([, v]) => !v.startsWith('[Output removed')).map(([k]) => k);
    assert.deepEqual(
      keptThen,
      justMasked.slice(-6).map(([k]) => k),
    );
    // Later requests add to it until the next batch.
    const last = results(requests.at(-1) ?? []);
    const masked = [...last.values()].filter((v) => v.startsWith('[Output removed'));
    assert.equal(masked.length, batch - 6);
    assert.equal(
      last.get('c1'),
      '[Output removed to save context: read_file src/c1.ts (7,000 characters); read the file again if you need it.]',
    );
  });

  it('caps the results of one step together at half the window, as they arrive', async () => {
    const conversation = conversationOf({ windowTokens: 20_000 });
    await conversation.prepare([], signal);
    const step: ModelMessage[] = [
      {
        role: 'assistant',
        content: ['a', 'b', 'c', 'd'].map((id) => ({
          type: 'tool-call' as const,
          toolCallId: id,
          toolName: 'search',
          input: {},
        })),
      },
      {
        role: 'tool',
        content: ['a', 'b', 'c', 'd'].map((id) => ({
          type: 'tool-result' as const,
          toolCallId: id,
          toolName: 'search',
          output: { type: 'text' as const, value: `${id}\n`.repeat(20_000) },
        })),
      },
    ];
    const { messages } = await conversation.prepare(step, signal);
    for (const value of results(messages).values()) {
      // 10k tokens for four results: 2.5k tokens (8,750 characters) each, head and tail kept.
      assert.ok(value.length <= 8_750, String(value.length));
      assert.match(value, /left out here to fit the model's context window/);
    }
  });

  it('changes nothing when it is not managed (the bench compares with that)', async () => {
    const conversation = conversationOf({ windowTokens: 10_000, managed: false });
    await conversation.prepare([], signal);
    for (let i = 0; i < 5; i++) await conversation.prepare(read(`r${i}`, 40_000), signal);
    const sent = results(conversation.messages());
    assert.equal(sent.size, 5);
    for (const value of sent.values()) assert.equal(value.length, 40_000);
    assert.equal(conversation.outputTokens, 1_000);
  });
});

describe('Conversation: compaction', () => {
  const summaryText = 'Read src/a.ts and src/b.ts; the parser lives in src/b.ts. Next: fix it.';
  const isSummaryRequest = (body: unknown) =>
    JSON.stringify(body).includes('You write the working notes of a software engineering agent');

  it('replaces the older history by a summary, keeping every prompt word for word and the recent work', async () => {
    // Three earlier turns whose messages (long answers, which are never masked) fill the window.
    const history: ModelMessage[] = [];
    for (let t = 1; t <= 3; t++) {
      history.push(user(`Prompt of turn ${t}: keep this exact text ${'é'.repeat(t)}`));
      history.push(...read(`t${t}`, 2_000));
      // The last answer is short: it is recent work, kept as it is.
      history.push({
        role: 'assistant',
        content: `Answer ${t} ${'z'.repeat(t < 3 ? 16_000 : 10)}`,
      });
    }
    let summaryRequest: unknown;
    fake.script(
      dynamic((req) => {
        summaryRequest = req.body;
        return isSummaryRequest(req.body) ? reply(summaryText) : undefined;
      }),
    );
    // 10k window: compaction past 8k tokens; the history is some 11k.
    const conversation = conversationOf({
      windowTokens: 10_000,
      history,
      prompt: 'Prompt of turn 4',
    });
    const { messages, compaction } = await conversation.prepare([], signal);
    fake.assertDone();
    assert.ok(compaction, 'compacted');
    assert.equal(compaction.reason, 'threshold');
    assert.ok(
      compaction.tokensAfter < 8_000 && compaction.tokensBefore > 10_000,
      JSON.stringify(compaction),
    );
    assert.ok(compaction.usage.inputTokens > 0 && compaction.usage.outputTokens > 0);
    // The summariser saw the older part: its prompts and its answers.
    assert.match(JSON.stringify(summaryRequest), /Prompt of turn 1/);
    assert.match(JSON.stringify(summaryRequest), /Answer 2/);

    const [checkpoint, ...recent] = messages;
    const text = JSON.stringify(checkpoint);
    assert.equal(checkpoint?.role, 'user');
    for (let t = 1; t <= 3; t++)
      assert.ok(text.includes(`Prompt of turn ${t}: keep this exact text ${'é'.repeat(t)}`));
    assert.ok(text.includes(summaryText));
    // The recent work as it was (turn 3's read and answer, as many tokens of it as a quarter
    // of the window holds), then this turn's prompt.
    assert.deepEqual(
      recent.map((m) => m.role),
      ['assistant', 'tool', 'assistant', 'user'],
    );
    assert.ok(recent.slice(0, 3).every((m, i) => m === history[history.length - 3 + i]));
    assert.deepEqual(recent[3], user('Prompt of turn 4'));

    // The turn stores the whole new conversation, and the next turn starts from it.
    const stored = conversation.stored();
    assert.equal(stored.length, messages.length);
    assert.ok(stored.slice(1).every((m, i) => m === messages[i + 1]));
    assert.deepEqual(stored[0]?.providerOptions?.errand, {
      summary: summaryText,
      prompts: [1, 2, 3].map((t) => `Prompt of turn ${t}: keep this exact text ${'é'.repeat(t)}`),
      fromStart: true,
    });
    const next = jobHistory([{ messages: history }, { messages: stored }]);
    assert.ok(next.length === stored.length && next.every((m, i) => m === stored[i]));
  });

  it("folds this turn's prompt into the summary when the recent work is this turn's own", async () => {
    fake.scriptAll((req) => (isSummaryRequest(req.body) ? reply(summaryText) : undefined));
    const conversation = conversationOf({
      windowTokens: 10_000,
      history: [user('Earlier prompt'), { role: 'assistant', content: 'Earlier answer' }],
      prompt: 'The current prompt',
    });
    await conversation.prepare([], signal);
    // Long answers between the reads: the window fills with text that cannot be masked.
    let compactions = 0;
    for (let i = 0; i < 12; i++) {
      const step = read(`s${i}`, 1_500);
      step.unshift({ role: 'assistant', content: `Thinking ${i} ${'w'.repeat(4_000)}` });
      const { compaction } = await conversation.prepare(step, signal);
      if (compaction) compactions++;
      assert.ok(
        conversation.estimate() <= 8_000,
        `${conversation.estimate()} tokens after step ${i}`,
      );
    }
    assert.ok(compactions >= 2, `${compactions} compactions`);
    const [checkpoint] = conversation.messages();
    assert.ok(checkpoint?.role === 'user' && Array.isArray(checkpoint.content));
    const parts = checkpoint.content.map((p) => (p.type === 'text' ? p.text : ''));
    assert.match(parts[0] ?? '', /<request n="1">\nEarlier prompt\n<\/request>/);
    assert.doesNotMatch(parts[0] ?? '', /The current prompt/);
    assert.match(parts[0] ?? '', /The request you are working on now follows, word for word/);
    assert.equal(parts[1], 'The current prompt');
    fake.assertDone();
  });
});

describe('the bytes of a request', () => {
  it("sends tool-call arguments in the key order PostgreSQL's jsonb reads them back in", async () => {
    const input = { startLine: 1, path: 'src/a.ts', endLine: 9, é: { zz: 1, b: [{ y: 1, x: 2 }] } };
    const conversation = conversationOf({ windowTokens: 100_000 });
    await conversation.prepare([], signal);
    const step = read('k1', 100);
    const call = step[0];
    assert.ok(call?.role === 'assistant' && Array.isArray(call.content));
    const part = call.content[0];
    assert.ok(part?.type === 'tool-call');
    part.input = input;
    const { messages } = await conversation.prepare(step, signal);
    const sent = messages.flatMap((m) =>
      m.role === 'assistant' && Array.isArray(m.content)
        ? m.content.flatMap((p) => (p.type === 'tool-call' ? [p.input] : []))
        : [],
    );
    const client = new pg.Client({ connectionString: testServerUrl() });
    await client.connect();
    try {
      const { rows } = await client.query<{ stored: unknown }>('SELECT $1::jsonb AS stored', [
        JSON.stringify(input),
      ]);
      // What the request sent is what the database gives back, byte for byte.
      assert.equal(JSON.stringify(sent[0]), JSON.stringify(rows[0]?.stored));
      assert.notEqual(JSON.stringify(sent[0]), JSON.stringify(input));
    } finally {
      await client.end();
    }
  });
});

describe('jobHistory', () => {
  it('appends turns, and starts again from a turn that stands for the whole conversation', () => {
    const a = [user('one'), { role: 'assistant' as const, content: 'did one' }];
    const b = [user('two'), { role: 'assistant' as const, content: 'did two' }];
    const whole: ModelMessage[] = [
      { ...user('summary'), providerOptions: { errand: { fromStart: true } } },
      { role: 'assistant', content: 'did three' },
    ];
    const c = [user('four')];
    assert.deepEqual(jobHistory([{ messages: a }, { messages: b }]), [...a, ...b]);
    assert.deepEqual(jobHistory([{ messages: a }, { messages: whole }, { messages: c }]), [
      ...whole,
      ...c,
    ]);
    assert.deepEqual(jobHistory([]), []);
  });
});

describe('a refusal for length', () => {
  const refusal = (status: number, message: string, body = '') =>
    new APICallError({
      message,
      url: 'http://x',
      requestBodyValues: {},
      statusCode: status,
      responseBody: body,
      isRetryable: false,
    });

  it('is recognised in each provider’s words, with the window and the count it names', () => {
    const cases: Array<[APICallError, { windowTokens?: number; promptTokens?: number }]> = [
      [
        refusal(400, 'prompt is too long: 210000 tokens > 200000 maximum'),
        { windowTokens: 200_000, promptTokens: 210_000 },
      ],
      [
        refusal(
          400,
          'input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again',
        ),
        { windowTokens: 200_000, promptTokens: 188_240 },
      ],
      [
        refusal(
          400,
          "This model's maximum context length is 128000 tokens. However, you requested 130000 tokens (114000 in the messages, 16000 in the completion). Please reduce the length of the messages or completion.",
        ),
        { windowTokens: 128_000, promptTokens: 114_000 },
      ],
      [
        refusal(
          400,
          "This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.",
        ),
        { windowTokens: 8_192, promptTokens: 8_227 },
      ],
      [
        refusal(
          400,
          'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).',
        ),
        { windowTokens: 1_048_576, promptTokens: 1_200_000 },
      ],
      [
        refusal(
          400,
          'the request exceeds the available context size, try increasing it',
          '{"error":{"code":400,"type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}',
        ),
        { windowTokens: 4_096, promptTokens: 5_000 },
      ],
      [
        refusal(
          400,
          'Bad request',
          '{"error":{"code":"context_length_exceeded","message":"too long"}}',
        ),
        {},
      ],
    ];
    for (const [error, facts] of cases) {
      assert.equal(isWindowOverflow(error), true, error.message);
      assert.deepEqual(overflowFacts(error), facts, error.message);
    }
  });

  it('is not any other refusal', () => {
    assert.equal(
      isWindowOverflow(
        refusal(
          400,
          'max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens',
        ),
      ),
      false,
    );
    assert.equal(isWindowOverflow(refusal(429, 'maximum context length is 8192 tokens')), false);
    assert.equal(isWindowOverflow(refusal(401, 'invalid x-api-key')), false);
    assert.equal(isWindowOverflow(new Error('prompt is too long')), true);
  });
});
