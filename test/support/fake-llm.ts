// A scripted fake of the model vendors' HTTP APIs (OpenAI chat completions, OpenAI responses and
// Anthropic messages, streaming and not) on 127.0.0.1, so the real AI SDK providers can be tested over
// loopback. It answers from a queue the test gives, records every request, and reports anything
// a real vendor would reject or the test did not script through `unexpected` / `assertDone()`.
// A request that asks the vendor to act for the client (a tool the vendor runs, its MCP connector,
// content it would fetch from a URL, state stored there) is unexpected too: Errand never sends one.
// It counts a prompt's tokens deterministically (a quarter of its characters), can enforce a
// context window and refuse a longer prompt in the vendor's words, and reports prompt-cache hits
// the way each vendor caches: OpenAI the common prefix with the previous request of the same
// prompt_cache_key, Anthropic only up to the request's cache_control breakpoints.

import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export type Protocol = 'openai' | 'anthropic' | 'responses';

/**
 * A tool call. Responses only: `namespace` names the namespace of a function (Codex offers an
 * MCP server's tools as one, once its tool search found them), and a call of `tool_search`,
 * where the request offers client-run tool search, is a `tool_search_call` with `input` as its
 * arguments.
 */
export type FakeToolCall = { id?: string; name: string; input: unknown; namespace?: string };

/** A successful model answer: text and/or tool calls. */
export type ReplyItem = {
  type: 'reply';
  text?: string;
  toolCalls?: FakeToolCall[];
  /** Defaults to 'tool_calls' / 'tool_use' when there are tool calls, else 'stop' / 'end_turn'. */
  finish?: 'stop' | 'tool_calls' | 'length';
  /** Reported as given; by default the input is the prompt's counted tokens and its cache hits. */
  usage?: { input: number; output: number; cacheRead?: number; cacheWrite?: number };
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
  /**
   * Only for streaming requests: after this many content chunks the stream stops sending and
   * stays open until the client closes it (the request's `stalled` says it got there). A stream
   * a test aborts in the middle, at a point it knows, without a clock. Implies streamOnly.
   */
  stallAfter?: number;
};

/** An HTTP error in the vendor's own error format. */
export type ErrorItem = {
  type: 'error';
  status: number;
  message?: string;
  /** OpenAI's error code; by default the one its status usually carries. */
  code?: string;
  headers?: Record<string, string>;
};

/**
 * Computes the answer from the request, e.g. to echo what the server received; undefined for a
 * request the test did not expect (it is answered with a 500 and reported).
 */
export type DynamicItem = {
  type: 'dynamic';
  respond: (
    request: RecordedRequest,
  ) => ReplyItem | ErrorItem | undefined | Promise<ReplyItem | ErrorItem | undefined>;
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
  /** A `stallAfter` answer reached its stall and holds the stream open. */
  stalled: boolean;
  /** The prompt's tokens as the fake counts them (tools, system and messages), once parsed. */
  promptTokens: number | undefined;
  /** Prompt tokens served from the fake's prompt cache, and written to it. */
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Refused for passing the context window. */
  overflow: boolean;
  /** The images the request carries, in order, decoded (each checked as its vendor checks it). */
  images: RecordedImage[];
};

/** An image a request carried: where, its declared type, and its bytes. */
export type RecordedImage = { message: number; mediaType: string; bytes: Buffer };

export type FakeLlmOptions = {
  /** The key every request must carry (Bearer for OpenAI, x-api-key for Anthropic). */
  apiKey: string;
  /** Model ids the server knows; a request for another model is unexpected. */
  models: string[];
  /**
   * The models' context window in tokens, or each model's: a request whose prompt plus its
   * max_tokens passes it is refused as the vendor refuses it (OpenAI 400
   * `context_length_exceeded`, Anthropic 400 `invalid_request_error` "prompt is too long"),
   * without taking a scripted answer.
   */
  contextWindow?: number | Readonly<Record<string, number>>;
  /** Refusals for the window the test expects (default 0); more are unexpected. */
  allowOverflows?: number;
};

/** Tokens of a text as the fake counts them: a quarter of its characters, rounded up. */
export function countTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

export type FakeLlm = {
  /** Base URL without path, e.g. http://127.0.0.1:1234 (providers want `${url}/v1`). */
  url: string;
  requests: RecordedRequest[];
  /** Problems found: requests nobody scripted or a real vendor would refuse. */
  unexpected: string[];
  script: (...items: ScriptItem[]) => void;
  /**
   * Answers every request the queue has no item for with `respond`; a request it returns
   * undefined for is unexpected. For runs whose number of model calls is not known in advance.
   */
  scriptAll: (respond: DynamicItem['respond'] | undefined) => void;
  /** Scripted answers not used yet. */
  pending: () => number;
  /** Expects `n` more refusals for the window (until reset); others stay unexpected. */
  expectOverflows: (n: number) => void;
  /** Resolves when `predicate` holds for a recorded request; rejects after `timeoutMs`. */
  waitFor: (
    predicate: (r: RecordedRequest) => boolean,
    timeoutMs?: number,
  ) => Promise<RecordedRequest>;
  /** Throws when something unexpected happened or scripted answers are left over. */
  assertDone: () => void;
  /** Forgets the script, recordings, problems and prompt caches (between tests sharing one server). */
  reset: () => void;
  close: () => Promise<void>;
};

