// What one attempt of a best-of-N turn did, declared once (docs/eval.md): the job record's
// `attempts` (src/records/job.ts), the jobs.attempts column (migration 0033) and the typed
// client's type come from this schema. The turn pipeline writes it when the turn ends.
import { z } from 'zod';
import type { AttemptResult } from '../db/schema.ts';
import { ENGINE_NAMES } from './project.ts';

/** How an attempt ended: its check's verdict, or why there is none. */
export const ATTEMPT_OUTCOMES = Object.freeze([
  'passed',
  'failed',
  'unchecked',
  'no_changes',
  'error',
] as const);

export const attemptRecord = z
  .object({
    n: z.number().int().min(1).describe('Its number, from 1.'),
    engine: z.enum(ENGINE_NAMES).describe('The agent that made it.'),
    model: z.string().describe('The model it ran on (provider:model).'),
    branch: z.string().describe('The branch it worked on; pushed when it committed.'),
    outcome: z
      .enum(ATTEMPT_OUTCOMES)
      .describe(
        'passed or failed: what the check command said of its finished checkout; unchecked: no check command was set; no_changes: it changed nothing; error: it did not finish (see error).',
      ),
    check: z
      .object({
        exitCode: z
          .number()
          .int()
          .nullable()
          .describe('The check command exit code; null when it was stopped (time, memory).'),
        outputTail: z.string().describe("The last lines of the check's output, secrets removed."),
        durationMs: z.number().int().min(0),
      })
      .nullable()
      .describe('The check command run on its finished checkout; null when none ran.'),
    costUsd: z
      .number()
      .nullable()
      .describe("What its model calls cost, estimated; null when the model's prices are unknown."),
    diff: z
      .object({
        files: z.number().int().min(0),
        lines: z.number().int().min(0).describe('Lines added plus lines removed.'),
      })
      .describe('What its commit changed against the turn start.'),
    commitSha: z.string().nullable().describe('Its commit; null when it made none.'),
    error: z.string().nullable().describe('Why it did not finish, for an error.'),
    winner: z
      .boolean()
      .describe(
        "Whether it won (the first to pass, then the cheapest, then the smallest diff): its branch became the job's branch and pull request.",
      ),
  })
  .describe('One attempt of a best-of-N turn.');

// The column's type is this schema's shape: a row's attempts are sent as they are.
attemptRecord satisfies z.ZodType<AttemptResult>;
