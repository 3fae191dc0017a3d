// A model call's body as the model proxy forwards it: parsed and written anew, naming the job's
// model, and cut down to what the engine runs itself and the meter can price. Whatever would make
// the vendor act for the engine (search the web, fetch a URL, run code, call an MCP server, read
// state stored at the vendor) or bill beyond the tokens it reports is removed or refused here.
import { isRecord } from '../json.ts';
import { scrubDeep } from '../secrets/scrub.ts';

/**
 * The model APIs the proxy speaks, as far as their request bodies go: Anthropic's Messages and
 * its token counting, OpenAI's Responses and chat completions.
 */
export type ModelApi = 'messages' | 'count_tokens' | 'responses' | 'chat';

/** Why a call is not forwarded, as the client is answered. */
export interface ProxyRefusal {
  status: number;
  /** A machine code, e.g. `step_limit`. */
  code: string;
  message: string;
}

/**
 * What the proxy removes from a request, as the turn is told of it. A closed list: a tool is
 * named by its family, never by what the request called it, so no request content is quoted.
 */
export type Removed =
  | 'web_search'
  | 'web_fetch'
  | 'code_execution'
  | 'code_interpreter'
  | 'file_search'
  | 'image_generation'
  | 'mcp'
  | 'tool_search'
  | 'computer_use'
  | 'shell'
  | 'other_tool'
  | 'mcp_servers'
  | 'container'
  | 'web_search_options'
  | 'plugins'
  | 'compaction'
  | 'speed'
  | 'service_tier';

/** A vendor-run tool's family, from its `type` (`web_search_20250305`, `web_search_preview`, …). */
const FAMILIES: readonly (readonly [RegExp, Removed])[] = [
  [/^web_search/, 'web_search'],
  [/^web_fetch/, 'web_fetch'],
  [/^code_execution/, 'code_execution'],
  [/^code_interpreter/, 'code_interpreter'],
  [/^file_search/, 'file_search'],
  [/^image_generation/, 'image_generation'],
  [/^mcp/, 'mcp'],
  [/^tool_search/, 'tool_search'],
  [/^computer/, 'computer_use'],
  [/^(local_)?shell/, 'shell'],
];

function familyOf(type: unknown): Removed {
  const found = typeof type === 'string' && FAMILIES.find(([pattern]) => pattern.test(type));
  return found ? found[1] : 'other_tool';
}

/**
 * The tools each API's engines run themselves, by their declaration; any other is the vendor's
 * to run. Anthropic: a tool without a type (or `custom`), and the Anthropic-defined tools whose
 * calls the client executes (bash, text editor, computer, memory). Responses: functions, custom
 * (freeform) tools, the local shell, Codex's tool search when the client runs it, and namespaces
 * (whose own tools are checked the same way). Chat completions: functions and custom tools.
 */
const CLIENT_TOOL: Record<ModelApi, (tool: Record<string, unknown>) => boolean> = {
  messages: anthropicClientTool,
  count_tokens: anthropicClientTool,
  responses: (tool) =>
    tool.type === 'function' ||
    tool.type === 'custom' ||
    tool.type === 'local_shell' ||
    tool.type === 'namespace' ||
    (tool.type === 'tool_search' && tool.execution === 'client'),
  chat: (tool) => tool.type === 'function' || tool.type === 'custom',
};

function anthropicClientTool(tool: Record<string, unknown>): boolean {
  return (
    !('type' in tool) ||
    tool.type === 'custom' ||
    (typeof tool.type === 'string' && /^(bash|text_editor|computer|memory)_\d{8}$/.test(tool.type))
  );
}

/**
 * Top-level parameters that make the vendor act or bill beyond the tokens it reports, removed
 * when present: Anthropic's MCP connector and code execution container, web search and
 * OpenRouter's plugins for chat completions. `speed`, `service_tier` and compaction are handled
 * apart, since some of their values are harmless.
 */
const VENDOR_PARAMETERS: Record<ModelApi, readonly Removed[]> = {
  messages: ['mcp_servers', 'container'],
  count_tokens: ['mcp_servers', 'container'],
  responses: [],
  chat: ['web_search_options', 'plugins'],
};

/**
 * Parameters that name state stored at the vendor (an earlier response, a conversation, a stored
 * prompt, which may bring its own tools): the request is refused, since the proxy cannot see or
 * check what they bring.
 */
const VENDOR_STATE: Record<ModelApi, readonly string[]> = {
  messages: [],
  count_tokens: [],
  responses: ['previous_response_id', 'conversation', 'prompt'],
  chat: [],
};

