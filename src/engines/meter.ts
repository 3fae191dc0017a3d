// What each model call of an engine used, and whether the turn may make another. The model proxy
// shows the meter every answer of a billable call as it passes; the meter reads the usage the
// vendor bills from it, whatever the engine reports and whenever it reports it (Anthropic
// Messages, OpenAI Responses and chat completions, each streamed or whole), and prices what it
// cannot read as the most the request could have used. The proxy asks it before each call
// whether the turn's step limit and budgets leave room for it, and the meter's steps tell the
// turn what the proxy removed from its requests.

import { addTokens, NO_TOKENS, type TokenUsage, type Usage } from '../jobs/usage.ts';
import { isRecord } from '../json.ts';
import type { AnswerObserver, ObservedAnswer, ProxyCall } from '../sandbox/model-proxy.ts';
import type { ModelApi, ProxyRefusal, Removed } from '../sandbox/model-request.ts';
import { formatUsd } from '../words.ts';

/** A whole JSON answer is read up to this size; no real answer comes near it. */
const MAX_JSON_BYTES = 16 * 1024 * 1024;
/** One server-sent event's data is read up to this size (a usage event is a few hundred bytes). */
const MAX_EVENT_BYTES = 4 * 1024 * 1024;
/**
 * The output tokens of an unread answer whose request set no limit (Codex sets none): the most
 * any model of today writes in one answer (OpenAI's GPT-5 family, 128k).
 */
const UNLIMITED_OUTPUT_TOKENS = 128_000;

/** What one forwarded call used, as the turn counts it. */
export interface MeteredCall {
  tokens: TokenUsage;
  /**
   * `answer`: the vendor's answer named them. `estimate`: it named none that could be read to
   * the end (cut, compressed, malformed), or none came: the most the request could have used.
   * `error`: the vendor answered an error status, which it does not bill.
   */
  source: 'answer' | 'estimate' | 'error';
  /** The vendor's status (0: no answer came). */
  status: number;
}

/**
 * An observer for one answer of a billable call. `done` is called once, when the answer has
 * ended or was cut, with what the call used.
 */
export function meterAnswer(
  answer: ObservedAnswer,
  done: (call: MeteredCall) => void,
): AnswerObserver {
  const { status } = answer;
  const error = status >= 300 || (status > 0 && status < 200);
  const readable =
    status >= 200 &&
    status < 300 &&
    (answer.contentEncoding === '' || answer.contentEncoding === 'identity');
  const usage = new CallUsage(answer.api);
  const streamed = answer.contentType.startsWith('text/event-stream');
  const decoder = new TextDecoder();
  let text = '';
  let tooLarge = false;
  let ended = false;
  return {
    data(chunk) {
      if (!readable || tooLarge) return;
      text += decoder.decode(chunk, { stream: true });
      if (streamed) text = readEvents(text, usage);
      if (text.length > (streamed ? MAX_EVENT_BYTES : MAX_JSON_BYTES)) {
        tooLarge = true;
        text = '';
      }
    },
    end() {
      if (ended) return;
      ended = true;
      if (error) {
        done({ tokens: { ...NO_TOKENS }, source: 'error', status });
        return;
      }
      if (readable && !tooLarge) {
        text += decoder.decode();
        if (streamed) readEvents(`${text}\n\n`, usage);
        else usage.readWhole(parseJson(text));
      }
      const read = usage.tokens();
      if (read && usage.complete) done({ tokens: read, source: 'answer', status });
      else done({ tokens: estimate(answer.request, read), source: 'estimate', status });
    },
  };
}

/**
 * The most a call could have used: the input its answer named, else one token per byte of its
 * request (more than any tokenizer makes of text, images or documents), none of it cached; and
 * the output its request allowed.
 */
function estimate(request: ObservedAnswer['request'], read: TokenUsage | undefined): TokenUsage {
  const output = request.maxOutputTokens ?? UNLIMITED_OUTPUT_TOKENS;
  if (read && read.inputTokens > 0) {
    return { ...read, outputTokens: Math.max(read.outputTokens, output) };
  }
  return { ...NO_TOKENS, inputTokens: request.bytes, outputTokens: output };
}

