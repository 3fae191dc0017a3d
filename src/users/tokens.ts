// Personal API tokens: a signed-in user makes tokens of their own for scripts and the CLI. A token
// is shown once; only its SHA-256 hash is kept. It acts on the API with its user's roles, clamped
// to the projects it lists and, when read-only, to `viewer`; it stops at once when revoked,
// expired or its user deactivated (no cache). The only writer of user_tokens.
import { sql } from 'kysely';
import type { DatabaseHandle, Db } from '../db/database.ts';
import type { ProjectRole, UserTokenRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { isId, newId } from '../ids.ts';
import { hashKey, isWellFormedToken, mintToken, tokenStart } from '../keys/format.ts';
import type { UserPrincipal } from '../keys/service.ts';

/** The longest a token may live, and what the dashboard offers when nothing is chosen. */
export const TOKEN_MAX_DAYS = 365;
export const TOKEN_DEFAULT_DAYS = 90;
export const TOKEN_NAME_MAX = 200;

export interface NewToken {
  name: string;
  /** Whole days from now, 1 to TOKEN_MAX_DAYS. */
  expiresInDays: number;
  /** null or empty: every project the user has a role on. */
  projectIds: readonly string[] | null;
  readOnly: boolean;
}

/** The new token (shown this once) and its row. Bad input is refused (400) and changes nothing. */
export async function createToken(
  db: Db,
  userId: string,
  opts: NewToken,
): Promise<{ token: string; row: UserTokenRow }> {
  const name = opts.name.trim();
  if (!name || name.length > TOKEN_NAME_MAX) {
    throw new AppError('bad_request', `a token needs a name of 1 to ${TOKEN_NAME_MAX} characters`);
  }
  if (
    !Number.isInteger(opts.expiresInDays) ||
    opts.expiresInDays < 1 ||
    opts.expiresInDays > TOKEN_MAX_DAYS
  ) {
    throw new AppError(
      'bad_request',
      `a token expires in 1 to ${TOKEN_MAX_DAYS} days (whole days)`,
    );
  }
  const projectIds = opts.projectIds?.length ? [...new Set(opts.projectIds)] : null;
  const bad = projectIds?.find((id) => !isId('prj', id));
  if (bad !== undefined) throw new AppError('bad_request', `${bad} is not a project id`);
  const token = mintToken();
  const row = await db
    .insertInto('user_tokens')
    .values({
      id: newId('tok'),
      user_id: userId,
      name,
      start: tokenStart(token),
      hash: hashKey(token),
      project_ids: projectIds,
      read_only: opts.readOnly,
      expires_at: sql<Date>`now() + make_interval(days => ${opts.expiresInDays})`,
      last_used_at: null,
      revoked_at: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { token, row };
}

/** The user's tokens, newest first, revoked and expired ones too (they show when they ended). */
export async function listTokens(db: Db, userId: string): Promise<UserTokenRow[]> {
  return db
    .selectFrom('user_tokens')
    .selectAll()
    .where('user_id', '=', userId)
    .orderBy('created_at', 'desc')
    .orderBy('id')
    .execute();
}

/** The user's own token, or 404: another user's token is as unknown as one that never was. */
export async function getToken(db: Db, userId: string, tokenId: string): Promise<UserTokenRow> {
  const row = isId('tok', tokenId)
    ? await db
        .selectFrom('user_tokens')
        .selectAll()
        .where('id', '=', tokenId)
        .where('user_id', '=', userId)
        .executeTakeFirst()
    : undefined;
  if (!row) throw new AppError('not_found', `token ${tokenId} not found`);
  return row;
}

/** Revokes one of the user's own tokens; its next request is refused. Revoking twice is a no-op. */
export async function revokeToken(db: Db, userId: string, tokenId: string): Promise<UserTokenRow> {
  if (!isId('tok', tokenId)) throw new AppError('not_found', `token ${tokenId} not found`);
  const row = await db
    .updateTable('user_tokens')
    .set({ revoked_at: sql`coalesce(revoked_at, now())` })
    .where('id', '=', tokenId)
    .where('user_id', '=', userId)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw new AppError('not_found', `token ${tokenId} not found`);
  return row;
}

interface TokenAndUserRow {
  id: string;
  user_id: string;
  project_ids: string[] | null;
  read_only: boolean;
  revoked: boolean;
  expired: boolean;
  deactivated: boolean;
  admin: boolean;
  email: string | null;
  name: string | null;
  /** [project id, role] pairs: the strongest of the user's own and their groups' per project. */
  roles: [string, ProjectRole][];
}

// The token, its user and the user's roles in one statement. A server admin acts as a
// maintainer of every project, so that a token that may not be an admin (read-only or limited
// to projects) keeps what the admin could read there.
const TOKEN_SQL = `
  SELECT t.id, t.user_id, t.project_ids, t.read_only,
    t.revoked_at IS NOT NULL AS revoked, t.expires_at <= now() AS expired,
    u.deactivated_at IS NOT NULL AS deactivated, u.admin, u.email, u.name,
    CASE WHEN u.admin THEN
      (SELECT coalesce(json_agg(json_build_array(p.id, 'maintainer')), '[]') FROM projects p)
    ELSE
      (SELECT coalesce(json_agg(json_build_array(r.project_id, r.role)), '[]') FROM (
        SELECT DISTINCT ON (project_id) project_id, role
        FROM project_roles
        WHERE (grantee_kind = 'user' AND grantee = u.id)
           OR (grantee_kind = 'group' AND grantee = ANY(u.groups))
        ORDER BY project_id,
          CASE role WHEN 'maintainer' THEN 0 WHEN 'member' THEN 1 ELSE 2 END) r)
    END AS roles
  FROM user_tokens t JOIN users u ON u.id = t.user_id
  WHERE t.hash = $1`;

const LAST_USED_RESOLUTION_MS = 60_000;

/** The principal a token row acts as: its user's roles, clamped. Throws 401 for a dead token. */
function principalOfToken(row: TokenAndUserRow | undefined): UserPrincipal {
  if (!row) throw new AppError('unauthorized', 'unknown personal API token');
  if (row.revoked) throw new AppError('unauthorized', 'this personal API token has been revoked');
  if (row.expired) throw new AppError('unauthorized', 'this personal API token has expired');
  if (row.deactivated) {
    throw new AppError('unauthorized', 'the user of this personal API token has been deactivated');
  }
  const limit = row.project_ids ? new Set(row.project_ids) : undefined;
  const roles = new Map<string, ProjectRole>();
  for (const [projectId, role] of row.roles) {
    if (limit && !limit.has(projectId)) continue;
    roles.set(projectId, row.read_only ? 'viewer' : role);
  }
  return {
    kind: 'user',
    userId: row.user_id,
    // An admin's token is an admin only when nothing clamps it.
    admin: row.admin && !row.read_only && !limit,
    roles,
    name: row.name,
    email: row.email,
    token: { id: row.id, readOnly: row.read_only },
  };
}

/**
 * Checks a personal token with one statement: the token, its user and the user's roles.
 * Malformed tokens are refused without a lookup. `last_used_at` is written at most once a
 * minute per token and process, as for keys.
 */
export class TokenChecker {
  readonly #db: Db;
  readonly #prepared: DatabaseHandle['prepared'];
  readonly #lastWritten = new Map<string, number>();
  readonly #onError: (err: unknown) => void;

  constructor(
    ctx: { db: Db; prepared: DatabaseHandle['prepared'] },
    onError: (err: unknown) => void,
  ) {
    this.#db = ctx.db;
    this.#prepared = ctx.prepared;
    this.#onError = onError;
  }

  async check(token: string): Promise<UserPrincipal> {
    if (!isWellFormedToken(token)) {
      throw new AppError('unauthorized', 'malformed personal API token');
    }
    const [row] = await this.#prepared<TokenAndUserRow>('errand_user_token', TOKEN_SQL, [
      hashKey(token),
    ]);
    const principal = principalOfToken(row);
    if (row) this.#touch(row.id);
    return principal;
  }

  #touch(tokenId: string): void {
    const now = Date.now();
    if (now - (this.#lastWritten.get(tokenId) ?? 0) < LAST_USED_RESOLUTION_MS) return;
    this.#lastWritten.set(tokenId, now);
    this.#db
      .updateTable('user_tokens')
      .set({ last_used_at: sql`now()` })
      .where('id', '=', tokenId)
      .execute()
      .catch(this.#onError);
  }
}
