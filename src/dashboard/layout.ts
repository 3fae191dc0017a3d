// The frame every dashboard page shares (header, navigation, the one stylesheet and script),
// its notices and the small pieces several pages use. Every value goes through `html`, which
// escapes it; nothing here reads the database or the request.
import { isServerAdmin, type Principal } from '../keys/service.ts';
import { html, type SafeHtml } from './html.ts';

export interface Layout {
  title: string;
  /** undefined when signed out: no navigation. */
  principal?: Principal | undefined;
  /** A same-site path the page moves on to at once (after a sign-in through the provider). */
  redirect?: string;
}

export function page(layout: Layout, body: SafeHtml): string {
  const admin = layout.principal !== undefined && isServerAdmin(layout.principal);
  const nav = layout.principal
    ? html`<nav aria-label="Main">
        <a href="/projects">Projects</a>
        <a href="/evals">Evals</a>
        ${
          admin
            ? html`<a href="/keys">Admin keys</a>
        <a href="/users">Users</a>
        <a href="/audit">Audit</a>`
            : ''
        }
        ${layout.principal.kind === 'user' ? html`<a href="/tokens">Tokens</a>` : ''}
        ${signedInAs(layout.principal)}
        <form method="post" action="/sign-out" class="inline">
          <button type="submit" class="link">Sign out</button>
        </form>
      </nav>`
    : '';
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
${layout.redirect ? html`<meta http-equiv="refresh" content="0;url=${layout.redirect}">` : ''}
<title>${layout.title} · Errand</title>
<link rel="stylesheet" href="/assets/dashboard.css">
<link rel="stylesheet" href="/assets/diff.css">
<script src="/assets/dashboard.js" defer></script>
</head>
<body>
<header><a class="brand" href="/">Errand</a>${nav}</header>
<main id="main">
<h1>${layout.title}</h1>
${body}
</main>
</body>
</html>`.value;
}

export function notice(message: string | undefined, kind: 'error' | 'ok' = 'error'): SafeHtml {
  if (!message) return html``;
  return html`<p class="notice ${kind}" role="${kind === 'error' ? 'alert' : 'status'}">${message}</p>`;
}

/** Who the header says is signed in: the user's name and email, or the kind of key. */
function signedInAs(principal: Principal): SafeHtml {
  if (principal.kind === 'key')
    return html`<span class="muted" id="signed-in-as">${principal.projectId === null ? 'Admin key' : 'Project key'}</span>`;
  const name = principal.name ?? principal.email ?? principal.userId;
  const email =
    principal.name && principal.email ? html` <span class="muted">(${principal.email})</span>` : '';
  return html`<span id="signed-in-as">${name}${email}</span>`;
}

/** How the sign-in page lets one in: the OpenID provider's button and/or the key form. */
export interface SignInMethods {
  /** The provider's name, when single sign-on is configured. */
  provider: string | undefined;
  /** Whether the API key form is offered (off with SSO unless ERRAND_DASHBOARD_KEY_SIGNIN=true). */
  key: boolean;
}

export function signInPage(methods: SignInMethods, error?: string): string {
  const sso = methods.provider
    ? // A link, not a form: the page's form-action policy would stop a form's redirect to the
      // provider's site.
      html`<p class="card narrow"><a class="button" href="/auth/oidc/login">Sign in with ${methods.provider}</a></p>`
    : '';
  return page({ title: 'Sign in' }, html`${notice(error)}${sso}${methods.key ? keyForm() : ''}`);
}

function keyForm(): SafeHtml {
  return html`<form method="post" action="/sign-in" class="card narrow">
  <label for="key">API key</label>
  <input id="key" name="key" type="password" autocomplete="off" required autofocus
    aria-describedby="key-help">
  <p id="key-help" class="help">An admin key (from the data directory's <code>admin.key</code>)
  sees every project; a project key sees only its project. The key is exchanged for a session
  and is not kept in this browser.</p>
  <button type="submit">Sign in</button>
</form>`;
}

export function errorPage(
  principal: Principal | undefined,
  status: number,
  message: string,
): string {
  return page(
    { title: status === 404 ? 'Not found' : status === 403 ? 'Not allowed' : 'Refused', principal },
    html`${notice(message)}<p><a href="/projects">Back to projects</a></p>`,
  );
}

export function when(iso: string): SafeHtml {
  return html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`;
}

/**
 * Only http(s) links become links: a forge's URL, never a `javascript:` one. `text` is what
 * the link says (default the URL).
 */
export function externalLink(url: string | null, text?: string): SafeHtml {
  if (!url) return html`<span class="muted">none yet</span>`;
  return /^https?:\/\//i.test(url)
    ? html`<a href="${url}" rel="noreferrer">${text ?? url}</a>`
    : html`<span class="mono">${text ?? url}</span>`;
}
