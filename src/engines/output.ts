// A coding CLI's turn given an output schema (docs/structured-output.md): the engine's value
// (Claude Code's structured output, else its final message as JSON) checked against the schema;
// an invalid one is told its errors in a follow-up of the same engine session, once, and still
// invalid fails the turn with them.

import {
  checkOutput,
  checkOutputText,
  invalidOutputMessage,
  type OutputCheck,
  retryPrompt,
} from '../jobs/output-schema.ts';
import { TurnFailedError } from '../jobs/runner.ts';
import { addTokens } from '../jobs/usage.ts';
import type { TurnBudget } from './meter.ts';
import { type EngineTurnInput, type EngineTurnResult, runEngineTurn } from './run.ts';

/** The turn's value as the engine gave it, checked against `schema`. */
function checkEngineOutput(schema: Record<string, unknown>, result: EngineTurnResult): OutputCheck {
  return result.output
    ? checkOutput(schema, result.output.value)
    : checkOutputText(schema, result.summary);
}

/** A budget with what the first run spent added to it. */
function plus(budget: TurnBudget | undefined, costUsd: number): TurnBudget | undefined {
  return budget && { ...budget, spentUsd: budget.spentUsd + costUsd };
}

/**
 * Runs the engine's turn and, when it has an output schema, obtains a valid value: the first
 * run's summary stays the turn's (its account of the work), the usage is both runs'.
 */
export async function runEngineTurnWithOutput(
  input: EngineTurnInput,
): Promise<EngineTurnResult & { output?: { value: unknown } | undefined }> {
  const schema = input.outputSchema;
  const first = await runEngineTurn(input);
  if (!schema) return first;
  const checked = checkEngineOutput(schema, first);
  if (checked.ok) return { ...first, output: { value: checked.value } };
  // The follow-up resumes the engine's session (its state directory holds it).
  const spent = input.priced(first.usage).costUsd ?? 0;
  const again = await runEngineTurn({
    ...input,
    prompt: retryPrompt(checked.problems),
    // The session has them already.
    images: undefined,
    budget: plus(input.budget, spent),
    monthBudget: plus(input.monthBudget, spent),
  });
  const rechecked = checkEngineOutput(schema, again);
  if (!rechecked.ok) throw new TurnFailedError(invalidOutputMessage(rechecked.problems));
  return {
    summary: first.summary,
    usage: addTokens(first.usage, again.usage),
    output: { value: rechecked.value },
  };
}
