// Route schemas in zod: the one source of each route's validation, its handler's types and the
// OpenAPI document. A refused request leaves through the one error map (errors.ts) with
// Errand's codes and a message naming the field; Fastify's own validation messages never do.
// Responses are documented, not serialized through the schemas: JSON.stringify stays the
// only work per response, as it was before schemas (bench/README.md measures why it matters).
import type { FastifySchemaCompiler } from 'fastify';
import { z } from 'zod';
import { KEY_LIFETIME_HOURS, keyProblem } from '../idempotency/keys.ts';
import { refusal } from '../validation.ts';
import { JOB_STATUSES } from '../words.ts';

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
// Shared pieces of the documented responses (the Error body and error responses: src/responses.ts).

const isoTime = z.iso.datetime();

const tokenCount = (what: string) => z.number().int().min(0).describe(what);

/**
 * What model calls used and cost (src/jobs/usage.ts). Inline in the job record: the document
 * keeps to the published one's components.
 */
const usageRecord = z
  .object({
    inputTokens: tokenCount('Input tokens, cached ones included.'),
    outputTokens: tokenCount('Output tokens.'),
    cacheReadTokens: tokenCount(
      "Of the input tokens, those read from the provider's prompt cache.",
    ),
    cacheWriteTokens: tokenCount(
      "Of the input tokens, those written to the provider's prompt cache.",
    ),
    costUsd: z
      .number()
      .nullable()
      .describe(
        "An estimate in US dollars from the model's list prices (cache reads and writes at their own prices); null when a price of the model is unknown, never a guess.",
      ),
  })
  .describe('Tokens used by model calls, and their estimated cost.');

export const jobRecord = z
  .object({
    id: z.string().describe('The job id (job_ and 20 characters).'),
    status: z
      .enum(JOB_STATUSES)
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
      .describe(
        "The pull request once one exists; it stays set afterwards. On a plain git remote, Errand's review page: its link carries the token that opens the page without a key (until the job is archived), so share it only with the job's readers.",
      ),
    createdAt: isoTime,
    archivedAt: isoTime.nullable(),
    projectId: z.string(),
    branch: z.string().describe('The work branch the agent commits to.'),
    error: z.string().nullable().describe('Why the last turn failed, when it did.'),
    turns: z.number().int().describe('How many prompts the job has received.'),
    usage: usageRecord.describe(
      "What the job's turns used of the model, summed; costUsd is null when any turn's is.",
    ),
    origin: z
      .object({
        forge: z.enum(['github', 'gitlab', 'gitea']),
        number: z.number().int().describe('The issue number (GitLab: its iid).'),
        url: z.string().describe("The issue's page."),
        title: z.string().describe("The issue's title when the job was made."),
      })
      .nullable()
      .optional()
      .describe(
        'The forge issue the job was made from (a labelled issue, or a mention in one); null for jobs made otherwise.',
      ),
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
