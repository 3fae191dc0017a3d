// One error type for the whole service, mapped to HTTP in one place (http/errors.ts).
// Upstream failures (model vendor, forge, git remote) get their own class so that an
// outage is never reported as the caller's fault.

export type ErrorCode =
  | 'bad_request'
  | 'invalid_json'
  | 'invalid_prompt'
  | 'model_unavailable'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'request_timeout'
  | 'conflict'
  | 'idempotency_key_in_flight'
  | 'idempotency_key_reused'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'expectation_failed'
  | 'header_too_large'
  | 'rate_limited'
  | 'unavailable'
  | 'internal';

const codeToStatus: Record<ErrorCode, number> = {
  bad_request: 400,
  invalid_json: 400,
  invalid_prompt: 400,
  model_unavailable: 400,
  unauthorized: 401,
  forbidden: 403,
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
  internal: 500,
  unavailable: 503,
};

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
