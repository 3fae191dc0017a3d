// One agent turn: the AI SDK tool loop over the job's history and a new prompt, under step,
// output-token, wall-time and cost budgets, with its context kept under the model's window by a
// TurnContext (context.ts). It reports progress as events and turns every way a turn can fail
// into one of three errors: BudgetExceededError, ModelError (model-errors.ts), or an AbortError.

import {
  type FinishReason,
  isStepCount,
  type LanguageModel,
  type ModelMessage,
  streamText,
  type ToolSet,
  type UserModelMessage,
} from 'ai';
import { errorMessage } from '../errors.ts';
import type { Emitted } from '../events/catalog.ts';
import { addTokens, NO_TOKENS, type TokenUsage } from '../jobs/usage.ts';
import { oneLine } from '../text.ts';
import { type Compaction, isContextOverflow, TurnContext, tokenUsage } from './context.ts';
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
  /** Errand's note for this turn (how the setup command went), sent after the prompt. */
  note?: string | undefined;
  tools: ToolSet;
  budgets: TurnBudgets;
  signal: AbortSignal;
  onEvent: (event: AgentEvent) => Promise<void> | void;
  /** The model's context window and prompt caching (see context.ts). */
  context?: {
    /** The model's context window in tokens; DEFAULT_CONTEXT_TOKENS when unknown. */
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
  const { budgets, signal } = input;
  // A bare id string would make the SDK route the call through its hosted gateway.
  if (typeof input.model === 'string') {
    throw new TypeError('runAgentTurn needs a model made by resolveModel, not a model id');
  }
  signal.throwIfAborted();
  const summarizeArgs = input.summarizeArgs ?? summarizeToolArgs;
  const summarizeResult = input.summarizeResult ?? ((_name, output) => describeToolOutput(output));
  const maxRetries = input.maxRetries ?? 3;

  const userMessage: UserModelMessage = input.note
    ? {
        role: 'user',
        content: [
          { type: 'text', text: input.prompt },
          { type: 'text', text: input.note },
        ],
      }
    : { role: 'user', content: input.prompt };
  const context = new TurnContext({
    model: input.model,
    system: input.system,
    tools: input.tools,
    history: input.history,
    user: userMessage,
    windowTokens: input.context?.windowTokens,
    maxOutputTokens: budgets.maxOutputTokens,
    managed: input.context?.managed ?? true,
    cacheKey: input.context?.cacheKey,
    maxRetries,
    describeCall: summarizeArgs,
  });

  // Our own controller, not AbortSignal.timeout, so that a timeout can be told apart from the
  // caller's cancel and a failing event sink can stop the loop too.
  const stop = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    stop.abort(new DOMException('turn time budget elapsed', 'TimeoutError'));
  }, budgets.timeoutMs);
  const abortSignal = AbortSignal.any([signal, stop.signal]);

  const completed: ModelMessage[] = [];
  /** Messages of finished steps the context has not been given yet. */
  let pending: ModelMessage[] = [];
  let usage: TokenUsage = { ...NO_TOKENS };
  let stepCount = 0;
  let spentUsd = input.budget?.spentUsd ?? 0;
  const overBudget = () => input.budget !== undefined && spentUsd >= input.budget.limitUsd;
  let sinkError: { error: unknown } | undefined;

  const emit = async (event: AgentEvent) => {
    try {
      await input.onEvent(event);
    } catch (error) {
      sinkError ??= { error };
      stop.abort(error);
    }
  };
  // A function, so that TypeScript does not take sinkError for unchanged between awaits.
  const throwIfSinkFailed = () => {
    if (sinkError) throw sinkError.error;
  };
  const spend = (u: TokenUsage) => {
    usage = addTokens(usage, u);
    const cost = input.budget?.costOf(u);
    if (cost) spentUsd += cost;
  };
  const compacted = async (compaction: Compaction | undefined) => {
    if (!compaction) return;
    spend(compaction.usage);
    await emit({ type: 'context.compacted', ...compaction });
  };
  const partial = (): PartialTurn => {
    context.append(pending);
    pending = [];
    return {
      responseMessages: [...completed],
      turnMessages: context.stored(),
      usage: { ...usage },
      steps: stepCount,
    };
  };
  const costError = () => {
    const budget = input.budget as CostBudget;
    return new BudgetExceededError(
      'cost',
      `the job reached its budget of ${formatUsd(budget.limitUsd)} (it has spent ${formatUsd(spentUsd)}); ` +
        `raise ${BUDGET_SETTINGS.cost} or split the task`,
      partial(),
    );
  };

  /** One run of the SDK's tool loop, from the context's messages, for the steps left. */
  const runSegment = async (): Promise<SegmentEnd> => {
    let streamError: unknown;
    let finished = false;
    const result = streamText({
      model: input.model,
      instructions: context.instructions(),
      messages: context.messages(),
      tools: input.tools,
      stopWhen: [isStepCount(budgets.maxSteps - stepCount), overBudget],
      maxOutputTokens: context.outputTokens,
      maxRetries,
      abortSignal,
      ...(context.providerOptions() ? { providerOptions: context.providerOptions() } : {}),
      prepareStep: async () => {
        const added = pending;
        pending = [];
        const request = await context.prepare(added, abortSignal);
        await compacted(request.compaction);
        return { messages: request.messages };
      },
      // Errors arrive as stream parts below; without this the SDK also prints them.
      onError: () => {},
      // Called before the next step is prepared and the stop conditions are checked (the
      // stream's parts may come later): the count and the cost must be known by then.
      onStepEnd: (step) => {
        context.observe(step.usage);
        spend(tokenUsage(step.usage));
        completed.push(...step.response.messages);
        pending.push(...step.response.messages);
      },
    });

    for await (const part of result.stream) {
      switch (part.type) {
        case 'tool-call':
          await emit({
            type: 'tool.call',
            id: part.toolCallId,
            name: part.toolName,
            summary: summarizeArgs(part.toolName, part.input),
          });
          break;
        case 'tool-result':
          await emit({
            type: 'tool.result',
            id: part.toolCallId,
            name: part.toolName,
            ...summarizeResult(part.toolName, part.output),
          });
          break;
        case 'tool-error':
          await emit({
            type: 'tool.result',
            id: part.toolCallId,
            name: part.toolName,
            ok: false,
            summary: oneLine(errorMessage(part.error)),
          });
          break;
        case 'finish-step': {
          stepCount++;
          const step = tokenUsage(part.usage);
          await emit({
            type: 'model.step',
            step: stepCount,
            finishReason: part.finishReason,
            usage: step,
          });
          break;
        }
        case 'finish':
          finished = true;
          break;
        case 'error':
          streamError ??= part.error;
          break;
        default:
          break;
      }
    }
    if (streamError !== undefined || !finished) {
      return { kind: 'failed', error: streamError ?? abortSignal.reason };
    }
    const finalStep = await result.finalStep;
    return {
      kind: 'finished',
      finishReason: finalStep.finishReason,
      text: finalStep.text,
      toolCalls: finalStep.toolCalls.length,
    };
  };

  try {
    if (overBudget()) throw costError();
    let recoveredAtStep = -1;
    let end: SegmentEnd;
    for (;;) {
      end = await runSegment();
      if (signal.aborted) throw abortError(signal.reason);
      throwIfSinkFailed();
      if (timedOut) break;
      if (end.kind === 'finished' || !isContextOverflow(end.error)) break;
      // Refused for its length: compact and send the same step again, once.
      if (!(input.context?.managed ?? true) || recoveredAtStep === stepCount) break;
      recoveredAtStep = stepCount;
      context.append(pending);
      pending = [];
      let recovery: Compaction | undefined;
      try {
        recovery = await context.recover(end.error, abortSignal);
      } catch (error) {
        end = { kind: 'failed', error };
        break;
      }
      if (!recovery) break;
      await compacted(recovery);
      throwIfSinkFailed();
    }

    clearTimeout(timer);
    if (timedOut && end.kind === 'failed') {
      throw new BudgetExceededError(
        'time',
        `the turn ran out of its ${formatDuration(budgets.timeoutMs)} time budget; ` +
          `raise ${BUDGET_SETTINGS.time} or split the task`,
        partial(),
      );
    }
    if (end.kind === 'failed') {
      const error = end.error;
      if (isContextOverflow(error)) throw overflowError(error, input.model, context);
      throw classifyModelError(error, input.model);
    }
    if (end.finishReason === 'length') {
      throw new BudgetExceededError(
        'outputTokens',
        `the model's reply reached the ${context.outputTokens}-token output limit before it ` +
          `finished; raise ${BUDGET_SETTINGS.outputTokens} or ask for a smaller change`,
        partial(),
      );
    }
    // Tool calls in the last step mean the loop stopped on a budget, not on an answer.
    if (end.toolCalls > 0 && overBudget()) throw costError();
    if (end.toolCalls > 0 && stepCount >= budgets.maxSteps) {
      throw new BudgetExceededError(
        'steps',
        `the turn used its ${budgets.maxSteps} steps without finishing; ` +
          `raise ${BUDGET_SETTINGS.steps} or split the task`,
        partial(),
      );
    }
    const turn = partial();
    return { summary: end.text.trim(), ...turn, finishReason: end.finishReason };
  } catch (error) {
    // The SDK rejects its result promises with the abort reason; report the cause instead.
    if (signal.aborted) throw abortError(signal.reason);
    throwIfSinkFailed();
    throw error;
  } finally {
    clearTimeout(timer);
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
