// The agent's context: what each model request of a turn carries. It keeps every request under
// the model's context window and its prefix stable for prompt caches: tool results are capped as
// they arrive, old ones are masked in batches, and when that is not enough the older part of the
// job's conversation is summarised by the model (compaction). What the turn ends with is what it
// stores for follow-ups (jobHistory rebuilds the conversation from the stored turns).

import {
  type AssistantModelMessage,
  generateText,
  type JSONValue,
  type LanguageModel,
  type LanguageModelUsage,
  type ModelMessage,
  type SystemModelMessage,
  type ToolResultPart,
  type ToolSet,
  type UserModelMessage,
} from 'ai';
import { NO_TOKENS, type TokenUsage } from '../jobs/usage.ts';

/** The window of a model the catalog does not know: that of most current open-weight models. */
export const DEFAULT_CONTEXT_TOKENS = 128_000;

/**
 * The thresholds of one turn, in tokens, from the model's window (docs/turns.md says why):
 * - a request leaves room for its reply: `outputTokens` (the configured output limit, at most a
 *   quarter of the window), since providers count it against the window too;
 * - one tool result is capped at `resultCapTokens` (head and tail kept), like Claude Code's 25k
 *   for a file read;
 * - once a request passes `maskAt` (half the window, at most 128k), every tool result older
 *   than the most recent `keepToolTokens` of them (a tenth of the window, at most 20k) is masked
 *   at once: a batch, so the prefix stays the same until the next one;
 * - a request that would still pass `compactAt` (80 % of the window, and 95 % of what the reply
 *   leaves) compacts the older history, keeping the last `keepAfterCompaction` tokens of work.
 */
export interface ContextPolicy {
  windowTokens: number;
  outputTokens: number;
  resultCapTokens: number;
  keepToolTokens: number;
  maskAt: number;
  compactAt: number;
  keepAfterCompaction: number;
}

export function contextPolicy(windowTokens: number, maxOutputTokens: number): ContextPolicy {
  const outputTokens = Math.max(1, Math.min(maxOutputTokens, Math.floor(windowTokens / 4)));
  return {
    windowTokens,
    outputTokens,
    resultCapTokens: Math.min(25_000, Math.floor(windowTokens * 0.15)),
    keepToolTokens: Math.min(20_000, Math.floor(windowTokens * 0.1)),
    maskAt: Math.min(128_000, Math.floor(windowTokens * 0.5)),
    compactAt: Math.min(
      Math.floor(windowTokens * 0.8),
      Math.floor((windowTokens - outputTokens) * 0.95),
    ),
    keepAfterCompaction: Math.floor(windowTokens * 0.25),
  };
}

/**
 * Characters per token where a size must not depend on the turn (caps of tool results): a
 * little under what tokenizers give for code, so a cap errs on the small side.
 */
const CAP_CHARS_PER_TOKEN = 3.5;
/** Tool results shorter than this are never masked: the placeholder would be as long. */
const MASK_MIN_CHARS = 1_000;
/** Output of the summary that replaces the older history. */
const SUMMARY_MAX_TOKENS = 8_000;

/** Errand's own marks on stored messages, under providerOptions (no provider reads them). */
const ERRAND = 'errand';

/**
 * What Errand keeps on the first message of a turn's stored messages when they stand for the
 * whole conversation before them (`fromStart`), on a compaction's summary message (`summary`,
 * and every user prompt it stands for, word for word), and on a turn's last message (the
 * provider's tokens per character of a request, so the next turn's first estimate is right).
 */
interface ErrandMark {
  fromStart?: boolean;
  summary?: string;
  prompts?: string[];
  tokensPerChar?: number;
}

/**
 * The job's conversation as its next turn starts from it: each earlier turn's stored messages
 * in order, from the last turn whose messages stand for the whole conversation (it compacted or
 * masked earlier turns' messages).
 */
export function jobHistory(turns: readonly { messages: readonly unknown[] }[]): ModelMessage[] {
  let history: ModelMessage[] = [];
  for (const turn of turns) {
    const messages = turn.messages as ModelMessage[];
    if (messages.length > 0 && markOf(messages[0])?.fromStart) history = [...messages];
    else history.push(...messages);
  }
  return history;
}

