// Admin API for keys: POST /v2/admin/keys ({"projectId"} or {"admin": true}, optional
// "name") → 201 with the key, shown this once; GET /v2/admin/keys; POST /v2/admin/keys/{id}/revoke.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { auditedChange, whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { access } from '../../keys/route-access.ts';
import { createKey, listKeys, revokeKey, toKeyRecord } from '../../keys/service.ts';
import { findProject } from '../../projects/service.ts';
import { createdKeyRecord, keyRecord } from '../../records/key.ts';
import { errors, json } from '../../responses.ts';

const NAME = '"name" must be a string of at most 200 characters';

const createBody = z
  .strictObject(
    {
      projectId: z
        .string({ error: '"projectId" must be a string' })
        .optional()
        .describe('The project the key may act on.'),
      admin: z
        .boolean({ error: '"admin" must be a boolean' })
        .optional()
        .describe('true for an admin key (every project and the admin API).'),
      name: z
        .string({ error: NAME })
        .max(200, { error: NAME })
        .optional()
        .describe('A name to recognise the key by.'),
    },
    {
      error: (issue) =>
        issue.code === 'invalid_type' ? 'request body must be a JSON object' : undefined,
    },
  )
  .refine((body) => (body.admin === true) !== (body.projectId !== undefined), {
    error: 'give exactly one of "projectId" or "admin": true',
  });

const admin = { tags: ['admin'], security: [{ bearerAuth: [] }] };

export function registerAdminKeyRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.post(
    '/v2/admin/keys',
    {
      config: { ...access('admin'), audit: { action: 'key.create', target: 'key' } },
      schema: {
        ...admin,
        summary: 'Create API key',
        description: 'Mints a project key or an admin key. The key is in this response only.',
        body: createBody,
        response: {
          201: json('The new key.', createdKeyRecord),
          ...errors(400, 401, 403, 413, 415, 503),
        },
      },
    },
    async (request, reply) => {
      const { projectId, name } = request.body;
      // findProject is undefined only for a project that does not exist: a database failure
      // throws, and leaves through the error map as a 503 or 500, not as the caller's fault.
      if (projectId !== undefined && !(await findProject(ctx, projectId))) {
        throw new AppError('bad_request', `project ${projectId} does not exist`);
      }
      const { key, row } = await auditedChange(
        ctx,
        whoOf(request, request.principal),
        async (db) => {
          const made = await createKey(db, { projectId: projectId ?? null, name: name ?? null });
          // The key's id, name and project: never the key.
          return {
            result: made,
            entry: {
              action: 'key.create',
              target: { kind: 'key', id: made.row.id },
              details: { name: made.row.name, projectId: made.row.project_id },
            },
          };
        },
      );
      return reply.code(201).send({ ...toKeyRecord(row), key });
    },
  );
  typed.get(
    '/v2/admin/keys',
    {
      config: access('admin'),
      schema: {
        ...admin,
        summary: 'List API keys',
        response: {
          200: json('Every key, without secrets.', z.object({ keys: z.array(keyRecord) })),
          ...errors(401, 403, 503),
        },
      },
    },
    async () => ({ keys: (await listKeys(ctx)).map(toKeyRecord) }),
  );
  typed.post(
    '/v2/admin/keys/:id/revoke',
    {
      config: { ...access('admin'), audit: { action: 'key.revoke', target: 'key' } },
      schema: {
        ...admin,
        summary: 'Revoke API key',
        params: z.object({ id: z.string().describe('The key id (key_ and 20 characters).') }),
        response: { 200: json('The revoked key.', keyRecord), ...errors(401, 403, 404, 503) },
      },
    },
    async (request) =>
      toKeyRecord(
        await auditedChange(ctx, whoOf(request, request.principal), async (db) => ({
          result: await revokeKey({ db }, request.params.id),
          entry: { action: 'key.revoke', target: { kind: 'key', id: request.params.id } },
        })),
      ),
  );
}
