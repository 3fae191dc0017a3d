// The admin's side of users and roles: list users, give and take a project role, deactivate and
// reactivate a user. The only writer of project_roles and of users.deactivated_at; users
// themselves are made by the OpenID sign-in.
import type { Db } from '../db/database.ts';
import type { ProjectRole, ProjectRoleRow, UserRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import type { RoleRecord, UserRecord } from '../records/user.ts';

type Grantee = { kind: 'user' | 'group'; name: string };

export function toRoleRecord(row: ProjectRoleRow): RoleRecord {
  return {
    projectId: row.project_id,
    granteeKind: row.grantee_kind,
    grantee: row.grantee,
    role: row.role,
    createdAt: row.created_at.toISOString(),
  };
}

export function toUserRecord(row: UserRow, roles: ProjectRoleRow[]): UserRecord {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    groups: row.groups,
    admin: row.admin,
    roles: roles.map((role) => ({ projectId: role.project_id, role: role.role })),
    createdAt: row.created_at.toISOString(),
    lastSeenAt: row.last_seen_at?.toISOString() ?? null,
    deactivatedAt: row.deactivated_at?.toISOString() ?? null,
  };
}

async function userRecord(db: Db, row: UserRow): Promise<UserRecord> {
  const roles = await db
    .selectFrom('project_roles')
    .selectAll()
    .where('grantee_kind', '=', 'user')
    .where('grantee', '=', row.id)
    .orderBy('project_id')
    .execute();
  return toUserRecord(row, roles);
}

export async function listUsers(db: Db): Promise<UserRecord[]> {
  const users = await db
    .selectFrom('users')
    .selectAll()
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  const roles = await db
    .selectFrom('project_roles')
    .selectAll()
    .where('grantee_kind', '=', 'user')
    .orderBy('project_id')
    .execute();
  return users.map((user) =>
    toUserRecord(
      user,
      roles.filter((role) => role.grantee === user.id),
    ),
  );
}

/**
 * Deactivates (or reactivates) a user. A deactivated user's sessions end here, and every
 * session or token read checks deactivated_at too, so nothing of theirs works from the next
 * request on.
 */
export async function setDeactivated(
  db: Db,
  userId: string,
  deactivated: boolean,
): Promise<UserRecord> {
  // One transaction: the caller's (an audited change), or one of its own.
  const change = async (trx: Db) => {
    const updated = await trx
      .updateTable('users')
      .set({ deactivated_at: deactivated ? new Date() : null })
      .where('id', '=', userId)
      .returningAll()
      .executeTakeFirst();
    if (!updated) throw new AppError('not_found', `user ${userId} not found`);
    if (deactivated)
      await trx.deleteFrom('dashboard_sessions').where('user_id', '=', userId).execute();
    return updated;
  };
  const row = db.isTransaction ? await change(db) : await db.transaction().execute(change);
  return userRecord(db, row);
}

export async function listRoles(db: Db, projectId: string): Promise<RoleRecord[]> {
  const rows = await db
    .selectFrom('project_roles')
    .selectAll()
    .where('project_id', '=', projectId)
    .orderBy('grantee_kind')
    .orderBy('grantee')
    .execute();
  return rows.map(toRoleRecord);
}

/** Gives the grantee the role on the project, replacing the one they had there. */
export async function giveRole(
  db: Db,
  projectId: string,
  grantee: Grantee,
  role: ProjectRole,
): Promise<RoleRecord> {
  if (grantee.kind === 'user') {
    const user = await db
      .selectFrom('users')
      .select('id')
      .where('id', '=', grantee.name)
      .executeTakeFirst();
    if (!user) throw new AppError('bad_request', `user ${grantee.name} does not exist`);
  }
  const row = await db
    .insertInto('project_roles')
    .values({ project_id: projectId, grantee_kind: grantee.kind, grantee: grantee.name, role })
    .onConflict((oc) => oc.columns(['project_id', 'grantee_kind', 'grantee']).doUpdateSet({ role }))
    .returningAll()
    .executeTakeFirstOrThrow();
  return toRoleRecord(row);
}

/** Takes the grantee's role on the project; 404 when they had none. */
export async function takeRole(db: Db, projectId: string, grantee: Grantee): Promise<RoleRecord> {
  const row = await db
    .deleteFrom('project_roles')
    .where('project_id', '=', projectId)
    .where('grantee_kind', '=', grantee.kind)
    .where('grantee', '=', grantee.name)
    .returningAll()
    .executeTakeFirst();
  if (!row)
    throw new AppError(
      'not_found',
      `${grantee.kind} ${grantee.name} has no role on project ${projectId}`,
    );
  return toRoleRecord(row);
}