/** OpenAI's service tiers priced as the meter prices them (or below). */
const PRICED_TIERS: ReadonlySet<unknown> = new Set(['auto', 'default', 'flex']);

export interface PreparedBody {
  body: Buffer;
  /** The output tokens the request allows in all, when it sets a limit. */
  maxOutputTokens: number | undefined;
  /** What was removed from it, each once, in a stable order. */
  removed: readonly Removed[];
}

/**
 * The body as forwarded, or why it is refused. Written anew (so the vendor reads exactly what
 * Errand read: no second `model` key), naming the job's model; a streamed chat completion asks for
 * its usage; a Responses call is never stored at the vendor; tools the vendor would run, and
 * parameters that make it act, are removed; a background response, a request naming vendor
 * state, and content the vendor would fetch from a URL or its file store are refused.
 */
export function prepareBody(
  api: ModelApi,
  raw: Buffer,
  model: string,
  scrub?: (text: string) => string,
): PreparedBody | ProxyRefusal {
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(raw));
  } catch {
    return { status: 400, code: 'bad_body', message: 'the body is not JSON in UTF-8' };
  }
  if (!isRecord(body)) {
    return { status: 400, code: 'bad_body', message: 'the body is not a JSON object' };
  }
  try {
    // The turn's secrets, wherever a string of the body holds one (what the engine's shell
    // printed, a file it read): the model never receives a value.
    const scrubbed = scrub ? scrubDeep(body, scrub) : body;
    if (!isRecord(scrubbed)) throw new Error('a scrubbed object is an object');
    return rewrite(api, scrubbed, model);
  } catch (err) {
    // JSON.parse reads any depth; walking the body and writing it anew take a frame a level.
    if (!(err instanceof RangeError)) throw err;
    return { status: 400, code: 'bad_body', message: 'the body is nested too deeply' };
  }
}

function rewrite(
  api: ModelApi,
  body: Record<string, unknown>,
  model: string,
): PreparedBody | ProxyRefusal {
  const refusal = refusalOf(api, body);
  if (refusal) return refusal;
  body.model = model;
  if (api === 'chat' && body.stream === true) {
    const options = isRecord(body.stream_options) ? body.stream_options : {};
    body.stream_options = { ...options, include_usage: true };
  }
  // Stored, a response would keep the repository's content at the vendor for its retention
  // period, for anyone with the key to read, and could be continued by previous_response_id.
  if (api === 'responses') body.store = false;
  if (api === 'chat' && body.store !== undefined && body.store !== false) delete body.store;
  const removed = new Set<Removed>();
  removeVendorTools(api, body, removed);
  removeVendorParameters(api, body, removed);
  return {
    body: Buffer.from(JSON.stringify(body)),
    maxOutputTokens: maxOutputTokens(api, body),
    removed: [...removed].sort(),
  };
}

function refusalOf(api: ModelApi, body: Record<string, unknown>): ProxyRefusal | undefined {
  if (api === 'responses' && body.background !== undefined && body.background !== false) {
    return {
      status: 400,
      code: 'background_not_allowed',
      message: 'background responses run on after the turn, where they cannot be metered',
    };
  }
  const state = VENDOR_STATE[api].find((name) => body[name] !== undefined && body[name] !== null);
  if (state) return vendorState(`\`${state}\``);
  if (api === 'responses') return remoteContent(body.input);
  return remoteContent(body.messages) ?? (api === 'chat' ? undefined : remoteContent(body.system));
}

function vendorState(what: string): ProxyRefusal {
  return {
    status: 400,
    code: 'vendor_state_not_allowed',
    message: `the model proxy forwards only requests that carry their whole context: ${what} names state stored at the vendor`,
  };
}

/**
 * The refusal of content the vendor would fetch or look up rather than read from the request: an
 * image or document given by URL (a `data:` URL is inline), a file id of the vendor's file store,
 * a reference to a stored item. Walks messages and their content blocks, tool results and
 * documents within them, never a tool call's arguments.
 */
function remoteContent(value: unknown): ProxyRefusal | undefined {
  if (Array.isArray(value)) {
    for (const item of value) {
      const refusal = remoteContent(item);
      if (refusal) return refusal;
    }
    return undefined;
  }
  if (!isRecord(value)) return undefined;
  if (value.type === 'item_reference') return vendorState('an `item_reference`');
  if (given(value.file_id)) return vendorState('a `file_id`');
  const byUrl =
    value.type === 'url' ||
    Object.entries(value).some(
      ([key, field]) => key.endsWith('_url') && given(field) && !inline(field),
    );
  if (byUrl) {
    return {
      status: 400,
      code: 'remote_content_not_allowed',
      message:
        'the model proxy forwards images and files only inline (base64 or a data: URL), never by a URL the vendor would fetch',
    };
  }
  for (const key of ['content', 'output', 'source', 'file']) {
    const refusal = remoteContent(value[key]);
    if (refusal) return refusal;
  }
  return undefined;
}

