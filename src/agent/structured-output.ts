// The value of a turn given an output schema (docs/structured-output.md), from Errand's own
// agent: once its tool loop has answered, one more model call asks for the result in the
// provider's structured output (OpenAI's `response_format: json_schema`, Anthropic's
// `output_config.format` or its forced JSON tool, as the AI SDK chooses for the model), the
// answer checked against the schema here; an invalid one is told its errors and asked once more.
import {
  generateText,
  jsonSchema,
  type LanguageModel,
  type LanguageModelUsage,
  type ModelMessage,
  NoObjectGeneratedError,
  Output,
  type SystemModelMessage,
} from 'ai';
import {
  checkOutput,
  checkOutputText,
  type OutputCheck,
  outputRequest,
  retryPrompt,
} from '../jobs/output-schema.ts';
import { addTokens, NO_TOKENS, type TokenUsage } from '../jobs/usage.ts';
import { tokenUsage } from './conversation.ts';
import { classifyModelError } from './model-errors.ts';

export interface StructuredOutputInput {
  model: LanguageModel;
  system: string | SystemModelMessage;
  /** The conversation as the loop left it: the job's history and this turn, answered. */
  messages: ModelMessage[];
  schema: Record<string, unknown>;
  maxOutputTokens: number;
  maxRetries: number;
  signal: AbortSignal;
  /** Told of each model call: its usage, for the turn's `model.step` events and spend. */
  onCall: (usage: TokenUsage) => Promise<void> | void;
}

export interface StructuredOutput {
  /** The last answer checked: valid, or what is wrong with it after the retry. */
  check: OutputCheck;
  /** The exchange, for the turn's stored conversation: the requests and the answers. */
  messages: ModelMessage[];
  usage: TokenUsage;
}

/** Where the value sits when the schema's root is not an object (providers want one). */
const WRAPPED = 'value';

/**
 * The schema the provider is sent: the client's when its root is an object, else the client's
 * as the one property of an object (its `$defs` stay at the root, so `#/$defs/...` holds).
 */
function providerSchema(schema: Record<string, unknown>): {
  schema: Record<string, unknown>;
  wrapped: boolean;
} {
  if (schema.type === 'object') return { schema, wrapped: false };
  const { $defs, $schema: _draft, ...rest } = schema;
  return {
    schema: {
      type: 'object',
      properties: { [WRAPPED]: rest },
      required: [WRAPPED],
      additionalProperties: false,
      ...($defs !== undefined ? { $defs } : {}),
    },
    wrapped: true,
  };
}

/** Asks the model for the turn's value, and once more with the errors when it is invalid. */
export async function structuredOutput(input: StructuredOutputInput): Promise<StructuredOutput> {
  const sent = providerSchema(input.schema);
  const exchange: ModelMessage[] = [{ role: 'user', content: outputRequest(input.schema) }];
  let usage: TokenUsage = { ...NO_TOKENS };
  let check: OutputCheck = { ok: false, problems: 'no answer' };
  for (let attempt = 1; attempt <= 2; attempt++) {
    const answer = await ask(input, sent.schema, [...input.messages, ...exchange]);
    usage = addTokens(usage, answer.usage);
    await input.onCall(answer.usage);
    // An empty answer is still a turn of the conversation: vendors refuse two user turns in a row.
    exchange.push({ role: 'assistant', content: answer.text || '(no answer)' });
    check = checkAnswer(input.schema, answer.text, sent.wrapped);
    if (check.ok) break;
    if (attempt === 1) exchange.push({ role: 'user', content: retryPrompt(check.problems) });
  }
  return { check, messages: exchange, usage };
}

/** One structured call: the answer's text (JSON, unless the model failed to give it) and usage. */
async function ask(
  input: StructuredOutputInput,
  schema: Record<string, unknown>,
  messages: ModelMessage[],
): Promise<{ text: string; usage: TokenUsage }> {
  try {
    const result = await generateText({
      model: input.model,
      instructions: input.system,
      messages,
      output: Output.object({ schema: jsonSchema(schema), name: 'output' }),
      maxOutputTokens: input.maxOutputTokens,
      maxRetries: input.maxRetries,
      abortSignal: input.signal,
      // OpenAI's strict mode takes only a subset of JSON Schema (every property required, no
      // extra ones): a client's schema is sent as it is, and checked here.
      providerOptions: { openai: { strictJsonSchema: false } },
    });
    return { text: result.text, usage: tokenUsage(result.usage) };
  } catch (err) {
    // The SDK could not parse the answer as JSON: it is checked, and refused, as any other.
    if (NoObjectGeneratedError.isInstance(err)) {
      return { text: err.text ?? '', usage: usageOf(err.usage) };
    }
    if (input.signal.aborted) throw err;
    throw classifyModelError(err, input.model);
  }
}

function usageOf(usage: LanguageModelUsage | undefined): TokenUsage {
  return usage ? tokenUsage(usage) : { ...NO_TOKENS };
}

function checkAnswer(schema: Record<string, unknown>, text: string, wrapped: boolean): OutputCheck {
  if (!wrapped) return checkOutputText(schema, text);
  const outer = checkOutputText({ type: 'object', required: [WRAPPED] }, text);
  if (!outer.ok) return outer;
  return checkOutput(schema, (outer.value as Record<string, unknown>)[WRAPPED]);
}
