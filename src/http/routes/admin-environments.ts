// Admin API for a project's environments, under /v2/admin/projects/{id}/environments: list the
// snapshots the workers keep, drop them (all, or one key on every worker), and ask for a rebuild
// in the background. The workers build, restore and bound them (src/environments/).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { auditAfter, whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { access } from '../../keys/route-access.ts';
import { rebuildEnvironment } from '../../projects/environment-builds.ts';
import { deleteEnvironments, listEnvironments } from '../../projects/environments.ts';
import { environmentRecord } from '../../records/environment.ts';
import { errors, json } from '../../responses.ts';

const id = z.string().describe('The project id (prj_ and 20 characters).');
const projectParams = z.object({ id });
const keyParams = z.object({ id, key: z.string().describe('The environment’s key.') });
const dropped = z.object({
  deleted: z.number().int().describe('How many snapshots were dropped, on every worker.'),
});

const admin = { tags: ['admin'], security: [{ bearerAuth: [] }] };
const base = '/v2/admin/projects/:id/environments';

export function registerAdminEnvironmentRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.get(
    base,
    {
      config: access('maintainer'),
      schema: {
        ...admin,
        summary: 'List environments',
        description:
          'The snapshots of the project’s environment that its workers keep, the one used last first.',
        params: projectParams,
        response: {
          200: json(
            'The project’s environments.',
            z.object({ environments: z.array(environmentRecord) }),
          ),
          ...errors(401, 403, 404, 503),
        },
      },
    },
    async (request) => ({ environments: await listEnvironments(ctx, request.params.id) }),
  );
  typed.delete(
    base,
    {
      config: {
        ...access('maintainer'),
        audit: { action: 'environment.delete', target: 'project' },
      },
      schema: {
        ...admin,
        summary: 'Delete environments',
        description:
          'Drops every snapshot of the project, on every worker: the next turn runs the setup command again (or the next background build does).',
        params: projectParams,
        response: { 200: json('Dropped.', dropped), ...errors(401, 403, 404, 503) },
      },
    },
    async (request) => {
      const deleted = await deleteEnvironments(ctx, request.params.id);
      await auditAfter(ctx, whoOf(request, request.principal), {
        action: 'environment.delete',
        target: { kind: 'project', id: request.params.id },
        details: { deleted },
      });
      return { deleted };
    },
  );
  typed.delete(
    `${base}/:key`,
    {
      config: {
        ...access('maintainer'),
        audit: { action: 'environment.delete', target: 'environment' },
      },
      schema: {
        ...admin,
        summary: 'Delete environment',
        description: 'Drops the snapshots of one key, on every worker that keeps one.',
        params: keyParams,
        response: { 200: json('Dropped.', dropped), ...errors(401, 403, 404, 503) },
      },
    },
    async (request) => {
      const deleted = await deleteEnvironments(ctx, request.params.id, request.params.key);
      await auditAfter(ctx, whoOf(request, request.principal), {
        action: 'environment.delete',
        target: { kind: 'environment', id: request.params.key },
        details: { projectId: request.params.id, deleted },
      });
      return { deleted };
    },
  );
  typed.post(
    `${base}/rebuild`,
    {
      config: {
        ...access('maintainer'),
        audit: { action: 'environment.rebuild', target: 'project' },
      },
      schema: {
        ...admin,
        summary: 'Rebuild environment',
        description:
          'Asks for the project’s environment to be built in the background, by running its setup command on the base ref. Refused for a project without a setup command.',
        params: projectParams,
        response: {
          202: json(
            'The build was queued.',
            z.object({ queued: z.literal(true).describe('A worker will build it.') }),
          ),
          ...errors(400, 401, 403, 404, 503),
        },
      },
    },
    async (request, reply) => {
      await rebuildEnvironment(ctx, request.params.id);
      await auditAfter(ctx, whoOf(request, request.principal), {
        action: 'environment.rebuild',
        target: { kind: 'project', id: request.params.id },
      });
      return reply.code(202).send({ queued: true });
    },
  );
}