/** Reads the complete events at the head of `text`; returns what is left (a partial event). */
function readEvents(text: string, usage: CallUsage): string {
  let rest = text.replace(/\r\n/g, '\n');
  for (let end = rest.indexOf('\n\n'); end !== -1; end = rest.indexOf('\n\n')) {
    const data = rest
      .slice(0, end)
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
      .join('\n');
    rest = rest.slice(end + 2);
    if (data !== '' && data !== '[DONE]') usage.readEvent(parseJson(data));
  }
  return rest;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // Not an answer with usage (a keep-alive, a truncated body): it names no tokens.
    return undefined;
  }
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

/** The usage one call's answer has named so far, in the vendor's own fields. */
class CallUsage {
  readonly #api: ModelApi;
  #input: number | undefined;
  #output: number | undefined;
  #cacheRead: number | undefined;
  #cacheWrite: number | undefined;
  /** The answer named its final usage (not only the input a stream starts with). */
  complete = false;

  constructor(api: ModelApi) {
    this.#api = api;
  }

  /** A whole JSON answer. */
  readWhole(body: unknown): void {
    if (isRecord(body) && isRecord(body.usage)) {
      this.#read(body.usage);
      this.complete = true;
    }
  }

  /** One streamed event's data. */
  readEvent(event: unknown): void {
    if (!isRecord(event)) return;
    switch (this.#api) {
      case 'messages':
        // message_start carries the input (and the first output) counts; message_delta, once
        // the message is done, the final ones.
        if (event.type === 'message_start' && isRecord(event.message)) {
          this.#read(event.message.usage);
        } else if (event.type === 'message_delta' && isRecord(event.usage)) {
          this.#read(event.usage);
          this.complete = true;
        }
        return;
      case 'responses':
        // The response's last event (completed, incomplete or failed) holds its usage.
        if (isRecord(event.response) && isRecord(event.response.usage)) {
          this.#read(event.response.usage);
          this.complete = true;
        }
        return;
      case 'chat':
        // With stream_options.include_usage (the proxy asks for it), the last chunk.
        if (isRecord(event.usage)) {
          this.#read(event.usage);
          this.complete = true;
        }
        return;
      case 'count_tokens':
        return;
    }
  }

