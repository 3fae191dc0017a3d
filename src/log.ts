// The service logger. Redaction happens here, once, for every call site: authorization
// headers and any field that is named like a secret are replaced before a line is written.
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

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { service: 'errand' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    },
    destination ?? process.stderr,
  );
}
