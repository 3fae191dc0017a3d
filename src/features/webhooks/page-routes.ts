// The dashboard's webhook routes under /projects/:id/webhooks, for admin sessions only (as the
// admin API): they call the endpoint service the admin API calls, which checks what a person
// typed, and a refusal is shown on the form with its message. Registered inside the dashboard's
// signed-in scope, so its session, Origin check and headers apply.
import type { FastifyInstance } from 'fastify';
import { auditAfter, whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { type Form, sendPage, session } from '../../dashboard/requests.ts';
import { AppError } from '../../errors.ts';
import { isId } from '../../ids.ts';
import { access } from '../../keys/route-access.ts';
import type { Principal } from '../../keys/service.ts';
import { getProject, toProjectRecord } from '../../projects/service.ts';
import type { ProjectRecord } from '../../records/project.ts';
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listDeliveries,
  listWebhooks,
  redeliver,
  rotateWebhookSecret,
  updateWebhook,
} from './endpoints.ts';
import {
  DEFAULT_OVERLAP_HOURS,
  deleteWebhookPage,
  emptyWebhookForm,
  eventField,
  MAX_OVERLAP_HOURS,
  type WebhookForm,
  webhookPage,
  webhooksPage,
  webhookValues,
} from './pages.ts';
import {
  type DeliveryRecord,
  isWebhookEventType,
  WEBHOOK_EVENT_TYPES,
  type WebhookEventType,
  type WebhookRecord,
} from './types.ts';

const DELIVERIES_PER_PAGE = 20;

/** The form as typed: what the page shows again after a refusal. */
function formValues(form: Form): WebhookForm {
  return {
    url: form.url ?? '',
    events: WEBHOOK_EVENT_TYPES.filter((type) => form[eventField(type)] === '1'),
    description: form.description ?? '',
    enabled: form.enabled === '1',
  };
}

/** The ticked event types; a field of an unknown type cannot come from the page and is ignored. */
function ticked(values: WebhookForm): WebhookEventType[] {
  return values.events.filter(isWebhookEventType);
}

/** A refusal to show on the page; anything else (a database failure) is the error page's. */
function refusal(err: unknown): AppError {
  if (err instanceof AppError && err.status < 500) return err;
  throw err;
}

type ProjectParams = { Params: { id: string } };
type WebhookParams = { Params: { id: string; webhookId: string } };

async function loadProject(ctx: AppContext, id: string): Promise<ProjectRecord> {
  return toProjectRecord(ctx, await getProject(ctx, id));
}

/** The project's list of endpoints with the form to add one. */
async function listPage(
  ctx: AppContext,
  principal: Principal,
  current: ProjectRecord,
  opts: Omit<Parameters<typeof webhooksPage>[3], 'values'> & { values?: WebhookForm },
) {
  return webhooksPage(principal, current, await listWebhooks(ctx, current.id), {
    values: emptyWebhookForm,
    ...opts,
  });
}

/** One endpoint's page: its form, its secret and a page of its delivery log. */
async function detailPage(
  ctx: AppContext,
  principal: Principal,
  current: ProjectRecord,
  webhook: WebhookRecord,
  opts: Omit<Parameters<typeof webhookPage>[3], 'values' | 'deliveries' | 'nextCursor'> & {
    values?: WebhookForm;
    cursor?: string | undefined;
  },
) {
  const { cursor, ...rest } = opts;
  const listed = await listDeliveries(ctx, current.id, webhook.id, {
    limit: DELIVERIES_PER_PAGE,
    cursor: cursor || undefined,
  });
  return webhookPage(principal, current, webhook, {
    values: webhookValues(webhook),
    deliveries: listed.deliveries,
    nextCursor: listed.nextCursor,
    ...rest,
  });
}

export function registerWebhookPages(pages: FastifyInstance, ctx: AppContext): void {
  registerListPages(pages, ctx);
  registerEndpointPages(pages, ctx);
  registerRotatePage(pages, ctx);
  registerDeletePages(pages, ctx);
  registerRedeliverPage(pages, ctx);
}

