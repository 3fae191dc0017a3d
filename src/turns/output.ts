// The value of a turn given an output schema (docs/structured-output.md), from Errand's own
// agent or, for a turn retried after its push, from what landed: asked of the job's model once
// the work is done, with the turn's conversation; still invalid after the retry, the turn fails.
import type { LanguageModel, ModelMessage } from 'ai';
import { jobHistory } from '../agent/conversation.ts';
import { ModelError } from '../agent/model-errors.ts';
import type { ModelRegistry } from '../agent/models.ts';
import { structuredOutput } from '../agent/structured-output.ts';
import type { Config } from '../config.ts';
import type { Emit } from '../events/catalog.ts';
import { invalidOutputMessage, outputSchemaOf } from '../jobs/output-schema.ts';
import { TurnFailedError, type TurnInput } from '../jobs/runner.ts';
import type { TokenUsage } from '../jobs/usage.ts';
import type { Metrics } from '../metrics/metrics.ts';

/**
 * The turn's value, undefined for a turn without a schema. `turnMessages`: the turn's part of
 * the conversation; `steps`: its model steps so far (the calls here are the next ones);
 * `asked`: the model, secrets scrubbed, and the system prompt.
 */
export async function turnOutput(
  deps: { config: Config; models: ModelRegistry; metrics: Metrics },
  input: TurnInput,
  turnMessages: unknown[],
  steps: number,
  emit: Emit,
  asked: { model: LanguageModel; system: string },
): Promise<
  { output: { value: unknown }; usage: TokenUsage; messages: ModelMessage[] } | undefined
> {
  const { job, turn, signal } = input;
  const schema = outputSchemaOf(turn);
  if (!schema) return undefined;
  const { config, models, metrics } = deps;
  let step = steps;
  const structured = await structuredOutput({
    ...asked,
    messages: jobHistory([...input.earlier, { messages: turnMessages }]),
    schema,
    maxOutputTokens: config.agent.maxOutputTokens,
    maxRetries: 3,
    signal,
    onCall: (tokens) => {
      const usage = models.usage(job.model, tokens);
      metrics.modelStep(job.model, usage);
      return emit('model.step', { step: ++step, usage });
    },
  }).catch((err: unknown) => {
    if (err instanceof ModelError) metrics.modelError(job.model);
    throw err;
  });
  if (!structured.check.ok)
    throw new TurnFailedError(invalidOutputMessage(structured.check.problems));
  const { usage, messages } = structured;
  return { output: { value: structured.check.value }, usage, messages };
}
