// What a key may act on, and the order in which a request is refused: 401 when there is no
// valid key (KeyChecker), then 403 when the key may not act there (these checks), then 404 for
// what does not exist. Said once for the API's routes, its polling read and the dashboard's
// pages, so that a project key of another project learns nothing of what exists elsewhere.
import { AppError } from '../errors.ts';
import { isServerAdmin, type Principal } from './service.ts';

/**
 * Whether the principal may act on the project: an admin key or a server admin on any, a
 * project key on its own, a user on those they have a role on.
 */
export function mayActOn(principal: Principal, projectId: string): boolean {
  if (isServerAdmin(principal)) return true;
  return principal.kind === 'key'
    ? principal.projectId === projectId
    : principal.roles.has(projectId);
}

/** Refuses (403) a key that may not act on the project; 404s are checked after this. */
export function requireProjectAccess(principal: Principal, projectId: string): Principal {
  if (!mayActOn(principal, projectId)) {
    throw new AppError(
      'forbidden',
      principal.kind === 'key'
        ? `this API key is not valid for project ${projectId}`
        : `you have no role on project ${projectId}`,
    );
  }
  return principal;
}

/** Refuses (403) a project key where only an admin key may act: an admin route or page. */
export function requireAdminKey(principal: Principal, where: 'route' | 'page'): Principal {
  if (!isServerAdmin(principal)) {
    throw new AppError(
      'forbidden',
      principal.kind === 'key'
        ? `this ${where} needs an admin key; this is a project key`
        : `this ${where} needs a server admin`,
    );
  }
  return principal;
}
