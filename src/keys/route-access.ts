// The access rule of every route, in one place: each route declares what it needs in its
// config (`config: { access: 'member' }`), authentication hooks (the API's keys, the dashboard's
// sessions) find the principal, and enforceAccess reads the rule and asks access.ts. A route
// without a rule does not start the server (checkAccessRules): a new route cannot be forgotten.
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import { AppError } from '../errors.ts';
import { ACCESS_LEVELS, type Access, needsProject, requireAccess } from './access.ts';
import type { Principal } from './service.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call this route (keys/access.ts): every route says. */
    access?: Access;
  }
}

/** A route's config with its rule: `{ config: access('member') }`. */
export function access(rule: Access): { access: Access } {
  return { access: rule };
}

/**
 * The project a route acts on: its `projectId` path parameter, or `id` on the dashboard's and
 * the admin API's /projects/:id paths.
 */
function projectParam(url: string): 'projectId' | 'id' | undefined {
  if (url.includes(':projectId')) return 'projectId';
  if (/\/projects\/:id(\/|$)/.test(url)) return 'id';
  return undefined;
}

/** The route's rule; every route has one (checkAccessRules). */
function routeAccess(request: FastifyRequest): Access {
  const rule = request.routeOptions.config.access;
  if (!rule) throw new AppError('internal', `no access rule for ${request.routeOptions.url}`);
  return rule;
}

/** Refuses (401, 403) the principal unless it has the access the request's route declares. */
export function enforceAccess(
  request: FastifyRequest,
  principal: Principal | null | undefined,
  where: 'route' | 'page' = 'route',
): void {
  const rule = routeAccess(request);
  const param = projectParam(request.routeOptions.url ?? '');
  const params = request.params as Record<string, string | undefined>;
  requireAccess(principal, rule, param ? params[param] : undefined, where);
}

const declared = new WeakMap<FastifyInstance, RouteOptions[]>();

/** Every route of the app with its rule, one per method, as checkAccessRules saw them added. */
export function declaredRoutes(
  app: FastifyInstance,
): { method: string; url: string; access: Access | undefined }[] {
  return (declared.get(app) ?? []).flatMap((route) =>
    [route.method]
      .flat()
      .map((method) => ({ method: String(method), url: route.url, access: route.config?.access })),
  );
}

/**
 * Checks, when the server is ready, that every route has a valid rule and that a rule that
 * needs a project has one in its path. Checked at ready, not as each route is added: the
 * scopes of other packages' routes (static files, the API's docs) mark theirs open in an
 * onRoute hook of their own, which runs after this app's.
 */
export function checkAccessRules(app: FastifyInstance): void {
  const routes: RouteOptions[] = [];
  declared.set(app, routes);
  app.addHook('onRoute', (route) => {
    routes.push(route);
  });
  app.addHook('onReady', async () => {
    const missing: string[] = [];
    for (const route of routes) {
      const rule = route.config?.access;
      const name = `${String(route.method)} ${route.url}`;
      if (!rule || !ACCESS_LEVELS.includes(rule)) missing.push(`${name}: no access rule`);
      else if (needsProject(rule) && !projectParam(route.url)) {
        missing.push(`${name}: ${rule} access but no project in the path`);
      }
    }
    if (missing.length)
      throw new Error(`routes without a valid access rule:\n${missing.join('\n')}`);
  });
}

/** An onRoute hook for a scope whose routes are another package's and public (static files). */
export function markOpen(route: RouteOptions): void {
  route.config = { ...route.config, access: 'open' };
}
