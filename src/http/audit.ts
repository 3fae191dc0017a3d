// The audit log at the API's edge: each route that changes state names its action in its
// config (`config: { audit }`), and a request to it that is refused leaves a row too, written by
// the error handler (errors.ts). Its success row is written by the change itself, with the
// request's Who (whoOf).
import type { FastifyRequest } from 'fastify';
import { type AuditEntry, type Auditing, auditAfter, whoOf } from '../audit/audit.ts';
import type { AppError } from '../errors.ts';
import type { AuditAction } from '../records/audit.ts';

/** A route's action, and the kind of what its path's last id parameter names. */
interface RouteAudit {
  action: AuditAction;
  target: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    audit?: RouteAudit;
  }
}

/** The id a refused request aimed at: its path's most specific id parameter. */
function targetId(params: unknown): string | undefined {
  if (typeof params !== 'object' || params === null) return undefined;
  const named = params as Record<string, unknown>;
  for (const name of ['webhookId', 'scheduleId', 'name', 'key', 'id', 'projectId']) {
    const value = named[name];
    if (typeof value === 'string' && value.length <= 200) return value;
  }
  return undefined;
}

/**
 * A refused attempt at a change, for the log: the answer was a 4xx other than a rate limit (a
 * flood of those is the rate limiter's to count, and would make the log the flood). Nothing is
 * written for a route that changes nothing.
 */
function refusal(request: FastifyRequest, err: AppError): AuditEntry | undefined {
  const route = request.routeOptions.config.audit;
  if (!route || err.status >= 500 || err.status === 429) return undefined;
  const id = targetId(request.params);
  return {
    action: route.action,
    target: id === undefined ? null : { kind: route.target, id },
    refused: err.code,
  };
}

/** Writes the row of a refused request, if its route changes state. */
export async function auditRefusal(
  ctx: Auditing,
  request: FastifyRequest,
  err: AppError,
): Promise<void> {
  const entry = refusal(request, err);
  if (entry) await auditAfter(ctx, whoOf(request, request.principal), entry);
}
