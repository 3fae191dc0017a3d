// Dashboard sessions: an API key, or a user signed in through the OpenID provider, is exchanged
// once for a random session id held in an HttpOnly cookie. Only the id's hash is stored, in the
// database (not in memory), so any API process serves any session. The only writer of
// dashboard_sessions.
import { hash } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { randomBase62 } from '../ids.ts';
import { hashKey } from '../keys/format.ts';
import {
  type KeyPrincipal,
  type Principal,
  principalOfRow,
  type UserPrincipal,
  wellFormedKey,
} from '../keys/service.ts';
import { rolesOf } from '../users/service.ts';

/**
 * The cookie that holds the session id (read and written through @fastify/cookie). Other pages
 * (the review page) read the session with it and readSession to tell signed-in users apart.
 */
export const SESSION_COOKIE = 'errand_session';

/** A session ends after this long without a request... */
export const SESSION_IDLE_SECONDS = 12 * 60 * 60;
/** ...and at the latest this long after sign-in. */
export const SESSION_MAX_SECONDS = 7 * 24 * 60 * 60;
const TOUCH_SECONDS = 60;
const SESSION_ID_LENGTH = 43; // about 256 bits of base62

function sessionHash(id: string): string {
  return hash('sha256', id, 'hex');
}

/**
 * Checks an API key and starts a session for it; returns the session id for the cookie.
 * Refusals carry the same messages as the API's 401.
 */
export async function signIn(db: Db, key: string): Promise<{ id: string; principal: Principal }> {
  const trimmed = key.trim();
  if (!trimmed) throw new AppError('unauthorized', 'enter an API key');
  const row = await db
    .selectFrom('api_keys')
    .select(['id', 'project_id', 'revoked_at'])
    .where('hash', '=', hashKey(wellFormedKey(trimmed)))
    .executeTakeFirst();
  const principal = principalOfRow(row);
  const id = await startSession(db, { key_id: principal.keyId });
  return { id, principal };
}

/**
 * Starts a session for a user the OpenID provider signed in (src/users/oidc.ts); returns the
 * session id for the cookie. The caller has refused a deactivated user.
 */
export async function startUserSession(db: Db, userId: string): Promise<string> {
  return startSession(db, { user_id: userId });
}

async function startSession(
  db: Db,
  who: { key_id: string } | { user_id: string },
): Promise<string> {
  const id = randomBase62(SESSION_ID_LENGTH);
  // Sessions that ended are removed as new ones start, so the table does not only grow.
  await db
    .deleteFrom('dashboard_sessions')
    .where(
      sql<boolean>`expires_at <= now() OR last_seen_at <= now() - make_interval(secs => ${SESSION_IDLE_SECONDS})`,
    )
    .execute();
  await db
    .insertInto('dashboard_sessions')
    .values({
      hash: sessionHash(id),
      ...who,
      expires_at: sql<Date>`now() + make_interval(secs => ${SESSION_MAX_SECONDS})`,
    })
    .execute();
  return id;
}

/**
 * The principal of a live session, renewing its idle time; undefined for an unknown, idle,
 * expired session, or one whose key was revoked or whose user was deactivated (that session is
 * deleted). A user's roles are read afresh with each request, so a role given or taken applies
 * at once.
 */
export async function readSession(db: Db, id: string | undefined): Promise<Principal | undefined> {
  if (!id || id.length !== SESSION_ID_LENGTH || !/^[0-9A-Za-z]+$/.test(id)) return undefined;
  const h = sessionHash(id);
  // The idle time is renewed at most once a minute: a job page polls every second, and that
  // need not be a write each time.
  // A key's session ends with its key's revocation; a user's with their deactivation (read
  // again on every request).
  const live = await sql<{
    key_id: string | null;
    project_id: string | null;
    user_id: string | null;
    admin: boolean | null;
    groups: string[] | null;
    email: string | null;
    name: string | null;
  }>`
    WITH live AS (
      SELECT s.hash, s.key_id, k.project_id, s.user_id, u.admin, u.groups, u.email, u.name,
        s.last_seen_at
      FROM dashboard_sessions s
        LEFT JOIN api_keys k ON k.id = s.key_id
        LEFT JOIN users u ON u.id = s.user_id
      WHERE s.hash = ${h}
        AND ((k.id IS NOT NULL AND k.revoked_at IS NULL)
          OR (u.id IS NOT NULL AND u.deactivated_at IS NULL))
        AND s.expires_at > now()
        AND s.last_seen_at > now() - make_interval(secs => ${SESSION_IDLE_SECONDS})
    ), touched AS (
      UPDATE dashboard_sessions d SET last_seen_at = now()
      FROM live
      WHERE d.hash = live.hash AND live.last_seen_at < now() - make_interval(secs => ${TOUCH_SECONDS})
    )
    SELECT key_id, project_id, user_id, admin, groups, email, name FROM live`.execute(db);
  const row = live.rows[0];
  if (row?.key_id) {
    const key: KeyPrincipal = { kind: 'key', keyId: row.key_id, projectId: row.project_id };
    return key;
  }
  if (row?.user_id) {
    const user: UserPrincipal = {
      kind: 'user',
      userId: row.user_id,
      admin: row.admin === true,
      roles: await rolesOf(db, { id: row.user_id, groups: row.groups ?? [] }),
      name: row.name,
      email: row.email,
    };
    return user;
  }
  await db.deleteFrom('dashboard_sessions').where('hash', '=', h).execute();
  return undefined;
}

/** Sign-out: the session ends for every process at once. */
export async function endSession(db: Db, id: string | undefined): Promise<void> {
  if (!id) return;
  await db.deleteFrom('dashboard_sessions').where('hash', '=', sessionHash(id)).execute();
}
