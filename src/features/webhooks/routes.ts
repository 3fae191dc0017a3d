// Admin API for a project's webhook endpoints, under /v2/admin/projects/{projectId}/webhooks:
// create, list, get, update, delete, rotate the signing secret, read the delivery log and
// redeliver. The schemas check each field's shape; the endpoint service checks what needs the
// server (the target's addresses, ERRAND_SECRET_KEY, the stored endpoint).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { auditAfter, whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { pageQuery } from '../../http/schemas.ts';
import { access } from '../../keys/route-access.ts';
import { errorBody, errors, json } from '../../responses.ts';
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listDeliveries,
  listWebhooks,
  MAX_DESCRIPTION_CHARS,
  MAX_OVERLAP_SECONDS,
  MAX_URL_CHARS,
  MAX_WEBHOOKS_PER_PROJECT,
  redeliver,
  rotateWebhookSecret,
  updateWebhook,
} from './endpoints.ts';
import { deliveryRecord, WEBHOOK_EVENT_TYPES, webhookRecord, webhookWithSecret } from './types.ts';

const URL_TEXT = `"url" must be a string of 1 to ${MAX_URL_CHARS} characters`;
const EVENTS = `"events" must be a non-empty list of ${WEBHOOK_EVENT_TYPES.join(', ')}`;
const DESCRIPTION = `"description" must be a string of at most ${MAX_DESCRIPTION_CHARS} characters, or null`;
const OVERLAP = `"overlapSeconds" must be an integer from 0 to ${MAX_OVERLAP_SECONDS}`;

const fields = {
  url: z
    .string({
      error: (issue) => (issue.input === undefined ? '"url" is required' : URL_TEXT),
    })
    .min(1, { error: URL_TEXT })
    .max(MAX_URL_CHARS, { error: URL_TEXT })
    .describe(
      'Where deliveries are POSTed: https:// to a public address (http:// and private addresses only with ERRAND_WEBHOOK_ALLOW_PRIVATE=true).',
    ),
  events: z
    .array(
      z.enum(WEBHOOK_EVENT_TYPES, {
        error: (issue) =>
          `"events": ${JSON.stringify(issue.input)} is not an event type; use ${WEBHOOK_EVENT_TYPES.join(', ')}`,
      }),
      { error: EVENTS },
    )
    .min(1, { error: EVENTS })
    .describe('The event types to deliver; every type when not given.'),
  description: z
    .string({ error: DESCRIPTION })
    .max(MAX_DESCRIPTION_CHARS, { error: DESCRIPTION })
    .nullable()
    .describe('A note to recognise the endpoint by (null clears it).'),
  enabled: z
    .boolean({ error: '"enabled" must be a boolean' })
    .describe('A disabled endpoint gets no deliveries; true when not given.'),
};

const notAnObject = {
  error: (issue: z.core.$ZodRawIssue) =>
    issue.code === 'invalid_type' ? 'request body must be a JSON object' : undefined,
};

const createBody = z.strictObject(
  {
    url: fields.url,
    events: fields.events.optional(),
    description: fields.description.optional(),
    enabled: fields.enabled.optional(),
  },
  notAnObject,
);

const updateBody = z
  .strictObject(
    {
      url: fields.url.optional(),
      events: fields.events.optional(),
      description: fields.description.optional(),
      enabled: fields.enabled.optional(),
    },
    notAnObject,
  )
  .refine((body) => Object.values(body).some((value) => value !== undefined), {
    error: 'give at least one of "url", "events", "description", "enabled"',
  });

const rotateBody = z
  .strictObject(
    {
      overlapSeconds: z
        .number({ error: OVERLAP })
        .int({ error: OVERLAP })
        .min(0, { error: OVERLAP })
        .max(MAX_OVERLAP_SECONDS, { error: OVERLAP })
        .default(86_400)
        .describe(
          'How long the current secret keeps signing beside the new one (0: not at all). A day when not given.',
        ),
    },
    notAnObject,
  )
  // Fastify validates a request without a body as null, so null stands for no body.
  .nullish()
  .describe('Optional: without a body, the overlap is a day.');

