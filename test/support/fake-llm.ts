// A scripted fake of the model vendors' HTTP APIs (OpenAI chat completions and Anthropic
// messages, streaming and not) on 127.0.0.1, so the real AI SDK providers can be tested over
// loopback. It answers from a queue the test gives, records every request, and reports anything
// a real vendor would reject or the test did not script through `unexpected` / `assertDone()`.

import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export type Protocol = 'openai' | 'anthropic';

export type FakeToolCall = { id?: string; name: string; input: unknown };

/** A successful model answer: text and/or tool calls. */
export type ReplyItem = {
  type: 'reply';
  text?: string;
  toolCalls?: FakeToolCall[];
  /** Defaults to 'tool_calls' / 'tool_use' when there are tool calls, else 'stop' / 'end_turn'. */
  finish?: 'stop' | 'tool_calls' | 'length';
  usage?: { input: number; output: number };
  /** Streamed text is cut into pieces of this many characters (default: whole words). */
  chunkChars?: number;
  /** Pause before each streamed chunk: a "slow stream" a test can abort in the middle. */
  chunkDelayMs?: number;
  /** Only for streaming requests: answering a non-streaming request with it is unexpected. */
  streamOnly?: boolean;
  /**
   * Breaks the stream off with the vendor's in-stream error event (Anthropic `overloaded_error`,
   * OpenAI `server_error`) after this many content chunks. Implies streamOnly.
   */
  streamErrorAfter?: number;
};

/** An HTTP error in the vendor's own error format. */
export type ErrorItem = {
  type: 'error';
  status: number;
  message?: string;
  headers?: Record<string, string>;
};

/** Computes the answer from the request, e.g. to echo what the server received. */
export type DynamicItem = {
  type: 'dynamic';
  respond: (request: RecordedRequest) => ReplyItem | ErrorItem | Promise<ReplyItem | ErrorItem>;
};

export type ScriptItem = (ReplyItem | ErrorItem | DynamicItem) & {
  /** The protocol this answer is meant for; a request of the other protocol is unexpected. */
  protocol?: Protocol;
};

export type RecordedRequest = {
  index: number;
  protocol: Protocol | undefined;
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  stream: boolean;
  status: number | undefined;
  /** The client closed the connection before the answer was complete. */
  aborted: boolean;
  /** The answer was written completely. */
  completed: boolean;
};

export type FakeLlmOptions = {
  /** The key every request must carry (Bearer for OpenAI, x-api-key for Anthropic). */
  apiKey: string;
  /** Model ids the server knows; a request for another model is unexpected. */
  models: string[];
};

export type FakeLlm = {
  /** Base URL without path, e.g. http://127.0.0.1:1234 (providers want `${url}/v1`). */
  url: string;
  requests: RecordedRequest[];
  /** Problems found: requests nobody scripted or a real vendor would refuse. */
  unexpected: string[];
  script: (...items: ScriptItem[]) => void;
  /** Scripted answers not used yet. */
  pending: () => number;
  /** Resolves when `predicate` holds for a recorded request; rejects after `timeoutMs`. */
  waitFor: (
    predicate: (r: RecordedRequest) => boolean,
    timeoutMs?: number,
  ) => Promise<RecordedRequest>;
  /** Throws when something unexpected happened or scripted answers are left over. */
  assertDone: () => void;
  /** Forgets the script, recordings and problems (between tests sharing one server). */
  reset: () => void;
  close: () => Promise<void>;
};

export function reply(text: string, extra: Omit<ReplyItem, 'type' | 'text'> = {}): ReplyItem {
  return { type: 'reply', text, ...extra };
}

export function toolCalls(calls: FakeToolCall[], extra: Omit<ReplyItem, 'type'> = {}): ReplyItem {
  return { type: 'reply', toolCalls: calls, ...extra };
}

export function httpError(
  status: number,
  extra: Omit<ErrorItem, 'type' | 'status'> = {},
): ErrorItem {
  return { type: 'error', status, ...extra };
}

