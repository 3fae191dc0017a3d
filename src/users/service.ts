// People who sign in to the dashboard through the OpenID provider: a user is made at their first
// sign-in and brought up to date at each (email, name, groups, server admin), keyed by the
// provider's issuer and subject. Also a user's roles on projects, as a session or token acts.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import type { ProjectRole, ProjectRoleRow, UserRow } from '../db/schema.ts';
import { newId } from '../ids.ts';

/** Who the provider says signed in, from the ID token (and the userinfo endpoint). */
export interface Identity {
  issuer: string;
  subject: string;
  email: string | null;
  /** Whether the provider vouches for the email (the `email_verified` claim is true). */
  emailVerified: boolean;
  name: string | null;
  groups: string[];
}

/** Who makes a server admin: the groups and emails of ERRAND_OIDC_ADMIN_GROUPS and ERRAND_ADMIN_EMAILS. */
export interface AdminRule {
  adminGroups: readonly string[];
  /** Lower-cased. */
  adminEmails: readonly string[];
}

/**
 * Whether the identity is a server admin: in one of the admin groups, or with one of the admin
 * emails that the provider has verified (an unverified email is whatever the user typed).
 */
export function isAdminIdentity(identity: Identity, rule: AdminRule): boolean {
  if (identity.groups.some((group) => rule.adminGroups.includes(group))) return true;
  return (
    identity.emailVerified &&
    identity.email !== null &&
    rule.adminEmails.includes(identity.email.toLowerCase())
  );
}

/**
 * The user of this identity, made at the first sign-in; at each next one, their email, name,
 * groups and admin flag are the provider's as of now. A deactivated user stays deactivated (the
 * caller refuses them).
 */
export async function upsertUser(db: Db, identity: Identity, admin: boolean): Promise<UserRow> {
  return db
    .insertInto('users')
    .values({
      id: newId('usr'),
      issuer: identity.issuer,
      subject: identity.subject,
      email: identity.email,
      name: identity.name,
      groups: identity.groups,
      admin,
      last_seen_at: sql<Date>`now()`,
    })
    .onConflict((oc) =>
      oc.columns(['issuer', 'subject']).doUpdateSet({
        email: identity.email,
        name: identity.name,
        groups: identity.groups,
        admin,
        last_seen_at: sql<Date>`now()`,
      }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * The user's role on each project they have one on, in one query: their own rows and their
 * groups', the strongest per project (maintainer, then member, then viewer).
 */
export async function rolesOf(
  db: Db,
  user: { id: string; groups: readonly string[] },
): Promise<Map<string, ProjectRole>> {
  const rows = await sql<Pick<ProjectRoleRow, 'project_id' | 'role'>>`
    SELECT DISTINCT ON (project_id) project_id, role
    FROM project_roles
    WHERE (grantee_kind = 'user' AND grantee = ${user.id})
       OR (grantee_kind = 'group' AND grantee = ANY(${[...user.groups]}::text[]))
    ORDER BY project_id,
      CASE role WHEN 'maintainer' THEN 0 WHEN 'member' THEN 1 ELSE 2 END`.execute(db);
  return new Map(rows.rows.map((row) => [row.project_id, row.role]));
}
