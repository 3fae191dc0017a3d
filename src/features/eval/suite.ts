// An eval suite as POST /v2/admin/evals takes it (docs/eval.md): its schema, with the defaults
// filled in, and its check against the server before anything is written: each task's project
// found (by id, or as the one project with the task's repository), the principal a maintainer
// of it, and each agent able to run there as the job core's create would check it. A suite
// that could not run is refused when it arrives.
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import type { ProjectRow } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { isId } from '../../ids.ts';
import { checkBestOf } from '../../jobs/best-of.ts';
import { requireAccess } from '../../keys/access.ts';
import type { Principal } from '../../keys/service.ts';
import { isValidModelId } from '../../projects/repository.ts';
import { ENGINE_NAMES } from '../../records/project.ts';

const MAX_TASKS = 200;
const MAX_AGENTS = 8;
const MAX_REPEAT = 20;
const MAX_CONCURRENCY = 16;
const MAX_NAME_CHARS = 200;
const MAX_CHECK_CHARS = 4000;
const TASK_ID = /^[A-Za-z0-9._-]{1,100}$/;

const whole = (field: string, max: number) =>
  z
    .number({ error: `"${field}" must be a whole number from 1 to ${max}` })
    .int({ error: `"${field}" must be a whole number from 1 to ${max}` })
    .min(1, { error: `"${field}" must be a whole number from 1 to ${max}` })
    .max(max, { error: `"${field}" must be a whole number from 1 to ${max}` });

const text = (field: string, max: number) =>
  z
    .string({ error: `"${field}" must be a string of 1 to ${max} characters` })
    .max(max, { error: `"${field}" must be a string of 1 to ${max} characters` })
    .refine((value) => value.trim().length > 0, {
      error: `"${field}" must contain at least one non-space character`,
    });

function taskSchema(maxPromptChars: number) {
  return z
    .strictObject(
      {
        id: z
          .string({ error: '"id" must be a string' })
          .regex(TASK_ID, { error: '"id" must be 1 to 100 of A-Z a-z 0-9 . _ -' })
          .describe('The task’s name in the run, unique in the suite.'),
        project: z
          .string({ error: '"project" must be a project id' })
          .optional()
          .describe('The project it runs in (prj_…); or give `repository`.'),
        repository: z
          .string({ error: '"repository" must be a string' })
          .min(1, { error: '"repository" must not be empty' })
          .max(2000, { error: '"repository" may be at most 2000 characters' })
          .optional()
          .describe('The repository of the one project it runs in; or give `project`.'),
        ref: z
          .string({ error: '"ref" must be a string' })
          .min(1, { error: '"ref" must not be empty' })
          .max(255, { error: '"ref" may be at most 255 characters' })
          .optional()
          .describe("The ref its job starts from; else the project's."),
        prompt: text('prompt', maxPromptChars).describe('What the agent is asked to do.'),
        check: text('check', MAX_CHECK_CHARS).describe(
          'The shell command run in the sandbox on the finished branch, with the project’s environment; exit 0 passes.',
        ),
      },
      { error: 'a task must be an object with "id", "prompt", "check" and a project' },
    )
    .refine((task) => (task.project === undefined) !== (task.repository === undefined), {
      error: 'a task gives exactly one of "project" and "repository"',
    });
}

const agentSchema = z
  .strictObject(
    {
      engine: z
        .enum(ENGINE_NAMES, { error: `"engine" must be one of ${ENGINE_NAMES.join(', ')}` })
        .optional()
        .describe("The agent's engine; else each project's."),
      model: z
        .string({ error: '"model" must be a string' })
        .refine(isValidModelId, {
          error: '"model" must look like provider:model, e.g. anthropic:claude-sonnet-4-5',
        })
        .optional()
        .describe("The model it runs on (provider:model); else each project's."),
    },
    { error: 'an agent must be an object with "engine" and/or "model"' },
  )
  .describe('One agent of the matrix: an engine and a model, each optional.');

/** The body of POST /v2/admin/evals. */
export function suiteBody(maxPromptChars: number) {
  return z
    .strictObject(
      {
        name: text('name', MAX_NAME_CHARS).optional().describe('Its name; else "eval <date>".'),
        tasks: z
          .array(taskSchema(maxPromptChars), { error: '"tasks" must be an array of tasks' })
          .min(1, { error: '"tasks" must list at least one task' })
          .max(MAX_TASKS, { error: `"tasks" may list at most ${MAX_TASKS} tasks` })
          .describe(`The tasks, 1 to ${MAX_TASKS}.`),
        agents: z
          .array(agentSchema, { error: '"agents" must be an array of agents' })
          .min(1, { error: '"agents" must list at least one agent when given' })
          .max(MAX_AGENTS, { error: `"agents" may list at most ${MAX_AGENTS} agents` })
          .optional()
          .describe("The agents each task runs with; else one: each project's engine and model."),
        repeat: whole('repeat', MAX_REPEAT)
          .optional()
          .describe('How many times each task runs with each agent; 1 when not given.'),
        concurrency: whole('concurrency', MAX_CONCURRENCY)
          .optional()
          .describe('How many of its jobs run at once, at most; 2 when not given.'),
      },
      {
        error: (issue) =>
          issue.code === 'invalid_type' ? 'request body must be a JSON object' : undefined,
      },
    )
    .superRefine((suite, ctx) => {
      const seen = new Set<string>();
      suite.tasks.forEach((task, i) => {
        if (seen.has(task.id))
          ctx.addIssue({
            code: 'custom',
            path: ['tasks', i, 'id'],
            message: `"tasks[${i}].id": '${task.id}' names two tasks; task ids are unique`,
          });
        seen.add(task.id);
      });
    });
}

