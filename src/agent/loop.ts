// One agent turn: the AI SDK tool loop over the job's history and a new prompt, under step,
// output-token, wall-time and cost budgets, with its conversation kept under the model's window
// by a Conversation (conversation.ts). It reports progress as events and turns every way a turn can fail
// into one of three errors: BudgetExceededError, ModelError (model-errors.ts), or an AbortError.

import {
  type FinishReason,
  isStepCount,
  type LanguageModel,
  type ModelMessage,
  streamText,
  type TextStreamPart,
  type ToolSet,
  type UserModelMessage,
} from 'ai';
import { errorMessage } from '../errors.ts';
import type { Emitted } from '../events/catalog.ts';
import { addTokens, NO_TOKENS, type TokenUsage } from '../jobs/usage.ts';
import { oneLine } from '../text.ts';
import { type Compaction, Conversation, isWindowOverflow, tokenUsage } from './conversation.ts';
import { imageParts, type PromptImage, withoutImages } from './images.ts';
import { classifyModelError, overflowError } from './model-errors.ts';
import { describeToolOutput } from './tool-output.ts';
import { summarizeToolArgs } from './tools/index.ts';

/** Names of the settings that raise each budget, quoted in the budget errors. */
const BUDGET_SETTINGS = {
  steps: 'ERRAND_MAX_STEPS',
  outputTokens: 'ERRAND_MAX_OUTPUT_TOKENS',
  time: 'ERRAND_TURN_TIMEOUT_SECONDS',
  cost: "the project's jobBudgetUsd",
} as const;

/**
 * What the loop tells of a turn as it runs: the tool calls and results as the catalog declares
 * them; a model step and a compaction with their tokens before they are priced (the pipeline
 * prices them into the catalog's `model.step` and `context.compacted`).
 */
export type AgentEvent =
  | Emitted<'tool.call'>
  | Emitted<'tool.result'>
  | { type: 'model.step'; step: number; finishReason: FinishReason; usage: TokenUsage }
  | ({ type: 'context.compacted' } & Compaction);

type TurnBudgets = {
  /** Model calls in the turn; each call's tool results feed the next. */
  maxSteps: number;
  /** Output tokens one model reply may use; a reply cut off at this limit fails the turn. */
  maxOutputTokens: number;
  /** Wall time for the whole turn, tools included. */
  timeoutMs: number;
};

/** The job's budget in US dollars, for a model whose prices are known. */
export type CostBudget = {
  limitUsd: number;
  /** What the job's turns spent before this one. */
  spentUsd: number;
  /** What a model call's usage costs; null when a price it needs is unknown (not counted). */
  costOf: (usage: TokenUsage) => number | null;
};

export type AgentTurnInput = {
  model: LanguageModel;
  system: string;
  /** The job's conversation so far: jobHistory() of the earlier turns' `turnMessages`. */
  history: ModelMessage[];
  prompt: string;
  /** The turn's images, sent after the prompt (docs/images.md); stored as lines naming them. */
  images?: readonly PromptImage[] | undefined;
  /** Errand's note for this turn (how the setup command went), sent after the prompt. */
  note?: string | undefined;
  tools: ToolSet;
  budgets: TurnBudgets;
  signal: AbortSignal;
  onEvent: (event: AgentEvent) => Promise<void> | void;
  /** How the conversation is kept under the model's window, and prompt caching (conversation.ts). */
  conversation?: {
    /** The model's context window in tokens; DEFAULT_WINDOW_TOKENS when unknown. */
    windowTokens?: number | undefined;
    /** OpenAI's prompt cache key: the job's id, so its requests share a cache. */
    cacheKey?: string | undefined;
    /**
     * False only for the bench's comparison: no caps, masking, compaction or cache hints, and
     * no recovery from a refusal for length. Default true.
     */
    managed?: boolean;
  };
  /** The job's budget: the turn stops once the job's spend reaches it. */
  budget?: CostBudget | undefined;
  /** Retries of one model call on 429/5xx/network errors, with the SDK's backoff. Default 3. */
  maxRetries?: number;
  /** One-line description of a tool call for events. Default: the file tools' summarizeToolArgs. */
  summarizeArgs?: (toolName: string, input: unknown) => string;
  /** Whether a tool's output reports success, and a one-line description. Default: describeToolOutput. */
  summarizeResult?: (toolName: string, output: unknown) => { ok: boolean; summary: string };
};

