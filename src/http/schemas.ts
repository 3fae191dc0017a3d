// Route schemas in zod: the one source of each route's validation, its handler's types and the
// OpenAPI document; the records the routes answer with are src/records/'s. A refused request leaves through the one error map (errors.ts) with
// Errand's codes and a message naming the field; Fastify's own validation messages never do.
// Responses are documented, not serialized through the schemas: JSON.stringify stays the
// only work per response, as it was before schemas (bench/README.md measures why it matters).
import type { FastifySchemaCompiler } from 'fastify';
import { z } from 'zod';
import { KEY_LIFETIME_HOURS, keyProblem } from '../idempotency/keys.ts';
import { refusal } from '../validation.ts';

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
