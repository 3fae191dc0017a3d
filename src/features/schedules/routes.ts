// Admin API for a project's schedules, under /v2/admin/projects/{projectId}/schedules: create,
// list, get, update (pause is {"paused": true}) and delete. The schemas check each field's
// shape; the store checks what needs the server (the expression and zone as pg-boss's scheduler
// reads them, the model), before anything is written. The dashboard's form takes the same body.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { access } from '../../keys/route-access.ts';
import { isValidModelId } from '../../projects/repository.ts';
import { errorBody, errors, json } from '../../responses.ts';
import {
  createSchedule,
  deleteSchedule,
  getSchedule,
  listSchedules,
  MAX_SCHEDULES_PER_PROJECT,
  updateSchedule,
} from './store.ts';
import { SCHEDULE_MODES, scheduleRecord } from './types.ts';

const MAX_NAME_CHARS = 100;
const MAX_CRON_CHARS = 200;
const NAME = `"name" must be a string of 1 to ${MAX_NAME_CHARS} characters`;
const CRON = `"cron" must be a string of 1 to ${MAX_CRON_CHARS} characters`;
const TIMEZONE = '"timezone" must be an IANA time zone name, e.g. Europe/Paris';
const MODE = `"mode" must be one of ${SCHEDULE_MODES.join(', ')}`;

function fields(maxPromptChars: number) {
  const prompt = `"prompt" must be a string of 1 to ${maxPromptChars} characters, not only spaces`;
  return {
    name: z
      .string({ error: NAME })
      .trim()
      .min(1, { error: NAME })
      .max(MAX_NAME_CHARS, { error: NAME })
      .describe("A name to know it by; else the prompt's first line."),
    cron: z
      .string({ error: (i) => (i.input === undefined ? '"cron" is required' : CRON) })
      .trim()
      .min(1, { error: CRON })
      .max(MAX_CRON_CHARS, { error: CRON })
      .describe('When it fires: a cron expression, e.g. "0 6 * * 1" (Mondays at 06:00).'),
    timezone: z
      .string({ error: TIMEZONE })
      .min(1, { error: TIMEZONE })
      .max(64, { error: TIMEZONE })
      .describe('The IANA time zone the expression is read in; UTC when not given.'),
    prompt: z
      .string({ error: (i) => (i.input === undefined ? '"prompt" is required' : prompt) })
      .max(maxPromptChars, { error: prompt })
      .refine((p) => p.trim().length > 0, { error: prompt })
      .describe('The prompt of each job it creates.'),
    mode: z
      .enum(SCHEDULE_MODES, { error: MODE })
      .describe('The mode of its jobs: code (the default), ask or plan.'),
    model: z
      .string({ error: '"model" must be a string or null' })
      .refine(isValidModelId, {
        error: '"model" must look like provider:model, e.g. anthropic:claude-sonnet-4-5',
      })
      .nullable()
      .describe("The jobs' model (provider:model); null or not given: the project's."),
    paused: z
      .boolean({ error: '"paused" must be a boolean' })
      .describe('A paused schedule does not fire; false when not given.'),
  };
}

const notAnObject = {
  error: (issue: z.core.$ZodRawIssue) =>
    issue.code === 'invalid_type' ? 'request body must be a JSON object' : undefined,
};

export function createBody(maxPromptChars: number) {
  const f = fields(maxPromptChars);
  return z.strictObject(
    {
      name: f.name.optional(),
      cron: f.cron,
      timezone: f.timezone.optional(),
      prompt: f.prompt,
      mode: f.mode.optional(),
      model: f.model.optional(),
      paused: f.paused.optional(),
    },
    notAnObject,
  );
}

function updateBody(maxPromptChars: number) {
  const f = fields(maxPromptChars);
  return z
    .strictObject(
      {
        name: f.name.optional(),
        cron: f.cron.optional(),
        timezone: f.timezone.optional(),
        prompt: f.prompt.optional(),
        mode: f.mode.optional(),
        model: f.model.optional(),
        paused: f.paused.optional(),
      },
      notAnObject,
    )
    .refine((body) => Object.values(body).some((value) => value !== undefined), {
      error: 'give at least one of "name", "cron", "timezone", "prompt", "mode", "model", "paused"',
    });
}