  #read(usage: unknown): void {
    if (!isRecord(usage)) return;
    if (this.#api === 'messages') {
      this.#input = num(usage.input_tokens) ?? this.#input;
      this.#output = num(usage.output_tokens) ?? this.#output;
      this.#cacheRead = num(usage.cache_read_input_tokens) ?? this.#cacheRead;
      this.#cacheWrite = num(usage.cache_creation_input_tokens) ?? this.#cacheWrite;
      return;
    }
    const chat = this.#api === 'chat';
    const details = chat ? usage.prompt_tokens_details : usage.input_tokens_details;
    this.#input = num(chat ? usage.prompt_tokens : usage.input_tokens) ?? this.#input;
    this.#output = num(chat ? usage.completion_tokens : usage.output_tokens) ?? this.#output;
    this.#cacheRead =
      (isRecord(details) ? num(details.cached_tokens) : undefined) ?? this.#cacheRead;
  }

  /** As Errand counts tokens (inputTokens includes the cached ones), or undefined if none named. */
  tokens(): TokenUsage | undefined {
    if (this.#input === undefined && this.#output === undefined) return undefined;
    const cacheRead = this.#cacheRead ?? 0;
    const cacheWrite = this.#cacheWrite ?? 0;
    return {
      ...NO_TOKENS,
      // Anthropic's input_tokens leaves out what was read from or written to the cache; OpenAI's
      // counts the cached ones already.
      inputTokens: (this.#input ?? 0) + (this.#api === 'messages' ? cacheRead + cacheWrite : 0),
      outputTokens: this.#output ?? 0,
      cacheReadTokens: cacheRead,
      cacheWriteTokens: cacheWrite,
    };
  }
}

/** A budget in US dollars and what was spent from it before the turn. */
export interface TurnBudget {
  limitUsd: number;
  spentUsd: number;
}

/** One model call as the turn's `model.step` event reports it. */
export interface StepReport {
  step: number;
  usage: Usage;
  /** The usage is the most the call could have used: its answer named none that was read. */
  estimated?: true;
  /** The vendor's error status: the call was refused there and used nothing. */
  status?: number;
  /**
   * What the model proxy removed from this call's request (a tool the vendor would have run, a
   * parameter that makes it act), each told once a turn: on the step of the first call it was
   * removed from.
   */
  removed?: readonly Removed[];
}

export interface TurnMeterOptions {
  /** The model calls the turn may make (ERRAND_MAX_STEPS). */
  maxSteps: number;
  /** The job's budget (jobBudgetUsd) and what the job spent before the turn. */
  job: TurnBudget | undefined;
  /** The project's monthly budget (monthlyBudgetUsd) and what it spent this month before the turn. */
  month: TurnBudget | undefined;
  /** Tokens with their cost on the job's model; a null cost is not counted against a budget. */
  priced: (tokens: TokenUsage) => Usage;
  /** Each billable call, once its answer has ended or was cut, numbered from 1. */
  onStep: (step: StepReport) => void;
  /** Called once, when the turn has to stop: a limit is reached. */
  onStop: () => void;
}

type Limit = 'steps' | 'job' | 'month';

/**
 * A turn's model calls: admitted while its step limit and budgets leave room, metered as their
 * answers end. The first call refused, or the first answer that spends a budget, stops the
 * turn; every call after that is refused with the same reason. So a turn goes past a budget by
 * at most the calls that were in flight when it was spent.
 */
export class TurnMeter {
  readonly #options: TurnMeterOptions;
  /** Billable calls admitted. */
  #started = 0;
  /** Billable calls metered. */
  #steps = 0;
  #usage: TokenUsage = { ...NO_TOKENS };
  #turnUsd = 0;
  #limit: Limit | undefined;
  /** What the proxy removed that a step has told already. */
  readonly #told = new Set<Removed>();

  constructor(options: TurnMeterOptions) {
    this.#options = options;
  }

  /** Every token the turn's calls used (or were estimated at). */
  get usage(): TokenUsage {
    return { ...this.#usage };
  }

  /** Why the turn was stopped, in the words Errand's own loop uses; undefined while it may go on. */
  get stopped(): string | undefined {
    const { job, month, maxSteps } = this.#options;
    if (this.#limit === 'steps') {
      return `the turn used its ${maxSteps} model calls without finishing; raise ERRAND_MAX_STEPS or split the task`;
    }
    if (this.#limit === 'job') {
      return `the job reached its budget of ${formatUsd(job?.limitUsd)} (it has spent ${formatUsd((job?.spentUsd ?? 0) + this.#turnUsd)}); raise the project's jobBudgetUsd or split the task`;
    }
    if (this.#limit === 'month') {
      return `the project reached its monthly budget of ${formatUsd(month?.limitUsd)} (it has spent ${formatUsd((month?.spentUsd ?? 0) + this.#turnUsd)} this month); raise the project's monthlyBudgetUsd or wait for the next month`;
    }
    return undefined;
  }

  /** The model proxy's question before a call starts: undefined lets it go out. */
  admit(call: ProxyCall): ProxyRefusal | undefined {
    this.#checkBudgets();
    if (call.billable && this.#started >= this.#options.maxSteps) this.#stop('steps');
    if (this.#limit !== undefined) {
      const code = this.#limit === 'steps' ? 'step_limit' : 'budget_spent';
      return { status: 429, code, message: this.stopped ?? '' };
    }
    if (call.billable) this.#started++;
    return undefined;
  }

  /** The model proxy's observer for a billable call's answer. */
  observe(answer: ObservedAnswer): AnswerObserver {
    return meterAnswer(answer, (call) => this.#record(call, answer.request.removed));
  }

  #record(call: MeteredCall, removed: readonly Removed[]): void {
    const untold = removed.filter((what) => !this.#told.has(what));
    for (const what of untold) this.#told.add(what);
    this.#usage = addTokens(this.#usage, call.tokens);
    const usage = this.#options.priced(call.tokens);
    if (usage.costUsd !== null) this.#turnUsd += usage.costUsd;
    this.#steps++;
    this.#options.onStep({
      step: this.#steps,
      usage,
      ...(call.source === 'estimate' ? { estimated: true as const } : {}),
      ...(call.source === 'error' ? { status: call.status } : {}),
      ...(untold.length > 0 ? { removed: untold } : {}),
    });
    this.#checkBudgets();
  }

  /** Stops the turn once what it spent, added to what was spent before, reaches a budget. */
  #checkBudgets(): void {
    const { job, month } = this.#options;
    if (job && job.spentUsd + this.#turnUsd >= job.limitUsd) this.#stop('job');
    if (month && month.spentUsd + this.#turnUsd >= month.limitUsd) this.#stop('month');
  }

  #stop(limit: Limit): void {
    if (this.#limit !== undefined) return;
    this.#limit = limit;
    this.#options.onStop();
  }
}
