// Admin API for people: GET /v2/admin/users (with their roles), POST
// /v2/admin/users/{id}/deactivate and /reactivate; a project's roles: GET
// /v2/admin/projects/{id}/roles, PUT and DELETE /v2/admin/projects/{id}/roles/{user|group}/{grantee}.
// A server admin's only (the admin key or a user the provider's groups make one).

import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { auditedChange, whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { access } from '../../keys/route-access.ts';
import { giveRole, listRoles, listUsers, setDeactivated, takeRole } from '../../keys/users.ts';
import { getProject } from '../../projects/service.ts';
import { roleBody, roleRecord, userRecord } from '../../records/user.ts';
import { errors, json } from '../../responses.ts';

const admin = { tags: ['admin'], security: [{ bearerAuth: [] }] };
const userParams = z.object({ id: z.string().describe('The user id (usr_ and 20 characters).') });
const projectParams = z.object({ id: z.string().describe('The project id.') });
const granteeParams = projectParams.extend({
  granteeKind: z
    .enum(['user', 'group'], { error: 'the grantee kind must be user or group' })
    .describe("user, or group (a group of the provider's groups claim)."),
  grantee: z.string().min(1).max(200).describe("The user's id, or the group's name."),
});

export function registerAdminUserRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.get(
    '/v2/admin/users',
    {
      config: access('admin'),
      schema: {
        ...admin,
        summary: 'List users',
        description: 'Everyone who has signed in, with the project roles given to them.',
        response: {
          200: json('Every user.', z.object({ users: z.array(userRecord) })),
          ...errors(401, 403, 503),
        },
      },
    },
    async () => ({ users: await listUsers(ctx.db) }),
  );
  for (const [action, deactivated] of [
    ['deactivate', true],
    ['reactivate', false],
  ] as const) {
    typed.post(
      `/v2/admin/users/:id/${action}`,
      {
        config: {
          ...access('admin'),
          audit: { action: deactivated ? 'user.deactivate' : 'user.reactivate', target: 'user' },
        },
        schema: {
          ...admin,
          summary: deactivated ? 'Deactivate user' : 'Reactivate user',
          description: deactivated
            ? 'The user can no longer sign in; their sessions and tokens stop at once.'
            : 'The user may sign in again.',
          params: userParams,
          response: { 200: json('The user.', userRecord), ...errors(401, 403, 404, 503) },
        },
      },
      async (request) =>
        auditedChange(ctx, whoOf(request, request.principal), async (db) => ({
          result: await setDeactivated(db, request.params.id, deactivated),
          entry: {
            action: deactivated ? 'user.deactivate' : 'user.reactivate',
            target: { kind: 'user', id: request.params.id },
          },
        })),
    );
  }
  typed.get(
    '/v2/admin/projects/:id/roles',
    {
      config: access('admin'),
      schema: {
        ...admin,
        summary: "List a project's roles",
        params: projectParams,
        response: {
          200: json("The project's roles.", z.object({ roles: z.array(roleRecord) })),
          ...errors(401, 403, 404, 503),
        },
      },
    },
    async (request) => {
      const project = await getProject(ctx, request.params.id);
      return { roles: await listRoles(ctx.db, project.id) };
    },
  );
  typed.put(
    '/v2/admin/projects/:id/roles/:granteeKind/:grantee',
    {
      config: { ...access('admin'), audit: { action: 'role.grant', target: 'project' } },
      schema: {
        ...admin,
        summary: 'Give a project role',
        description: 'Gives the user or group the role on the project, replacing the one it had.',
        params: granteeParams,
        body: roleBody,
        response: { 200: json('The role.', roleRecord), ...errors(400, 401, 403, 404, 415, 503) },
      },
    },
    async (request) => {
      const { id, granteeKind, grantee } = request.params;
      const project = await getProject(ctx, id);
      const { role } = request.body;
      return auditedChange(ctx, whoOf(request, request.principal), async (db) => ({
        result: await giveRole(db, project.id, { kind: granteeKind, name: grantee }, role),
        entry: {
          action: 'role.grant',
          target: { kind: 'project', id: project.id },
          details: { granteeKind, grantee, role },
        },
      }));
    },
  );
  typed.delete(
    '/v2/admin/projects/:id/roles/:granteeKind/:grantee',
    {
      config: { ...access('admin'), audit: { action: 'role.revoke', target: 'project' } },
      schema: {
        ...admin,
        summary: 'Take a project role',
        params: granteeParams,
        response: { 200: json('The role taken.', roleRecord), ...errors(400, 401, 403, 404, 503) },
      },
    },
    async (request) => {
      const { id, granteeKind, grantee } = request.params;
      const project = await getProject(ctx, id);
      return auditedChange(ctx, whoOf(request, request.principal), async (db) => {
        const taken = await takeRole(db, project.id, { kind: granteeKind, name: grantee });
        return {
          result: taken,
          entry: {
            action: 'role.revoke',
            target: { kind: 'project', id: project.id },
            details: { granteeKind, grantee, role: taken.role },
          },
        };
      });
    },
  );
}
