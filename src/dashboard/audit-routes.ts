// The audit log's page (admin), through the same reader and the same checks of its filters as
// GET /v2/admin/audit: a filter the API would refuse is shown as the API's message.
import type { FastifyInstance } from 'fastify';
import { listAudit } from '../audit/audit.ts';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { access } from '../keys/route-access.ts';
import { AUDIT_ACTIONS } from '../records/audit.ts';
import { actorLabel, actorNames } from './actors.ts';
import { type AuditFilters, auditPage } from './audit-pages.ts';
import { sendPage, session } from './requests.ts';

const ROWS_PER_PAGE = 50;

function time(name: string, value: string | undefined): Date | undefined {
  if (!value) return undefined;
  const at = new Date(value);
  if (Number.isNaN(at.getTime()))
    throw new AppError(
      'bad_request',
      `"${name}" must be an ISO 8601 time, such as 2026-11-28T00:00:00Z`,
    );
  return at;
}

export function registerAuditRoutes(pages: FastifyInstance, ctx: AppContext): void {
  pages.get<{ Querystring: AuditFilters & { cursor?: string } }>(
    '/audit',
    { config: access('admin') },
    async (request, reply) => {
      const principal = session(request);
      const { cursor, ...filters } = request.query;
      try {
        const action = filters.action
          ? (AUDIT_ACTIONS.find((a) => a === filters.action) ??
            (() => {
              throw new AppError(
                'bad_request',
                `"action" must be one of ${AUDIT_ACTIONS.join(', ')}`,
              );
            })())
          : undefined;
        const listed = await listAudit(ctx.db, {
          limit: ROWS_PER_PAGE,
          cursor: cursor || undefined,
          actor: filters.actor?.trim() || undefined,
          action,
          target: filters.target?.trim() || undefined,
          since: time('since', filters.since),
          until: time('until', filters.until),
        });
        const names = await actorNames(
          ctx.db,
          listed.entries.map((e) => e.actor),
        );
        const rows = listed.entries.map((entry) => ({
          entry,
          actor: actorLabel(entry.actor, names),
        }));
        return sendPage(reply, 200, auditPage(principal, rows, filters, listed.nextCursor));
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        return sendPage(reply, err.status, auditPage(principal, [], filters, null, err.message));
      }
    },
  );
}
