// The personal API tokens page's routes, for a user's session only (a key has no tokens): the
// user's own tokens, making one (shown once, in the answer to the form) and revoking one after a
// confirmation. They call the token service (src/users/tokens.ts).

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { auditedChange, whoOf } from '../audit/audit.ts';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { access } from '../keys/route-access.ts';
import { isServerAdmin, type UserPrincipal } from '../keys/service.ts';
import { listProjects } from '../projects/service.ts';
import { createToken, getToken, listTokens, revokeToken } from '../users/tokens.ts';
import { type Form, given, sendPage, session } from './requests.ts';
import { revokeTokenPage, type TokenProject, tokensPage } from './token-pages.ts';

/** The session's user; a key's session is refused: tokens belong to people. */
function user(request: FastifyRequest): UserPrincipal {
  const principal = session(request);
  if (principal.kind !== 'user') {
    throw new AppError(
      'forbidden',
      'personal API tokens belong to a user: sign in through the identity provider',
    );
  }
  return principal;
}

export function registerTokenRoutes(pages: FastifyInstance, ctx: AppContext): void {
  const projectsOf = async (principal: UserPrincipal): Promise<TokenProject[]> =>
    (await listProjects(ctx))
      .filter((row) => isServerAdmin(principal) || principal.roles.has(row.id))
      .map((row) => ({ id: row.id, name: row.name }));
  const render = async (
    principal: UserPrincipal,
    opts: { created?: string; error?: string | undefined },
  ) =>
    tokensPage(principal, await listTokens(ctx.db, principal.userId), await projectsOf(principal), {
      ...opts,
      now: new Date(),
    });

  pages.get('/tokens', { config: access('person') }, async (request, reply) => {
    return sendPage(reply, 200, await render(user(request), {}));
  });

  pages.post<{ Body: Form | undefined }>(
    '/tokens',
    { config: access('person') },
    async (request, reply) => {
      const principal = user(request);
      const form = request.body ?? {};
      const days = given(form, 'expiresInDays');
      const projects = await projectsOf(principal);
      try {
        const opts = {
          name: given(form, 'name') ?? '',
          expiresInDays: days === undefined ? Number.NaN : Number(days),
          // Only projects the user has a role on can be ticked: others are not offered.
          projectIds: projects
            .filter((project) => form[`project_${project.id}`] === '1')
            .map((project) => project.id),
          readOnly: form.readOnly === '1',
        };
        // The token's id, name and limits in the log: never the token.
        const { token } = await auditedChange(ctx, whoOf(request, principal), async (db) => {
          const made = await createToken(db, principal.userId, opts);
          return {
            result: made,
            entry: {
              action: 'token.create',
              target: { kind: 'token', id: made.row.id },
              details: {
                name: made.row.name,
                projectIds: made.row.project_ids ?? [],
                readOnly: made.row.read_only,
                expiresAt: made.row.expires_at.toISOString(),
              },
            },
          };
        });
        return sendPage(reply, 201, await render(principal, { created: token }));
      } catch (err) {
        if (!(err instanceof AppError) || err.status !== 400) throw err;
        return sendPage(reply, 400, await render(principal, { error: err.message }));
      }
    },
  );

  pages.get<{ Params: { id: string } }>(
    '/tokens/:id/revoke',
    { config: access('person') },
    async (request, reply) => {
      const principal = user(request);
      const token = await getToken(ctx.db, principal.userId, request.params.id);
      return sendPage(reply, 200, revokeTokenPage(principal, token));
    },
  );

  pages.post<{ Params: { id: string } }>(
    '/tokens/:id/revoke',
    { config: access('person') },
    async (request, reply) => {
      const principal = user(request);
      await auditedChange(ctx, whoOf(request, principal), async (db) => ({
        result: await revokeToken(db, principal.userId, request.params.id),
        entry: { action: 'token.revoke', target: { kind: 'token', id: request.params.id } },
      }));
      return reply.redirect('/tokens', 303);
    },
  );
}