/** A suite as the request gave it. */
export type SuiteInput = z.infer<ReturnType<typeof suiteBody>>;

/** The suite as stored and shown: its defaults filled in, each task's project found. */
export const acceptedSuite = z
  .object({
    name: z.string(),
    tasks: z.array(
      z.object({
        id: z.string(),
        project: z.string().describe('The project it runs in (found from `repository` if given).'),
        repository: z.string().optional(),
        ref: z.string().optional(),
        prompt: z.string(),
        check: z.string(),
      }),
    ),
    agents: z.array(
      z.object({ engine: z.enum(ENGINE_NAMES).optional(), model: z.string().optional() }),
    ),
    repeat: z.number().int(),
    concurrency: z.number().int(),
  })
  .describe('The suite as accepted, its defaults filled in.');

export type Suite = z.infer<typeof acceptedSuite>;
type SuiteTask = Suite['tasks'][number];

/** An agent as one project runs it: its engine and model filled in. */
export interface ResolvedAgent {
  engine: ProjectRow['engine'];
  model: string;
}

/** The name of an agent in a run's results and tables: engine/model. */
export function agentLabel(agent: ResolvedAgent): string {
  return `${agent.engine}/${agent.model}`;
}

/** One result a run will have: a task with an agent, once per repeat. */
export interface PlannedResult {
  n: number;
  task: SuiteTask;
  agent: ResolvedAgent;
  repeat: number;
  projectId: string;
}

/** The agent `agent` of the suite is in `project`: the project's engine and model where it says none. */
function resolveAgent(
  ctx: AppContext,
  project: ProjectRow,
  agent: Suite['agents'][number],
): ResolvedAgent {
  return {
    engine: agent.engine ?? project.engine,
    model: agent.model ?? project.model ?? ctx.models.defaultId,
  };
}

async function findProject(
  ctx: AppContext,
  principal: Principal,
  task: SuiteInput['tasks'][number],
  i: number,
): Promise<ProjectRow> {
  if (task.project !== undefined) {
    // Access first: a principal learns nothing of a project it may not act on.
    if (isId('prj', task.project)) requireAccess(principal, 'maintainer', task.project);
    const row = isId('prj', task.project)
      ? await ctx.db
          .selectFrom('projects')
          .selectAll()
          .where('id', '=', task.project)
          .executeTakeFirst()
      : undefined;
    if (!row)
      throw new AppError('bad_request', `"tasks[${i}].project": project ${task.project} not found`);
    return row;
  }
  const rows = await ctx.db
    .selectFrom('projects')
    .selectAll()
    .where('repository', '=', task.repository ?? '')
    .limit(2)
    .execute();
  const [row, other] = rows;
  if (!row)
    throw new AppError(
      'bad_request',
      `"tasks[${i}].repository": no project has the repository ${task.repository}`,
    );
  if (other)
    throw new AppError(
      'bad_request',
      `"tasks[${i}].repository": several projects have the repository ${task.repository}; give "project" instead`,
    );
  requireAccess(principal, 'maintainer', row.id);
  return row;
}

/**
 * The suite with its defaults, and the results it makes (task × agent × repeat, in that order),
 * once each task's project is found and each agent checked there as createJob checks it. Throws
 * a 400 (or the 403 of a project the principal does not maintain) naming the field.
 */
export async function acceptSuite(
  ctx: AppContext,
  principal: Principal,
  input: SuiteInput,
  now: Date = new Date(),
): Promise<{ suite: Suite; results: PlannedResult[] }> {
  const agents = input.agents ?? [{}];
  const repeat = input.repeat ?? 1;
  const tasks: SuiteTask[] = [];
  const results: PlannedResult[] = [];
  for (const [i, given] of input.tasks.entries()) {
    const project = await findProject(ctx, principal, given, i);
    const task: SuiteTask = {
      id: given.id,
      project: project.id,
      ...(given.repository !== undefined ? { repository: given.repository } : {}),
      ...(given.ref !== undefined ? { ref: given.ref } : {}),
      prompt: given.prompt,
      check: given.check,
    };
    tasks.push(task);
    const labels = new Map<string, number>();
    for (const [a, agent] of agents.entries()) {
      const resolved = resolveAgent(ctx, project, agent);
      const label = agentLabel(resolved);
      const same = labels.get(label);
      if (same !== undefined)
        throw new AppError(
          'bad_request',
          `"agents[${a}]" is the same agent as "agents[${same}]" (${label}) in project ${project.id}`,
        );
      labels.set(label, a);
      try {
        // As createJob checks a job of one attempt: the agent's engine with its model, which
        // need not be the project's engine.
        checkBestOf(ctx, project, resolved.model, 'code', { count: 1, agents: [resolved] });
      } catch (err) {
        if (err instanceof AppError)
          throw new AppError(
            err.code,
            `"agents[${a}]" cannot run task "${task.id}" in project ${project.id}: ${err.message}`,
          );
        throw err;
      }
      for (let r = 1; r <= repeat; r++)
        results.push({
          n: results.length + 1,
          task,
          agent: resolved,
          repeat: r,
          projectId: project.id,
        });
    }
  }
  return {
    suite: {
      name: input.name?.trim() ?? `eval ${now.toISOString().slice(0, 16).replace('T', ' ')}`,
      tasks,
      agents,
      repeat,
      concurrency: input.concurrency ?? 2,
    },
    results,
  };
}
