// The routes of a project's secrets on the dashboard, for admin sessions only: the form that
// sets one, and the delete confirmation. They call the secrets service the admin API calls; a
// refusal is shown on the settings page with its message, the value never filled in again.
import type { FastifyInstance } from 'fastify';
import { auditAfter, whoOf } from '../audit/audit.ts';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { access } from '../keys/route-access.ts';
import { afterSecretChanged } from '../projects/environment-builds.ts';
import { deleteSecret, listSecrets, putSecret, type SecretExposure } from '../projects/secrets.ts';
import { getProject, toProjectRecord } from '../projects/service.ts';
import { SECRET_EXPOSURES } from '../records/secret.ts';
import { type Form, sendPage, session } from './requests.ts';
import { deleteSecretPage } from './secret-pages.ts';
import { projectSettingsPage } from './settings-page.ts';

function exposureOf(value: string | undefined): SecretExposure {
  const exposure = SECRET_EXPOSURES.find((e) => e === (value || 'setup'));
  if (!exposure)
    throw new AppError('bad_request', `"exposure" must be one of ${SECRET_EXPOSURES.join(', ')}`);
  return exposure;
}

export function registerSecretRoutes(pages: FastifyInstance, ctx: AppContext): void {
  const project = async (id: string) => toProjectRecord(ctx, await getProject(ctx, id));
  const settings = (id: string, query: string) => `/projects/${id}/settings?${query}#secrets`;

  pages.post<{ Params: { id: string }; Body: Form | undefined }>(
    '/projects/:id/secrets',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await project(request.params.id);
      const form = request.body ?? {};
      const name = (form.name ?? '').trim();
      try {
        // The value exactly as typed: spaces around it may be part of it.
        const { created } = await putSecret(ctx, current.id, name, {
          value: form.value ?? '',
          exposure: exposureOf(form.exposure),
        });
        // The secret's name: never its value.
        await auditAfter(ctx, whoOf(request, principal), {
          action: 'secret.set',
          target: { kind: 'secret', id: name },
          details: { projectId: current.id, created },
        });
        await afterSecretChanged(ctx, current.id);
        return reply.redirect(settings(current.id, `secret=${encodeURIComponent(name)}`), 303);
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        return sendPage(
          reply,
          err.status,
          await projectSettingsPage(ctx, principal, current, {
            secrets: { error: err.message, values: { name, exposure: form.exposure } },
          }),
        );
      }
    },
  );

  const secretOf = async (projectId: string, name: string) => {
    const secret = (await listSecrets(ctx, projectId)).find((s) => s.name === name);
    if (!secret) throw new AppError('not_found', `project ${projectId} has no secret ${name}`);
    return secret;
  };

  pages.get<{ Params: { id: string; name: string } }>(
    '/projects/:id/secrets/:name/delete',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await project(request.params.id);
      const secret = await secretOf(current.id, request.params.name);
      return sendPage(reply, 200, deleteSecretPage(principal, current, secret));
    },
  );

  pages.post<{ Params: { id: string; name: string } }>(
    '/projects/:id/secrets/:name/delete',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await project(request.params.id);
      await deleteSecret(ctx, current.id, request.params.name);
      await auditAfter(ctx, whoOf(request, principal), {
        action: 'secret.delete',
        target: { kind: 'secret', id: request.params.name },
        details: { projectId: current.id },
      });
      await afterSecretChanged(ctx, current.id);
      return reply.redirect(
        settings(current.id, `deleted=${encodeURIComponent(request.params.name)}`),
        303,
      );
    },
  );
}
