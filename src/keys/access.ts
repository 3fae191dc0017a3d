// What a key may act on, and the order in which a request is refused: 401 when there is no
// valid key (KeyChecker), then 403 when the key may not act there (these checks), then 404 for
// what does not exist. Said once for the API's routes, its polling read and the dashboard's
// pages, so that a project key of another project learns nothing of what exists elsewhere.
import { AppError } from '../errors.ts';
import type { Principal } from './service.ts';

/** Whether the key may act on the project: an admin key on any, a project key on its own. */
export function mayActOn(principal: Principal, projectId: string): boolean {
  return principal.projectId === null || principal.projectId === projectId;
}

/** Refuses (403) a key that may not act on the project; 404s are checked after this. */
export function requireProjectAccess(principal: Principal, projectId: string): Principal {
  if (!mayActOn(principal, projectId)) {
    throw new AppError('forbidden', `this API key is not valid for project ${projectId}`);
  }
  return principal;
}

/** Refuses (403) a project key where only an admin key may act: an admin route or page. */
export function requireAdminKey(principal: Principal, where: 'route' | 'page'): Principal {
  if (principal.projectId !== null) {
    throw new AppError('forbidden', `this ${where} needs an admin key; this is a project key`);
  }
  return principal;
}