export function reply(text: string, extra: Omit<ReplyItem, 'type' | 'text'> = {}): ReplyItem {
  return { type: 'reply', text, ...extra };
}

/** The tool results of a recorded OpenAI request, in order. */
export function toolResults(request: RecordedRequest | undefined): string[] {
  const body = request?.body as { messages?: Array<{ role: string; content: unknown }> };
  return (body?.messages ?? [])
    .filter((m) => m.role === 'tool')
    .map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)));
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
  '/v1/responses': 'responses',
};

export async function startFakeLlm(options: FakeLlmOptions): Promise<FakeLlm> {
  let queue: ScriptItem[] = [];
  let fallback: DynamicItem['respond'] | undefined;
  let requests: RecordedRequest[] = [];
  let unexpected: string[] = [];
  let overflows = 0;
  let allowedOverflows = options.allowOverflows ?? 0;
  let caches = new PromptCaches();
  let idCounter = 0;
  const nextId = (prefix: string) => `${prefix}${++idCounter}`;

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const raw = await readBody(req);
    const path = (req.url ?? '').split('?')[0] ?? '';
    const protocol = Object.hasOwn(routes, path) ? routes[path] : undefined;
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
      stalled: false,
      promptTokens: undefined,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      overflow: false,
      images: [],
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
    if (protocol === 'anthropic' && raw.length > MAX_ANTHROPIC_REQUEST)
      return refuse(413, `request exceeds ${MAX_ANTHROPIC_REQUEST} bytes`);
    const images = readImages(protocol, record.body as Record<string, unknown>);
    if (typeof images === 'string') return refuse(400, images);
    record.images = images;
    record.stream = isRecord(record.body) && record.body.stream === true;
    if (protocol === 'openai' && record.stream) {
      const so = isRecord(record.body) ? record.body.stream_options : undefined;
      if (!isRecord(so) || so.include_usage !== true) {
        return refuse(400, 'streaming request without stream_options.include_usage');
      }
    }

    const prompt = measurePrompt(protocol, record.body as Record<string, unknown>);
    record.promptTokens = prompt.tokens;
    const model = isRecord(record.body) ? String(record.body.model) : '';
    const window =
      typeof options.contextWindow === 'object'
        ? options.contextWindow[model]
        : options.contextWindow;
    const completion = maxTokensOf(record.body as Record<string, unknown>);
    if (window !== undefined && prompt.tokens + completion > window) {
      record.overflow = true;
      overflows++;
      if (overflows > allowedOverflows) {
        unexpected.push(
          `request #${record.index}: ${prompt.tokens} prompt tokens + ${completion} max_tokens pass the ${window}-token window`,
        );
      }
      return sendError(
        res,
        record,
        protocol,
        overflowError(protocol, prompt.tokens, completion, window),
      );
    }

    const item: ScriptItem | undefined =
      queue.shift() ?? (fallback ? { type: 'dynamic', respond: fallback } : undefined);
    if (!item) return refuse(500, 'more requests than scripted');
    if (item.protocol && item.protocol !== protocol) {
      return refuse(500, `scripted for ${item.protocol}, got a ${protocol} request`);
    }
    let answer: ReplyItem | ErrorItem | undefined;
    if (item.type === 'dynamic') {
      try {
        answer = await item.respond(record);
      } catch (err) {
        return refuse(500, `dynamic script item threw: ${String(err)}`);
      }
      if (!answer) return refuse(500, 'the script has no answer for this request');
    } else {
      answer = item;
    }
    if (answer.type === 'error') return sendError(res, record, protocol, answer);
    if (protocol === 'responses') {
      const undeclared = (answer.toolCalls ?? []).find(
        (c) => responsesToolKind(record.body, c.name, c.namespace) === undefined,
      );
      if (undeclared)
        return refuse(
          500,
          `scripted a call of ${undeclared.name}, which the request does not offer`,
        );
    }
    const streamOnly =
      answer.streamOnly || answer.streamErrorAfter !== undefined || answer.stallAfter !== undefined;
    if (streamOnly && !record.stream) {
      return refuse(500, 'a streaming answer was scripted for a non-streaming request');
    }
    // Only an answered prompt is cached, as at the vendors.
    const cache = caches.use(protocol, prompt, record.body as Record<string, unknown>);
    record.cacheReadTokens = cache.read;
    record.cacheWriteTokens = cache.write;
    const shaped = normalizeReply(answer, nextId, protocol, prompt.tokens, cache);
    if (!record.stream) {
      return sendJson(res, record, 200, completeBody(protocol, shaped, model, record.body, nextId));
    }
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
    scriptAll: (respond) => {
      fallback = respond;
    },
    pending: () => queue.length,
    expectOverflows: (n) => {
      allowedOverflows = overflows + n;
    },
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
      fallback = undefined;
      requests = [];
      unexpected = [];
      overflows = 0;
      allowedOverflows = options.allowOverflows ?? 0;
      caches = new PromptCaches();
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
  if (protocol !== 'anthropic') {
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
  const acts = vendorActs(protocol, body);
  if (acts) return acts;
  const format = checkOutputFormat(protocol, body);
  if (format) return format;
  if (protocol === 'responses') return checkResponsesInput(body);
  if (!Array.isArray(body.messages) || body.messages.length === 0) return 'no messages';
  return protocol === 'openai'
    ? checkOpenAiMessages(body.messages)
    : checkAnthropicBody(body, body.messages);
}

/** Parameters with which the vendor acts beyond answering, or bills beyond the tokens. */
const VENDOR_ACTS: Record<Protocol, readonly string[]> = {
  anthropic: ['mcp_servers', 'container'],
  responses: ['previous_response_id', 'conversation', 'prompt', 'context_management'],
  openai: ['web_search_options', 'plugins'],
};

/**
 * What in a request the vendor would do for the client rather than answer: a tool not run by
 * the client (Anthropic: untyped, `custom` or one of its client-run tools; OpenAI: functions and
 * custom tools, Responses' local shell and client-run tool search), a parameter of VENDOR_ACTS,
 * a premium speed or tier, a background response, or content by URL, file id or item reference.
 */
function vendorActs(protocol: Protocol, body: Record<string, unknown>): string | undefined {
  const clientRun = (tool: unknown): boolean => {
    if (!isRecord(tool)) return false;
    if (protocol === 'anthropic') {
      return (
        tool.type === undefined ||
        tool.type === 'custom' ||
        /^(bash|text_editor|computer|memory)_\d{8}$/.test(String(tool.type))
      );
    }
    if (tool.type === 'function' || tool.type === 'custom') return true;
    if (protocol !== 'responses') return false;
    if (tool.type === 'namespace')
      return (Array.isArray(tool.tools) ? tool.tools : []).every(clientRun);
    return (
      tool.type === 'local_shell' || (tool.type === 'tool_search' && tool.execution === 'client')
    );
  };
  const searched =
    protocol === 'responses' && Array.isArray(body.input)
      ? body.input.flatMap((item) =>
          isRecord(item) && item.type === 'tool_search_output' && Array.isArray(item.tools)
            ? item.tools
            : [],
        )
      : [];
  for (const tool of [...(Array.isArray(body.tools) ? body.tools : []), ...searched]) {
    if (!clientRun(tool)) {
      return `a tool the vendor runs: ${JSON.stringify(isRecord(tool) ? tool.type : tool)}`;
    }
  }
  const choice = body.tool_choice;
  if (isRecord(choice) && protocol !== 'anthropic') {
    if (!['function', 'custom', 'allowed_tools'].includes(String(choice.type))) {
      return `a tool_choice the vendor runs: ${JSON.stringify(choice.type)}`;
    }
  }
  for (const name of VENDOR_ACTS[protocol]) {
    if (body[name] !== undefined) return `${name}: the vendor would act on it`;
  }
  if (body.speed !== undefined && body.speed !== 'standard') return 'a premium speed';
  if (['priority', 'fast', 'scale'].includes(String(body.service_tier))) return 'a premium tier';
  if (body.background === true) return 'a background response';
  const edits = isRecord(body.context_management) ? body.context_management.edits : undefined;
  if (Array.isArray(edits) && edits.some((e) => isRecord(e) && /^compact/.test(String(e.type)))) {
    return 'compaction at the vendor';
  }
  const fetched = (value: unknown): boolean => {
    if (Array.isArray(value)) return value.some(fetched);
    if (!isRecord(value)) return false;
    if (value.type === 'url' || value.file_id !== undefined || value.type === 'item_reference') {
      return true;
    }
    for (const [key, field] of Object.entries(value)) {
      const url = isRecord(field) ? field.url : field;
      if (/_url$/.test(key) && !String(url).startsWith('data:')) return true;
    }
    return [value.content, value.output, value.source].some(fetched);
  };
  if (fetched(body.messages) || fetched(body.input) || fetched(body.system)) {
    return 'content the vendor would fetch or look up';
  }
  return undefined;
}

/**
 * A request for structured output as the vendor takes it: OpenAI's `response_format` (chat) or
 * `text.format` (responses) of type `json_schema` with a name and an object-rooted schema (in
 * strict mode, every object closed and every property required), Anthropic's
 * `output_config.format` of type `json_schema` whose objects are all closed.
 */
function checkOutputFormat(protocol: Protocol, body: Record<string, unknown>): string | undefined {
  if (protocol === 'anthropic') {
    const config = body.output_config;
    if (config === undefined) return undefined;
    if (!isRecord(config)) return 'output_config is not an object';
    const format = config.format;
    if (format === undefined) return undefined;
    if (!isRecord(format) || format.type !== 'json_schema' || !isRecord(format.schema)) {
      return 'output_config.format must be {type: "json_schema", schema}';
    }
    return openObject(format.schema, 'output_config.format.schema');
  }
  const format =
    protocol === 'openai'
      ? body.response_format
      : isRecord(body.text)
        ? body.text.format
        : undefined;
  if (format === undefined) return undefined;
  if (!isRecord(format)) return 'the response format is not an object';
  if (format.type === 'text' || format.type === 'json_object') return undefined;
  if (format.type !== 'json_schema') return `unknown response format ${String(format.type)}`;
  // Chat nests the schema's fields under json_schema; Responses puts them in the format.
  const spec = protocol === 'openai' ? format.json_schema : format;
  if (!isRecord(spec)) return 'json_schema is missing';
  if (typeof spec.name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(spec.name)) {
    return `json_schema name ${JSON.stringify(spec.name)} must be 1 to 64 of a-z, A-Z, 0-9, _ and -`;
  }
  if (!isRecord(spec.schema) || spec.schema.type !== 'object') {
    return 'json_schema.schema must be a JSON Schema whose root is an object';
  }
  return spec.strict === true ? strictProblem(spec.schema, 'schema') : undefined;
}

/** Where a schema has an object that admits more properties than it lists (a refusal), if any. */
function openObject(schema: unknown, at: string): string | undefined {
  return walkObjects(schema, at, (node, where) =>
    node.additionalProperties === false
      ? undefined
      : `${where}: an object schema must set additionalProperties to false`,
  );
}

/** OpenAI's strict mode: every object closed, every one of its properties required. */
function strictProblem(schema: unknown, at: string): string | undefined {
  return walkObjects(schema, at, (node, where) => {
    if (node.additionalProperties !== false) {
      return `${where}: strict mode requires additionalProperties: false`;
    }
    const keys = isRecord(node.properties) ? Object.keys(node.properties) : [];
    const required = Array.isArray(node.required) ? node.required : [];
    const missing = keys.filter((k) => !required.includes(k));
    return missing.length > 0
      ? `${where}: strict mode requires every property in required (missing ${missing.join(', ')})`
      : undefined;
  });
}

/** The first problem `check` finds with an object schema anywhere in `schema`. */
function walkObjects(
  schema: unknown,
  at: string,
  check: (node: Record<string, unknown>, at: string) => string | undefined,
): string | undefined {
  if (Array.isArray(schema)) {
    for (const [i, item] of schema.entries()) {
      const found = walkObjects(item, `${at}[${i}]`, check);
      if (found) return found;
    }
    return undefined;
  }
  if (!isRecord(schema)) return undefined;
  if (schema.type === 'object' || isRecord(schema.properties)) {
    const found = check(schema, at);
    if (found) return found;
  }
  for (const [key, value] of Object.entries(schema)) {
    // The values of these are data, not schemas.
    if (key === 'enum' || key === 'const' || key === 'default' || key === 'examples') continue;
    const found = walkObjects(value, `${at}.${key}`, check);
    if (found) return found;
  }
  return undefined;
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

/**
 * The Responses API's input: items in order, each tool call answered by an output with its
 * call_id before the next message; the tools named by calls must be the request's own.
 */
function checkResponsesInput(body: Record<string, unknown>): string | undefined {
  if (!Array.isArray(body.input) || body.input.length === 0) return 'no input';
  const open = new Set<string>();
  for (const [i, item] of body.input.entries()) {
    if (!isRecord(item)) return `input ${i} is not an object`;
    const type = item.type ?? 'message';
    if (type === 'function_call' || type === 'custom_tool_call' || type === 'tool_search_call') {
      open.add(String(item.call_id));
    } else if (
      type === 'function_call_output' ||
      type === 'custom_tool_call_output' ||
      type === 'tool_search_output'
    ) {
      if (!open.delete(String(item.call_id))) {
        return `input ${i}: ${String(type)} for unknown call_id ${String(item.call_id)}`;
      }
    } else if (type === 'message') {
      if (open.size > 0) return `input ${i}: calls ${[...open].join(', ')} have no output`;
      if (!['system', 'developer', 'user', 'assistant'].includes(String(item.role))) {
        return `input ${i}: bad role ${String(item.role)}`;
      }
    }
  }
  return open.size > 0 ? `calls ${[...open].join(', ')} have no output` : undefined;
}

/** How the request declares a tool: a JSON `function`, a freeform `custom` one, or not at all. */
function responsesToolKind(
  body: unknown,
  name: string,
  namespace?: string,
): 'function' | 'custom' | 'tool_search' | undefined {
  const tools = isRecord(body) && Array.isArray(body.tools) ? body.tools.filter(isRecord) : [];
  if (namespace !== undefined) {
    // A namespace offered, or found by an earlier tool search of the conversation.
    const searched =
      isRecord(body) && Array.isArray(body.input)
        ? body.input.flatMap((item) =>
            isRecord(item) && item.type === 'tool_search_output' && Array.isArray(item.tools)
              ? item.tools.filter(isRecord)
              : [],
          )
        : [];
    const space = [...tools, ...searched].find(
      (t) => t.type === 'namespace' && t.name === namespace,
    );
    const inner = Array.isArray(space?.tools) ? space.tools.filter(isRecord) : [];
    return inner.some((t) => t.name === name && t.type === 'function') ? 'function' : undefined;
  }
  if (name === 'tool_search' && tools.some((t) => t.type === 'tool_search')) return 'tool_search';
  const tool = tools.find((t) => t.name === name);
  return tool?.type === 'function' || tool?.type === 'custom' ? tool.type : undefined;
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

// --- images ---

/** The types every vendor takes, and the first bytes each starts with. */
const IMAGE_MAGIC: Readonly<Record<string, (b: Buffer) => boolean>> = {
  'image/png': (b) => b.subarray(0, 8).equals(Buffer.from('89504e470d0a1a0a', 'hex')),
  'image/jpeg': (b) => b.subarray(0, 3).equals(Buffer.from('ffd8ff', 'hex')),
  'image/gif': (b) => /^GIF8[79]a/.test(b.subarray(0, 6).toString('latin1')),
  'image/webp': (b) =>
    b.subarray(0, 4).toString('latin1') === 'RIFF' &&
    b.subarray(8, 12).toString('latin1') === 'WEBP',
};
/** Anthropic's limit on one image, which it counts on the base64; OpenAI's, on the bytes. */
const MAX_IMAGE_BYTES = { anthropic: 5 * 1024 * 1024, openai: 20 * 1024 * 1024 };
/** Anthropic's limit on a whole request. */
const MAX_ANTHROPIC_REQUEST = 32 * 1024 * 1024;
const STRICT_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** An image's bytes from strict base64 with the type it claims, checked; else the vendor's refusal. */
function imageBytes(
  mediaType: unknown,
  data: unknown,
  maxBytes: number,
): { mediaType: string; bytes: Buffer } | string {
  const type = String(mediaType);
  const matches = IMAGE_MAGIC[type];
  if (!matches) return `image media type ${JSON.stringify(mediaType)} is not supported`;
  if (
    typeof data !== 'string' ||
    data.length === 0 ||
    data.length % 4 !== 0 ||
    !STRICT_BASE64.test(data)
  )
    return 'image data is not valid base64';
  const bytes = Buffer.from(data, 'base64');
  const size = maxBytes === MAX_IMAGE_BYTES.anthropic ? data.length : bytes.length;
  if (size > maxBytes) return `image exceeds ${maxBytes} bytes: ${size} bytes`;
  if (!matches(bytes)) return `image does not match the provided media type ${type}`;
  return { mediaType: type, bytes };
}

/**
 * The images of a request, each in its vendor's shape: Anthropic's `image` block with a base64
 * source in a user message (or a tool result), OpenAI's `image_url` part with a data URL in a
 * user message, the Responses API's `input_image` in a user message. Anything else that looks
 * like an image (a wrong shape, a wrong place, a type its bytes deny) is refused.
 */
function readImages(protocol: Protocol, body: Record<string, unknown>): RecordedImage[] | string {
  const images: RecordedImage[] = [];
  const items = protocol === 'responses' ? body.input : body.messages;
  for (const [i, m] of (Array.isArray(items) ? items : []).entries()) {
    if (!isRecord(m) || !Array.isArray(m.content)) continue;
    const parts = m.content.flatMap((p) =>
      isRecord(p) && p.type === 'tool_result' && Array.isArray(p.content) ? [p, ...p.content] : [p],
    );
    for (const part of parts.filter(isRecord)) {
      const where = `message ${i}`;
      let found: { mediaType: string; bytes: Buffer } | string | undefined;
      if (protocol === 'anthropic' && part.type === 'image') {
        const source = isRecord(part.source) ? part.source : {};
        if (source.type !== 'base64') return `${where}: image source type ${String(source.type)}`;
        found = imageBytes(source.media_type, source.data, MAX_IMAGE_BYTES.anthropic);
      } else if (protocol === 'openai' && part.type === 'image_url') {
        const image = isRecord(part.image_url) ? part.image_url : {};
        if (![undefined, 'auto', 'low', 'high'].includes(image.detail as string | undefined))
          return `${where}: image detail ${String(image.detail)}`;
        found = dataUrlImage(image.url);
      } else if (protocol === 'responses' && part.type === 'input_image') {
        // The Responses API takes `original` too (full resolution; Codex sends it for its models).
        if (
          ![undefined, 'auto', 'low', 'high', 'original'].includes(
            part.detail as string | undefined,
          )
        )
          return `${where}: image detail ${String(part.detail)}`;
        found = dataUrlImage(part.image_url);
      } else if (/image/.test(String(part.type))) {
        return `${where}: a content part of type ${String(part.type)} is not a ${protocol} image`;
      } else continue;
      if (typeof found === 'string') return `${where}: ${found}`;
      if (m.role !== 'user') return `${where}: an image in a ${String(m.role)} message`;
      images.push({ message: i, ...found });
    }
  }
  return images;
}

function dataUrlImage(url: unknown): { mediaType: string; bytes: Buffer } | string {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(String(url));
  if (!match) return 'image_url is not a base64 data URL';
  return imageBytes(match[1], match[2], MAX_IMAGE_BYTES.openai);
}

// --- answers ---

type ShapedReply = {
  text: string;
  toolCalls: Array<{
    id: string;
    name: string;
    arguments: string;
    input: unknown;
    namespace?: string;
  }>;
  finish: 'stop' | 'tool_calls' | 'length';
  /** `input` counts every prompt token, the cached ones included. */
  usage: { input: number; output: number; cacheRead: number; cacheWrite: number };
  chunkChars: number | undefined;
  chunkDelayMs: number;
  streamErrorAfter: number | undefined;
  stallAfter: number | undefined;
};

function normalizeReply(
  r: ReplyItem,
  nextId: (prefix: string) => string,
  protocol: Protocol,
  promptTokens: number,
  cache: CacheUse,
): ShapedReply {
  const text = r.text ?? '';
  const calls = (r.toolCalls ?? []).map((c) => ({
    id: c.id ?? nextId(protocol === 'anthropic' ? 'toolu_' : 'call_'),
    name: c.name,
    arguments: JSON.stringify(c.input),
    input: c.input,
    ...(c.namespace !== undefined ? { namespace: c.namespace } : {}),
  }));
  const output = Math.max(1, countTokens(text)) + calls.length;
  return {
    text,
    toolCalls: calls,
    finish: r.finish ?? (calls.length > 0 ? 'tool_calls' : 'stop'),
    usage: r.usage
      ? {
          input: r.usage.input,
          output: r.usage.output,
          cacheRead: r.usage.cacheRead ?? 0,
          cacheWrite: r.usage.cacheWrite ?? 0,
        }
      : { input: promptTokens, output, cacheRead: cache.read, cacheWrite: cache.write },
    chunkChars: r.chunkChars,
    chunkDelayMs: r.chunkDelayMs ?? 0,
    streamErrorAfter: r.streamErrorAfter,
    stallAfter: r.stallAfter,
  };
}

const anthropicStop = { stop: 'end_turn', tool_calls: 'tool_use', length: 'max_tokens' } as const;

function completeBody(
  protocol: Protocol,
  r: ShapedReply,
  model: string,
  body: unknown,
  nextId: (prefix: string) => string,
): unknown {
  if (protocol === 'responses') {
    return responsesObject(
      nextId('resp_'),
      model,
      'completed',
      responsesOutput(r, body, nextId),
      r,
    );
  }
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
    usage: { ...anthropicInputUsage(r), output_tokens: r.usage.output },
  };
}

function openAiUsage(r: ShapedReply) {
  return {
    prompt_tokens: r.usage.input,
    completion_tokens: r.usage.output,
    total_tokens: r.usage.input + r.usage.output,
    prompt_tokens_details: { cached_tokens: r.usage.cacheRead },
  };
}

// Anthropic's input_tokens leaves out the tokens read from or written to the cache.
function anthropicInputUsage(r: ShapedReply) {
  return {
    input_tokens: Math.max(0, r.usage.input - r.usage.cacheRead - r.usage.cacheWrite),
    cache_creation_input_tokens: r.usage.cacheWrite,
    cache_read_input_tokens: r.usage.cacheRead,
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
  const events =
    protocol === 'openai'
      ? openAiEvents(r, model)
      : protocol === 'responses'
        ? responsesEvents(r, model, record.body, nextId)
        : anthropicEvents(r, model, nextId);
  let contentChunks = 0;
  for (const { chunk, content } of events) {
    if (content && r.streamErrorAfter !== undefined && contentChunks >= r.streamErrorAfter) {
      res.write(streamErrorEvent(protocol));
      break;
    }
    if (content && r.stallAfter !== undefined && contentChunks >= r.stallAfter) {
      record.stalled = true;
      if (!res.destroyed) await once(res, 'close');
      return;
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
  if (protocol === 'responses') {
    const error = { type: 'error', code: 'server_error', message: 'The server had an error' };
    return `event: error\ndata: ${JSON.stringify(error)}\n\n`;
  }
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

type ResponsesItem = Record<string, unknown> & { type: string; id: string };

/** The reply as Responses output items: a message with its text, then each tool call. */
function responsesOutput(
  r: ShapedReply,
  body: unknown,
  nextId: (prefix: string) => string,
): ResponsesItem[] {
  const items: ResponsesItem[] = [];
  if (r.text !== '') {
    items.push({
      type: 'message',
      id: nextId('msg_'),
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: r.text, annotations: [] }],
    });
  }
  for (const c of r.toolCalls) {
    const kind = responsesToolKind(body, c.name, c.namespace);
    if (kind === 'tool_search') {
      items.push({
        type: 'tool_search_call',
        id: nextId('tsc_'),
        execution: 'client',
        call_id: c.id,
        status: 'completed',
        arguments: c.input,
      });
      continue;
    }
    // A freeform (custom) tool takes its input as the text itself, a function tool as JSON.
    items.push(
      kind === 'custom'
        ? {
            type: 'custom_tool_call',
            id: nextId('ctc_'),
            status: 'completed',
            call_id: c.id,
            name: c.name,
            input: typeof c.input === 'string' ? c.input : c.arguments,
          }
        : {
            type: 'function_call',
            id: nextId('fc_'),
            status: 'completed',
            call_id: c.id,
            name: c.name,
            arguments: c.arguments,
            ...(c.namespace !== undefined ? { namespace: c.namespace } : {}),
          },
    );
  }
  return items;
}

function responsesObject(
  id: string,
  model: string,
  status: 'in_progress' | 'completed' | 'incomplete',
  output: ResponsesItem[],
  r: ShapedReply | undefined,
): Record<string, unknown> {
  return {
    id,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status,
    model,
    output,
    ...(status === 'incomplete' ? { incomplete_details: { reason: 'max_output_tokens' } } : {}),
    usage: r
      ? {
          input_tokens: r.usage.input,
          input_tokens_details: { cached_tokens: r.usage.cacheRead },
          output_tokens: r.usage.output,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: r.usage.input + r.usage.output,
        }
      : null,
  };
}

/** The Responses API's stream: created, each output item added, its deltas, done, completed. */
function* responsesEvents(
  r: ShapedReply,
  model: string,
  body: unknown,
  nextId: (prefix: string) => string,
): Generator<SseChunk> {
  let seq = 0;
  const ev = (type: string, payload: Record<string, unknown>, content = false): SseChunk => ({
    chunk: `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...payload })}\n\n`,
    content,
  });
  const id = nextId('resp_');
  yield ev('response.created', {
    response: responsesObject(id, model, 'in_progress', [], undefined),
  });
  yield ev('response.in_progress', {
    response: responsesObject(id, model, 'in_progress', [], undefined),
  });
  const output = responsesOutput(r, body, nextId);
  for (const [index, item] of output.entries()) {
    const at = { output_index: index, item_id: item.id };
    if (item.type === 'message') {
      yield ev('response.output_item.added', {
        output_index: index,
        item: { ...item, status: 'in_progress', content: [] },
      });
      const part = { type: 'output_text', text: '', annotations: [] };
      yield ev('response.content_part.added', { ...at, content_index: 0, part });
      for (const piece of splitText(r.text, r.chunkChars)) {
        yield ev('response.output_text.delta', { ...at, content_index: 0, delta: piece }, true);
      }
      yield ev('response.output_text.done', { ...at, content_index: 0, text: r.text });
      yield ev('response.content_part.done', {
        ...at,
        content_index: 0,
        part: { ...part, text: r.text },
      });
    } else if (item.type === 'function_call') {
      yield ev('response.output_item.added', {
        output_index: index,
        item: { ...item, status: 'in_progress', arguments: '' },
      });
      const args = String(item.arguments);
      for (const piece of splitText(args, r.chunkChars ?? 8)) {
        yield ev('response.function_call_arguments.delta', { ...at, delta: piece }, true);
      }
      yield ev('response.function_call_arguments.done', { ...at, arguments: args });
    } else if (item.type === 'tool_search_call') {
      yield ev('response.output_item.added', {
        output_index: index,
        item: { ...item, status: 'in_progress' },
      });
    } else {
      yield ev('response.output_item.added', {
        output_index: index,
        item: { ...item, status: 'in_progress', input: '' },
      });
      const input = String(item.input);
      for (const piece of splitText(input, r.chunkChars ?? 8)) {
        yield ev('response.custom_tool_call_input.delta', { ...at, delta: piece }, true);
      }
      yield ev('response.custom_tool_call_input.done', { ...at, input });
    }
    yield ev('response.output_item.done', { output_index: index, item });
  }
  const status = r.finish === 'length' ? 'incomplete' : 'completed';
  yield ev(status === 'completed' ? 'response.completed' : 'response.incomplete', {
    response: responsesObject(id, model, status, output, r),
  });
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
        usage: { ...anthropicInputUsage(r), output_tokens: 1 },
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
    protocol !== 'anthropic'
      ? {
          error: {
            message,
            type: openAiErrorTypes[e.status]?.type ?? 'server_error',
            param: e.code === 'context_length_exceeded' ? 'messages' : null,
            code: e.code ?? openAiErrorTypes[e.status]?.code ?? null,
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

// --- prompts: their tokens, the context window and the prompt caches ---

/**
 * A prompt as the fake counts it: its canonical text (tools, system, messages in the order the
 * vendor caches them, without cache_control markers) cut into blocks, each block's end offset,
 * and the blocks that carry a cache_control breakpoint (Anthropic).
 */
interface MeasuredPrompt {
  tokens: number;
  blocks: string[];
  breakpoints: number[];
}

function measurePrompt(protocol: Protocol, body: Record<string, unknown>): MeasuredPrompt {
  const blocks: string[] = [];
  const breakpoints: number[] = [];
  const add = (value: unknown, prefix = '') => {
    if (isRecord(value) && value.cache_control !== undefined) {
      breakpoints.push(blocks.length);
      const { cache_control: _, ...rest } = value;
      blocks.push(prefix + JSON.stringify(rest));
    } else {
      blocks.push(prefix + JSON.stringify(value));
    }
  };
  for (const tool of Array.isArray(body.tools) ? body.tools : []) add(tool);
  if (protocol === 'anthropic') {
    const system = body.system;
    if (typeof system === 'string') add(system, 'system:');
    else if (Array.isArray(system)) for (const block of system) add(block, 'system:');
    for (const m of Array.isArray(body.messages) ? body.messages : []) {
      const role = isRecord(m) ? String(m.role) : '';
      const content = isRecord(m) ? m.content : undefined;
      if (Array.isArray(content)) {
        content.forEach((block, i) => {
          add(block, i === 0 ? `${role}:` : '');
        });
      } else add(content, `${role}:`);
    }
  } else if (protocol === 'responses') {
    if (typeof body.instructions === 'string') add(body.instructions, 'instructions:');
    for (const item of Array.isArray(body.input) ? body.input : []) add(item);
  } else {
    for (const m of Array.isArray(body.messages) ? body.messages : []) add(m);
  }
  return { tokens: countTokens(blocks.join('')), blocks, breakpoints };
}

function maxTokensOf(body: Record<string, unknown>): number {
  const n = body.max_tokens ?? body.max_completion_tokens ?? body.max_output_tokens;
  return typeof n === 'number' ? n : 0;
}

/** The vendor's refusal of a prompt that does not fit the window, in its own words. */
function overflowError(
  protocol: Protocol,
  prompt: number,
  completion: number,
  window: number,
): ErrorItem {
  if (protocol !== 'anthropic') {
    const message =
      completion > 0
        ? `This model's maximum context length is ${window} tokens. However, you requested ${prompt + completion} tokens (${prompt} in the messages, ${completion} in the completion). Please reduce the length of the messages or completion.`
        : `This model's maximum context length is ${window} tokens. However, your messages resulted in ${prompt} tokens. Please reduce the length of the messages.`;
    return { type: 'error', status: 400, message, code: 'context_length_exceeded' };
  }
  const message =
    prompt > window
      ? `prompt is too long: ${prompt} tokens > ${window} maximum`
      : `input length and \`max_tokens\` exceed context limit: ${prompt} + ${completion} > ${window}, decrease input length or \`max_tokens\` and try again`;
  return { type: 'error', status: 400, message };
}

interface CacheUse {
  read: number;
  write: number;
}

/** OpenAI caches in 128-token steps from 1024 tokens on; Anthropic caches no shorter prefix. */
const CACHE_MIN_TOKENS = 1024;
const OPENAI_CACHE_STEP = 128;
/** Anthropic looks for an earlier cache entry up to this many blocks before a breakpoint. */
const ANTHROPIC_LOOKBACK_BLOCKS = 20;

/** The prompt caches of one fake server, as each vendor keeps them. */
class PromptCaches {
  /** OpenAI: the last answered prompt's text per prompt_cache_key ('' without one). */
  readonly #openAi = new Map<string, string>();
  /** Anthropic: the hashes of the prefixes written at breakpoints. */
  readonly #anthropic = new Set<string>();

  use(protocol: Protocol, prompt: MeasuredPrompt, body: Record<string, unknown>): CacheUse {
    return protocol === 'anthropic' ? this.#useAnthropic(prompt) : this.#useOpenAi(prompt, body);
  }

  #useOpenAi(prompt: MeasuredPrompt, body: Record<string, unknown>): CacheUse {
    const key = typeof body.prompt_cache_key === 'string' ? body.prompt_cache_key : '';
    const text = prompt.blocks.join('');
    const previous = this.#openAi.get(key) ?? '';
    this.#openAi.set(key, text);
    let same = 0;
    const max = Math.min(text.length, previous.length);
    while (same < max && text.charCodeAt(same) === previous.charCodeAt(same)) same++;
    const tokens = Math.floor(same / 4);
    if (tokens < CACHE_MIN_TOKENS) return { read: 0, write: 0 };
    const read =
      CACHE_MIN_TOKENS +
      Math.floor((tokens - CACHE_MIN_TOKENS) / OPENAI_CACHE_STEP) * OPENAI_CACHE_STEP;
    return { read: Math.min(read, prompt.tokens), write: 0 };
  }

  #useAnthropic(prompt: MeasuredPrompt): CacheUse {
    if (prompt.breakpoints.length === 0) return { read: 0, write: 0 };
    // The hash of the prefix ending after each block, and that prefix's tokens.
    const hashes: string[] = [];
    const tokensAt: number[] = [];
    const hash = createHash('sha256');
    let chars = 0;
    for (const block of prompt.blocks) {
      hash.update(block);
      chars += block.length;
      hashes.push(hash.copy().digest('hex'));
      tokensAt.push(Math.floor(chars / 4));
    }
    let read = 0;
    for (const b of prompt.breakpoints) {
      for (let i = b; i >= 0 && i >= b - ANTHROPIC_LOOKBACK_BLOCKS; i--) {
        const h = hashes[i];
        if (h !== undefined && this.#anthropic.has(h)) {
          read = Math.max(read, tokensAt[i] ?? 0);
          break;
        }
      }
    }
    let write = 0;
    for (const b of prompt.breakpoints) {
      const tokens = tokensAt[b] ?? 0;
      const h = hashes[b];
      if (h === undefined || tokens < CACHE_MIN_TOKENS) continue;
      if (!this.#anthropic.has(h)) this.#anthropic.add(h);
      write = Math.max(write, tokens - read);
    }
    return { read, write };
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
