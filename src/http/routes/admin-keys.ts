// Admin API for keys: POST /v2/admin/keys ({"projectId"} or {"admin": true}, optional
// "name") → 201 with the key, shown this once; GET /v2/admin/keys; POST /v2/admin/keys/{id}/revoke.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { createKey, listKeys, revokeKey, toKeyRecord } from '../../keys/service.ts';
import { getProject } from '../../projects/service.ts';

interface CreateKeyBody {
  projectId?: unknown;
  admin?: unknown;
  name?: unknown;
}

export function registerAdminKeyRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.post('/v2/admin/keys', async (request, reply) => {
    const body = request.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new AppError('bad_request', 'request body must be a JSON object');
    }
    const { projectId, admin, name } = body as CreateKeyBody;
    if (admin !== undefined && typeof admin !== 'boolean') {
      throw new AppError('bad_request', '"admin" must be a boolean');
    }
    if (projectId !== undefined && typeof projectId !== 'string') {
      throw new AppError('bad_request', '"projectId" must be a string');
    }
    if ((admin === true) === (projectId !== undefined)) {
      throw new AppError('bad_request', 'give exactly one of "projectId" or "admin": true');
    }
    if (name !== undefined && (typeof name !== 'string' || name.length > 200)) {
      throw new AppError('bad_request', '"name" must be a string of at most 200 characters');
    }
    if (projectId !== undefined) {
      const exists = await getProject(ctx, projectId).catch(() => undefined);
      if (!exists) throw new AppError('bad_request', `project ${projectId} does not exist`);
    }
    const { key, row } = await createKey(ctx.db, {
      projectId: projectId ?? null,
      name: typeof name === 'string' ? name : null,
    });
    return reply.code(201).send({ ...toKeyRecord(row), key });
  });
  app.get('/v2/admin/keys', async () => ({ keys: (await listKeys(ctx)).map(toKeyRecord) }));
  app.post<{ Params: { id: string } }>('/v2/admin/keys/:id/revoke', async (request) =>
    toKeyRecord(await revokeKey(ctx, request.params.id)),
  );
}
