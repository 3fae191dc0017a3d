// The dashboard as a Fastify plugin of the API's app, registered by the entry (src/service.ts):
// the review page, always, and with the dashboard on (not --no-dashboard) the pages at `/`,
// with the features' pages (src/features/) the entry hands in.
// Pages need a session (src/dashboard/sessions.ts); actions go through the same services and
// schemas as the admin API, and a refusal is shown on the page with the API's message. Its
// cookies, security headers, form bodies and files are the @fastify plugins', in this scope only:
// the API keeps answering form bodies with 415.
import { fileURLToPath } from 'node:url';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import helmet from '@fastify/helmet';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { auditAfter, whoOf } from '../audit/audit.ts';
import type { AppContext } from '../context.ts';
import { AppError, toAppError } from '../errors.ts';
import { access, enforceAccess, markOpen } from '../keys/route-access.ts';
import { OidcRelyingParty } from '../users/oidc.ts';
import { registerAuditRoutes } from './audit-routes.ts';
import { registerEnvironmentRoutes } from './environment-routes.ts';
import { securityHeaders } from './headers.ts';
import { registerJobRoutes } from './job-routes.ts';
import { registerKeyRoutes } from './key-routes.ts';
import { errorPage, type SignInMethods, signInPage } from './layout.ts';
import { registerOidcRoutes } from './oidc-routes.ts';
import { registerProjectRoutes } from './project-routes.ts';
import { type Form, sendPage, wantsHtml } from './requests.ts';
import { registerReviewPage } from './review.ts';
import { registerSecretRoutes } from './secret-routes.ts';
import {
  endSession,
  readSession,
  SESSION_COOKIE,
  SESSION_MAX_SECONDS,
  signIn,
} from './sessions.ts';
import { registerTokenRoutes } from './token-routes.ts';
import { registerUserRoutes } from './user-routes.ts';

export interface DashboardOptions {
  ctx: AppContext;
}

/**
 * A feature's pages (src/features/), registered in the signed-in scope: its session, Origin
 * check and headers apply. The features sit above this layer and use its helpers, so the entry
 * hands them in.
 */
export type DashboardPages = (signedIn: FastifyInstance, ctx: AppContext) => void;

// No inline script or style anywhere, so the policy needs no 'unsafe-inline'.
const CSP = {
  'default-src': ["'none'"],
  'script-src': ["'self'"],
  'style-src': ["'self'"],
  'img-src': ["'self'"],
  'connect-src': ["'self'"],
  'form-action': ["'self'"],
  'frame-ancestors': ["'none'"],
  'base-uri': ["'none'"],
};

const ASSETS = fileURLToPath(new URL('./assets/', import.meta.url));

/** The dashboard with the features' pages. */
export function dashboardWith(
  features: readonly DashboardPages[],
): FastifyPluginAsync<DashboardOptions> {
  return async (app, { ctx }) => {
    // The review page reads the session too, to link a signed-in reader to the job's page.
    await app.register(cookie);
    await registerReviewPage(app, ctx);
    if (ctx.config.dashboard) await app.register(async (scope) => pages(scope, ctx, features));
  };
}

/** The dashboard's own pages and the review page, without a feature's. */
export const dashboard = dashboardWith([]);