export function dynamic(respond: DynamicItem['respond']): DynamicItem {
  return { type: 'dynamic', respond };
}

const routes: Record<string, Protocol> = {
  '/v1/chat/completions': 'openai',
  '/v1/messages': 'anthropic',
};

export async function startFakeLlm(options: FakeLlmOptions): Promise<FakeLlm> {
  let queue: ScriptItem[] = [];
  let requests: RecordedRequest[] = [];
  let unexpected: string[] = [];
  let idCounter = 0;
  const nextId = (prefix: string) => `${prefix}${++idCounter}`;

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const raw = await readBody(req);
    const path = (req.url ?? '').split('?')[0] ?? '';
    const protocol = routes[path];
    const record: RecordedRequest = {
      index: requests.length,
      protocol,
      method: req.method ?? '',
      path,
      headers: { ...req.headers },
      body: undefined,
      stream: false,
      status: undefined,
      aborted: false,
      completed: false,
    };
    requests.push(record);
    res.on('close', () => {
      if (!res.writableFinished) record.aborted = true;
    });

    const refuse = (status: number, problem: string) => {
      unexpected.push(`request #${record.index} ${record.method} ${path}: ${problem}`);
      const p = protocol ?? 'openai';
      sendError(res, record, p, { type: 'error', status, message: problem });
    };

    if (!protocol || req.method !== 'POST') return refuse(404, 'unknown endpoint');
    try {
      record.body = JSON.parse(raw);
    } catch {
      return refuse(400, 'body is not JSON');
    }
    const authProblem = checkAuth(protocol, req, options.apiKey);
    if (authProblem) return refuse(401, authProblem);
    const bodyProblem = checkBody(protocol, record.body, options.models);
    if (bodyProblem) return refuse(400, bodyProblem);
    record.stream = isRecord(record.body) && record.body.stream === true;
    if (protocol === 'openai' && record.stream) {
      const so = isRecord(record.body) ? record.body.stream_options : undefined;
      if (!isRecord(so) || so.include_usage !== true) {
        return refuse(400, 'streaming request without stream_options.include_usage');
      }
    }

    const item = queue.shift();
    if (!item) return refuse(500, 'more requests than scripted');
    if (item.protocol && item.protocol !== protocol) {
      return refuse(500, `scripted for ${item.protocol}, got a ${protocol} request`);
    }
    let answer: ReplyItem | ErrorItem;
    if (item.type === 'dynamic') {
      try {
        answer = await item.respond(record);
      } catch (err) {
        return refuse(500, `dynamic script item threw: ${String(err)}`);
      }
    } else {
      answer = item;
    }
    if (answer.type === 'error') return sendError(res, record, protocol, answer);
    if ((answer.streamOnly || answer.streamErrorAfter !== undefined) && !record.stream) {
      return refuse(500, 'a streaming answer was scripted for a non-streaming request');
    }
    const model = isRecord(record.body) ? String(record.body.model) : '';
    const shaped = normalizeReply(answer, nextId, protocol);
    if (!record.stream) return sendJson(res, record, 200, completeBody(protocol, shaped, model));
    await stream(res, record, protocol, shaped, model, nextId);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      unexpected.push(`fake server failed: ${String(err)}`);
      if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    get unexpected() {
      return unexpected;
    },
    script: (...items) => {
      queue.push(...items);
    },
    pending: () => queue.length,
    waitFor: async (predicate, timeoutMs = 2000) => {
      // Polling is simplest: records change from several places (headers, body, close).
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = requests.find(predicate);
        if (found) return found;
        if (Date.now() > deadline) {
          throw new Error(`fake LLM: condition not met within ${timeoutMs} ms`);
        }
        await sleep(5);
      }
    },
    assertDone: () => {
      const problems = [...unexpected];
      if (queue.length > 0) problems.push(`${queue.length} scripted answer(s) never requested`);
      if (problems.length > 0) throw new Error(`fake LLM:\n  ${problems.join('\n  ')}`);
    },
    reset: () => {
      queue = [];
      requests = [];
      unexpected = [];
    },
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

