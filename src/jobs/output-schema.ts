// Structured output (docs/structured-output.md): the JSON Schema a client gives a turn, checked
// when the request comes (an object, at most 16 KB, JSON Schema 2020-12 that compiles, only
// references inside itself: nothing is ever fetched), and the value a turn's agent produced
// checked against it, with errors short enough to tell a model and a client.
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { isRecord } from '../json.ts';

/** The largest output schema, as JSON, in bytes. */
export const MAX_OUTPUT_SCHEMA_BYTES = 16 * 1024;

const DRAFT_2020_12 = 'https://json-schema.org/draft/2020-12/schema';

/** At most this many of a value's problems are told, each cut to a line. */
const MAX_PROBLEMS = 10;
const MAX_PROBLEM_CHARS = 200;

/** A new validator for each schema: an instance keeps the `$id`s it compiled, and refuses them twice. */
function compile(schema: Record<string, unknown>): ValidateFunction {
  // Not strict: a schema written for another validator (unknown keywords, formats) still
  // works, its unknown words taken as annotations. No loadSchema: a reference is never fetched.
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  return ajv.compile(schema);
}

/**
 * Why `schema` cannot be a turn's output schema, in the words of a refused request; undefined
 * when it can.
 */
export function outputSchemaProblem(schema: unknown): string | undefined {
  if (!isRecord(schema)) return 'must be a JSON Schema object';
  const bytes = Buffer.byteLength(JSON.stringify(schema));
  if (bytes > MAX_OUTPUT_SCHEMA_BYTES) {
    return `is ${bytes} bytes as JSON; the maximum is ${MAX_OUTPUT_SCHEMA_BYTES}`;
  }
  if (schema.$schema !== undefined && schema.$schema !== DRAFT_2020_12) {
    return `names another draft in "$schema": only JSON Schema 2020-12 (${DRAFT_2020_12}) is taken; leave "$schema" out or name that one`;
  }
  const remote = remoteReference(schema);
  if (remote !== undefined) {
    return `refers to ${JSON.stringify(remote.slice(0, 100))}: only references inside the schema ("#...") are allowed; nothing is fetched`;
  }
  try {
    compile(schema);
  } catch (err) {
    return `is not a valid JSON Schema 2020-12: ${cut(err instanceof Error ? err.message : String(err))}`;
  }
  return undefined;
}

/** The first `$ref` or `$dynamicRef` (anywhere in the schema) that does not start with `#`. */
function remoteReference(value: unknown): string | undefined {
  if (Array.isArray(value)) {
    for (const item of value) {
      const found = remoteReference(item);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (!isRecord(value)) return undefined;
  for (const [key, field] of Object.entries(value)) {
    if ((key === '$ref' || key === '$dynamicRef') && typeof field === 'string') {
      if (!field.startsWith('#')) return field;
      continue;
    }
    const found = remoteReference(field);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** A value checked against an output schema: valid, or what is wrong with it. */
export type OutputCheck = { ok: true; value: unknown } | { ok: false; problems: string };

/** Checks `value` against `schema` (one outputSchemaProblem accepted). */
export function checkOutput(schema: Record<string, unknown>, value: unknown): OutputCheck {
  const validate = compile(schema);
  if (validate(value)) return { ok: true, value };
  return { ok: false, problems: describeErrors(validate.errors ?? []) };
}

/**
 * Checks a final answer given as text: JSON (alone, or in one fenced block), valid against
 * `schema`. For the engines with no structured output of their own, and models that answered
 * in text.
 */
export function checkOutputText(schema: Record<string, unknown>, text: string): OutputCheck {
  const json = jsonOf(text);
  if (json === undefined) {
    return { ok: false, problems: 'the answer is not JSON: it must be only the JSON value' };
  }
  return checkOutput(schema, json.value);
}

/** The JSON value of a text that is only one, possibly inside a ``` fence; undefined if none. */
function jsonOf(text: string): { value: unknown } | undefined {
  const trimmed = text.trim();
  const fenced = /^```[a-zA-Z]*\n([\s\S]*)\n```$/.exec(trimmed);
  try {
    return { value: JSON.parse(fenced?.[1] ?? trimmed) as unknown };
  } catch {
    return undefined;
  }
}

/** A value's problems, one per line, as many as MAX_PROBLEMS, each cut. */
function describeErrors(errors: readonly ErrorObject[]): string {
  const lines = errors
    .slice(0, MAX_PROBLEMS)
    .map((e) => cut(`${e.instancePath || '(the value)'}: ${e.message ?? e.keyword}`));
  if (errors.length > MAX_PROBLEMS) lines.push(`and ${errors.length - MAX_PROBLEMS} more`);
  return lines.join('\n');
}

function cut(text: string): string {
  return text.length > MAX_PROBLEM_CHARS ? `${text.slice(0, MAX_PROBLEM_CHARS - 1)}…` : text;
}

/** What a model is told when its answer did not satisfy the schema, to try once more. */
export function retryPrompt(problems: string): string {
  return `Your answer does not satisfy the required JSON Schema:\n${problems}\nAnswer again with only a JSON value valid against the schema.`;
}

/** What a model is asked, once its work is done, for the turn's value. */
export function outputRequest(schema: Record<string, unknown>): string {
  return `Now give the result of this task as a JSON value valid against this JSON Schema (2020-12). Answer with only the JSON value.\n${JSON.stringify(schema)}`;
}

/** The output schema a turn was accepted with; undefined for a turn without one. */
export function outputSchemaOf(turn: {
  output_schema: unknown;
}): Record<string, unknown> | undefined {
  return isRecord(turn.output_schema) ? turn.output_schema : undefined;
}

/** The error of a turn whose answer was still invalid after its retry. */
export function invalidOutputMessage(problems: string): string {
  return `the agent's answer is not valid against the outputSchema, after one retry:\n${problems}`;
}
/**
 * What an engine is told with its prompt (docs/structured-output.md): its final message is the
 * turn's value, as JSON valid against the schema.
 */
export function outputNote(schema: Record<string, unknown>): string {
  return `When you have finished, your final message must be only a JSON value (no other text, no code fence) valid against this JSON Schema (2020-12); it is the result of this task:\n${JSON.stringify(schema)}`;
}