export type TurnResult = {
  /** The model's final text: the change summary, first line a subject. */
  summary: string;
  /** What the model and the tools added in this turn (assistant and tool messages), as they came. */
  responseMessages: ModelMessage[];
  /**
   * What the turn stores for follow-ups: the prompt as a user message and the turn's messages,
   * as the model last saw them (long tool results capped, old ones masked); or, when the turn
   * compacted or masked the conversation before it, the whole conversation (jobHistory starts
   * from it).
   */
  turnMessages: ModelMessage[];
  /** Every model call of the turn, compactions included. */
  usage: TokenUsage;
  steps: number;
  finishReason: FinishReason;
};

/** What a turn that ran out of budget got done, so the caller can keep the transcript. */
export type PartialTurn = Omit<TurnResult, 'summary' | 'finishReason'>;

export class BudgetExceededError extends Error {
  readonly budget: 'steps' | 'outputTokens' | 'time' | 'cost';
  readonly partial: PartialTurn;
  constructor(budget: BudgetExceededError['budget'], message: string, partial: PartialTurn) {
    super(message);
    this.name = 'BudgetExceededError';
    this.budget = budget;
    this.partial = partial;
  }
}

/** How one run of the SDK's loop ended. */
type SegmentEnd =
  | { kind: 'finished'; finishReason: FinishReason; text: string; toolCalls: number }
  | { kind: 'failed'; error: unknown };

export async function runAgentTurn(input: AgentTurnInput): Promise<TurnResult> {
  const { signal } = input;
  // A bare id string would make the SDK route the call through its hosted gateway.
  if (typeof input.model === 'string') {
    throw new TypeError('runAgentTurn needs a model made by resolveModel, not a model id');
  }
  signal.throwIfAborted();
  const turn = new Turn(input);
  try {
    if (turn.overBudget()) throw turn.costError();
    const end = await turn.run();
    turn.stopClock();
    return turn.outcome(end);
  } catch (error) {
    // The SDK rejects its result promises with the abort reason; report the cause instead.
    if (signal.aborted) throw abortError(signal.reason);
    turn.throwIfSinkFailed();
    throw error;
  } finally {
    turn.stopClock();
  }
}

/**
 * One turn under way: its conversation, what it has spent and its steps so far, its clock, and
 * the events it reports. A failing event sink or the time budget stops it through its own
 * controller.
 */
class Turn {
  readonly #input: AgentTurnInput;
  readonly #summarizeArgs: NonNullable<AgentTurnInput['summarizeArgs']>;
  readonly #summarizeResult: NonNullable<AgentTurnInput['summarizeResult']>;
  readonly #maxRetries: number;
  readonly #conversation: Conversation;
  // Our own controller, not AbortSignal.timeout, so that a timeout can be told apart from the
  // caller's cancel and a failing event sink can stop the loop too.
  readonly #stop = new AbortController();
  readonly #timer: NodeJS.Timeout;
  readonly #abortSignal: AbortSignal;
  #timedOut = false;
  readonly #completed: ModelMessage[] = [];
  /** Messages of finished steps the conversation has not been given yet. */
  #pending: ModelMessage[] = [];
  #usage: TokenUsage = { ...NO_TOKENS };
  #stepCount = 0;
  #spentUsd: number;
  #sinkError: { error: unknown } | undefined;