// --- request checks: what the real APIs would refuse ---

function checkAuth(protocol: Protocol, req: IncomingMessage, key: string): string | undefined {
  if (protocol === 'openai') {
    return req.headers.authorization === `Bearer ${key}`
      ? undefined
      : 'missing or wrong Authorization: Bearer header';
  }
  if (req.headers['x-api-key'] !== key) return 'missing or wrong x-api-key header';
  if (!req.headers['anthropic-version']) return 'missing anthropic-version header';
  return undefined;
}

function checkBody(protocol: Protocol, body: unknown, models: string[]): string | undefined {
  if (!isRecord(body)) return 'body is not an object';
  if (typeof body.model !== 'string' || !models.includes(body.model)) {
    return `unknown model ${JSON.stringify(body.model)}`;
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) return 'no messages';
  return protocol === 'openai'
    ? checkOpenAiMessages(body.messages)
    : checkAnthropicBody(body, body.messages);
}

function checkOpenAiMessages(messages: unknown[]): string | undefined {
  let open = new Set<string>();
  for (const [i, m] of messages.entries()) {
    if (!isRecord(m)) return `message ${i} is not an object`;
    if (m.role === 'tool') {
      if (typeof m.tool_call_id !== 'string' || !open.delete(m.tool_call_id)) {
        return `message ${i}: tool result for unknown tool_call_id ${String(m.tool_call_id)}`;
      }
      continue;
    }
    if (open.size > 0) return `message ${i}: tool calls ${[...open].join(', ')} have no result`;
    if (!['system', 'developer', 'user', 'assistant'].includes(String(m.role))) {
      return `message ${i}: bad role ${String(m.role)}`;
    }
    if (m.role === 'assistant' && Array.isArray(m.tool_calls)) {
      open = new Set(m.tool_calls.map((c) => (isRecord(c) ? String(c.id) : '')));
    }
  }
  return open.size > 0 ? `tool calls ${[...open].join(', ')} have no result` : undefined;
}

function checkAnthropicBody(
  body: Record<string, unknown>,
  messages: unknown[],
): string | undefined {
  if (typeof body.max_tokens !== 'number') return 'max_tokens is required';
  let pendingToolUse: string[] = [];
  for (const [i, m] of messages.entries()) {
    if (!isRecord(m)) return `message ${i} is not an object`;
    const expected = i % 2 === 0 ? 'user' : 'assistant';
    if (m.role !== expected) return `message ${i}: roles must alternate, starting with user`;
    const blocks = Array.isArray(m.content) ? m.content.filter(isRecord) : [];
    if (pendingToolUse.length > 0) {
      const answered = new Set(
        blocks.filter((b) => b.type === 'tool_result').map((b) => String(b.tool_use_id)),
      );
      const missing = pendingToolUse.filter((id) => !answered.has(id));
      if (missing.length > 0) return `message ${i}: no tool_result for ${missing.join(', ')}`;
    }
    pendingToolUse =
      m.role === 'assistant'
        ? blocks.filter((b) => b.type === 'tool_use').map((b) => String(b.id))
        : [];
  }
  return pendingToolUse.length > 0 ? 'last message has unanswered tool_use' : undefined;
}

// --- answers ---

type ShapedReply = {
  text: string;
  toolCalls: Array<{ id: string; name: string; arguments: string; input: unknown }>;
  finish: 'stop' | 'tool_calls' | 'length';
  usage: { input: number; output: number };
  chunkChars: number | undefined;
  chunkDelayMs: number;
  streamErrorAfter: number | undefined;
};

