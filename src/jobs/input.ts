// What a client may send to create a job or follow one up: the prompt (and at creation the model
// and the ref to start from), checked by these schemas in the API's routes and the dashboard's
// forms alike, so both refuse with the same codes and words.
import { z } from 'zod';
import { jobMcpServersField } from '../projects/mcp-servers.ts';
import { isValidModelId, isValidRef } from '../projects/repository.ts';
import { JOB_MODES } from '../records/job.ts';
import { refusedAs } from '../validation.ts';
import { attachmentsField } from './attachments.ts';
import { attemptsField, checkCommandField } from './best-of.ts';
import { MAX_OUTPUT_SCHEMA_BYTES, outputSchemaProblem } from './output-schema.ts';

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

/** The mode of create and message (docs/modes.md). */
const modeField = z
  .enum(JOB_MODES, { error: `"mode" must be one of ${JOB_MODES.join(', ')}` })
  .optional()
  .describe(
    "What the turn may do: code (the default: change the repository, commit, push, open the pull request), ask (read-only: the answer is the turn's summary; nothing is committed or pushed), plan (read-only: the plan is the summary, and the job waits for approval).",
  );

/** The output schema of create and message (docs/structured-output.md). */
const outputSchemaField = z
  .record(z.string(), z.unknown(), { error: '"outputSchema" must be a JSON Schema object' })
  .superRefine((schema, check) => {
    const problem = outputSchemaProblem(schema);
    if (problem) check.addIssue({ code: 'custom', message: `"outputSchema" ${problem}` });
  })
  .optional()
  .describe(
    `A JSON Schema (2020-12, at most ${MAX_OUTPUT_SCHEMA_BYTES / 1024} KB, only references inside itself): the turn ends with the agent producing a value valid against it, the job's \`output\`. An answer still invalid after one retry fails the turn with the validation errors.`,
  );

/** A follow-up's prompt that approves the plan before it: `approve`, any case, spaces around. */
export function isApproval(prompt: string): boolean {
  return prompt.trim().toLowerCase() === 'approve';
}

const bodyType = {
  error: (issue: z.core.$ZodRawIssue) =>
    issue.code === 'invalid_type'
      ? 'request body must be a JSON object with a "prompt" string'
      : undefined,
};

/** The body of a follow-up message: its prompt, and its mode. */
export function promptBody(maxChars: number) {
  return refusedAs(
    z.strictObject(
      {
        prompt: promptField(maxChars).describe(
          `The instruction for the agent: 1 to ${maxChars} characters, not only spaces. \`approve\` (any case) after a plan carries the plan out.`,
        ),
        mode: modeField,
        outputSchema: outputSchemaField,
        attachments: attachmentsField,
      },
      bodyType,
    ),
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
        mode: modeField,
        outputSchema: outputSchemaField,
        attachments: attachmentsField,
        mcpServers: jobMcpServersField.optional(),
        attempts: attemptsField,
        checkCommand: checkCommandField,
      },
      bodyType,
    ),
    'invalid_prompt',
    'prompt',
  );
}