/** The list page and its forms: add an endpoint, turn one on or off. */
function registerListPages(pages: FastifyInstance, ctx: AppContext): void {
  pages.get<ProjectParams>(
    '/projects/:id/webhooks',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await loadProject(ctx, request.params.id);
      return sendPage(reply, 200, await listPage(ctx, principal, current, {}));
    },
  );

  pages.post<ProjectParams & { Body: Form | undefined }>(
    '/projects/:id/webhooks',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await loadProject(ctx, request.params.id);
      const values = formValues(request.body ?? {});
      try {
        const created = await createWebhook(ctx, current.id, {
          url: values.url.trim(),
          events: ticked(values),
          description: values.description,
        });
        // The endpoint's id: never its signing secret, nor its URL (which can carry a credential).
        await auditAfter(ctx, whoOf(request, principal), {
          action: 'webhook.create',
          target: { kind: 'webhook', id: created.id },
          details: { projectId: current.id },
        });
        // The secret is in this answer only: a redirect would have to carry it in the URL.
        return sendPage(reply, 201, await listPage(ctx, principal, current, { created }));
      } catch (err) {
        const refused = refusal(err);
        return sendPage(
          reply,
          refused.status,
          await listPage(ctx, principal, current, { values, error: refused.message }),
        );
      }
    },
  );

  pages.post<WebhookParams & { Body: Form | undefined }>(
    '/projects/:id/webhooks/:webhookId/enabled',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await loadProject(ctx, request.params.id);
      const enabled = request.body?.enabled;
      if (enabled !== 'true' && enabled !== 'false') {
        throw new AppError('bad_request', '"enabled" must be true or false');
      }
      await updateWebhook(ctx, current.id, request.params.webhookId, {
        enabled: enabled === 'true',
      });
      await auditAfter(ctx, whoOf(request, principal), {
        action: 'webhook.update',
        target: { kind: 'webhook', id: request.params.webhookId },
        details: { projectId: current.id, fields: ['enabled'] },
      });
      return reply.redirect(`/projects/${current.id}/webhooks`, 303);
    },
  );
}

/** One endpoint's page and its form to change the endpoint. */
function registerEndpointPages(pages: FastifyInstance, ctx: AppContext): void {
  pages.get<WebhookParams & { Querystring: { cursor?: string; done?: string } }>(
    '/projects/:id/webhooks/:webhookId',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await loadProject(ctx, request.params.id);
      const webhook = await getWebhook(ctx, current.id, request.params.webhookId);
      const done = request.query.done;
      return sendPage(
        reply,
        200,
        await detailPage(ctx, principal, current, webhook, {
          cursor: request.query.cursor,
          notice:
            done === 'saved'
              ? 'Saved.'
              : done && isId('msg', done)
                ? `Delivery ${done} is queued again.`
                : undefined,
        }),
      );
    },
  );

  pages.post<WebhookParams & { Body: Form | undefined }>(
    '/projects/:id/webhooks/:webhookId',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await loadProject(ctx, request.params.id);
      const webhook = await getWebhook(ctx, current.id, request.params.webhookId);
      const values = formValues(request.body ?? {});
      try {
        await updateWebhook(ctx, current.id, webhook.id, {
          url: values.url.trim(),
          events: ticked(values),
          // An emptied description removes it.
          description: values.description.trim() || null,
          enabled: values.enabled,
        });
        await auditAfter(ctx, whoOf(request, principal), {
          action: 'webhook.update',
          target: { kind: 'webhook', id: webhook.id },
          details: { projectId: current.id, fields: ['description', 'enabled', 'events', 'url'] },
        });
        return reply.redirect(`/projects/${current.id}/webhooks/${webhook.id}?done=saved`, 303);
      } catch (err) {
        const refused = refusal(err);
        return sendPage(
          reply,
          refused.status,
          await detailPage(ctx, principal, current, webhook, { values, error: refused.message }),
        );
      }
    },
  );
}