function normalizeReply(
  r: ReplyItem,
  nextId: (prefix: string) => string,
  protocol: Protocol,
): ShapedReply {
  const text = r.text ?? '';
  const calls = (r.toolCalls ?? []).map((c) => ({
    id: c.id ?? nextId(protocol === 'openai' ? 'call_' : 'toolu_'),
    name: c.name,
    arguments: JSON.stringify(c.input),
    input: c.input,
  }));
  return {
    text,
    toolCalls: calls,
    finish: r.finish ?? (calls.length > 0 ? 'tool_calls' : 'stop'),
    usage: r.usage ?? { input: 10, output: Math.max(1, Math.ceil(text.length / 4)) + calls.length },
    chunkChars: r.chunkChars,
    chunkDelayMs: r.chunkDelayMs ?? 0,
    streamErrorAfter: r.streamErrorAfter,
  };
}

const anthropicStop = { stop: 'end_turn', tool_calls: 'tool_use', length: 'max_tokens' } as const;

function completeBody(protocol: Protocol, r: ShapedReply, model: string): unknown {
  if (protocol === 'openai') {
    return {
      id: 'chatcmpl-fake',
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: r.text === '' ? null : r.text,
            ...(r.toolCalls.length > 0 && {
              tool_calls: r.toolCalls.map((c) => ({
                id: c.id,
                type: 'function',
                function: { name: c.name, arguments: c.arguments },
              })),
            }),
          },
          finish_reason: r.finish,
        },
      ],
      usage: openAiUsage(r),
    };
  }
  return {
    id: 'msg_fake',
    type: 'message',
    role: 'assistant',
    model,
    content: [
      ...(r.text === '' ? [] : [{ type: 'text', text: r.text }]),
      ...r.toolCalls.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: c.input })),
    ],
    stop_reason: anthropicStop[r.finish],
    stop_sequence: null,
    usage: { input_tokens: r.usage.input, output_tokens: r.usage.output },
  };
}

function openAiUsage(r: ShapedReply) {
  return {
    prompt_tokens: r.usage.input,
    completion_tokens: r.usage.output,
    total_tokens: r.usage.input + r.usage.output,
  };
}

function splitText(text: string, chunkChars: number | undefined): string[] {
  if (text === '') return [];
  if (chunkChars && chunkChars > 0) {
    const out: string[] = [];
    for (let i = 0; i < text.length; i += chunkChars) out.push(text.slice(i, i + chunkChars));
    return out;
  }
  return text.match(/\S+\s*|\s+/g) ?? [text];
}

async function stream(
  res: ServerResponse,
  record: RecordedRequest,
  protocol: Protocol,
  r: ShapedReply,
  model: string,
  nextId: (prefix: string) => string,
): Promise<void> {
  record.status = 200;
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  const events = protocol === 'openai' ? openAiEvents(r, model) : anthropicEvents(r, model, nextId);
  let contentChunks = 0;
  for (const { chunk, content } of events) {
    if (content && r.streamErrorAfter !== undefined && contentChunks >= r.streamErrorAfter) {
      res.write(streamErrorEvent(protocol));
      break;
    }
    if (content && r.chunkDelayMs > 0) await sleep(r.chunkDelayMs);
    if (res.destroyed || record.aborted) return;
    res.write(chunk);
    if (content) contentChunks++;
  }
  res.end();
  record.completed = true;
}

type SseChunk = { chunk: string; content: boolean };

function streamErrorEvent(protocol: Protocol): string {
  if (protocol === 'openai') {
    const error = { message: 'The server had an error', type: 'server_error', code: null };
    return `data: ${JSON.stringify({ error })}\n\n`;
  }
  const error = { type: 'overloaded_error', message: 'Overloaded' };
  return `event: error\ndata: ${JSON.stringify({ type: 'error', error })}\n\n`;
}

