// GET /v2/admin/audit: the audit log, newest first, a page at a time (`limit`, `cursor` from
// the previous page's `nextCursor`), with filters by actor, action, target and time.

import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { listAudit } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { access } from '../../keys/route-access.ts';
import { AUDIT_ACTIONS, auditRecord } from '../../records/audit.ts';
import { errors, json } from '../../responses.ts';
import { pageQuery } from '../schemas.ts';

const once = (name: string) => ({ error: `"${name}" must be given once` });
const time = (name: string) =>
  z.iso
    .datetime({
      offset: true,
      error: `"${name}" must be an ISO 8601 time, such as 2026-11-28T00:00:00Z`,
    })
    .transform((value) => new Date(value))
    .optional();

const query = pageQuery('rows').extend({
  actor: z
    .string(once('actor'))
    .min(1)
    .max(300)
    .optional()
    .describe(
      "Only rows of this actor: a user's id (usr_…), an API key's id (key_…), or a forge user as <forge>:<login>.",
    ),
  action: z
    .enum(AUDIT_ACTIONS, { error: `"action" must be one of ${AUDIT_ACTIONS.join(', ')}` })
    .optional()
    .describe('Only rows of this action.'),
  target: z
    .string(once('target'))
    .min(1)
    .max(300)
    .optional()
    .describe("Only rows on this target's id (a job's, a project's, a key's, a secret's name…)."),
  since: time('since').describe('Only rows at or after this time.'),
  until: time('until').describe('Only rows before this time.'),
});

export function registerAdminAuditRoute(app: FastifyInstance, ctx: AppContext): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v2/admin/audit',
    {
      config: access('admin'),
      schema: {
        tags: ['admin'],
        security: [{ bearerAuth: [] }],
        summary: 'List audit log',
        description:
          'Every change of state, and every refused attempt at one, newest first: who (a user, a key or a forge user), from which address, what, on what, the outcome and the request id. Never holds a secret.',
        querystring: query,
        response: {
          200: json(
            'A page of the audit log.',
            z.object({
              entries: z.array(auditRecord),
              nextCursor: z
                .string()
                .nullable()
                .describe('Pass as cursor for the next page; null on the last page.'),
            }),
          ),
          ...errors(400, 401, 403, 503),
        },
      },
    },
    async (request) => listAudit(ctx.db, request.query),
  );
}
