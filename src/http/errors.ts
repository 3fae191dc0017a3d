// Every error leaves the API as {"error", "code", "requestId"} with the status of its code.
// Fastify's own errors (bad JSON, wrong content type, body too large) are mapped too (toAppError
// in src/errors.ts), so bad input is always a 4xx with a readable message, never a stack trace.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Auditing } from '../audit/audit.ts';
import { type AppError, toAppError } from '../errors.ts';
import { BudgetExhaustedError } from '../jobs/spend.ts';
import type { Logger } from '../log.ts';
import { RateLimitedError } from '../ratelimit/ratelimit.ts';
import { auditRefusal } from './audit.ts';
import { setRateLimitHeaders } from './ratelimit-headers.ts';

/** Seconds a client is asked to wait before trying again after a 503. */
const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

export function sendError(
  reply: FastifyReply,
  request: FastifyRequest,
  err: AppError,
): FastifyReply {
  if (err.code === 'unauthorized') reply.header('WWW-Authenticate', 'Bearer realm="errand"');
  if (err instanceof RateLimitedError) {
    setRateLimitHeaders(reply, err.state);
    reply.header('Retry-After', String(err.state.resetSeconds));
  }
  if (err instanceof BudgetExhaustedError && err.retryAfterSeconds !== undefined)
    reply.header('Retry-After', String(err.retryAfterSeconds));
  if (err.code === 'unavailable')
    reply.header('Retry-After', String(UNAVAILABLE_RETRY_AFTER_SECONDS));
  return reply.code(err.status).send({ error: err.message, code: err.code, requestId: request.id });
}

export function errorHandler(ctx: Auditing & { log: Logger }) {
  return async (err: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) => {
    const appError = toAppError(err);
    if (appError.status >= 500)
      ctx.log.error({ err, requestId: request.id, url: request.url }, 'request failed');
    // A refused change is in the audit log as well; a failure to write its row is logged, and
    // the answer is the refusal still.
    await auditRefusal(ctx, request, appError).catch((auditErr: unknown) =>
      ctx.log.warn({ err: auditErr, requestId: request.id }, 'could not write an audit row'),
    );
    return sendError(reply, request, appError);
  };
}