const projectId = z.string().describe('The project id (prj_ and 20 characters).');
const scheduleId = z.string().describe('The schedule id (sch_ and 20 characters).');
const projectParams = z.object({ projectId });
const scheduleParams = z.object({ projectId, scheduleId });

const admin = { tags: ['admin'], security: [{ bearerAuth: [] }] };
const base = '/v2/admin/projects/:projectId/schedules';

export function registerScheduleRoutes(app: FastifyInstance, ctx: AppContext): void {
  registerCollectionRoutes(app, ctx);
  registerScheduleItemRoutes(app, ctx);
}

/** Create a schedule and list the project's. */
function registerCollectionRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.post(
    base,
    {
      config: { ...access('maintainer'), audit: { action: 'schedule.create', target: 'project' } },
      schema: {
        ...admin,
        summary: 'Create schedule',
        description:
          "Adds a recurring prompt: at each occurrence of the cron expression (in the time zone), a job is created as the API creates one, counted in the project's rate limit and budget, its createdBy the schedule. At most one job per occurrence, however many workers run; at most one firing a minute.",
        params: projectParams,
        body: createBody(ctx.config.maxPromptChars),
        response: {
          201: json('The new schedule.', scheduleRecord),
          ...errors(400, 401, 403, 404, 413, 415, 503),
          409: json(`The project already has ${MAX_SCHEDULES_PER_PROJECT} schedules.`, errorBody),
        },
      },
    },
    async (request, reply) => {
      const who = whoOf(request, request.principal);
      const created = await createSchedule(ctx, who, request.params.projectId, request.body);
      return reply.code(201).send(created);
    },
  );
  typed.get(
    base,
    {
      config: access('maintainer'),
      schema: {
        ...admin,
        summary: 'List schedules',
        params: projectParams,
        response: {
          200: json(
            'The project’s schedules, oldest first, each with its last firing.',
            z.object({ schedules: z.array(scheduleRecord) }),
          ),
          ...errors(401, 403, 404, 503),
        },
      },
    },
    async (request) => ({ schedules: await listSchedules(ctx, request.params.projectId) }),
  );
}

/** Read, change (pause, resume) and delete one schedule. */
function registerScheduleItemRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.get(
    `${base}/:scheduleId`,
    {
      config: access('maintainer'),
      schema: {
        ...admin,
        summary: 'Get schedule',
        params: scheduleParams,
        response: {
          200: json('The schedule, with its last firing.', scheduleRecord),
          ...errors(401, 403, 404, 503),
        },
      },
    },
    async (request) => getSchedule(ctx, request.params.projectId, request.params.scheduleId),
  );
  typed.patch(
    `${base}/:scheduleId`,
    {
      config: { ...access('maintainer'), audit: { action: 'schedule.update', target: 'schedule' } },
      schema: {
        ...admin,
        summary: 'Update schedule',
        description:
          'Changes the given fields. {"paused": true} pauses it (no firing until {"paused": false}).',
        params: scheduleParams,
        body: updateBody(ctx.config.maxPromptChars),
        response: {
          200: json('The schedule as it is now.', scheduleRecord),
          ...errors(400, 401, 403, 404, 413, 415, 503),
        },
      },
    },
    async (request) => {
      const { projectId, scheduleId } = request.params;
      const who = whoOf(request, request.principal);
      return updateSchedule(ctx, who, projectId, scheduleId, request.body);
    },
  );
  typed.delete(
    `${base}/:scheduleId`,
    {
      config: { ...access('maintainer'), audit: { action: 'schedule.delete', target: 'schedule' } },
      schema: {
        ...admin,
        summary: 'Delete schedule',
        description: 'Deletes the schedule; the jobs it created stay.',
        params: scheduleParams,
        response: {
          204: z.null().describe('Deleted.'),
          ...errors(401, 403, 404, 503),
        },
      },
    },
    async (request, reply) => {
      const who = whoOf(request, request.principal);
      await deleteSchedule(ctx, who, request.params.projectId, request.params.scheduleId);
      return reply.code(204).send(null);
    },
  );
}
