// The API key pages' routes, for admin sessions only: a project's keys, the admin keys, creating
// a key (shown once, in the answer to the form) and revoking one after a confirmation. They call
// the key service the admin API calls.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { auditedChange, whoOf } from '../audit/audit.ts';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { isId } from '../ids.ts';
import { access } from '../keys/route-access.ts';
import { createKey, listKeys, type Principal, revokeKey, toKeyRecord } from '../keys/service.ts';
import { findProject, getProject, toProjectRecord } from '../projects/service.ts';
import { adminKeysPage, projectKeysPage, revokePage } from './key-pages.ts';
import { baseUrl, type Form, given, sendPage, session } from './requests.ts';

const NAME_TOO_LONG = '"name" must be a string of at most 200 characters';

export function registerKeyRoutes(pages: FastifyInstance, ctx: AppContext): void {
  const keysOf = async (projectId: string | null) =>
    (await listKeys(ctx)).map(toKeyRecord).filter((key) => key.projectId === projectId);

  pages.get<{ Params: { id: string } }>(
    '/projects/:id/keys',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = toProjectRecord(ctx, await getProject(ctx, request.params.id));
      return sendPage(
        reply,
        200,
        projectKeysPage(principal, current, await keysOf(current.id), {
          baseUrl: baseUrl(ctx, request),
        }),
      );
    },
  );

  pages.post<{ Params: { id: string }; Body: Form | undefined }>(
    '/projects/:id/keys',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = toProjectRecord(ctx, await getProject(ctx, request.params.id));
      const name = given(request.body ?? {}, 'name');
      if (name !== undefined && name.length > 200) {
        return sendPage(
          reply,
          400,
          projectKeysPage(principal, current, await keysOf(current.id), {
            baseUrl: baseUrl(ctx, request),
            error: NAME_TOO_LONG,
          }),
        );
      }
      const { key } = await createAuditedKey(request, principal, current.id, name ?? null);
      return sendPage(
        reply,
        201,
        projectKeysPage(principal, current, await keysOf(current.id), {
          baseUrl: baseUrl(ctx, request),
          created: { key },
        }),
      );
    },
  );

  pages.get('/keys', { config: access('admin') }, async (request, reply) => {
    const principal = session(request);
    return sendPage(reply, 200, adminKeysPage(principal, await keysOf(null), {}));
  });

  pages.post<{ Body: Form | undefined }>(
    '/keys',
    { config: access('admin') },
    async (request, reply) => {
      const principal = session(request);
      const name = given(request.body ?? {}, 'name');
      if (name !== undefined && name.length > 200) {
        return sendPage(
          reply,
          400,
          adminKeysPage(principal, await keysOf(null), { error: NAME_TOO_LONG }),
        );
      }
      const { key } = await createAuditedKey(request, principal, null, name ?? null);
      return sendPage(
        reply,
        201,
        adminKeysPage(principal, await keysOf(null), { created: { key } }),
      );
    },
  );

  // The key's id, name and project in the log: never the key.
  const createAuditedKey = (
    request: FastifyRequest,
    principal: Principal,
    projectId: string | null,
    name: string | null,
  ) =>
    auditedChange(ctx, whoOf(request, principal), async (db) => {
      const made = await createKey(db, { projectId, name });
      return {
        result: made,
        entry: {
          action: 'key.create',
          target: { kind: 'key', id: made.row.id },
          details: { name, projectId },
        },
      };
    });

  const keyRecord = async (id: string) => {
    const key = isId('key', id) ? (await listKeys(ctx)).find((k) => k.id === id) : undefined;
    if (!key) throw new AppError('not_found', `key ${id} not found`);
    return toKeyRecord(key);
  };
  const keysPageOf = (projectId: string | null) =>
    projectId === null ? '/keys' : `/projects/${projectId}/keys`;

  pages.get<{ Params: { id: string } }>(
    '/keys/:id/revoke',
    { config: access('admin') },
    async (request, reply) => {
      const principal = session(request);
      const key = await keyRecord(request.params.id);
      return sendPage(reply, 200, revokePage(principal, key, keysPageOf(key.projectId)));
    },
  );

  pages.post<{ Params: { id: string } }>(
    '/keys/:id/revoke',
    { config: access('admin') },
    async (request, reply) => {
      const key = toKeyRecord(
        await auditedChange(ctx, whoOf(request, session(request)), async (db) => ({
          result: await revokeKey({ db }, request.params.id),
          entry: { action: 'key.revoke', target: { kind: 'key', id: request.params.id } },
        })),
      );
      // A project that no longer exists has no keys page to go back to.
      const back =
        key.projectId !== null && !(await findProject(ctx, key.projectId))
          ? '/keys'
          : keysPageOf(key.projectId);
      return reply.redirect(back, 303);
    },
  );
}
