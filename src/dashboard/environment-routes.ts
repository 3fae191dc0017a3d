// The routes of a project's environments on the dashboard, for admin sessions only: rebuild in
// the background, drop one key or all. They call what the admin API calls; a refusal (a project
// without a setup command) is shown on the settings page with its message.
import type { FastifyInstance } from 'fastify';
import { auditAfter, whoOf } from '../audit/audit.ts';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { access } from '../keys/route-access.ts';
import { rebuildEnvironment } from '../projects/environment-builds.ts';
import { deleteEnvironments } from '../projects/environments.ts';
import { getProject, toProjectRecord } from '../projects/service.ts';
import { sendPage, session } from './requests.ts';
import { projectSettingsPage } from './settings-page.ts';

export function registerEnvironmentRoutes(pages: FastifyInstance, ctx: AppContext): void {
  const project = async (id: string) => toProjectRecord(ctx, await getProject(ctx, id));
  const settings = (id: string, query: string) => `/projects/${id}/settings?${query}#environments`;

  pages.post<{ Params: { id: string } }>(
    '/projects/:id/environments/rebuild',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await project(request.params.id);
      try {
        await rebuildEnvironment(ctx, current.id);
        await auditAfter(ctx, whoOf(request, principal), {
          action: 'environment.rebuild',
          target: { kind: 'project', id: current.id },
        });
        return reply.redirect(settings(current.id, 'rebuilt=1'), 303);
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        return sendPage(
          reply,
          err.status,
          await projectSettingsPage(ctx, principal, current, {
            environments: { error: err.message },
          }),
        );
      }
    },
  );

  pages.post<{ Params: { id: string } }>(
    '/projects/:id/environments/delete',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await project(request.params.id);
      const deleted = await deleteEnvironments(ctx, current.id);
      await auditAfter(ctx, whoOf(request, principal), {
        action: 'environment.delete',
        target: { kind: 'project', id: current.id },
        details: { deleted },
      });
      return reply.redirect(settings(current.id, 'dropped=all'), 303);
    },
  );

  pages.post<{ Params: { id: string; key: string } }>(
    '/projects/:id/environments/:key/delete',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await project(request.params.id);
      const deleted = await deleteEnvironments(ctx, current.id, request.params.key);
      await auditAfter(ctx, whoOf(request, principal), {
        action: 'environment.delete',
        target: { kind: 'environment', id: request.params.key },
        details: { projectId: current.id, deleted },
      });
      return reply.redirect(
        settings(current.id, `dropped=${encodeURIComponent(request.params.key)}`),
        303,
      );
    },
  );
}
