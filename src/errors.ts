// One error type for the whole service, and what any thrown error means as one (toAppError);
// sent over HTTP in one place (http/errors.ts; the dashboard renders it as a page).
// Upstream failures (model vendor, forge, git remote) get their own class so that an
// outage is never reported as the caller's fault.
import { isDatabaseUnavailable, isDiskFull } from './db/unavailable.ts';

/**
 * Every code Errand's errors carry, with the HTTP status it is sent with: the one list of them.
 * The code's type and the error body's documented codes (responses.ts) come from it.
 */
const codeToStatus = {
  bad_request: 400,
  invalid_json: 400,
  invalid_prompt: 400,
  model_unavailable: 400,
  unauthorized: 401,
  forbidden: 403,
  // A signed-in user (or their token) without the role a route needs: one code per role, so a
  // client can tell "ask for member" from "ask for maintainer" without reading the message.
  viewer_required: 403,
  member_required: 403,
  maintainer_required: 403,
  admin_required: 403,
  not_found: 404,
  request_timeout: 408,
  conflict: 409,
  idempotency_key_in_flight: 409,
  idempotency_key_reused: 422,
  payload_too_large: 413,
  unsupported_media_type: 415,
  expectation_failed: 417,
  header_too_large: 431,
  rate_limited: 429,
  budget_exhausted: 429,
  internal: 500,
  // The project's forge refused or failed a read Errand made for the caller: neither the
  // caller's fault nor Errand's; the message is the forge's, in Errand's words.
  forge_failed: 502,
  unavailable: 503,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof codeToStatus;

/** Every code, in the error map's order. */
export const ERROR_CODES = Object.keys(codeToStatus) as ErrorCode[];

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.name = 'AppError';
    this.code = code;
    this.status = codeToStatus[code];
  }
}

/**
 * A failure of something outside Errand (model API, forge, git remote). `transient` says
 * whether trying again later can help (network errors, 5xx, rate limits).
 */
export class ExternalError extends Error {
  readonly service: string;
  readonly transient: boolean;
  readonly retryAfterSeconds: number | undefined;
  constructor(
    service: string,
    message: string,
    opts: { transient: boolean; retryAfterSeconds?: number; cause?: unknown },
  ) {
    super(message, { cause: opts.cause });
    this.name = 'ExternalError';
    this.service = service;
    this.transient = opts.transient;
    this.retryAfterSeconds = opts.retryAfterSeconds;
  }
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

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

/**
 * What any thrown error means as an AppError: Errand's own as it is; Fastify's (bad JSON, wrong
 * content type, body too large) as the client's fault with a readable message; a database that
 * is down or full as unavailable; anything else as internal, never with its message.
 */
export function toAppError(err: Error): AppError {
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

export function databaseUnavailable(): AppError {
  return new AppError(
    'unavailable',
    'the database is unavailable or did not answer in time; try again shortly',
  );
}
