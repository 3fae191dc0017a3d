// Best-of-N on create (docs/eval.md): how many attempts a job's first turn makes at once, with
// which agents, and the check command that judges them. The fields are the API's and the
// dashboard's; the check here refuses, when the request arrives, an agent that could not run.
import { z } from 'zod';
import type { BestOf, ProjectRow, TurnMode } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { isValidModelId } from '../projects/repository.ts';
import { ENGINE_NAMES } from '../records/project.ts';
import { checkMode, checkModel } from './accept.ts';
import type { JobsContext } from './context.ts';

/** The most attempts one turn makes. */
const MAX_ATTEMPTS = 4;

/** The longest check command, in characters. */
const MAX_CHECK_COMMAND = 4000;

const agentField = z
  .strictObject(
    {
      engine: z
        .enum(ENGINE_NAMES, { error: `"engine" must be one of ${ENGINE_NAMES.join(', ')}` })
        .optional()
        .describe("The agent that makes the attempt; else the project's engine."),
      model: z
        .string({ error: '"model" must be a string' })
        .refine(isValidModelId, {
          error: '"model" must look like provider:model, e.g. anthropic:claude-sonnet-4-5',
        })
        .optional()
        .describe("The model it runs on (provider:model); else the job's model."),
    },
    { error: 'an agent must be an object with "engine" and/or "model"' },
  )
  .describe('An agent of the attempts: an engine and a model, each optional.');

export const attemptsField = z
  .strictObject(
    {
      count: z
        .number({ error: `"count" must be a whole number from 1 to ${MAX_ATTEMPTS}` })
        .int({ error: `"count" must be a whole number from 1 to ${MAX_ATTEMPTS}` })
        .min(1, { error: `"count" must be a whole number from 1 to ${MAX_ATTEMPTS}` })
        .max(MAX_ATTEMPTS, { error: `"count" must be a whole number from 1 to ${MAX_ATTEMPTS}` })
        .describe(`How many attempts run at once, 1 to ${MAX_ATTEMPTS}.`),
      agents: z
        .array(agentField, { error: '"agents" must be an array' })
        .min(1, { error: '"agents" must name at least one agent when given' })
        .max(MAX_ATTEMPTS, { error: `"agents" may name at most ${MAX_ATTEMPTS}` })
        .optional()
        .describe(
          "The agents to use, in turn: attempt i takes agents[(i - 1) mod length]; else the project's engine and the job's model for all.",
        ),
    },
    { error: '"attempts" must be an object with "count" and optionally "agents"' },
  )
  .refine((attempts) => (attempts.agents?.length ?? 0) <= attempts.count, {
    error: '"attempts.agents" may not name more agents than "count"',
  })
  .optional()
  .describe(
    "Best-of-N (docs/eval.md): the first turn runs this many attempts in parallel, each on a branch of its own; each finished attempt runs the check command, and the winner (the first to pass, then the cheapest, then the smallest diff) becomes the job's branch and pull request. The job's budget covers all of them.",
  );

export const checkCommandField = z
  .string({ error: '"checkCommand" must be a string' })
  .max(MAX_CHECK_COMMAND, {
    error: `"checkCommand" may be at most ${MAX_CHECK_COMMAND} characters`,
  })
  .refine((command) => command.trim().length > 0, {
    error: '"checkCommand" must contain at least one non-space character',
  })
  .optional()
  .describe(
    "The command that judges this job's attempts instead of the project's checkCommand: run by sh in the sandbox, with the project's environment, on each attempt's finished checkout; exit 0 passes.",
  );

/** The agent attempt `n` (from 1) of `bestOf` takes, its engine and model filled in. */
export function attemptAgent(
  bestOf: BestOf,
  n: number,
  defaults: { engine: ProjectRow['engine']; model: string },
): { engine: ProjectRow['engine']; model: string } {
  const agent = bestOf.agents.length > 0 ? bestOf.agents[(n - 1) % bestOf.agents.length] : {};
  return { engine: agent?.engine ?? defaults.engine, model: agent?.model ?? defaults.model };
}

/**
 * Refuses attempts that could not run: in a mode other than code (only code turns commit), or
 * with an agent whose engine cannot hold its model, a model the server cannot use, or a model
 * a budget could not price.
 */
export function checkBestOf(
  ctx: JobsContext,
  project: ProjectRow,
  model: string,
  mode: TurnMode,
  bestOf: BestOf,
): void {
  if (mode !== 'code')
    throw new AppError('bad_request', `"attempts" needs mode "code"; this job's mode is ${mode}`);
  // The job's own model, which its follow-ups run on, is one the server can use.
  const usable = ctx.models.check(model);
  if (!usable.ok) throw new AppError('model_unavailable', usable.message);
  for (let n = 1; n <= Math.min(bestOf.count, Math.max(bestOf.agents.length, 1)); n++) {
    const agent = attemptAgent(bestOf, n, { engine: project.engine, model });
    const as = { ...project, engine: agent.engine };
    checkMode(as, mode);
    checkModel(ctx, as, agent.model);
  }
}
