// A signed-in person as a principal: their server role and their role on each project, read
// fresh for every request (a session, later a personal token) so that a role given or taken, or
// a deactivation, counts from the next request on.
import type { Db } from '../db/database.ts';
import type { ProjectRole } from '../db/schema.ts';
import type { UserPrincipal } from './service.ts';

const STRENGTH: Record<ProjectRole, number> = { viewer: 1, member: 2, maintainer: 3 };

/**
 * The user's principal, or undefined for an unknown or deactivated user. A role comes from the
 * user's own grant or a grant to one of their groups (the provider's claim at the last
 * sign-in); the strongest counts.
 */
export async function userPrincipal(db: Db, userId: string): Promise<UserPrincipal | undefined> {
  const user = await db
    .selectFrom('users')
    .select(['id', 'admin', 'groups'])
    .where('id', '=', userId)
    .where('deactivated_at', 'is', null)
    .executeTakeFirst();
  if (!user) return undefined;
  const grants = await db
    .selectFrom('project_roles')
    .select(['project_id', 'role'])
    .where((eb) =>
      eb.or([
        eb.and([eb('grantee_kind', '=', 'user'), eb('grantee', '=', user.id)]),
        ...(user.groups.length
          ? [eb.and([eb('grantee_kind', '=', 'group'), eb('grantee', 'in', user.groups)])]
          : []),
      ]),
    )
    .execute();
  const roles = new Map<string, ProjectRole>();
  for (const grant of grants) {
    const held = roles.get(grant.project_id);
    if (!held || STRENGTH[grant.role] > STRENGTH[held]) roles.set(grant.project_id, grant.role);
  }
  return { kind: 'user', userId: user.id, admin: user.admin, roles };
}
