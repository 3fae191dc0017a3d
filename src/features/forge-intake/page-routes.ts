// The routes of a project's forge webhook page: the page, a new secret made by Errand (shown
// on the answer's page only), and the form that sets a chosen secret, the handle and the label,
// or removes the secret. Checked by the admin API's schemas, saved through the project service.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { auditAfter, auditedChange, whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { baseUrl, type Form, given, parse, sendPage, session } from '../../dashboard/requests.ts';
import { AppError } from '../../errors.ts';
import { forgeProviders } from '../../forges/registry.ts';
import { access } from '../../keys/route-access.ts';
import { projectUpdateBody } from '../../projects/schemas.ts';
import {
  generateForgeWebhookSecret,
  getProject,
  toProjectRecord,
  updateProject,
} from '../../projects/service.ts';
import type { ProjectRecord } from '../../records/project.ts';
import { type ForgeWebhookView, forgeWebhookPage, OUTCOMES, RECENT_EVENTS } from './pages.ts';
import { payloadReaders } from './payloads/readers.ts';
import { forgeWebhookUrl } from './receive.ts';
import { recentEvents } from './records.ts';

export function registerForgeWebhookPages(pages: FastifyInstance, ctx: AppContext): void {
  /** `outcome`: the filter of the events received, as the query gives it ('' or absent: all). */
  const view = async (
    request: FastifyRequest,
    project: ProjectRecord,
    outcome?: string,
  ): Promise<ForgeWebhookView> => {
    const provider = forgeProviders.get(project.forge.kind);
    const reader = payloadReaders.get(project.forge.kind);
    const chosen = outcome ? OUTCOMES.find((o) => o === outcome) : undefined;
    if (outcome && !chosen)
      throw new AppError('bad_request', `"outcome" must be one of ${OUTCOMES.join(', ')}`);
    return {
      project,
      url: forgeWebhookUrl(baseUrl(ctx, request), project.id),
      events: reader?.webhookEvents ?? [],
      forgeName: provider?.name,
      received: await recentEvents(ctx.db, project.id, RECENT_EVENTS, chosen),
      outcome: chosen,
    };
  };
  const project = async (id: string) => toProjectRecord(ctx, await getProject(ctx, id));

  pages.get<{ Params: { id: string }; Querystring: { saved?: string; outcome?: string } }>(
    '/projects/:id/forge-webhook',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await project(request.params.id);
      return sendPage(
        reply,
        200,
        forgeWebhookPage(principal, await view(request, current, request.query.outcome), {
          saved: request.query.saved === '1',
        }),
      );
    },
  );

  pages.post<{ Params: { id: string } }>(
    '/projects/:id/forge-webhook/secret',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await project(request.params.id);
      try {
        const { row, secret } = await generateForgeWebhookSecret(ctx, current.id);
        // That a new secret was made, never the secret.
        await auditAfter(ctx, whoOf(request, principal), {
          action: 'project.forge_secret',
          target: { kind: 'project', id: row.id },
        });
        return sendPage(
          reply,
          200,
          forgeWebhookPage(principal, await view(request, toProjectRecord(ctx, row)), { secret }),
        );
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        return sendPage(
          reply,
          err.status,
          forgeWebhookPage(principal, await view(request, current), { error: err.message }),
        );
      }
    },
  );

  pages.post<{ Params: { id: string }; Body: Form | undefined }>(
    '/projects/:id/forge-webhook',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await project(request.params.id);
      const form = request.body ?? {};
      try {
        const secret = given(form, 'forgeWebhookSecret');
        const body = parse(projectUpdateBody, {
          forgeHandle: (form.forgeHandle ?? '').trim(),
          forgeLabel: form.forgeLabel ?? '',
          // An empty secret field keeps the secret set now.
          ...(form.clearSecret === '1'
            ? { forgeWebhookSecret: null }
            : secret !== undefined
              ? { forgeWebhookSecret: secret }
              : {}),
        });
        // Which fields, never their values (the webhook secret is one).
        await auditedChange(ctx, whoOf(request, principal), async (db) => ({
          result: await updateProject({ ...ctx, db }, current.id, body),
          entry: {
            action: 'project.update',
            target: { kind: 'project', id: current.id },
            details: { fields: Object.keys(body).sort() },
          },
        }));
        return reply.redirect(`/projects/${current.id}/forge-webhook?saved=1`, 303);
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        return sendPage(
          reply,
          err.status,
          forgeWebhookPage(principal, await view(request, current), {
            error: err.message,
            values: { forgeHandle: form.forgeHandle, forgeLabel: form.forgeLabel },
          }),
        );
      }
    },
  );
}
