// The agent's conversation: what each model request of a turn carries. It keeps every request under
// the model's context window and its prefix stable for prompt caches: tool results are capped as
// they arrive, old ones are masked in batches, and when that is not enough the older part of the
// job's conversation is summarised by the model (compaction). What the turn ends with is what it
// stores for follow-ups (jobHistory rebuilds the conversation from the stored turns).
//
// This module is the turn's conversation itself (Conversation); its parts are in the modules
// beside it: the thresholds (window-policy.ts), the stored history (history.ts), tool results
// (tool-results.ts), compaction's summary (compaction-summary.ts) and a provider's refusal for
// length (window-overflow.ts).

import {
  generateText,
  type LanguageModel,
  type LanguageModelUsage,
  type ModelMessage,
  type SystemModelMessage,
  type ToolResultPart,
  type ToolSet,
  type UserModelMessage,
} from 'ai';
import { NO_TOKENS, type TokenUsage } from '../jobs/usage.ts';
import {
  checkpointText,
  promptOf,
  SUMMARY_INSTRUCTIONS,
  summaryRequest,
  userParts,
} from './compaction-summary.ts';
import { ERRAND, type ErrandMark, inStoredOrder, markOf, withMark } from './history.ts';
import { estimateReplacer } from './images.ts';
import { capAll, isToolResult, outputChars, toolCalls } from './tool-results.ts';
import { overflowFacts } from './window-overflow.ts';
import {
  CAP_CHARS_PER_TOKEN,
  DEFAULT_WINDOW_TOKENS,
  MASK_MIN_CHARS,
  SUMMARY_MAX_TOKENS,
  type WindowPolicy,
  windowPolicy,
} from './window-policy.ts';

// The conversation's API for the agent loop, the turn pipeline and the bench, wherever its part lives.
export { jobHistory } from './history.ts';
export { headAndTail } from './tool-results.ts';
export { isWindowOverflow, overflowFacts } from './window-overflow.ts';
export { DEFAULT_WINDOW_TOKENS, type WindowPolicy, windowPolicy } from './window-policy.ts';

/** A compaction, as the turn's progress log reports it. */
export interface Compaction {
  reason: 'threshold' | 'overflow';
  /** Estimated tokens of the request before and after. */
  tokensBefore: number;
  tokensAfter: number;
  /** What the summary cost. */
  usage: TokenUsage;
}

/** What a model request of the turn carries, from Conversation.prepare. */
export interface PreparedRequest {
  messages: ModelMessage[];
  compaction: Compaction | undefined;
}

export interface ConversationOptions {
  model: LanguageModel;
  system: string;
  tools: ToolSet;
  /** The job's conversation so far (jobHistory). */
  history: ModelMessage[];
  /** This turn's user message. */
  user: UserModelMessage;
  /** The model's context window; DEFAULT_WINDOW_TOKENS when the catalog does not know it. */
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
 * The conversation of one turn: the messages of its requests, from the job's history and this turn's
 * prompt to its last step. The agent loop hands it each step's new messages and the usage the
 * provider reported; it answers with what the next request carries.
 */
export class Conversation {
  readonly #opts: ConversationOptions;
  readonly #provider: string;
  readonly #history: readonly ModelMessage[];
  readonly #toolsChars: number;
  #policy: WindowPolicy;
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

  constructor(opts: ConversationOptions) {
    this.#opts = opts;
    this.#provider = providerOf(opts.model);
    this.#history = opts.history;
    this.#policy = windowPolicy(opts.windowTokens ?? DEFAULT_WINDOW_TOKENS, opts.maxOutputTokens);
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

  get policy(): WindowPolicy {
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
    this.#policy = windowPolicy(window, this.#opts.maxOutputTokens);
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
      n = JSON.stringify(message, estimateReplacer).length;
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
