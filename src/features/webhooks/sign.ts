// Signs a webhook request as the Standard Webhooks specification says, so that receivers can
// verify it with any of the specification's libraries: an HMAC-SHA256 over
// "<webhook-id>.<webhook-timestamp>.<body>", keyed with the secret's base64-decoded bytes.
import { createHmac } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** The headers that identify and sign one attempt of a delivery. */
export interface SignatureHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/** The key bytes of a `whsec_` secret (the prefix is optional, as the specification allows). */
function keyOf(secret: string): Buffer {
  const base64 = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  const key = Buffer.from(base64, 'base64');
  if (key.length === 0) throw new Error('a webhook secret has no key bytes');
  return key;
}

/** `v1,<base64 HMAC>` of one message under one secret. */
function signature(secret: string, id: string, timestamp: number, body: string): string {
  const mac = createHmac('sha256', keyOf(secret)).update(`${id}.${timestamp}.${body}`);
  return `v1,${mac.digest('base64')}`;
}

/**
 * The headers of one attempt: `id` is the delivery's (the same on every attempt, so a receiver
 * can drop repeats), `timestamp` this attempt's unix seconds, and one signature per secret
 * given (the current one, and the previous one while a rotation's overlap lasts), separated by
 * spaces.
 */
export function signHeaders(
  secrets: readonly string[],
  id: string,
  timestamp: number,
  body: string,
): SignatureHeaders {
  if (secrets.length === 0) throw new Error('a webhook request needs at least one secret');
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((s) => signature(s, id, timestamp, body)).join(' '),
  };
}