  constructor(input: AgentTurnInput) {
    this.#input = input;
    const { budgets } = input;
    this.#summarizeArgs = input.summarizeArgs ?? summarizeToolArgs;
    this.#summarizeResult =
      input.summarizeResult ?? ((_name, output) => describeToolOutput(output));
    this.#maxRetries = input.maxRetries ?? 3;
    const images = imageParts(input.images ?? []);
    const userMessage: UserModelMessage =
      input.note || images.length > 0
        ? {
            role: 'user',
            content: [
              { type: 'text', text: input.prompt },
              ...images,
              ...(input.note ? [{ type: 'text' as const, text: input.note }] : []),
            ],
          }
        : { role: 'user', content: input.prompt };
    this.#conversation = new Conversation({
      model: input.model,
      system: input.system,
      tools: input.tools,
      history: input.history,
      user: userMessage,
      windowTokens: input.conversation?.windowTokens,
      maxOutputTokens: budgets.maxOutputTokens,
      managed: input.conversation?.managed ?? true,
      cacheKey: input.conversation?.cacheKey,
      maxRetries: this.#maxRetries,
      describeCall: this.#summarizeArgs,
    });
    this.#timer = setTimeout(() => {
      this.#timedOut = true;
      this.#stop.abort(new DOMException('turn time budget elapsed', 'TimeoutError'));
    }, budgets.timeoutMs);
    this.#abortSignal = AbortSignal.any([input.signal, this.#stop.signal]);
    this.#spentUsd = input.budget?.spentUsd ?? 0;
  }

  readonly overBudget = (): boolean =>
    this.#input.budget !== undefined && this.#spentUsd >= this.#input.budget.limitUsd;

  stopClock(): void {
    clearTimeout(this.#timer);
  }

  throwIfSinkFailed(): void {
    if (this.#sinkError) throw this.#sinkError.error;
  }

  costError(): BudgetExceededError {
    const budget = this.#input.budget as CostBudget;
    return new BudgetExceededError(
      'cost',
      `the job reached its budget of ${formatUsd(budget.limitUsd)} (it has spent ${formatUsd(this.#spentUsd)}); ` +
        `raise ${BUDGET_SETTINGS.cost} or split the task`,
      this.#partial(),
    );
  }

  /**
   * The SDK's loop, run again from a compacted conversation once after a refusal for length at the
   * same step; how its last run ended.
   */
  async run(): Promise<SegmentEnd> {
    const { signal } = this.#input;
    let recoveredAtStep = -1;
    let end: SegmentEnd;
    for (;;) {
      end = await this.#segment();
      if (signal.aborted) throw abortError(signal.reason);
      this.throwIfSinkFailed();
      if (this.#timedOut) break;
      if (end.kind === 'finished' || !isWindowOverflow(end.error)) break;
      // Refused for its length: compact and send the same step again, once.
      if (!(this.#input.conversation?.managed ?? true) || recoveredAtStep === this.#stepCount)
        break;
      recoveredAtStep = this.#stepCount;
      this.#conversation.append(this.#pending);
      this.#pending = [];
      let recovery: Compaction | undefined;
      try {
        recovery = await this.#conversation.recover(end.error, this.#abortSignal);
      } catch (error) {
        end = { kind: 'failed', error };
        break;
      }
      if (!recovery) break;
      await this.#compacted(recovery);
      this.throwIfSinkFailed();
    }
    return end;
  }

  /** The turn's result, or the error that says which budget or failure ended it. */
  outcome(end: SegmentEnd): TurnResult {
    const { budgets, model } = this.#input;
    if (this.#timedOut && end.kind === 'failed') {
      throw new BudgetExceededError(
        'time',
        `the turn ran out of its ${formatDuration(budgets.timeoutMs)} time budget; ` +
          `raise ${BUDGET_SETTINGS.time} or split the task`,
        this.#partial(),
      );
    }
    if (end.kind === 'failed') {
      const error = end.error;
      if (isWindowOverflow(error)) throw overflowError(error, model, this.#conversation);
      throw classifyModelError(error, model);
    }
    if (end.finishReason === 'length') {
      throw new BudgetExceededError(
        'outputTokens',
        `the model's reply reached the ${this.#conversation.outputTokens}-token output limit before it ` +
          `finished; raise ${BUDGET_SETTINGS.outputTokens} or ask for a smaller change`,
        this.#partial(),
      );
    }
    // Tool calls in the last step mean the loop stopped on a budget, not on an answer.
    if (end.toolCalls > 0 && this.overBudget()) throw this.costError();
    if (end.toolCalls > 0 && this.#stepCount >= budgets.maxSteps) {
      throw new BudgetExceededError(
        'steps',
        `the turn used its ${budgets.maxSteps} steps without finishing; ` +
          `raise ${BUDGET_SETTINGS.steps} or split the task`,
        this.#partial(),
      );
    }
    const turn = this.#partial();
    return { summary: end.text.trim(), ...turn, finishReason: end.finishReason };
  }

  async #emit(event: AgentEvent): Promise<void> {
    try {
      await this.#input.onEvent(event);
    } catch (error) {
      this.#sinkError ??= { error };
      this.#stop.abort(error);
    }
  }

  #spend(u: TokenUsage): void {
    this.#usage = addTokens(this.#usage, u);
    const cost = this.#input.budget?.costOf(u);
    if (cost) this.#spentUsd += cost;
  }

  async #compacted(compaction: Compaction | undefined): Promise<void> {
    if (!compaction) return;
    this.#spend(compaction.usage);
    await this.#emit({ type: 'context.compacted', ...compaction });
  }

  #partial(): PartialTurn {
    this.#conversation.append(this.#pending);
    this.#pending = [];
    return {
      responseMessages: [...this.#completed],
      turnMessages: withoutImages(this.#conversation.stored()),
      usage: { ...this.#usage },
      steps: this.#stepCount,
    };
  }

  /** One run of the SDK's tool loop, from the conversation's messages, for the steps left. */
  async #segment(): Promise<SegmentEnd> {
    const conversation = this.#conversation;
    let streamError: unknown;
    let finished = false;
    const result = streamText({
      model: this.#input.model,
      instructions: conversation.instructions(),
      messages: conversation.messages(),
      tools: this.#input.tools,
      stopWhen: [isStepCount(this.#input.budgets.maxSteps - this.#stepCount), this.overBudget],
      maxOutputTokens: conversation.outputTokens,
      maxRetries: this.#maxRetries,
      abortSignal: this.#abortSignal,
      ...(conversation.providerOptions()
        ? { providerOptions: conversation.providerOptions() }
        : {}),
      prepareStep: async () => {
        const added = this.#pending;
        this.#pending = [];
        const request = await conversation.prepare(added, this.#abortSignal);
        await this.#compacted(request.compaction);
        return { messages: request.messages };
      },
      // Errors arrive as stream parts below; without this the SDK also prints them.
      onError: () => {},
      // Called before the next step is prepared and the stop conditions are checked (the
      // stream's parts may come later): the count and the cost must be known by then.
      onStepEnd: (step) => {
        conversation.observe(step.usage);
        this.#spend(tokenUsage(step.usage));
        this.#completed.push(...step.response.messages);
        this.#pending.push(...step.response.messages);
      },
    });

    for await (const part of result.stream) {
      if (part.type === 'finish') finished = true;
      else if (part.type === 'error') streamError ??= part.error;
      else await this.#report(part);
    }
    if (streamError !== undefined || !finished) {
      return { kind: 'failed', error: streamError ?? this.#abortSignal.reason };
    }
    const finalStep = await result.finalStep;
    return {
      kind: 'finished',
      finishReason: finalStep.finishReason,
      text: finalStep.text,
      toolCalls: finalStep.toolCalls.length,
    };
  }

  /** A tool's call and result and a model step's end, as events; other parts tell nothing. */
  async #report(part: TextStreamPart<ToolSet>): Promise<void> {
    switch (part.type) {
      case 'tool-call':
        await this.#emit({
          type: 'tool.call',
          id: part.toolCallId,
          name: part.toolName,
          summary: this.#summarizeArgs(part.toolName, part.input),
        });
        break;
      case 'tool-result':
        await this.#emit({
          type: 'tool.result',
          id: part.toolCallId,
          name: part.toolName,
          ...this.#summarizeResult(part.toolName, part.output),
        });
        break;
      case 'tool-error':
        await this.#emit({
          type: 'tool.result',
          id: part.toolCallId,
          name: part.toolName,
          ok: false,
          summary: oneLine(errorMessage(part.error)),
        });
        break;
      case 'finish-step': {
        this.#stepCount++;
        const step = tokenUsage(part.usage);
        await this.#emit({
          type: 'model.step',
          step: this.#stepCount,
          finishReason: part.finishReason,
          usage: step,
        });
        break;
      }
      default:
        break;
    }
  }
}

function formatUsd(usd: number): string {
  return `$${usd < 1 ? usd.toFixed(4) : usd.toFixed(2)}`;
}

function abortError(reason: unknown): Error {
  if (reason instanceof Error && reason.name === 'AbortError') return reason;
  const error = new DOMException('the turn was cancelled', 'AbortError');
  return Object.assign(error, { cause: reason });
}

function formatDuration(ms: number): string {
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}
