// The documented error responses every HTTP surface shares (the API's routes, the review page,
// /metrics): the Error body and the error responses by status, for the OpenAPI document. The
// body itself is written in one place, src/http/errors.ts.
import { z } from 'zod';
import { ERROR_CODES } from './errors.ts';

export const errorBody = z
  .object({
    error: z.string().describe('What went wrong, for a person.'),
    // The error map's codes (errors.ts): a code cannot be sent and be missing here.
    code: z.enum(ERROR_CODES).describe('A stable machine code.'),
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
  403: "The key is not valid for this project, or the route needs an admin key (forbidden); or the user lacks the route's role (viewer_required, member_required, maintainer_required, admin_required).",
  404: 'Not found, or of another project.',
  409: 'The job is archived (conflict), or a request with the same Idempotency-Key is still being processed (idempotency_key_in_flight: retry it later).',
  413: 'The request body is too large.',
  415: 'The request body is not JSON.',
  422: 'The Idempotency-Key was used for another request (another body, job or operation) in the last 24 hours (idempotency_key_reused).',
  429: "Rate limited (rate_limited), or the project's monthly budget is spent (budget_exhausted); Retry-After says when to try again.",
  502: "The project's forge refused the read (forge_failed): the message says what it answered and what to check; trying again does not help.",
  503: 'The database is unavailable or the server is stopping; Retry-After says when to try again.',
} as const;

export function errors<S extends keyof typeof errorResponses>(
  ...statuses: S[]
): Record<S, ReturnType<typeof json<typeof errorBody>>> {
  const out = {} as Record<S, ReturnType<typeof json<typeof errorBody>>>;
  for (const status of statuses) out[status] = json(errorResponses[status], errorBody);
  return out;
}