function registerRotatePage(pages: FastifyInstance, ctx: AppContext): void {
  pages.post<WebhookParams & { Body: Form | undefined }>(
    '/projects/:id/webhooks/:webhookId/rotate',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await loadProject(ctx, request.params.id);
      const webhook = await getWebhook(ctx, current.id, request.params.webhookId);
      const typed = (request.body?.overlapHours ?? String(DEFAULT_OVERLAP_HOURS)).trim();
      const hours = /^\d{1,3}$/.test(typed) ? Number(typed) : Number.NaN;
      try {
        if (!(hours >= 0 && hours <= MAX_OVERLAP_HOURS)) {
          throw new AppError(
            'bad_request',
            `the overlap must be a whole number of hours from 0 to ${MAX_OVERLAP_HOURS}`,
          );
        }
        const rotated = await rotateWebhookSecret(ctx, current.id, webhook.id, hours * 3600);
        await auditAfter(ctx, whoOf(request, principal), {
          action: 'webhook.rotate_secret',
          target: { kind: 'webhook', id: webhook.id },
          details: { projectId: current.id, overlapSeconds: hours * 3600 },
        });
        return sendPage(
          reply,
          200,
          await detailPage(ctx, principal, current, rotated, { rotated }),
        );
      } catch (err) {
        const refused = refusal(err);
        return sendPage(
          reply,
          refused.status,
          await detailPage(ctx, principal, current, webhook, {
            rotateError: refused.message,
            overlapHours: typed,
          }),
        );
      }
    },
  );
}

/** The page that asks before deleting, and the delete. */
function registerDeletePages(pages: FastifyInstance, ctx: AppContext): void {
  pages.get<WebhookParams>(
    '/projects/:id/webhooks/:webhookId/delete',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await loadProject(ctx, request.params.id);
      const webhook = await getWebhook(ctx, current.id, request.params.webhookId);
      return sendPage(reply, 200, deleteWebhookPage(principal, current, webhook));
    },
  );

  pages.post<WebhookParams>(
    '/projects/:id/webhooks/:webhookId/delete',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await loadProject(ctx, request.params.id);
      await deleteWebhook(ctx, current.id, request.params.webhookId);
      await auditAfter(ctx, whoOf(request, principal), {
        action: 'webhook.delete',
        target: { kind: 'webhook', id: request.params.webhookId },
        details: { projectId: current.id },
      });
      return reply.redirect(`/projects/${current.id}/webhooks`, 303);
    },
  );
}

function registerRedeliverPage(pages: FastifyInstance, ctx: AppContext): void {
  pages.post<{ Params: { id: string; webhookId: string; deliveryId: string } }>(
    '/projects/:id/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
    { config: access('maintainer') },
    async (request, reply) => {
      const principal = session(request);
      const current = await loadProject(ctx, request.params.id);
      const webhook = await getWebhook(ctx, current.id, request.params.webhookId);
      let delivery: DeliveryRecord;
      try {
        delivery = await redeliver(ctx, current.id, webhook.id, request.params.deliveryId);
        await auditAfter(ctx, whoOf(request, principal), {
          action: 'webhook.redeliver',
          target: { kind: 'webhook', id: webhook.id },
          details: { projectId: current.id, deliveryId: delivery.id },
        });
      } catch (err) {
        const refused = refusal(err);
        // An unknown delivery is a wrong address, not a refusal to explain beside the log.
        if (refused.code === 'not_found') throw refused;
        return sendPage(
          reply,
          refused.status,
          await detailPage(ctx, principal, current, webhook, { deliveryError: refused.message }),
        );
      }
      return reply.redirect(
        `/projects/${current.id}/webhooks/${webhook.id}?done=${delivery.id}#deliveries`,
        303,
      );
    },
  );
}