function markOf(message: ModelMessage | undefined): ErrandMark | undefined {
  const mark = message?.providerOptions?.[ERRAND];
  return mark && typeof mark === 'object' ? (mark as ErrandMark) : undefined;
}

function withMark(message: ModelMessage, mark: ErrandMark): ModelMessage {
  const merged = { ...markOf(message), ...mark } as Record<
    string,
    string | boolean | number | string[]
  >;
  return { ...message, providerOptions: { ...message.providerOptions, [ERRAND]: merged } };
}

/** A compaction, as the turn's progress log reports it. */
export interface Compaction {
  reason: 'threshold' | 'overflow';
  /** Estimated tokens of the request before and after. */
  tokensBefore: number;
  tokensAfter: number;
  /** What the summary cost. */
  usage: TokenUsage;
}

/** What a model request of the turn carries, from TurnContext.prepare. */
export interface PreparedRequest {
  messages: ModelMessage[];
  compaction: Compaction | undefined;
}

export interface TurnContextOptions {
  model: LanguageModel;
  system: string;
  tools: ToolSet;
  /** The job's conversation so far (jobHistory). */
  history: ModelMessage[];
  /** This turn's user message. */
  user: UserModelMessage;
  /** The model's context window; DEFAULT_CONTEXT_TOKENS when the catalog does not know it. */
  windowTokens: number | undefined;
  /** The configured output limit of one reply. */
  maxOutputTokens: number;
  /**
   * Off only for the bench's comparison: no caps, masking, compaction or cache hints, and the
   * configured output limit as it is.
   */
  managed: boolean;
  /** OpenAI's prompt cache key: requests of one job share a cache. */
  cacheKey: string | undefined;
  maxRetries: number;
  /** One line for a tool call, used in the placeholder of its masked result. */
  describeCall: (toolName: string, input: unknown) => string;
}

/** Which provider family a model is, for its cache hints. */
function providerOf(model: LanguageModel): string {
  return typeof model === 'string' ? '' : (model.provider.split('.')[0] ?? '');
}

/**
 * The context of one turn: the messages of its requests, from the job's history and this turn's
 * prompt to its last step. The agent loop hands it each step's new messages and the usage the
 * provider reported; it answers with what the next request carries.
 */
export class TurnContext {
  readonly #opts: TurnContextOptions;
  readonly #provider: string;
  readonly #history: readonly ModelMessage[];
  readonly #toolsChars: number;
  #policy: ContextPolicy;
  /** The messages as the next request carries them, without cache hints. */
  #messages: ModelMessage[];
  /** Whether this turn's user message was folded into a summary. */
  #userSummarised = false;
  /** Tokens per character of a request, from the provider's last count. */
  #tokensPerChar = 1 / 3.5;
  /** Whether #tokensPerChar is the provider's count rather than a guess. */
  #counted = false;
  /** Characters of the request last sent. */
  #lastChars = 0;
  readonly #charsOf = new WeakMap<ModelMessage, number>();

