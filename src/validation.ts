// A refused input as Errand says it: a zod schema's first problem as an AppError whose message
// names the field as the client wrote it, with the code the schema was marked with. One wording
// for the API's route schemas, the dashboard's forms and the domain's input schemas.
import type { z } from 'zod';
import { AppError, type ErrorCode } from './errors.ts';

/** The code a schema's refusals of one field (and of the body's type) carry: the prompt's. */
const refusalCodes = new WeakMap<z.ZodType, { code: ErrorCode; field: string }>();

/**
 * Marks `schema` so that its refusals of `field`, or of the body as a whole, carry `code`;
 * other fields, and unknown ones, stay `bad_request`.
 */
export function refusedAs<T extends z.ZodType>(schema: T, code: ErrorCode, field: string): T {
  refusalCodes.set(schema, { code, field });
  return schema;
}

/** `prompt`, `githubApp.appId`, `items[2]`: the field as a client wrote it. */
function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out = out ? `${out}.${String(key)}` : String(key);
  }
  return out;
}

const PARTS: Record<string, string> = {
  body: 'request body',
  querystring: 'query string',
  params: 'path',
  headers: 'headers',
};

/** The message of one refusal: a schema's own message names its field; others get it here. */
function refusalMessage(issue: z.core.$ZodIssue, part: string): string {
  const field = fieldPath(issue.path);
  if (issue.code === 'unrecognized_keys') {
    const names = issue.keys.map((key) => `"${field ? `${field}.${key}` : key}"`).join(', ');
    return `unknown field${issue.keys.length > 1 ? 's' : ''} ${names}; Errand does not accept ${issue.keys.length > 1 ? 'them' : 'it'}`;
  }
  if (issue.message.startsWith('"') || issue.message.startsWith('request body')) {
    return issue.message;
  }
  return field
    ? `invalid "${field}": ${issue.message}`
    : `invalid ${PARTS[part] ?? part}: ${issue.message}`;
}

/** The AppError for a failed parse: the first problem, in the order the schema checks. */
export function refusal(schema: z.ZodType, part: string, error: z.ZodError): AppError {
  const issue = error.issues[0];
  if (!issue) return new AppError('bad_request', `invalid ${PARTS[part] ?? part}`);
  const marked = refusalCodes.get(schema);
  const first = issue.path[0];
  const code =
    marked && issue.code !== 'unrecognized_keys' && (first === undefined || first === marked.field)
      ? marked.code
      : 'bad_request';
  return new AppError(code, refusalMessage(issue, part));
}
