// Admin API for projects: POST /v2/admin/projects, GET /v2/admin/projects,
// GET /v2/admin/projects/{id}, PATCH /v2/admin/projects/{id}.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import {
  createProject,
  getProject,
  listProjects,
  toProjectRecord,
  updateProject,
} from '../../projects/service.ts';

export function registerAdminProjectRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.post('/v2/admin/projects', async (request, reply) => {
    return reply.code(201).send(toProjectRecord(await createProject(ctx, request.body)));
  });
  app.get('/v2/admin/projects', async () => ({
    projects: (await listProjects(ctx)).map(toProjectRecord),
  }));
  app.get<{ Params: { id: string } }>('/v2/admin/projects/:id', async (request) =>
    toProjectRecord(await getProject(ctx, request.params.id)),
  );
  app.patch<{ Params: { id: string } }>('/v2/admin/projects/:id', async (request) =>
    toProjectRecord(await updateProject(ctx, request.params.id, request.body)),
  );
}
