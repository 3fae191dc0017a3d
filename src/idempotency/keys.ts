// Idempotency-Key (the IETF httpapi idempotency-key draft) for job creates and follow-ups: a
// retried request with the same key and the same body gets the first response back instead of
// making a second job. The only writer of idempotency_keys. A key's row is written in the
// transaction of the change it answers, so it exists exactly when that change committed, and
// every API process reads the same table.
import { createHash } from 'node:crypto';
import { sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import { AppError } from '../errors.ts';

/** How long a key is remembered; after that, the same key runs as a new request. */
export const KEY_LIFETIME_HOURS = 24;
const MAX_KEY_CHARS = 255;
const LIFETIME = sql<Date>`now() - make_interval(hours => ${KEY_LIFETIME_HOURS})`;

/** A request that carries an Idempotency-Key, as the job service needs it. */
export interface IdempotentRequest {
  projectId: string;
  /** The key's value (an sf-string's content when it was sent quoted). */
  key: string;
  /** See `fingerprint`. */
  fingerprint: string;
}

/** The response a key's first request got. */
export interface StoredResponse {
  status: number;
  /** The JSON text as it was sent, byte for byte. */
  body: string;
}

/**
 * Reads an Idempotency-Key header value. The draft's key is a Structured Field string (`"…"`,
 * RFC 8941: printable ASCII, `\"` and `\\` escaped); the bare value is accepted too, as many
 * clients send it: visible ASCII, no spaces. Both name the same key. Two header lines reach
 * here joined by ", ", which neither form allows.
 */
function readKey(value: string): { key: string } | { problem: string } {
  const key = unquote(value);
  if (key === undefined)
    return {
      problem:
        '"Idempotency-Key" must be one value: a quoted string ("...") or visible ASCII characters without spaces',
    };
  if (key.length === 0) return { problem: '"Idempotency-Key" must not be empty' };
  if (key.length > MAX_KEY_CHARS)
    return {
      problem: `"Idempotency-Key" is ${key.length} characters; the maximum is ${MAX_KEY_CHARS}`,
    };
  return { key };
}

/** Why a header value is not a key (for the route schema), or undefined when it is one. */
export function keyProblem(value: string): string | undefined {
  const read = readKey(value);
  return 'problem' in read ? read.problem : undefined;
}

/** The key a header value names; a 400 naming the header for any other value. */
export function parseKey(value: string): string {
  const read = readKey(value);
  if ('problem' in read) throw new AppError('bad_request', read.problem);
  return read.key;
}

function unquote(value: string): string | undefined {
  if (!value.startsWith('"')) return /^[\x21-\x7e]*$/.test(value) ? value : undefined;
  let out = '';
  for (let i = 1; i < value.length; i++) {
    const c = value[i] ?? '';
    if (c === '\\') {
      const next = value[++i];
      if (next !== '"' && next !== '\\') return undefined;
      out += next;
    } else if (c === '"') {
      return i === value.length - 1 ? out : undefined;
    } else if (c < ' ' || c > '~') {
      return undefined;
    } else {
      out += c;
    }
  }
  return undefined;
}

/**
 * What makes two requests "the same request" for a key: the method, the path (which names
 * the job of a follow-up) and the body as parsed, in canonical JSON (keys sorted, no
 * whitespace), so bodies that differ only in spacing or key order match.
 */
export function fingerprint(method: string, path: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method} ${path}\n${canonicalJson(body)}`)
    .digest('hex');
}

export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The transaction-scoped advisory lock of a key: 64 bits of a hash of project and key. */
function lockId({ projectId, key }: IdempotentRequest): string {
  return createHash('sha256')
    .update(`errand idempotency\0${projectId}\0${key}`)
    .digest()
    .readBigInt64BE(0)
    .toString();
}

/**
 * Claims the key for the caller's transaction, which must call this before it changes
 * anything. Returns the stored response when the key's first request committed (replay it,
 * and do nothing else); undefined when the request is to run (then `saveResponse` before the
 * commit). Throws 409 while another transaction holds the key and 422 for a key used with
 * another request.
 */
export async function claimKey(
  trx: Transaction<Database>,
  request: IdempotentRequest,
): Promise<StoredResponse | undefined> {
  // Not waiting is the draft's answer to a duplicate in flight (409), and it holds no
  // connection of the pool while the first request runs. The lookup is a statement of its
  // own, after the lock: its snapshot then includes the commit of the lock's last holder.
  const { rows } = await sql<{
    locked: boolean;
  }>`SELECT pg_try_advisory_xact_lock(${lockId(request)}::bigint) AS locked`.execute(trx);
  if (!rows[0]?.locked)
    throw new AppError(
      'idempotency_key_in_flight',
      'a request with this Idempotency-Key is still being processed; retry once it has been answered',
    );
  const row = await trx
    .selectFrom('idempotency_keys')
    .select(['fingerprint', 'status', 'body'])
    .where('project_id', '=', request.projectId)
    .where('key', '=', request.key)
    .where('created_at', '>', LIFETIME)
    .executeTakeFirst();
  if (!row) return undefined;
  if (row.fingerprint !== request.fingerprint)
    throw new AppError(
      'idempotency_key_reused',
      `this Idempotency-Key was used for another request (another body, job or operation) in the last ${KEY_LIFETIME_HOURS} hours; send a new key with a new request`,
    );
  return { status: row.status, body: row.body };
}

/**
 * Stores the response of a claimed key's request, in the transaction that made the change.
 * An expired row of the same key is overwritten; a live one cannot exist under the claim.
 */
export async function saveResponse(
  trx: Transaction<Database>,
  request: IdempotentRequest,
  response: StoredResponse,
): Promise<void> {
  const values = {
    fingerprint: request.fingerprint,
    status: response.status,
    body: response.body,
    created_at: sql<Date>`now()`,
  };
  const saved = await trx
    .insertInto('idempotency_keys')
    .values({ project_id: request.projectId, key: request.key, ...values })
    .onConflict((oc) =>
      oc
        .columns(['project_id', 'key'])
        .doUpdateSet(values)
        .where('idempotency_keys.created_at', '<=', LIFETIME),
    )
    .returning('key')
    .executeTakeFirst();
  if (!saved) throw new Error('an unexpired idempotency key was saved again under its claim');
}

/**
 * Deletes the keys older than their lifetime; returns how many. The processes that run workers
 * call it periodically (service.ts).
 */
export async function purgeExpiredKeys(db: Db): Promise<number> {
  const result = await db
    .deleteFrom('idempotency_keys')
    .where('created_at', '<=', LIFETIME)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
