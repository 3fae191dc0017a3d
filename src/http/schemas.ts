// Route schemas in zod: the one source of each route's validation, its handler's types and the
// OpenAPI document. A refused request leaves through the one error map (errors.ts) with
// Errand's codes and a message naming the field; Fastify's own validation messages never do.
// Responses are documented, not serialized through the schemas: JSON.stringify stays the
// only work per response, as it was before schemas (bench/README.md measures why it matters).
import type { FastifySchemaCompiler } from 'fastify';
import { z } from 'zod';
import { AppError, type ErrorCode } from '../errors.ts';
import { KEY_LIFETIME_HOURS, keyProblem } from '../idempotency/keys.ts';
import { isValidModelId, isValidRef } from '../projects/repository.ts';

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
export function refusalMessage(issue: z.core.$ZodIssue, part: string): string {
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

/**
 * Fastify's validator for zod schemas. The error is an AppError, which Fastify passes to the
 * error handler as it is, so the response carries Errand's code and message.
 */
export const validatorCompiler: FastifySchemaCompiler<z.ZodType> =
  ({ schema, httpPart }) =>
  (data) => {
    const result = schema.safeParse(data);
    if (result.success) return { value: result.data };
    return { error: refusal(schema, httpPart ?? 'body', result.error) };
  };

/** Responses are sent as JSON.stringify would, as they were before route schemas. */
export function serializerCompiler(): (data: unknown) => string {
  return (data) => JSON.stringify(data);
}

// ---------------------------------------------------------------------------------------------
// Shared pieces of the documented responses.

const isoTime = z.iso.datetime();

export const errorBody = z
  .object({
    error: z.string().describe('What went wrong, for a person.'),
    code: z
      .string()
      .describe(
        'A stable machine code: bad_request, invalid_json, invalid_prompt, model_unavailable, unauthorized, forbidden, not_found, conflict, idempotency_key_in_flight, idempotency_key_reused, payload_too_large, unsupported_media_type, rate_limited, unavailable, internal, …',
      ),
    requestId: z.string().describe('Also in the X-Request-Id header; the server log has it.'),
  })
  .meta({
    id: 'Error',
    description: 'Every error: a readable message, a stable code and the request id.',
  });

/**
 * A documented JSON response. The description goes beside the schema, not on it, so that a
 * shared schema (AgentJob, Error) stays one component that responses refer to.
 */
export function json<T extends z.ZodType>(description: string, schema: T) {
  return { description, content: { 'application/json': { schema } } };
}

/** Error responses by status, each described; a route picks the ones it can return. */
const errorResponses = {
  400: 'Bad input: the message names the field (codes bad_request, invalid_json, invalid_prompt, model_unavailable).',
  401: 'Missing, malformed, unknown or revoked API key (WWW-Authenticate: Bearer).',
  403: 'The key is not valid for this project, or the route needs an admin key.',
  404: 'Not found, or of another project.',
  409: 'The job is archived (conflict), or a request with the same Idempotency-Key is still being processed (idempotency_key_in_flight: retry it later).',
  413: 'The request body is too large.',
  415: 'The request body is not JSON.',
  422: 'The Idempotency-Key was used for another request (another body, job or operation) in the last 24 hours (idempotency_key_reused).',
  429: 'Rate limited; Retry-After says when to try again.',
  503: 'The database is unavailable or the server is stopping; Retry-After says when to try again.',
} as const;

export function errors<S extends keyof typeof errorResponses>(
  ...statuses: S[]
): Record<S, ReturnType<typeof json<typeof errorBody>>> {
  const out = {} as Record<S, ReturnType<typeof json<typeof errorBody>>>;
  for (const status of statuses) out[status] = json(errorResponses[status], errorBody);
  return out;
}

export const jobRecord = z
  .object({
    id: z.string().describe('The job id (job_ and 20 characters).'),
    status: z
      .enum(['active', 'completed', 'failed', 'archived'])
      .describe(
        'active: a turn is queued or running; completed: the last turn finished; failed: it failed (see error); archived: terminal.',
      ),
    source: z.object({
      repository: z
        .string()
        .describe(
          "The project's repository when the job was created, as a URL (file:// for a local repository, ssh:// for an scp-like address).",
        ),
      ref: z.string().describe('Git branch the agent is working on (the work branch, as branch).'),
      baseRef: z.string().describe('The branch, tag or commit the job started from.'),
    }),
    model: z.string().describe('The model the job runs on (provider:model).'),
    prLink: z
      .string()
      .nullable()
      .describe('The pull request (or review page) once one exists; it stays set afterwards.'),
    createdAt: isoTime,
    archivedAt: isoTime.nullable(),
    projectId: z.string(),
    branch: z.string().describe('The work branch the agent commits to.'),
    error: z.string().nullable().describe('Why the last turn failed, when it did.'),
    turns: z.number().int().describe('How many prompts the job has received.'),
    updatedAt: isoTime,
  })
  .meta({ id: 'AgentJob', description: 'An agent job.' });

/** The Idempotency-Key header of create and message (src/idempotency/keys.ts). */
export const idempotencyHeaders = z.object({
  'idempotency-key': z
    .string()
    .superRefine((value, check) => {
      const problem = keyProblem(value);
      if (problem !== undefined) check.addIssue({ code: 'custom', message: problem });
    })
    .optional()
    .describe(
      `Idempotency-Key: makes a retry safe. The same key with the same request within ${KEY_LIFETIME_HOURS} hours gets the first response again (status and body, with Idempotent-Replayed: true) and changes nothing; with another request it is a 422, and while the first is still being processed a 409. Keys are per project: 1 to 255 printable ASCII characters, quoted ("...") or bare. A request that fails stores nothing.`,
    ),
});

export const projectParams = z.object({
  projectId: z.string().describe('The project id (prj_ and 20 characters).'),
});

export const jobParams = z.object({
  projectId: z.string().describe('The project id (prj_ and 20 characters).'),
  id: z.string().describe('The job id (job_ and 20 characters).'),
});

/** The prompt of create and message. */
function promptField(maxChars: number) {
  return z
    .string({
      error: (issue) =>
        issue.input === undefined ? '"prompt" is required' : '"prompt" must be a string',
    })
    .max(maxChars, {
      error: (issue) =>
        `"prompt" is ${String(issue.input).length} characters; the maximum is ${maxChars}`,
    })
    .refine((prompt) => prompt.trim().length > 0, {
      error: '"prompt" must contain at least one non-space character',
    })
    .describe(`The instruction for the agent: 1 to ${maxChars} characters, not only spaces.`);
}

const bodyType = {
  error: (issue: z.core.$ZodRawIssue) =>
    issue.code === 'invalid_type'
      ? 'request body must be a JSON object with a "prompt" string'
      : undefined,
};

/** The body of a follow-up message: one prompt, nothing else. */
export function promptBody(maxChars: number) {
  return refusedAs(
    z.strictObject({ prompt: promptField(maxChars) }, bodyType),
    'invalid_prompt',
    'prompt',
  );
}

/** The body of a create: the prompt, and optionally the model and the ref to start from. */
export function createJobBody(maxChars: number) {
  return refusedAs(
    z.strictObject(
      {
        prompt: promptField(maxChars),
        model: z
          .string({ error: '"model" must be a string' })
          .refine(isValidModelId, {
            error: '"model" must look like provider:model, e.g. anthropic:claude-sonnet-4-5',
          })
          .optional()
          .describe(
            "The model for this job (provider:model), one the server can use; else the project's default.",
          ),
        baseRef: z
          .string({ error: '"baseRef" must be a string' })
          .refine(isValidRef, {
            error: (issue) =>
              `invalid "baseRef": '${String(issue.input)}' is not a valid git ref name`,
          })
          .optional()
          .describe(
            "The branch, tag or commit to start from; else the project's ref. One that does not exist fails the job when its turn starts.",
          ),
      },
      bodyType,
    ),
    'invalid_prompt',
    'prompt',
  );
}

const LIMIT_1_100 = '"limit" must be an integer from 1 to 100';

/** The query of a paged list: `limit` (1 to 100, default 20) and the previous page's cursor. */
export function pageQuery(items: string) {
  return z.object({
    // z.coerce.number is Number(): '', ' ' and a repeated parameter (an array) are refused.
    limit: z.coerce
      .number({ error: LIMIT_1_100 })
      .int({ error: LIMIT_1_100 })
      .min(1, { error: LIMIT_1_100 })
      .max(100, { error: LIMIT_1_100 })
      .default(20)
      .describe(`How many ${items} per page, 1 to 100.`),
    cursor: z
      .string({ error: '"cursor" must be given once' })
      .optional()
      .describe("The previous page's nextCursor."),
  });
}