  constructor(opts: TurnContextOptions) {
    this.#opts = opts;
    this.#provider = providerOf(opts.model);
    this.#history = opts.history;
    this.#policy = contextPolicy(opts.windowTokens ?? DEFAULT_CONTEXT_TOKENS, opts.maxOutputTokens);
    const counted = opts.history.findLast((m) => markOf(m)?.tokensPerChar)?.providerOptions;
    const earlier = (counted?.[ERRAND] as ErrandMark | undefined)?.tokensPerChar;
    if (earlier && earlier > 0) this.#tokensPerChar = earlier;
    this.#toolsChars = Object.entries(opts.tools).reduce(
      (n, [name, t]) => n + name.length + (t.description?.length ?? 0) + 300,
      0,
    );
    this.#messages = opts.managed
      ? [...capAll(opts.history, this.#capChars(1)), opts.user]
      : [...opts.history, opts.user];
  }

  get policy(): ContextPolicy {
    return this.#policy;
  }

  /** The output limit of each request. */
  get outputTokens(): number {
    return this.#opts.managed ? this.#policy.outputTokens : this.#opts.maxOutputTokens;
  }

  /** The system prompt, with Anthropic's cache breakpoint (it covers the tools before it). */
  instructions(): string | SystemModelMessage {
    const { system, managed } = this.#opts;
    if (!managed || this.#provider !== 'anthropic') return system;
    return { role: 'system', content: system, providerOptions: EPHEMERAL };
  }

  /** Options of every request: OpenAI's prompt cache key, one per job. */
  providerOptions(): Record<string, Record<string, string>> | undefined {
    const { cacheKey, managed } = this.#opts;
    if (!managed || !cacheKey || this.#provider !== 'openai') return undefined;
    return { openai: { promptCacheKey: cacheKey } };
  }

  /** The messages a (re)started loop begins from. */
  messages(): ModelMessage[] {
    return [...this.#messages];
  }

  /** Estimated tokens of the next request. */
  estimate(messages: readonly ModelMessage[] = this.#messages): number {
    return Math.ceil(this.#requestChars(messages) * this.#tokensPerChar);
  }

  /**
   * Adds the messages of the steps since the last request (their tool results capped), masks
   * and compacts as the thresholds say, and returns what the next request carries.
   */
  async prepare(added: readonly ModelMessage[], signal: AbortSignal): Promise<PreparedRequest> {
    this.append(added);
    let compaction: Compaction | undefined;
    if (this.#opts.managed) {
      const p = this.#policy;
      // A batch goes only when it is at least as large as what stays: each batch breaks the
      // cached prefix from its first masked result on.
      if (this.estimate() > p.maskAt) this.#mask(p.keepToolTokens, p.keepToolTokens);
      if (this.estimate() > p.compactAt) {
        this.#mask(p.keepToolTokens, 0);
        if (this.estimate() > p.compactAt) compaction = await this.#compact('threshold', signal);
      }
    }
    this.#lastChars = this.#requestChars(this.#messages);
    return { messages: this.#withBreakpoints(), compaction };
  }

  /** Adds messages of finished steps, their tool results capped. */
  append(added: readonly ModelMessage[]): void {
    if (added.length === 0) return;
    const results = added.reduce(
      (n, m) => n + (m.role === 'tool' ? m.content.filter(isToolResult).length : 0),
      0,
    );
    // The results of one step share half the window: the model has not seen them yet, so none
    // of them may be masked before the next request.
    const fresh = this.#opts.managed
      ? capAll(added.map(inStoredOrder), this.#capChars(results))
      : added;
    this.#messages.push(...fresh);
  }

  /** Learns the provider's count of the last request's tokens. */
  observe(usage: LanguageModelUsage): void {
    const tokens = usage.inputTokens;
    if (tokens && tokens > 0 && this.#lastChars > 0) {
      this.#tokensPerChar = tokens / this.#lastChars;
      this.#counted = true;
    }
  }

  /**
   * Answers a provider's refusal of the last request for its length: learns the window and the
   * count the refusal names, masks every old tool result, caps the rest to the (maybe smaller)
   * window and compacts. Returns undefined when nothing could be made smaller (the request then
   * cannot be sent again).
   */
  async recover(error: unknown, signal: AbortSignal): Promise<Compaction | undefined> {
    const facts = overflowFacts(error);
    const before = this.estimate();
    if (facts.promptTokens && this.#lastChars > 0) {
      this.#tokensPerChar = facts.promptTokens / this.#lastChars;
    }
    // The refused request did not fit: the window is smaller than what it was taken to hold.
    const sentTokens = facts.promptTokens ?? before;
    const window = Math.min(
      this.#policy.windowTokens,
      facts.windowTokens ?? Math.floor(sentTokens * 0.9),
    );
    this.#policy = contextPolicy(window, this.#opts.maxOutputTokens);
    const masked = this.#mask(0, 0);
    const capped = this.#recap();
    const compaction = await this.#compact('overflow', signal);
    if (!compaction && !masked && !capped) return undefined;
    return (
      compaction ?? {
        reason: 'overflow',
        tokensBefore: before,
        tokensAfter: this.estimate(),
        usage: { ...NO_TOKENS },
      }
    );
  }

  /**
   * What the turn stores: its own messages when the conversation before it is unchanged, else
   * the whole conversation, marked so that jobHistory starts from it.
   */
  stored(): ModelMessage[] {
    const history = this.#history;
    const unchanged =
      this.#messages.length > history.length && history.every((m, i) => this.#messages[i] === m);
    const stored = unchanged ? this.#messages.slice(history.length) : [...this.#messages];
    if (!unchanged && stored[0]) stored[0] = withMark(stored[0], { fromStart: true });
    const last = stored.length - 1;
    if (this.#counted && stored[last]) {
      stored[last] = withMark(stored[last], { tokensPerChar: this.#tokensPerChar });
    }
    return stored;
  }

  #capChars(resultsInStep: number): number {
    const p = this.#policy;
    const tokens = Math.min(
      p.resultCapTokens,
      Math.floor(p.windowTokens / 2 / Math.max(1, resultsInStep)),
    );
    return Math.floor(tokens * CAP_CHARS_PER_TOKEN);
  }

  #chars(message: ModelMessage): number {
    let n = this.#charsOf.get(message);
    if (n === undefined) {
      n = JSON.stringify(message).length;
      this.#charsOf.set(message, n);
    }
    return n;
  }

  #requestChars(messages: readonly ModelMessage[]): number {
    let n = this.#opts.system.length + this.#toolsChars;
    for (const m of messages) n += this.#chars(m);
    return n;
  }

  /**
   * Masks the tool results that are neither among the latest step's (which the model has not
   * seen) nor among the most recent `keep` tokens of the others, when they add up to at least
   * `minBatch` tokens. Returns whether any was masked.
   */
  #mask(keep: number, minBatch: number): boolean {
    const messages = this.#messages;
    const lastAssistant = messages.findLastIndex((m) => m.role === 'assistant');
    const lastStep = messages.at(-1)?.role === 'tool' ? lastAssistant : messages.length;
    const toMask = new Map<number, Set<string>>();
    let kept = 0;
    let masked = 0;
    for (let i = lastStep - 1; i >= 0; i--) {
      const m = messages[i];
      if (m?.role !== 'tool') continue;
      for (const part of [...m.content].reverse()) {
        if (!isToolResult(part)) continue;
        const chars = outputChars(part);
        if (chars < MASK_MIN_CHARS) continue;
        const tokens = chars * this.#tokensPerChar;
        if (kept + tokens <= keep) {
          kept += tokens;
          continue;
        }
        kept = keep; // an older result is never kept in place of a newer one
        masked += tokens;
        const ids = toMask.get(i) ?? new Set<string>();
        ids.add(part.toolCallId);
        toMask.set(i, ids);
      }
    }
    if (toMask.size === 0 || masked < minBatch) return false;
    const calls = toolCalls(messages);
    this.#messages = messages.map((m, i) => {
      const ids = toMask.get(i);
      if (!ids || m.role !== 'tool') return m;
      return {
        ...m,
        content: m.content.map((part) =>
          isToolResult(part) && ids.has(part.toolCallId)
            ? { ...part, output: { type: 'text' as const, value: this.#placeholder(part, calls) } }
            : part,
        ),
      };
    });
    return true;
  }

  #placeholder(part: ToolResultPart, calls: Map<string, unknown>): string {
    const described = this.#opts.describeCall(part.toolName, calls.get(part.toolCallId));
    const how =
      part.toolName === 'read_file'
        ? 'read the file again if you need it'
        : part.toolName === 'run_command'
          ? 'run the command again if you need its output'
          : `call ${part.toolName} again if you need it`;
    return `[Output removed to save context: ${described} (${outputChars(part).toLocaleString('en-US')} characters); ${how}.]`;
  }

  /** Caps every tool result to the current policy (after the window was found smaller). */
  #recap(): boolean {
    const before = this.#messages;
    this.#messages = capAll(before, this.#capChars(1));
    return this.#messages.some((m, i) => m !== before[i]);
  }

  /**
   * Replaces the older part of the conversation by a summary the model writes, keeping the most
   * recent work (at least the latest step) as it is. Returns undefined when there is nothing
   * older to replace.
   */
  async #compact(
    reason: Compaction['reason'],
    signal: AbortSignal,
  ): Promise<Compaction | undefined> {
    const messages = this.#messages;
    const split = this.#splitPoint();
    if (split === undefined) return undefined;
    const older = messages.slice(0, split);
    const recent = messages.slice(split);
    // Only the prompt, or only an earlier summary: there is nothing to summarise.
    if (!older.some((m) => m !== this.#opts.user && markOf(m)?.summary === undefined)) {
      return undefined;
    }
    const before = this.estimate();

    const userIndex = older.indexOf(this.#opts.user);
    const absorbsUser = userIndex >= 0;
    const prompts: string[] = [];
    for (const m of older) {
      const mark = markOf(m);
      if (mark?.prompts) prompts.push(...mark.prompts);
      else if (m.role === 'user') prompts.push(promptOf(m));
    }
    const summary = await this.#summarise(older, signal);
    this.#userSummarised ||= absorbsUser;
    const earlier = this.#userSummarised ? prompts.slice(0, -1) : prompts;
    const current = this.#userSummarised ? this.#opts.user : undefined;
    const checkpoint: ModelMessage = withMark(
      {
        role: 'user',
        content: [
          { type: 'text', text: checkpointText(earlier, summary.text, current !== undefined) },
          ...(current ? userParts(current) : []),
        ],
      },
      { summary: summary.text, prompts },
    );
    this.#messages = [checkpoint, ...recent];
    return { reason, tokensBefore: before, tokensAfter: this.estimate(), usage: summary.usage };
  }

  /**
   * Where the kept recent work starts: at an assistant message (so the summary, a user message,
   * is followed by the model's turn), as early as keeps it under keepAfterCompaction, and no
   * later than the latest step. At the start of a turn the latest step is its prompt alone,
   * which then joins the summary's message.
   */
  #splitPoint(): number | undefined {
    const messages = this.#messages;
    let best = messages.at(-1) === this.#opts.user ? messages.length : undefined;
    let tokens = 0;
    for (let i = messages.length - 1; i > 0; i--) {
      const m = messages[i];
      if (!m) continue;
      tokens += this.#chars(m) * this.#tokensPerChar;
      if (m.role !== 'assistant') continue;
      if (best === undefined || tokens <= this.#policy.keepAfterCompaction) best = i;
      else break;
    }
    return best;
  }

  async #summarise(
    older: readonly ModelMessage[],
    signal: AbortSignal,
  ): Promise<{ text: string; usage: TokenUsage }> {
    const p = this.#policy;
    const maxOutputTokens = Math.min(SUMMARY_MAX_TOKENS, p.outputTokens);
    const budgetChars = Math.floor(
      ((p.windowTokens - maxOutputTokens) * 0.7) / this.#tokensPerChar,
    );
    const result = await generateText({
      model: this.#opts.model,
      instructions: SUMMARY_INSTRUCTIONS,
      messages: [{ role: 'user', content: summaryRequest(older, budgetChars) }],
      maxOutputTokens,
      maxRetries: this.#opts.maxRetries,
      abortSignal: signal,
    });
    const text = result.text.trim() || '(the summary came back empty)';
    return { text, usage: tokenUsage(result.usage) };
  }

  /**
   * The request's messages with Anthropic's cache breakpoints: on the last message (written for
   * the next request) and on the message that ended the previous request (read from it). With
   * the system prompt's, that is three of the four Anthropic allows.
   */
  #withBreakpoints(): ModelMessage[] {
    const messages = this.#messages;
    if (!this.#opts.managed || this.#provider !== 'anthropic') return [...messages];
    const marks = new Set([messages.length - 1]);
    const lastAssistant = messages.findLastIndex((m) => m.role === 'assistant');
    if (lastAssistant > 0) marks.add(lastAssistant - 1);
    return messages.map((m, i) =>
      marks.has(i)
        ? {
            ...m,
            providerOptions: {
              ...m.providerOptions,
              anthropic: { ...m.providerOptions?.anthropic, ...EPHEMERAL.anthropic },
            },
          }
        : m,
    );
  }
}

const EPHEMERAL = { anthropic: { cacheControl: { type: 'ephemeral' } } };

/** A provider's usage in Errand's terms: every input token, and the cache's part of them. */
export function tokenUsage(u: LanguageModelUsage): TokenUsage {
  return {
    inputTokens: u.inputTokens ?? 0,
    outputTokens: u.outputTokens ?? 0,
    cacheReadTokens: u.inputTokenDetails?.cacheReadTokens ?? 0,
    cacheWriteTokens: u.inputTokenDetails?.cacheWriteTokens ?? 0,
  };
}

// --- the bytes of a request ---

/**
 * The message with the objects a provider sends as JSON (tool-call arguments, JSON tool output)
 * in the key order PostgreSQL's jsonb gives them back (shorter keys first, then by their UTF-8
 * bytes): a stored turn then reads back byte for byte as its requests sent it, and the next
 * turn's requests share the cached prefix.
 */
function inStoredOrder(message: ModelMessage): ModelMessage {
  if (message.role === 'assistant' && typeof message.content !== 'string') {
    return {
      ...message,
      content: message.content.map((part) =>
        part.type === 'tool-call' ? { ...part, input: jsonbOrder(part.input) } : part,
      ),
    };
  }
  if (message.role === 'tool') {
    return {
      ...message,
      content: message.content.map((part) =>
        isToolResult(part) && (part.output.type === 'json' || part.output.type === 'error-json')
          ? {
              ...part,
              output: { ...part.output, value: jsonbOrder(part.output.value) as JSONValue },
            }
          : part,
      ),
    };
  }
  return message;
}

function jsonbOrder(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(jsonbOrder);
  if (typeof value !== 'object' || value === null) return value;
  const keys = Object.keys(value).sort((a, b) => {
    const byLength = Buffer.byteLength(a) - Buffer.byteLength(b);
    return byLength !== 0 ? byLength : Buffer.compare(Buffer.from(a), Buffer.from(b));
  });
  const record = value as Record<string, unknown>;
  return Object.fromEntries(keys.map((k) => [k, jsonbOrder(record[k])]));
}

// --- tool results: caps, sizes and calls ---

function isToolResult(part: { type: string }): part is ToolResultPart {
  return part.type === 'tool-result';
}

function outputText(part: ToolResultPart): string {
  const output = part.output;
  switch (output.type) {
    case 'text':
    case 'error-text':
      return output.value;
    case 'json':
    case 'error-json':
      return JSON.stringify(output.value);
    case 'content':
      return output.value.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
    default:
      return output.reason ?? '';
  }
}

function outputChars(part: ToolResultPart): number {
  return outputText(part).length;
}

/** The arguments of every tool call, by call id. */
function toolCalls(messages: readonly ModelMessage[]): Map<string, unknown> {
  const calls = new Map<string, unknown>();
  for (const m of messages) {
    if (m.role !== 'assistant' || typeof m.content === 'string') continue;
    for (const part of m.content)
      if (part.type === 'tool-call') calls.set(part.toolCallId, part.input);
  }
  return calls;
}

/** The messages with every tool result longer than `maxChars` cut to its head and tail. */
function capAll(messages: readonly ModelMessage[], maxChars: number): ModelMessage[] {
  return messages.map((m) => {
    if (m.role !== 'tool' || !m.content.some((p) => isToolResult(p) && outputChars(p) > maxChars))
      return m;
    return {
      ...m,
      content: m.content.map((part) => {
        if (!isToolResult(part) || outputChars(part) <= maxChars) return part;
        const type = part.output.type === 'error-text' || part.output.type === 'error-json';
        return {
          ...part,
          output: {
            type: type ? ('error-text' as const) : ('text' as const),
            value: headAndTail(outputText(part), maxChars, part.toolName),
          },
        };
      }),
    };
  });
}

const NUMBERED_LINE = /^\s*(\d+)\t/;

/**
 * The start and the end of a long text, cut at line ends, with a note of what was left out in
 * between; for read_file's numbered lines, the note says how to read them.
 */
export function headAndTail(text: string, maxChars: number, toolName: string): string {
  const room = Math.max(0, maxChars - 300);
  let head = text.slice(0, Math.floor(room * 0.6));
  let tail = text.slice(text.length - Math.floor(room * 0.4));
  const headEnd = head.lastIndexOf('\n');
  if (headEnd > 0) head = head.slice(0, headEnd + 1);
  const tailStart = tail.indexOf('\n');
  if (tailStart >= 0 && tailStart < tail.length - 1) tail = tail.slice(tailStart + 1);
  const omitted = text.slice(head.length, text.length - tail.length);
  const lines = omitted.split('\n').length - (omitted.endsWith('\n') ? 1 : 0);
  const first = omitted.match(NUMBERED_LINE)?.[1];
  const last = omitted.trimEnd().split('\n').at(-1)?.match(NUMBERED_LINE)?.[1];
  const size = `${lines.toLocaleString('en-US')} lines, ${omitted.length.toLocaleString('en-US')} characters`;
  const how =
    toolName === 'read_file' && first && last
      ? `; read_file with startLine ${first} and endLine ${last} shows them`
      : '';
  return `${head}[… ${size} left out here to fit the model's context window${how} …]\n${tail}`;
}

// --- compaction: the summary request and the message that replaces the older history ---

const SUMMARY_INSTRUCTIONS = `You write the working notes of a software engineering agent whose conversation
has grown too long for its context window. You are given the older part of that conversation:
the user's requests, the agent's messages, its tool calls with shortened results, and perhaps
the notes of an earlier summary. The agent will continue from your notes and its most recent
work alone, so keep everything it needs and nothing else:
1. Done so far: each change made, with the file paths and what changed.
2. Findings: what the agent learned that the work depends on: files, functions, types,
   conventions, commands run and their results.
3. Decisions and constraints, the user's corrections included.
4. Problems met, and how they were solved or why not.
5. Still to do, in order.
The user's requests are kept word for word elsewhere: do not repeat them. Be specific (exact
paths, names, error messages) and brief. Never write down secrets. Plain text only.`;

/** The older messages as one text for the summariser, shortened to `maxChars`. */
function summaryRequest(older: readonly ModelMessage[], maxChars: number): string {
  const render = (excerpt: number): string[] =>
    older.flatMap((m): string[] => {
      const mark = markOf(m);
      if (mark?.summary !== undefined) {
        return [
          ...(mark.prompts ?? []).map((p) => `<request>\n${p}\n</request>`),
          `<earlier-notes>\n${mark.summary}\n</earlier-notes>`,
        ];
      }
      if (m.role === 'user') return [`<request>\n${promptOf(m)}\n</request>`];
      if (m.role === 'assistant') return assistantLines(m, excerpt);
      if (m.role === 'tool') {
        return m.content.filter(isToolResult).map((part) => {
          const text = outputText(part);
          const shown =
            text.length > excerpt
              ? `${text.slice(0, excerpt)}\n[… ${text.length - excerpt} more characters …]`
              : text;
          return `<tool-result name="${part.toolName}">\n${shown}\n</tool-result>`;
        });
      }
      return [];
    });
  let items = render(1_500);
  if (length(items) > maxChars) items = render(300);
  if (length(items) > maxChars) {
    // Keep the start (earlier notes, first requests) and as much of the end as fits.
    const head = items.slice(0, 3);
    const tail: string[] = [];
    let size = length(head) + 200;
    for (let i = items.length - 1; i >= head.length; i--) {
      const item = items[i] ?? '';
      if (size + item.length > maxChars) break;
      tail.unshift(item);
      size += item.length + 1;
    }
    const dropped = items.length - head.length - tail.length;
    items = [...head, `[… ${dropped} items of the conversation left out …]`, ...tail];
  }
  return `The older part of the conversation, to summarise:\n\n<conversation>\n${items.join('\n')}\n</conversation>\n\nWrite the notes now.`;
}

function length(items: readonly string[]): number {
  return items.reduce((n, s) => n + s.length + 1, 0);
}

/** The agent's words (at most four excerpts long) and its tool calls (one excerpt). */
function assistantLines(m: AssistantModelMessage, excerpt: number): string[] {
  const said = (text: string) =>
    `<agent>\n${text.length > excerpt * 4 ? `${text.slice(0, excerpt * 4)}…` : text}\n</agent>`;
  if (typeof m.content === 'string') return [said(m.content)];
  return m.content.flatMap((part): string[] => {
    if (part.type === 'text' && part.text.trim() !== '') return [said(part.text)];
    if (part.type === 'tool-call') {
      const input = JSON.stringify(part.input) ?? '';
      const shown = input.length > excerpt ? `${input.slice(0, excerpt)}…` : input;
      return [`<tool-call name="${part.toolName}">${shown}</tool-call>`];
    }
    return [];
  });
}

/** A user message's prompt: its text, or its first text part (later parts are Errand's notes). */
function promptOf(m: UserModelMessage): string {
  if (typeof m.content === 'string') return m.content;
  const first = m.content.find((p) => p.type === 'text');
  return first?.type === 'text' ? first.text : '';
}

function userParts(m: UserModelMessage): Exclude<UserModelMessage['content'], string> {
  return typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
}

function checkpointText(earlier: readonly string[], summary: string, current: boolean): string {
  const requests = earlier.map((p, i) => `<request n="${i + 1}">\n${p}\n</request>`).join('\n');
  const next = current
    ? 'The request you are working on now follows, word for word; after it, your most recent work as it happened.'
    : 'Your most recent work follows as it happened.';
  return `[Errand: this job's conversation grew past what your context window holds, so its older part was replaced by the notes below. ${
    earlier.length > 0 ? "The user's earlier requests are kept word for word. " : ''
  }Re-read files or re-run commands when you need their exact content.]
${requests ? `\n${requests}\n` : ''}
<notes-on-earlier-work>
${summary}
</notes-on-earlier-work>

${next}`;
}

// --- a provider's refusal of a request for its length ---

const OVERFLOW_PATTERNS = [
  /prompt is too long/i, // Anthropic
  /exceed context limit/i, // Anthropic: input plus max_tokens
  /context_length_exceeded/i, // OpenAI, Azure, Groq, LiteLLM
  /maximum context length/i, // OpenAI, vLLM, DeepSeek, Mistral
  /exceeds the maximum number of tokens/i, // Google
  /context (?:size|window|length)[^.]{0,40}(?:exceed|too (?:long|large|small))/i,
  /exceeds? (?:the )?(?:available )?context (?:size|window|length)/i, // llama.cpp, others
  /exceed_context_size/i, // llama.cpp
  /(?:input|prompt) is too long/i, // Bedrock
  /too many (?:input )?tokens/i,
];

function errorTexts(error: unknown): string {
  const parts: string[] = [];
  let e: unknown = error;
  for (let depth = 0; depth < 3 && typeof e === 'object' && e !== null; depth++) {
    const record = e as {
      message?: unknown;
      responseBody?: unknown;
      lastError?: unknown;
      cause?: unknown;
    };
    if (typeof record.message === 'string') parts.push(record.message);
    if (typeof record.responseBody === 'string') parts.push(record.responseBody);
    e = record.lastError ?? record.cause;
  }
  return parts.join('\n');
}

function statusOf(error: unknown): number | undefined {
  let e: unknown = error;
  for (let depth = 0; depth < 3 && typeof e === 'object' && e !== null; depth++) {
    const record = e as { statusCode?: unknown; lastError?: unknown; cause?: unknown };
    if (typeof record.statusCode === 'number') return record.statusCode;
    e = record.lastError ?? record.cause;
  }
  return undefined;
}

/**
 * Whether a provider refused a request for being longer than the model's context window: a
 * 400 or 413 whose message says so in one of the providers' wordings.
 */
export function isContextOverflow(error: unknown): boolean {
  const status = statusOf(error);
  if (status !== undefined && status !== 400 && status !== 413) return false;
  const text = errorTexts(error);
  return OVERFLOW_PATTERNS.some((p) => p.test(text));
}

/** The window and the request's tokens, where the refusal names them. */
export function overflowFacts(error: unknown): { windowTokens?: number; promptTokens?: number } {
  const text = errorTexts(error);
  const num = (re: RegExp, group = 1): number | undefined => {
    const m = text.match(re)?.[group];
    return m === undefined ? undefined : Number(m);
  };
  const windowTokens =
    num(/(\d+) tokens > (\d+) maximum/, 2) ?? // Anthropic
    num(/\d+ \+ \d+ > (\d+)/) ?? // Anthropic, with max_tokens
    num(/maximum context length is (\d+)/i) ?? // OpenAI, vLLM
    num(/maximum number of tokens allowed \((\d+)\)/i) ?? // Google
    num(/"n_ctx"\s*:\s*(\d+)/); // llama.cpp
  const promptTokens =
    num(/(\d+) tokens > \d+ maximum/) ??
    num(/(\d+) \+ \d+ > \d+/) ??
    num(/\((\d+) in the messages/) ??
    num(/resulted in (\d+) tokens/) ??
    num(/input token count \((\d+)\)/i) ??
    num(/"n_prompt_tokens"\s*:\s*(\d+)/);
  return {
    ...(windowTokens && windowTokens > 0 ? { windowTokens } : {}),
    ...(promptTokens && promptTokens > 0 ? { promptTokens } : {}),
  };
}
