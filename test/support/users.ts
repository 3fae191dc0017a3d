// Users for the tests of roles: a user, their project roles and a live dashboard session, made
// directly in the database (the OpenID sign-in that makes them in the service is tested on its
// own). Returns the session's cookie, as the browser would send it.
import { hash } from 'node:crypto';
import { sql } from 'kysely';
import { SESSION_COOKIE, SESSION_MAX_SECONDS } from '../../src/dashboard/sessions.ts';
import type { Db } from '../../src/db/database.ts';
import type { ProjectRole } from '../../src/db/schema.ts';
import { newId, randomBase62 } from '../../src/ids.ts';

export interface TestUserOptions {
  admin?: boolean;
  /** Roles given to the user themself, by project id. */
  roles?: Record<string, ProjectRole>;
  /** The provider's groups claim. */
  groups?: string[];
  email?: string;
  name?: string;
}

export interface TestUser {
  userId: string;
  /** `errand_session=...`, for a Cookie header. */
  cookie: string;
}

export async function createUser(db: Db, opts: TestUserOptions = {}): Promise<string> {
  const id = newId('usr');
  await db
    .insertInto('users')
    .values({
      id,
      issuer: 'http://127.0.0.1/test-issuer',
      subject: id,
      email: opts.email ?? `${id}@example.test`,
      name: opts.name ?? `Test ${id}`,
      groups: opts.groups ?? [],
      admin: opts.admin ?? false,
    })
    .execute();
  for (const [projectId, role] of Object.entries(opts.roles ?? {})) {
    await db
      .insertInto('project_roles')
      .values({ project_id: projectId, grantee_kind: 'user', grantee: id, role })
      .execute();
  }
  return id;
}

/** A live session of the user, as the sign-in makes one: its cookie. */
export async function sessionOf(db: Db, userId: string): Promise<string> {
  const sessionId = randomBase62(43);
  await db
    .insertInto('dashboard_sessions')
    .values({
      hash: hash('sha256', sessionId, 'hex'),
      key_id: null,
      user_id: userId,
      expires_at: sql<Date>`now() + make_interval(secs => ${SESSION_MAX_SECONDS})`,
    })
    .execute();
  return `${SESSION_COOKIE}=${sessionId}`;
}

/** A new user with a live session. */
export async function signedInUser(db: Db, opts: TestUserOptions = {}): Promise<TestUser> {
  const userId = await createUser(db, opts);
  return { userId, cookie: await sessionOf(db, userId) };
}
