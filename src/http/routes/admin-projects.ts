// Admin API for projects: POST /v2/admin/projects, GET /v2/admin/projects,
// GET /v2/admin/projects/{id}, PATCH /v2/admin/projects/{id} (its forge webhook secret is the
// forge intake's: src/features/forge-intake/secret-route.ts). The body schemas check each
// field's shape; the project service checks what needs the server's settings or the stored
// project (repository access, forge token variables, credentials). A create or update that
// changes what the environment is built from asks for a build once it has committed.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { ENGINE_NAMES } from '../../projects/engine.ts';
import { afterProjectCreated, afterProjectUpdated } from '../../projects/environment-builds.ts';
import { DEFAULT_ENVIRONMENT_KEY_FILES } from '../../projects/environment-key-files.ts';
import { FORGE_KINDS, type ForgeKind } from '../../projects/forge.ts';
import { networkRecordField } from '../../projects/network-schema.ts';
import { projectCreateBody, projectUpdateBody } from '../../projects/schemas.ts';
import {
  createProject,
  getProject,
  listProjects,
  toProjectRecord,
  updateProject,
} from '../../projects/service.ts';
import { errors, json } from '../../responses.ts';

/** The project as the admin API answers it (the forge intake's secret route answers it too). */
export const projectRecord = z
  .object({
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
    forgeWebhookSecretSet: z
      .boolean()
      .describe(
        "Whether the forge's webhook deliveries have a secret to be checked with; never the secret.",
      ),
    forgeHandle: z
      .string()
      .describe('The handle forge comments mention to reach Errand, without the @.'),
    forgeLabel: z.string().describe('The label that makes a forge issue a job.'),
    draftPullRequests: z.boolean(),
    commandsEnabled: z.boolean(),
    setupCommand: z.string().nullable(),
    maintenanceCommand: z
      .string()
      .nullable()
      .describe(
        'Run after the environment is restored, instead of the setup command (null: none).',
      ),
    environmentKeyFiles: z
      .array(z.string())
      .nullable()
      .describe(
        `The globs of the files whose content keys the environment (null: the common lock files, ${DEFAULT_ENVIRONMENT_KEY_FILES.join(', ')}).`,
      ),
    setupNetwork: z
      .boolean()
      .describe('Whether network.setup is "open" (kept for clients of the older setting).'),
    network: networkRecordField,
    commandTimeoutSeconds: z.number().int(),
    commandCpuSeconds: z.number().int(),
    commandMemoryMb: z.number().int(),
    commandProcesses: z.number().int(),
    commandFileSizeMb: z.number().int(),
    commandDiskMb: z.number().int(),
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
    engine: z
      .enum(ENGINE_NAMES)
      .describe("The agent that runs the project's turns (errand: Errand's own)."),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  // A component of the OpenAPI document, which every answer with a project refers to.
  .meta({ id: 'Project', description: 'A project.' });

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
          201: json('The new project.', projectRecord),
          ...errors(400, 401, 403, 413, 415, 503),
        },
      },
    },
    async (request, reply) => {
      const row = await createProject(ctx, request.body);
      await afterProjectCreated(ctx, row);
      return reply.code(201).send(toProjectRecord(ctx, row));
    },
  );
  typed.get(
    '/v2/admin/projects',
    {
      schema: {
        ...admin,
        summary: 'List projects',
        response: {
          200: json('Every project.', z.object({ projects: z.array(projectRecord) })),
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
        response: { 200: json('The project.', projectRecord), ...errors(401, 403, 404, 503) },
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
          200: json('The project as it is now.', projectRecord),
          ...errors(400, 401, 403, 404, 413, 415, 503),
        },
      },
    },
    async (request) => {
      const { before, row } = await updateProject(ctx, request.params.id, request.body);
      await afterProjectUpdated(ctx, before, row);
      return toProjectRecord(ctx, row);
    },
  );
}
