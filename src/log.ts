// The service logger. Redaction happens here, once, for every call site: authorization
// headers, any field that is named like a secret, and the values of a logged URL's query
// parameters named so (a review link's token) are replaced before a line is written.
import { type Logger, pino } from 'pino';

export type { Logger };

const REDACT_PATHS = [
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'request.headers.authorization',
  'key',
  'apiKey',
  'token',
  'secret',
  'password',
  '*.key',
  '*.apiKey',
  '*.token',
  '*.secret',
  '*.password',
];

const CENSOR = '[redacted]';

/**
 * Query parameters whose values are secrets, as the fields of REDACT_PATHS are; `code` is the
 * OpenID provider's authorization code at the dashboard's sign-in callback.
 */
const SECRET_PARAMS = new Set(['key', 'apikey', 'token', 'secret', 'password', 'code']);

/**
 * A logged request URL (`url`) without the values of its secret query parameters; the path
 * and the other parameters stay, to say which request it was.
 */
function redactUrl(url: unknown): unknown {
  if (typeof url !== 'string') return url;
  const start = url.indexOf('?');
  if (start < 0) return url;
  const query = url
    .slice(start + 1)
    .split('&')
    .map((part) => {
      // The name as the server reads it: `tok%65n` is `token` too.
      const [name = ''] = new URLSearchParams(part).keys();
      return SECRET_PARAMS.has(name.toLowerCase()) ? `${part.split('=')[0]}=${CENSOR}` : part;
    });
  return `${url.slice(0, start)}?${query.join('&')}`;
}

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { service: 'errand' },
      redact: { paths: REDACT_PATHS, censor: CENSOR },
      serializers: { url: redactUrl },
    },
    destination ?? process.stderr,
  );
}
