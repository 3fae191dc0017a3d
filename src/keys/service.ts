// Minting, listing, revoking and checking API keys. A key is shown once, when it is made;
// the database keeps only its SHA-256 hash and its first characters for display.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { ApiKeyRow, ProjectRole } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { isId, newId } from '../ids.ts';
import type { KeyRecord } from '../records/key.ts';
import { hashKey, isWellFormedKey, keyStart, mintKey } from './format.ts';

/** Who makes a request: an API key or a person signed in through the OpenID provider. */
export type Principal = KeyPrincipal | UserPrincipal;

export interface KeyPrincipal {
  kind: 'key';
  keyId: string;
  /** null for an admin key. */
  projectId: string | null;
}

export interface UserPrincipal {
  kind: 'user';
  userId: string;
  /** A server admin: every project, and the admin API and pages. */
  admin: boolean;
  /** The user's role on each project they have one on: their own or a group's, the strongest. */
  roles: ReadonlyMap<string, ProjectRole>;
  /** Who the user is, as the dashboard shows them (the provider's claims at the last sign-in). */
  name?: string | null;
  email?: string | null;
  /**
   * Set when the user acts through a personal API token (src/users/tokens.ts): `roles` and
   * `admin` are then already clamped to the token's projects and, when read-only, to `viewer`.
   */
  token?: { id: string; readOnly: boolean };
}

/**
 * The one id of a principal, for what is counted or kept per caller (open streams): a key's, a
 * personal token's (so its streams end when it does), or a user's session's.
 */
export function principalId(principal: Principal): string {
  if (principal.kind === 'key') return principal.keyId;
  return principal.token?.id ?? principal.userId;
}

/** A server admin: an admin key, or a user the provider's groups or the admin emails name. */
export function isServerAdmin(principal: Principal): boolean {
  return principal.kind === 'key' ? principal.projectId === null : principal.admin;
}

/** A key's row as the admin API shows it (src/records/key.ts): never the key. */
export function toKeyRecord(row: ApiKeyRow): KeyRecord {
  return {
    id: row.id,
    name: row.name,
    start: row.start,
    projectId: row.project_id,
    admin: row.project_id === null,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: row.last_used_at ? row.last_used_at.toISOString() : null,
    revokedAt: row.revoked_at ? row.revoked_at.toISOString() : null,
  };
}

export async function createKey(
  db: Db,
  opts: { projectId: string | null; name: string | null },
): Promise<{ key: string; row: ApiKeyRow }> {
  return storeKey(db, mintKey(), opts);
}

/** Stores the hash of a key made elsewhere (the operator's ERRAND_ADMIN_KEY), well-formed. */
export async function storeKey(
  db: Db,
  key: string,
  opts: { projectId: string | null; name: string | null },
): Promise<{ key: string; row: ApiKeyRow }> {
  const row = await db
    .insertInto('api_keys')
    .values({
      id: newId('key'),
      project_id: opts.projectId,
      name: opts.name,
      start: keyStart(key),
      hash: hashKey(key),
      last_used_at: null,
      revoked_at: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { key, row };
}

export async function listKeys(ctx: { db: Db }): Promise<ApiKeyRow[]> {
  return ctx.db
    .selectFrom('api_keys')
    .selectAll()
    .orderBy('created_at', 'asc')
    .orderBy('id')
    .execute();
}

export async function revokeKey(ctx: { db: Db }, keyId: string): Promise<ApiKeyRow> {
  if (!isId('key', keyId)) throw new AppError('not_found', `key ${keyId} not found`);
  const row = await ctx.db
    .updateTable('api_keys')
    .set({ revoked_at: sql`coalesce(revoked_at, now())` })
    .where('id', '=', keyId)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw new AppError('not_found', `key ${keyId} not found`);
  return row;
}

const LAST_USED_RESOLUTION_MS = 60_000;

/** The key itself, or 401 when it does not have the shape of an API key (no lookup needed). */
export function wellFormedKey(key: string): string {
  if (!isWellFormedKey(key)) throw new AppError('unauthorized', 'malformed API key');
  return key;
}

/**
 * The principal of a looked-up key row; throws 401 for an unknown or revoked key. The API and
 * the dashboard's sign-in refuse with these same words.
 */
export function principalOfRow(
  row: { id: string | null; project_id: string | null; revoked_at: Date | null } | undefined,
): KeyPrincipal {
  if (!row?.id) throw new AppError('unauthorized', 'unknown API key');
  if (row.revoked_at) throw new AppError('unauthorized', 'this API key has been revoked');
  return { kind: 'key', keyId: row.id, projectId: row.project_id };
}

/**
 * The credential of an `Authorization: Bearer` header, a key or a personal token (told apart by
 * their prefixes, src/keys/format.ts); throws 401 when the header is missing or not Bearer.
 */
export function bearerOf(header: string | undefined): string {
  if (!header) {
    throw new AppError(
      'unauthorized',
      'missing Authorization header (expected "Bearer <API key>")',
    );
  }
  const match = /^Bearer +(\S+)\s*$/i.exec(header);
  if (!match?.[1]) {
    throw new AppError('unauthorized', 'Authorization header must be "Bearer <API key>"');
  }
  return match[1];
}

/**
 * Checks an `Authorization` header. Malformed keys are refused without a database lookup;
 * revoked keys stop working at once (no cache). `last_used_at` is written at most once a
 * minute per key and process, so polling does not turn every read into a write.
 */
export class KeyChecker {
  readonly #db: Db;
  readonly #lastWritten = new Map<string, number>();
  readonly #onError: (err: unknown) => void;

  constructor(db: Db, onError: (err: unknown) => void) {
    this.#db = db;
    this.#onError = onError;
  }

  async check(header: string | undefined): Promise<Principal> {
    const row = await this.#db
      .selectFrom('api_keys')
      .select(['id', 'project_id', 'revoked_at'])
      .where('hash', '=', this.hashOf(header))
      .executeTakeFirst();
    return this.principalOf(row);
  }

  /** The stored hash of the header's key; throws 401 for a missing or malformed key. */
  hashOf(header: string | undefined): string {
    return hashKey(wellFormedKey(bearerOf(header)));
  }

  /** The principal of a looked-up key row; throws 401 for an unknown or revoked key. */
  principalOf(
    row: { id: string | null; project_id: string | null; revoked_at: Date | null } | undefined,
  ): Principal {
    const principal = principalOfRow(row);
    this.#touch(principal.keyId);
    return principal;
  }

  #touch(keyId: string): void {
    const now = Date.now();
    if (now - (this.#lastWritten.get(keyId) ?? 0) < LAST_USED_RESOLUTION_MS) return;
    this.#lastWritten.set(keyId, now);
    this.#db
      .updateTable('api_keys')
      .set({ last_used_at: sql`now()` })
      .where('id', '=', keyId)
      .execute()
      .catch(this.#onError);
  }
}
