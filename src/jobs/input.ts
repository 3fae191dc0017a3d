// What a client may send to create a job or follow one up: the prompt (and at creation the model
// and the ref to start from), checked by these schemas in the API's routes and the dashboard's
// forms alike, so both refuse with the same codes and words.
import { z } from 'zod';
import { isValidModelId, isValidRef } from '../projects/repository.ts';
import { refusedAs } from '../validation.ts';

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
