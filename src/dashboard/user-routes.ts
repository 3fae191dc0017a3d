// The people pages' routes, for server admins: the users, deactivating and reactivating one,
// and a project's roles, giving and taking one. They call the service the admin API calls.

import type { FastifyInstance } from 'fastify';
import { auditedChange, whoOf } from '../audit/audit.ts';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { access } from '../keys/route-access.ts';
import { giveRole, listRoles, listUsers, setDeactivated, takeRole } from '../keys/users.ts';
import { getProject, toProjectRecord } from '../projects/service.ts';
import { roleBody } from '../records/user.ts';
import { type Form, given, parse, sendPage, session } from './requests.ts';
import { rolesPage, usersPage } from './user-pages.ts';

/** The form's grantee: a user's id or a group's name, refused in the API's words. */
function grantee(form: Form): { kind: 'user' | 'group'; name: string } {
  const kind = form.granteeKind;
  if (kind !== 'user' && kind !== 'group') {
    throw new AppError('bad_request', 'the grantee kind must be user or group');
  }
  const name = given(form, 'grantee');
  if (!name || name.length > 200) {
    throw new AppError('bad_request', 'name a user or a group of at most 200 characters');
  }
  return { kind, name };
}

export function registerUserRoutes(pages: FastifyInstance, ctx: AppContext): void {
  pages.get('/users', { config: access('admin') }, async (request, reply) =>
    sendPage(reply, 200, usersPage(session(request), await listUsers(ctx.db))),
  );

  for (const [action, deactivated] of [
    ['deactivate', true],
    ['reactivate', false],
  ] as const) {
    pages.post<{ Params: { id: string } }>(
      `/users/:id/${action}`,
      { config: access('admin') },
      async (request, reply) => {
        await auditedChange(ctx, whoOf(request, session(request)), async (db) => ({
          result: await setDeactivated(db, request.params.id, deactivated),
          entry: {
            action: deactivated ? 'user.deactivate' : 'user.reactivate',
            target: { kind: 'user', id: request.params.id },
          },
        }));
        return reply.redirect('/users', 303);
      },
    );
  }

  const showRoles = async (
    request: { params: { id: string } } & Parameters<typeof session>[0],
    status: number,
    error?: string,
  ) => {
    const project = toProjectRecord(ctx, await getProject(ctx, request.params.id));
    return {
      status,
      body: rolesPage(
        session(request),
        project,
        await listRoles(ctx.db, project.id),
        await listUsers(ctx.db),
        error,
      ),
    };
  };

  pages.get<{ Params: { id: string } }>(
    '/projects/:id/roles',
    { config: access('admin') },
    async (request, reply) => {
      const { status, body } = await showRoles(request, 200);
      return sendPage(reply, status, body);
    },
  );

  pages.post<{ Params: { id: string }; Body: Form | undefined }>(
    '/projects/:id/roles',
    { config: access('admin') },
    async (request, reply) => {
      const project = await getProject(ctx, request.params.id);
      try {
        const form = request.body ?? {};
        const { role } = parse(roleBody, { role: form.role });
        const to = grantee(form);
        await auditedChange(ctx, whoOf(request, session(request)), async (db) => ({
          result: await giveRole(db, project.id, to, role),
          entry: {
            action: 'role.grant',
            target: { kind: 'project', id: project.id },
            details: { granteeKind: to.kind, grantee: to.name, role },
          },
        }));
      } catch (err) {
        if (!(err instanceof AppError) || err.status !== 400) throw err;
        const { body } = await showRoles(request, 400, err.message);
        return sendPage(reply, 400, body);
      }
      return reply.redirect(`/projects/${project.id}/roles`, 303);
    },
  );

  pages.post<{ Params: { id: string }; Body: Form | undefined }>(
    '/projects/:id/roles/delete',
    { config: access('admin') },
    async (request, reply) => {
      const project = await getProject(ctx, request.params.id);
      const from = grantee(request.body ?? {});
      await auditedChange(ctx, whoOf(request, session(request)), async (db) => {
        const taken = await takeRole(db, project.id, from);
        return {
          result: taken,
          entry: {
            action: 'role.revoke',
            target: { kind: 'project', id: project.id },
            details: { granteeKind: from.kind, grantee: from.name, role: taken.role },
          },
        };
      });
      return reply.redirect(`/projects/${project.id}/roles`, 303);
    },
  );
}