function given(field: unknown): boolean {
  return field !== undefined && field !== null;
}

/** Whether a `…_url` field (a string, or `{url}` in chat completions) holds its content inline. */
function inline(field: unknown): boolean {
  const url = isRecord(field) ? field.url : field;
  return typeof url === 'string' && url.startsWith('data:');
}

/**
 * Keeps the tools the engine runs itself, in the request's `tools`, in the tools a client-run tool
 * search returns (Responses' `tool_search_output`, which the model may call next), and drops a
 * `tool_choice` that names a tool no longer there.
 */
function removeVendorTools(
  api: ModelApi,
  body: Record<string, unknown>,
  removed: Set<Removed>,
): void {
  if (Array.isArray(body.tools)) body.tools = clientTools(api, body.tools, removed);
  if (api === 'responses' && Array.isArray(body.input)) {
    for (const item of body.input) {
      if (isRecord(item) && item.type === 'tool_search_output' && Array.isArray(item.tools)) {
        item.tools = clientTools(api, item.tools, removed);
      }
    }
  }
  const choice = body.tool_choice;
  if (!isRecord(choice)) return;
  const kept = Array.isArray(body.tools) ? body.tools.filter(isRecord) : [];
  if (choice.type === 'allowed_tools') {
    // Responses lists them at `tools`, chat completions at `allowed_tools.tools`.
    const holder = isRecord(choice.allowed_tools) ? choice.allowed_tools : choice;
    if (Array.isArray(holder.tools)) holder.tools = clientTools(api, holder.tools, removed);
  } else if (api === 'messages' || api === 'count_tokens') {
    if (choice.type === 'tool' && !kept.some((tool) => tool.name === choice.name)) {
      delete body.tool_choice;
    }
  } else if (choice.type !== 'function' && choice.type !== 'custom') {
    removed.add(familyOf(choice.type));
    delete body.tool_choice;
  }
}

function clientTools(api: ModelApi, tools: unknown[], removed: Set<Removed>): unknown[] {
  return tools.filter((tool) => {
    if (isRecord(tool) && CLIENT_TOOL[api](tool)) {
      if (tool.type === 'namespace' && Array.isArray(tool.tools)) {
        tool.tools = clientTools(api, tool.tools, removed);
      }
      return true;
    }
    removed.add(isRecord(tool) ? familyOf(tool.type) : 'other_tool');
    return false;
  });
}

function removeVendorParameters(
  api: ModelApi,
  body: Record<string, unknown>,
  removed: Set<Removed>,
): void {
  for (const name of VENDOR_PARAMETERS[api]) {
    if (name in body) {
      delete body[name];
      removed.add(name);
    }
  }
  if (api === 'messages' || api === 'count_tokens') {
    // Fast mode bills a multiple of the model's prices.
    if ('speed' in body && body.speed !== 'standard') {
      delete body.speed;
      removed.add('speed');
    }
    // Compaction is a second sampling whose tokens the answer's usage leaves out; clearing old
    // tool results or thinking is not.
    const management = body.context_management;
    if (isRecord(management) && Array.isArray(management.edits)) {
      const edits = management.edits.filter(
        (edit) => isRecord(edit) && typeof edit.type === 'string' && edit.type.startsWith('clear_'),
      );
      if (edits.length < management.edits.length) removed.add('compaction');
      management.edits = edits;
    }
  } else {
    // Priority ("fast") processing bills a multiple of the model's prices.
    if ('service_tier' in body && !PRICED_TIERS.has(body.service_tier)) {
      delete body.service_tier;
      removed.add('service_tier');
    }
    if (api === 'responses' && 'context_management' in body) {
      delete body.context_management;
      removed.add('compaction');
    }
  }
}

/** The output tokens a request allows in all, when it sets a limit. */
function maxOutputTokens(api: ModelApi, body: Record<string, unknown>): number | undefined {
  const count = (value: unknown) =>
    typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined;
  switch (api) {
    case 'messages':
      return count(body.max_tokens);
    case 'responses':
      return count(body.max_output_tokens);
    case 'chat': {
      const each = count(body.max_completion_tokens) ?? count(body.max_tokens);
      return each === undefined ? undefined : each * (count(body.n) ?? 1);
    }
    case 'count_tokens':
      return 0;
  }
}
