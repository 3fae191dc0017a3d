// Admin API for projects: POST /v2/admin/projects, GET /v2/admin/projects,
// GET /v2/admin/projects/{id}, PATCH /v2/admin/projects/{id}. The body schemas check each
// field's shape; the project service checks what needs the server's settings or the stored
// project (repository access, forge token variables, credentials).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { FORGE_KINDS, type ForgeKind } from '../../projects/forge.ts';
import { projectCreateBody, projectUpdateBody } from '../../projects/schemas.ts';
import {
  createProject,
  getProject,
  listProjects,
  toProjectRecord,
  updateProject,
} from '../../projects/service.ts';
import { errors } from '../../responses.ts';

const projectRecord = z.object({
  id: z.string(),
  name: z.string(),
  repository: z.string(),
  ref: z.string(),
  model: z.string().nullable(),
  forge: z.object({
    kind: z.enum(FORGE_KINDS as [ForgeKind, ...ForgeKind[]]),
    apiUrl: z.string().nullable(),
    inferred: z.boolean().describe('True when the kind was inferred from the repository URL.'),
    credentials: z
      .enum(['none', 'token-env', 'stored-token', 'github-app'])
      .describe('How credentials are given; never the credentials themselves.'),
    tokenEnv: z.string().nullable(),
  }),
  draftPullRequests: z.boolean(),
  commandsEnabled: z.boolean(),
  setupCommand: z.string().nullable(),
  setupNetwork: z.boolean(),
  commandTimeoutSeconds: z.number().int(),
  commandCpuSeconds: z.number().int(),
  commandMemoryMb: z.number().int(),
  commandProcesses: z.number().int(),
  commandFileSizeMb: z.number().int(),
  jobBudgetUsd: z
    .number()
    .nullable()
    .describe('What all turns of one job may cost, in US dollars (null: no budget).'),
  monthlyBudgetUsd: z
    .number()
    .nullable()
    .describe(
      "What the project's jobs may cost in a calendar month (UTC), in US dollars (null: none).",
    ),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
});

const params = z.object({ id: z.string().describe('The project id (prj_ and 20 characters).') });
const admin = { tags: ['admin'], security: [{ bearerAuth: [] }] };

export function registerAdminProjectRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.post(
    '/v2/admin/projects',
    {
      schema: {
        ...admin,
        summary: 'Create project',
        body: projectCreateBody,
        response: {
          201: projectRecord.describe('The new project.'),
          ...errors(400, 401, 403, 413, 415, 503),
        },
      },
    },
    async (request, reply) =>
      reply.code(201).send(toProjectRecord(ctx, await createProject(ctx, request.body))),
  );
  typed.get(
    '/v2/admin/projects',
    {
      schema: {
        ...admin,
        summary: 'List projects',
        response: {
          200: z.object({ projects: z.array(projectRecord) }).describe('Every project.'),
          ...errors(401, 403, 503),
        },
      },
    },
    async () => ({ projects: (await listProjects(ctx)).map((row) => toProjectRecord(ctx, row)) }),
  );
  typed.get(
    '/v2/admin/projects/:id',
    {
      schema: {
        ...admin,
        summary: 'Get project',
        params,
        response: { 200: projectRecord.describe('The project.'), ...errors(401, 403, 404, 503) },
      },
    },
    async (request) => toProjectRecord(ctx, await getProject(ctx, request.params.id)),
  );
  typed.patch(
    '/v2/admin/projects/:id',
    {
      schema: {
        ...admin,
        summary: 'Update project',
        description:
          'Changes the given fields. Jobs already created keep their repository and ref.',
        params,
        body: projectUpdateBody,
        response: {
          200: projectRecord.describe('The project as it is now.'),
          ...errors(400, 401, 403, 404, 413, 415, 503),
        },
      },
    },
    async (request) =>
      toProjectRecord(ctx, await updateProject(ctx, request.params.id, request.body)),
  );
}
