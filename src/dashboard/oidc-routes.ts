// Single sign-on to the dashboard through the OpenID provider (src/users/oidc.ts):
// GET /auth/oidc/login sends the browser to the provider, GET /auth/oidc/callback is where it
// comes back (the URL admins register at the provider), and ends in a dashboard session.
//
// The sign-in in progress (state, nonce, PKCE verifier) waits in a short-lived HttpOnly cookie
// rather than a table: it belongs to this one browser, any API process can read it back, it
// needs no clean-up, and it is used once (cleared at the callback). It is SameSite=Lax because
// the callback is a top-level navigation from the provider's site, which a Strict cookie would
// miss; its path keeps it off every other request.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { auditAfter, whoOf } from '../audit/audit.ts';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { access } from '../keys/route-access.ts';
import { type OidcRelyingParty, type PendingLogin, pendingLoginSchema } from '../users/oidc.ts';
import { isAdminIdentity, upsertUser } from '../users/service.ts';
import { html } from './html.ts';
import { notice, page, type SignInMethods, signInPage } from './layout.ts';
import { sendPage } from './requests.ts';
import { startUserSession } from './sessions.ts';

const LOGIN_COOKIE = 'errand_oidc_login';
const LOGIN_PATH = '/auth/oidc/';
/** How long a browser may spend at the provider before its sign-in must start again. */
const LOGIN_MAX_SECONDS = 600;

export interface OidcRouteOptions {
  rp: OidcRelyingParty;
  methods: SignInMethods;
  /** Whether cookies are marked Secure (ERRAND_PUBLIC_URL is https). */
  secure: boolean;
  /** Sets the session's cookie on the reply. */
  setSession: (reply: FastifyReply, sessionId: string) => void;
}

/** This server's callback URL: ERRAND_PUBLIC_URL's, else the address the browser used. */
function callbackUrl(ctx: AppContext, request: FastifyRequest): string {
  const base = ctx.config.publicUrl ?? `${request.protocol}://${request.host}`;
  return `${base}/auth/oidc/callback`;
}

function readPending(raw: string | undefined): PendingLogin | undefined {
  if (!raw) return undefined;
  try {
    const parsed = pendingLoginSchema.safeParse(
      JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')),
    );
    return parsed.success ? parsed.data : undefined;
  } catch {
    // A cookie that is not ours (or was edited): as if there were none.
    return undefined;
  }
}

export function registerOidcRoutes(
  scope: FastifyInstance,
  ctx: AppContext,
  opts: OidcRouteOptions,
): void {
  const loginCookie = {
    path: LOGIN_PATH,
    httpOnly: true,
    sameSite: 'lax',
    secure: opts.secure,
  } as const;
  const refused = async (request: FastifyRequest, reply: FastifyReply, err: unknown) => {
    if (!(err instanceof AppError)) throw err;
    ctx.log.warn({ code: err.code, reason: err.message }, 'dashboard sign-in refused');
    // A provider that is down is not a refused sign-in: nobody was turned away.
    if (err.status < 500)
      await auditAfter(ctx, whoOf(request, null), {
        action: 'session.sign_in',
        target: null,
        refused: err.code,
        details: { method: 'oidc' },
      });
    return sendPage(reply, err.status, signInPage(opts.methods, err.message));
  };

  scope.get('/auth/oidc/login', { config: access('open') }, async (request, reply) => {
    try {
      const { url, pending } = await opts.rp.start(callbackUrl(ctx, request));
      const value = Buffer.from(JSON.stringify(pending)).toString('base64url');
      reply.setCookie(LOGIN_COOKIE, value, { ...loginCookie, maxAge: LOGIN_MAX_SECONDS });
      return reply.redirect(url.href, 303);
    } catch (err) {
      return refused(request, reply, err);
    }
  });

  scope.get('/auth/oidc/callback', { config: access('open') }, async (request, reply) => {
    // Used once, whatever happens next.
    const pending = readPending(request.cookies[LOGIN_COOKIE]);
    reply.setCookie(LOGIN_COOKIE, '', { ...loginCookie, maxAge: 0 });
    try {
      if (!pending)
        throw new AppError(
          'unauthorized',
          `no sign-in was started in this browser, or it took longer than ${LOGIN_MAX_SECONDS / 60} minutes; start again`,
        );
      // The provider's answer is this request's query, on the URL it was sent to.
      const current = new URL(pending.redirectUri);
      current.search = new URL(request.url, 'http://callback.invalid').search;
      const identity = await opts.rp.finish(pending, current);
      const oidc = ctx.config.oidc;
      const admin = oidc !== undefined && isAdminIdentity(identity, oidc);
      const user = await upsertUser(ctx.db, identity, admin);
      if (user.deactivated_at)
        throw new AppError(
          'forbidden',
          'this user has been deactivated on this Errand server; ask an admin to reactivate you',
        );
      opts.setSession(reply, await startUserSession(ctx.db, user.id));
      await auditAfter(ctx, whoOf(request, { kind: 'user', userId: user.id }), {
        action: 'session.sign_in',
        target: null,
        details: { method: 'oidc' },
      });
      ctx.log.info({ userId: user.id, admin: user.admin }, 'dashboard sign-in');
      // A page, not a redirect: the browser came from the provider's site, and the session's
      // SameSite=Strict cookie is not sent on a redirect that a cross-site navigation started.
      // This page's own navigation to the dashboard is same-site, so the cookie goes with it.
      return sendPage(
        reply,
        200,
        page(
          { title: 'Signed in', redirect: '/projects' },
          html`${notice(`Signed in as ${user.name ?? user.email ?? user.subject}.`, 'ok')}
<p><a href="/projects">Continue to the dashboard</a></p>`,
        ),
      );
    } catch (err) {
      return refused(request, reply, err);
    }
  });
}