const deliveriesQuery = pageQuery('deliveries');

const projectId = z.string().describe('The project id (prj_ and 20 characters).');
const webhookId = z.string().describe('The webhook id (whk_ and 20 characters).');
const projectParams = z.object({ projectId });
const webhookParams = z.object({ projectId, webhookId });
const deliveryParams = z.object({
  projectId,
  webhookId,
  deliveryId: z.string().describe('The delivery id (msg_ and 20 characters).'),
});

const admin = { tags: ['admin'], security: [{ bearerAuth: [] }] };
const base = '/v2/admin/projects/:projectId/webhooks';

export function registerWebhookRoutes(app: FastifyInstance, ctx: AppContext): void {
  registerCollectionRoutes(app, ctx);
  registerEndpointRoutes(app, ctx);
  registerRotateRoute(app, ctx);
  registerDeliveryRoutes(app, ctx);
}

/** Create an endpoint and list the project's endpoints. */
function registerCollectionRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.post(
    base,
    {
      config: { ...access('maintainer'), audit: { action: 'webhook.create', target: 'project' } },
      schema: {
        ...admin,
        summary: 'Create webhook',
        description:
          'Adds an endpoint that receives the project’s job events, signed as the Standard Webhooks specification says. The signing secret is in this response only. Needs ERRAND_SECRET_KEY on the server.',
        params: projectParams,
        body: createBody,
        response: {
          201: json('The new endpoint, with its signing secret.', webhookWithSecret),
          ...errors(400, 401, 403, 404, 413, 415, 503),
          409: json(`The project already has ${MAX_WEBHOOKS_PER_PROJECT} webhooks.`, errorBody),
        },
      },
    },
    async (request, reply) => {
      const created = await createWebhook(ctx, request.params.projectId, request.body);
      // The endpoint's id and events: never its signing secret, nor its URL (which can carry
      // a credential).
      await auditAfter(ctx, whoOf(request, request.principal), {
        action: 'webhook.create',
        target: { kind: 'webhook', id: created.id },
        details: { projectId: request.params.projectId },
      });
      return reply.code(201).send(created);
    },
  );
  typed.get(
    base,
    {
      config: access('maintainer'),
      schema: {
        ...admin,
        summary: 'List webhooks',
        params: projectParams,
        response: {
          200: json(
            'The project’s endpoints, oldest first, without secrets.',
            z.object({ webhooks: z.array(webhookRecord) }),
          ),
          ...errors(401, 403, 404, 503),
        },
      },
    },
    async (request) => ({ webhooks: await listWebhooks(ctx, request.params.projectId) }),
  );
}

/** Read, change and delete one endpoint. */
function registerEndpointRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.get(
    `${base}/:webhookId`,
    {
      config: access('maintainer'),
      schema: {
        ...admin,
        summary: 'Get webhook',
        params: webhookParams,
        response: {
          200: json('The endpoint, without its secret.', webhookRecord),
          ...errors(401, 403, 404, 503),
        },
      },
    },
    async (request) => getWebhook(ctx, request.params.projectId, request.params.webhookId),
  );
  typed.patch(
    `${base}/:webhookId`,
    {
      config: { ...access('maintainer'), audit: { action: 'webhook.update', target: 'webhook' } },
      schema: {
        ...admin,
        summary: 'Update webhook',
        description:
          'Changes the given fields. Deliveries already written go to the endpoint as it is when they are attempted.',
        params: webhookParams,
        body: updateBody,
        response: {
          200: json('The endpoint as it is now.', webhookRecord),
          ...errors(400, 401, 403, 404, 413, 415, 503),
        },
      },
    },
    async (request) => {
      const { projectId, webhookId } = request.params;
      const updated = await updateWebhook(ctx, projectId, webhookId, request.body);
      await auditAfter(ctx, whoOf(request, request.principal), {
        action: 'webhook.update',
        target: { kind: 'webhook', id: webhookId },
        details: { projectId, fields: Object.keys(request.body).sort() },
      });
      return updated;
    },
  );
  typed.delete(
    `${base}/:webhookId`,
    {
      config: { ...access('maintainer'), audit: { action: 'webhook.delete', target: 'webhook' } },
      schema: {
        ...admin,
        summary: 'Delete webhook',
        description: 'Deletes the endpoint and its delivery log; pending deliveries are not sent.',
        params: webhookParams,
        response: {
          204: z.null().describe('Deleted.'),
          ...errors(401, 403, 404, 503),
        },
      },
    },
    async (request, reply) => {
      await deleteWebhook(ctx, request.params.projectId, request.params.webhookId);
      await auditAfter(ctx, whoOf(request, request.principal), {
        action: 'webhook.delete',
        target: { kind: 'webhook', id: request.params.webhookId },
        details: { projectId: request.params.projectId },
      });
      return reply.code(204).send(null);
    },
  );
}

