// The Idempotency-Key header on the routes that accept it (create and message): what a route
// hands to the job service, and how a stored response is sent again.
import type { FastifyReply } from 'fastify';
import { fingerprint, type IdempotentRequest, parseKey, type StoredResponse } from './keys.ts';

/** Marks a response that is a stored one sent again. */
const REPLAYED_HEADER = 'Idempotent-Replayed';

/**
 * The idempotent request of a route call, or undefined without the header. `path` names the
 * operation and its target (the job of a follow-up); `body` is the body as validated.
 */
export function idempotentRequest(
  header: string | undefined,
  projectId: string,
  method: string,
  path: string,
  body: unknown,
): IdempotentRequest | undefined {
  if (header === undefined) return undefined;
  return { projectId, key: parseKey(header), fingerprint: fingerprint(method, path, body) };
}

/**
 * Sends a key's first response again: its status and its JSON text as it was sent. RateLimit
 * headers are left out: a replay counts against no limit, and the first response's would be
 * stale.
 */
export function sendReplay(reply: FastifyReply, stored: StoredResponse): FastifyReply {
  return reply
    .code(stored.status)
    .header(REPLAYED_HEADER, 'true')
    .type('application/json; charset=utf-8')
    .send(stored.body);
}
