// Admin API for projects: POST /v2/admin/projects, GET /v2/admin/projects,
// GET /v2/admin/projects/{id}, PATCH /v2/admin/projects/{id} (its forge webhook secret is the
// forge intake's: src/features/forge-intake/secret-route.ts). The body schemas check each
// field's shape; the project service checks what needs the server's settings or the stored
// project (repository access, forge token variables, credentials). A create or update that
// changes what the environment is built from asks for a build once it has committed.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { auditedChange, whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { access } from '../../keys/route-access.ts';
import { afterProjectCreated, afterProjectUpdated } from '../../projects/environment-builds.ts';
import { projectCreateBody, projectUpdateBody } from '../../projects/schemas.ts';
import {
  createProject,
  getProject,
  listProjects,
  toProjectRecord,
  updateProject,
} from '../../projects/service.ts';
import { projectRecord } from '../../records/project.ts';
import { errors, json } from '../../responses.ts';

const params = z.object({ id: z.string().describe('The project id (prj_ and 20 characters).') });

const admin = { tags: ['admin'], security: [{ bearerAuth: [] }] };

export function registerAdminProjectRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.post(
    '/v2/admin/projects',
    {
      config: { ...access('admin'), audit: { action: 'project.create', target: 'project' } },
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
      const row = await auditedChange(ctx, whoOf(request, request.principal), async (db) => {
        const created = await createProject({ ...ctx, db }, request.body);
        return {
          result: created,
          entry: {
            action: 'project.create',
            target: { kind: 'project', id: created.id },
            details: { name: created.name },
          },
        };
      });
      await afterProjectCreated(ctx, row);
      return reply.code(201).send(toProjectRecord(ctx, row));
    },
  );
  typed.get(
    '/v2/admin/projects',
    {
      config: access('admin'),
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
      config: access('maintainer'),
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
      config: { ...access('maintainer'), audit: { action: 'project.update', target: 'project' } },
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
      const { before, row } = await auditedChange(
        ctx,
        whoOf(request, request.principal),
        async (db) => ({
          result: await updateProject({ ...ctx, db }, request.params.id, request.body),
          // Which fields, never their values: a repository's URL can carry a credential.
          entry: {
            action: 'project.update',
            target: { kind: 'project', id: request.params.id },
            details: { fields: Object.keys(request.body).sort() },
          },
        }),
      );
      await afterProjectUpdated(ctx, before, row);
      return toProjectRecord(ctx, row);
    },
  );
}