/** A new signing secret, the previous one signing beside it for the overlap. */
function registerRotateRoute(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().post(
    `${base}/:webhookId/rotate-secret`,
    {
      config: {
        ...access('maintainer'),
        audit: { action: 'webhook.rotate_secret', target: 'webhook' },
      },
      schema: {
        ...admin,
        summary: 'Rotate webhook secret',
        description:
          'Makes a new signing secret, shown in this response only. For overlapSeconds the previous secret signs too (a second signature in webhook-signature), so receivers can switch without refusing a delivery.',
        params: webhookParams,
        body: rotateBody,
        response: {
          200: json('The endpoint, with its new signing secret.', webhookWithSecret),
          ...errors(400, 401, 403, 404, 413, 415, 503),
        },
      },
    },
    async (request) => {
      const overlapSeconds = request.body?.overlapSeconds ?? 86_400;
      const rotated = await rotateWebhookSecret(
        ctx,
        request.params.projectId,
        request.params.webhookId,
        overlapSeconds,
      );
      await auditAfter(ctx, whoOf(request, request.principal), {
        action: 'webhook.rotate_secret',
        target: { kind: 'webhook', id: request.params.webhookId },
        details: { projectId: request.params.projectId, overlapSeconds },
      });
      return rotated;
    },
  );
}

/** An endpoint's delivery log and sending one of its deliveries again. */
function registerDeliveryRoutes(app: FastifyInstance, ctx: AppContext): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.get(
    `${base}/:webhookId/deliveries`,
    {
      config: access('maintainer'),
      schema: {
        ...admin,
        summary: 'List webhook deliveries',
        description: 'The delivery log, newest first, each delivery with its attempts.',
        params: webhookParams,
        querystring: deliveriesQuery,
        response: {
          200: z
            .object({
              deliveries: z.array(deliveryRecord),
              nextCursor: z
                .string()
                .nullable()
                .describe('Pass as cursor for the next page; null on the last page.'),
            })
            .describe('A page of deliveries.'),
          ...errors(400, 401, 403, 404, 503),
        },
      },
    },
    async (request) =>
      listDeliveries(ctx, request.params.projectId, request.params.webhookId, request.query),
  );
  typed.post(
    `${base}/:webhookId/deliveries/:deliveryId/redeliver`,
    {
      config: {
        ...access('maintainer'),
        audit: { action: 'webhook.redeliver', target: 'webhook' },
      },
      schema: {
        ...admin,
        summary: 'Redeliver',
        description:
          'Sends a delivered or failed delivery again, with the same webhook-id and payload; its attempts continue in the log.',
        params: deliveryParams,
        response: {
          202: deliveryRecord.describe('The delivery, pending again.'),
          ...errors(401, 403, 404, 503),
          409: json('The delivery is still pending, or the endpoint is disabled.', errorBody),
        },
      },
    },
    async (request, reply) => {
      const { projectId, webhookId, deliveryId } = request.params;
      const delivery = await redeliver(ctx, projectId, webhookId, deliveryId);
      await auditAfter(ctx, whoOf(request, request.principal), {
        action: 'webhook.redeliver',
        target: { kind: 'webhook', id: webhookId },
        details: { projectId, deliveryId },
      });
      return reply.code(202).send(delivery);
    },
  );
}