function* openAiEvents(r: ShapedReply, model: string): Generator<SseChunk> {
  const base = {
    id: 'chatcmpl-fake',
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model,
  };
  const data = (choice: Record<string, unknown>, content = true): SseChunk => ({
    chunk: `data: ${JSON.stringify({ ...base, choices: [{ index: 0, ...choice }] })}\n\n`,
    content,
  });
  yield data({ delta: { role: 'assistant', content: '' }, finish_reason: null }, false);
  for (const piece of splitText(r.text, r.chunkChars)) {
    yield data({ delta: { content: piece }, finish_reason: null });
  }
  for (const [index, c] of r.toolCalls.entries()) {
    yield data({
      delta: {
        tool_calls: [
          { index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } },
        ],
      },
      finish_reason: null,
    });
    for (const piece of splitText(c.arguments, r.chunkChars ?? 8)) {
      yield data({
        delta: { tool_calls: [{ index, function: { arguments: piece } }] },
        finish_reason: null,
      });
    }
  }
  yield data({ delta: {}, finish_reason: r.finish }, false);
  yield {
    chunk: `data: ${JSON.stringify({ ...base, choices: [], usage: openAiUsage(r) })}\n\n`,
    content: false,
  };
  yield { chunk: 'data: [DONE]\n\n', content: false };
}

function* anthropicEvents(
  r: ShapedReply,
  model: string,
  nextId: (prefix: string) => string,
): Generator<SseChunk> {
  const ev = (type: string, payload: Record<string, unknown>, content = true): SseChunk => ({
    chunk: `event: ${type}\ndata: ${JSON.stringify({ type, ...payload })}\n\n`,
    content,
  });
  yield ev(
    'message_start',
    {
      message: {
        id: nextId('msg_'),
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: r.usage.input, output_tokens: 1 },
      },
    },
    false,
  );
  let index = 0;
  if (r.text !== '') {
    yield ev('content_block_start', { index, content_block: { type: 'text', text: '' } }, false);
    yield ev('ping', {}, false);
    for (const piece of splitText(r.text, r.chunkChars)) {
      yield ev('content_block_delta', { index, delta: { type: 'text_delta', text: piece } });
    }
    yield ev('content_block_stop', { index }, false);
    index++;
  }
  for (const c of r.toolCalls) {
    yield ev(
      'content_block_start',
      { index, content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} } },
      false,
    );
    for (const piece of splitText(c.arguments, r.chunkChars ?? 8)) {
      yield ev('content_block_delta', {
        index,
        delta: { type: 'input_json_delta', partial_json: piece },
      });
    }
    yield ev('content_block_stop', { index }, false);
    index++;
  }
  yield ev(
    'message_delta',
    {
      delta: { stop_reason: anthropicStop[r.finish], stop_sequence: null },
      usage: { output_tokens: r.usage.output },
    },
    false,
  );
  yield ev('message_stop', {}, false);
}

const openAiErrorTypes: Record<number, { type: string; code: string | null }> = {
  400: { type: 'invalid_request_error', code: null },
  401: { type: 'invalid_request_error', code: 'invalid_api_key' },
  403: { type: 'invalid_request_error', code: 'unsupported_country_region_territory' },
  404: { type: 'invalid_request_error', code: 'model_not_found' },
  429: { type: 'requests', code: 'rate_limit_exceeded' },
};

const anthropicErrorTypes: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

function sendError(
  res: ServerResponse,
  record: RecordedRequest,
  protocol: Protocol,
  e: ErrorItem,
): void {
  const message = e.message ?? `fake error ${e.status}`;
  const body =
    protocol === 'openai'
      ? {
          error: {
            message,
            type: openAiErrorTypes[e.status]?.type ?? 'server_error',
            param: null,
            code: openAiErrorTypes[e.status]?.code ?? null,
          },
        }
      : {
          type: 'error',
          error: { type: anthropicErrorTypes[e.status] ?? 'api_error', message },
        };
  sendJson(res, record, e.status, body, e.headers);
}

function sendJson(
  res: ServerResponse,
  record: RecordedRequest,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  record.status = status;
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body), () => {
    record.completed = true;
  });
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
