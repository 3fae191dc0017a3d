// The one error the typed client throws: an answer of the server that is not a success (with
// Errand's code and request id when the body has them), or a failure to reach it at all.
// Callers branch on `code`, never on messages.

/**
 * `code` is the server's code (Errand's `{error, code, requestId}` body) or, when the body is
 * not Errand's, one derived from the status (`unauthorized`, `not_found`, `rate_limited`,
 * `http_418`…). The client's own codes have status 0: `network_error` (the server could not be
 * reached: refused, DNS, reset), `timeout` (waitForJob's timeoutMs passed), `invalid_response`
 * (a success whose body is not what the interface promises; its status is the answer's).
 */
export class ErrandError extends Error {
  override name = 'ErrandError';
  readonly code: string;
  /** The HTTP status; 0 when no answer was had. */
  readonly status: number;
  readonly requestId: string | undefined;
  /** The server's own message (the `error` of its body) when it answered with one. */
  readonly serverMessage: string | undefined;
  /** From Retry-After (429, 503): how long to wait before trying again. */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    message: string,
    fields: {
      code: string;
      status: number;
      requestId?: string | undefined;
      serverMessage?: string | undefined;
      retryAfterSeconds?: number | undefined;
      cause?: unknown;
    },
  ) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.code = fields.code;
    this.status = fields.status;
    this.requestId = fields.requestId;
    this.serverMessage = fields.serverMessage;
    this.retryAfterSeconds = fields.retryAfterSeconds;
  }

  /**
   * Worth trying again later: the server is busy, stopping or briefly unreachable. Not a
   * forge's refusal that Errand passes on (`forge_failed`): its credentials stay wrong.
   */
  get transient(): boolean {
    if (this.code === 'forge_failed') return false;
    return this.code === 'network_error' || [429, 502, 503, 504].includes(this.status);
  }
}

const CODES_BY_STATUS: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  422: 'unprocessable',
  429: 'rate_limited',
  500: 'internal',
  503: 'unavailable',
};

/** Retry-After as seconds: a number of seconds or an HTTP date; undefined when absent or bad. */
function retryAfterSeconds(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - now) / 1000));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The error for an answer that is not a success; its body is read here. */
export async function errorFromResponse(response: Response, what: string): Promise<ErrandError> {
  const text = await response.text().catch(() => '');
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  const status = response.status;
  const fromBody = isRecord(body) ? body : {};
  const code =
    typeof fromBody.code === 'string' && fromBody.code
      ? fromBody.code
      : (CODES_BY_STATUS[status] ?? `http_${status}`);
  const serverMessage =
    typeof fromBody.error === 'string' && fromBody.error ? fromBody.error : undefined;
  const message = serverMessage ?? `${response.statusText || 'error'}`;
  const requestId =
    typeof fromBody.requestId === 'string'
      ? fromBody.requestId
      : (response.headers.get('x-request-id') ?? undefined);
  return new ErrandError(`${what}: ${status} ${message}`, {
    code,
    status,
    requestId,
    serverMessage,
    retryAfterSeconds: retryAfterSeconds(response.headers.get('retry-after')),
  });
}
