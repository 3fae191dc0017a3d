// What a principal may act on, and the order in which a request is refused: 401 when there is
// no valid key or session (KeyChecker, the dashboard's session), then 403 when the principal may
// not act there (these checks), then 404 for what does not exist. Said once for the API's
// routes, its polling read and the dashboard's pages, so that a project key of another project
// learns nothing of what exists elsewhere.
//
// Every route and page declares the access it needs (Access, in its route config); the HTTP
// layer reads that rule in one hook (src/http/access.ts) and asks requireAccess here.
import type { ProjectRole } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { isServerAdmin, type Principal } from './service.ts';

/**
 * What a route needs: `open` (no key or session: each such route checks its caller its own
 * way, or has nothing to protect), `signed-in` (any principal), `person` (a user signed in
 * through the identity provider, not a key: what is a user's own, such as their tokens), a
 * role on the route's project, or a server admin.
 */
export type Access = 'open' | 'signed-in' | 'person' | ProjectRole | 'admin';

export const ACCESS_LEVELS: readonly Access[] = [
  'open',
  'signed-in',
  'person',
  'viewer',
  'member',
  'maintainer',
  'admin',
];

/** The access levels that need a project: the route names it in its path. */
export function needsProject(access: Access): access is ProjectRole {
  return access === 'viewer' || access === 'member' || access === 'maintainer';
}

const RANK: Record<ProjectRole | 'admin', number> = {
  viewer: 1,
  member: 2,
  maintainer: 3,
  admin: 4,
};

/**
 * The principal's role on the project: a server admin's is `admin`; a project key is a member
 * of its own project (what it could do before roles existed: see mayArchive); a user has the
 * role they or their groups were given.
 */
export function roleOn(principal: Principal, projectId: string): ProjectRole | 'admin' | undefined {
  if (isServerAdmin(principal)) return 'admin';
  if (principal.kind === 'key') return principal.projectId === projectId ? 'member' : undefined;
  return principal.roles.get(projectId);
}

/** Whether the principal holds at least `role` on the project. */
export function hasRole(
  principal: Principal,
  projectId: string,
  role: ProjectRole | 'admin',
): boolean {
  const held = roleOn(principal, projectId);
  return held !== undefined && RANK[held] >= RANK[role];
}

/**
 * Whether the principal may act on the project at all: an admin key or a server admin on any,
 * a project key on its own, a user on those they have a role on.
 */
export function mayActOn(principal: Principal, projectId: string): boolean {
  return roleOn(principal, projectId) !== undefined;
}

/**
 * The one decision of who may call a route: refuses (401) a missing principal and (403) one
 * without the access the route declares. Keys are refused as before roles existed (code
 * `forbidden`, the same messages): scripts that read them keep working. A user is told the
 * role that is missing, in the code (`member_required`...) and the message.
 */
export function requireAccess(
  principal: Principal | null | undefined,
  access: Access,
  projectId: string | undefined,
  where: 'route' | 'page' = 'route',
): void {
  if (access === 'open') return;
  if (!principal) throw new AppError('unauthorized', 'sign in or send an API key first');
  if (access === 'signed-in') return;
  if (access === 'person') {
    if (principal.kind === 'user') return;
    throw new AppError(
      'forbidden',
      `this ${where} is a person's own: sign in through the identity provider, not with a key`,
    );
  }
  if (access === 'admin') {
    requireAdminKey(principal, where);
    return;
  }
  if (projectId === undefined) {
    // A route that needs a project role names its project: src/http/access.ts checks that
    // when the route is registered.
    throw new AppError('internal', `this ${where} declares ${access} access but has no project`);
  }
  if (hasRole(principal, projectId, access)) return;
  if (principal.kind === 'key') {
    // Refused as before roles: what a member may not do was an admin key's, on any project;
    // what a member may do, a project key does on its own project only.
    if (RANK[access] > RANK.member) requireAdminKey(principal, where);
    requireProjectAccess(principal, projectId);
  }
  const held = roleOn(principal, projectId);
  throw new AppError(
    `${access}_required`,
    held
      ? `this ${where} needs the ${access} role on project ${projectId}; you are a ${held}`
      : `this ${where} needs the ${access} role on project ${projectId}; you have no role on it`,
  );
}

/** Refuses (403) a principal that may not act on the project; 404s are checked after this. */
function requireProjectAccess(principal: Principal, projectId: string): Principal {
  if (!mayActOn(principal, projectId)) {
    throw principal.kind === 'key'
      ? new AppError('forbidden', `this API key is not valid for project ${projectId}`)
      : new AppError('viewer_required', `you have no role on project ${projectId}`);
  }
  return principal;
}

/** Refuses (403) a principal that is not a server admin: an admin route or page. */
function requireAdminKey(principal: Principal, where: 'route' | 'page'): Principal {
  if (!isServerAdmin(principal)) {
    throw principal.kind === 'key'
      ? new AppError('forbidden', `this ${where} needs an admin key; this is a project key`)
      : new AppError('admin_required', `this ${where} needs a server admin`);
  }
  return principal;
}

/**
 * Whether the principal may archive the job: a member archives the jobs they created, a
 * maintainer or admin any job of the project. A project key archives any job of its project,
 * as it always could. `createdBy` is the job's creator (jobCreatedBy), undefined when unknown:
 * then only a maintainer may.
 */
export function mayArchive(
  principal: Principal,
  projectId: string,
  createdBy: string | undefined,
): boolean {
  if (hasRole(principal, projectId, 'maintainer')) return true;
  if (principal.kind === 'key') return principal.projectId === projectId;
  return hasRole(principal, projectId, 'member') && createdBy === principal.userId;
}