async function pages(scope: FastifyInstance, ctx: AppContext, features: readonly DashboardPages[]) {
  const publicOrigin = ctx.config.publicUrl ? new URL(ctx.config.publicUrl).origin : undefined;
  const sessionCookie = {
    path: '/',
    httpOnly: true,
    sameSite: 'strict',
    secure: ctx.config.publicUrl?.startsWith('https:') ?? false,
  } as const;

  scope.decorateRequest('session', null);
  // Pages, not the API: they stay out of the OpenAPI document.
  scope.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, hide: true };
  });
  // One value per name, the last one, as URLSearchParams gives it (a repeated field is not a list).
  await scope.register(formbody, {
    bodyLimit: 256 * 1024,
    parser: (body) => Object.fromEntries(new URLSearchParams(body)),
  });
  // Not no-referrer: under it a browser sends "Origin: null" with form posts, and the Origin
  // check below could not tell this site's forms from another's.
  await scope.register(
    helmet,
    securityHeaders({ directives: CSP, referrer: 'same-origin', nosniff: true }),
  );
  scope.addHook('onSend', (_request, reply, payload, done) => {
    // Pages hold data of a signed-in user: never kept, so after sign-out "back" shows none.
    if (!reply.hasHeader('Cache-Control')) reply.header('Cache-Control', 'no-store');
    done(null, payload);
  });
  // Cross-site form posts: SameSite=Strict keeps the cookie off them, and this refuses any
  // POST whose Origin is not this server's, even one that carries no cookie (sign-in).
  scope.addHook('onRequest', async (request) => {
    if (request.method !== 'POST') return;
    const site = request.headers['sec-fetch-site'];
    const origin = request.headers.origin;
    const own = `${request.protocol}://${request.host}`;
    if (
      (site !== undefined && site !== 'same-origin') ||
      (origin !== own && origin !== publicOrigin)
    ) {
      throw new AppError('forbidden', 'cross-site request refused; use the form on this site');
    }
  });
  scope.setErrorHandler((err, request, reply) => {
    // A script gets the API's JSON error, from the API's own error handler.
    if (!wantsHtml(request)) throw err;
    const appError = toAppError(err instanceof Error ? err : new Error(String(err)));
    if (appError.status >= 500)
      ctx.log.error({ err, requestId: request.id, url: request.url }, 'dashboard request failed');
    return sendPage(
      reply,
      appError.status,
      errorPage(request.session ?? undefined, appError.status, appError.message),
    );
  });

  // The stylesheets and the script, from the package (no CDN: works offline).
  // Public: the sign-in page needs them. The package's routes are marked open in a scope of
  // their own (every route declares its access: keys/route-access.ts).
  await scope.register(async (assets) => {
    assets.addHook('onRoute', markOpen);
    await assets.register(fastifyStatic, {
      root: ASSETS,
      prefix: '/assets/',
      wildcard: false,
      decorateReply: false,
      maxAge: 3600 * 1000,
      etag: false,
      lastModified: false,
      acceptRanges: false,
      // RFC 9239's type for JavaScript, as before (the mime table says application/javascript).
      setHeaders: (reply, path) => {
        if (path.endsWith('.js')) reply.header('content-type', 'text/javascript; charset=utf-8');
      },
    });
  });
  scope.get<{ Params: { '*': string } }>(
    '/assets/*',
    { config: access('open') },
    async (request) => {
      throw new AppError('not_found', `no asset ${request.params['*']}`);
    },
  );

  registerSignIn(scope, ctx, sessionCookie);

  // Everything below needs a session: a page without one sends a browser to sign in.
  await scope.register(async (signedIn) => {
    signedIn.addHook('onRequest', async (request, reply) => {
      const principal = await readSession(ctx.db, request.cookies[SESSION_COOKIE]);
      if (principal) {
        request.session = principal;
        // The page's access rule (keys/route-access.ts): the one check of who may see it.
        enforceAccess(request, principal, 'page');
        return;
      }
      if (request.method === 'GET' && wantsHtml(request)) return reply.redirect('/', 303);
      throw new AppError('unauthorized', 'sign in first: this needs a dashboard session');
    });
    registerProjectRoutes(signedIn, ctx);
    registerJobRoutes(signedIn, ctx);
    registerKeyRoutes(signedIn, ctx);
    registerSecretRoutes(signedIn, ctx);
    registerEnvironmentRoutes(signedIn, ctx);
    registerTokenRoutes(signedIn, ctx);
    registerUserRoutes(signedIn, ctx);
    registerAuditRoutes(signedIn, ctx);
    for (const register of features) register(signedIn, ctx);
  });
}

/** The session cookie's attributes: the server's, whatever the page. */
interface SessionCookie {
  path: string;
  httpOnly: boolean;
  sameSite: 'strict';
  secure: boolean;
}

/**
 * The public pages that start and end a session: the sign-in page, a key's sign-in (when the
 * operator allows it), the identity provider's sign-in (when configured) and sign-out.
 */
function registerSignIn(scope: FastifyInstance, ctx: AppContext, sessionCookie: SessionCookie) {
  const rp = ctx.config.oidc ? new OidcRelyingParty(ctx.config.oidc) : undefined;
  const methods: SignInMethods = { provider: rp?.name, key: ctx.config.dashboardKeySignIn };

  scope.get('/', { config: access('open') }, async (request, reply) => {
    const principal = await readSession(ctx.db, request.cookies[SESSION_COOKIE]);
    if (principal) return reply.redirect('/projects', 303);
    return sendPage(reply, 200, signInPage(methods));
  });

  // With single sign-on, an API key signs in to the dashboard only when the operator says so.
  scope.post<{ Body: Form | undefined }>(
    '/sign-in',
    { config: access('open') },
    async (request, reply) => {
      if (!methods.key)
        return sendPage(
          reply,
          403,
          signInPage(
            methods,
            'signing in with an API key is off on this server; sign in with the identity provider',
          ),
        );
      try {
        const { id, principal } = await signIn(ctx.db, request.body?.key ?? '');
        await auditAfter(ctx, whoOf(request, principal), {
          action: 'session.sign_in',
          target: null,
          details: { method: 'key' },
        });
        reply.setCookie(SESSION_COOKIE, id, { ...sessionCookie, maxAge: SESSION_MAX_SECONDS });
        return reply.redirect('/projects', 303);
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        // A refused sign-in names no one: the key typed is not in the row.
        await auditAfter(ctx, whoOf(request, null), {
          action: 'session.sign_in',
          target: null,
          refused: err.code,
          details: { method: 'key' },
        });
        return sendPage(reply, err.status, signInPage(methods, err.message));
      }
    },
  );

  if (rp)
    registerOidcRoutes(scope, ctx, {
      rp,
      methods,
      secure: sessionCookie.secure,
      setSession: (reply, id) =>
        reply.setCookie(SESSION_COOKIE, id, { ...sessionCookie, maxAge: SESSION_MAX_SECONDS }),
    });

  scope.post('/sign-out', { config: access('open') }, async (request, reply) => {
    const principal = await readSession(ctx.db, request.cookies[SESSION_COOKIE]);
    await endSession(ctx.db, request.cookies[SESSION_COOKIE]);
    if (principal)
      await auditAfter(ctx, whoOf(request, principal), {
        action: 'session.sign_out',
        target: null,
      });
    reply.setCookie(SESSION_COOKIE, '', { ...sessionCookie, maxAge: 0 });
    return reply.redirect('/', 303);
  });
}
