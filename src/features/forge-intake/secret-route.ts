// POST /v2/admin/projects/{id}/forge-webhook-secret: the forge intake's setup. Makes the
// project a new random webhook secret and answers it with what the admin gives the forge: the
// URL its webhook requests go to (route.ts) and the events to tick in its form.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { auditAfter, whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { access } from '../../keys/route-access.ts';
import { generateForgeWebhookSecret, toProjectRecord } from '../../projects/service.ts';
import { projectRecord } from '../../records/project.ts';
import { errors, json } from '../../responses.ts';
import { payloadReaders } from './payloads/readers.ts';
import { forgeWebhookUrl } from './receive.ts';

const params = z.object({ id: z.string().describe('The project id (prj_ and 20 characters).') });

const forgeWebhookSecret = z.object({
  secret: z
    .string()
    .describe(
      "The new secret, to paste into the forge's webhook form: shown in this response only.",
    ),
  url: z.string().describe('The payload URL to give the forge.'),
  events: z.array(z.string()).describe("The events to select in the forge's webhook form."),
  project: projectRecord,
});
const admin = { tags: ['admin'], security: [{ bearerAuth: [] }] };

export function registerForgeWebhookSecret(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().post(
    '/v2/admin/projects/:id/forge-webhook-secret',
    {
      config: {
        ...access('maintainer'),
        audit: { action: 'project.forge_secret', target: 'project' },
      },
      schema: {
        ...admin,
        summary: 'Make a forge webhook secret',
        description:
          "Makes the project a new random secret for its forge's webhook deliveries, replacing any, and returns it with the URL and the events to give the forge. The secret is shown in this response only. Refused for a plain git project.",
        params,
        response: {
          200: json('The new secret, shown this once.', forgeWebhookSecret),
          ...errors(400, 401, 403, 404, 503),
        },
      },
    },
    async (request) => {
      const { row, secret } = await generateForgeWebhookSecret(ctx, request.params.id);
      // That a new secret was made, never the secret.
      await auditAfter(ctx, whoOf(request, request.principal), {
        action: 'project.forge_secret',
        target: { kind: 'project', id: row.id },
      });
      const project = toProjectRecord(ctx, row);
      const base = ctx.config.publicUrl ?? `${request.protocol}://${request.host}`;
      return {
        secret,
        url: forgeWebhookUrl(base, row.id),
        events: [...(payloadReaders.get(project.forge.kind)?.webhookEvents ?? [])],
        project,
      };
    },
  );
}
