// Every error leaves the API as {"error", "code", "requestId"} with the status of its code.
// Fastify's own errors (bad JSON, wrong content type, body too large) are mapped here too, so
// bad input is always a 4xx with a readable message and never a stack trace.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable, isDiskFull } from '../db/unavailable.ts';
import { AppError, type ErrorCode } from '../errors.ts';
import type { Logger } from '../log.ts';
import { RateLimitedError } from '../ratelimit/ratelimit.ts';
import { setRateLimitHeaders } from './ratelimit-headers.ts';

const fastifyCodes: Record<string, { code: ErrorCode; message?: string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: 'unsupported_media_type',
    message: 'request body must be JSON (Content-Type: application/json)',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    code: 'bad_request',
    message: 'Content-Length does not match the body',
  },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'payload_too_large', message: 'request body is too large' },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    code: 'invalid_json',
    message: 'request body is empty; expected a JSON object',
  },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    code: 'invalid_json',
    message: 'request body is not valid JSON',
  },
};

export function toAppError(err: FastifyError | Error): AppError {
  if (err instanceof AppError) return err;
  const known = 'code' in err && typeof err.code === 'string' ? fastifyCodes[err.code] : undefined;
  if (known) return new AppError(known.code, known.message ?? err.message);
  if (err instanceof SyntaxError)
    return new AppError('invalid_json', 'request body is not valid JSON');
  const status = 'statusCode' in err && typeof err.statusCode === 'number' ? err.statusCode : 500;
  if (status === 413) return new AppError('payload_too_large', 'request body is too large');
  if (status === 415) return new AppError('unsupported_media_type', 'unsupported Content-Type');
  if (status >= 400 && status < 500) return new AppError('bad_request', err.message);
  if (isDiskFull(err))
    return new AppError(
      'unavailable',
      'the database has no disk space left for this write, and nothing of it was kept; try again once space is freed',
    );
  if (isDatabaseUnavailable(err)) return databaseUnavailable();
  return new AppError(
    'internal',
    'internal error; the server log has the details under this requestId',
  );
}

/** Seconds a client is asked to wait before trying again after a 503. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

export function databaseUnavailable(): AppError {
  return new AppError(
    'unavailable',
    'the database is unavailable or did not answer in time; try again shortly',
  );
}

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
  if (err.code === 'unavailable')
    reply.header('Retry-After', String(UNAVAILABLE_RETRY_AFTER_SECONDS));
  return reply.code(err.status).send({ error: err.message, code: err.code, requestId: request.id });
}

export function errorHandler(log: Logger) {
  return (err: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) => {
    const appError = toAppError(err);
    if (appError.status >= 500)
      log.error({ err, requestId: request.id, url: request.url }, 'request failed');
    return sendError(reply, request, appError);
  };
}
