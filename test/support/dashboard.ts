// The dashboard over plain HTTP, as a browser without scripts uses it: a session made by the
// sign-in form, pages fetched with its cookie, forms posted from the dashboard's own origin
// (or another, to show a cross-site post refused). Redirects are returned, not followed.
import assert from 'node:assert/strict';

/** A page or a form's answer. */
export interface PageResult {
  status: number;
  location: string | null;
  text: string;
}

/** A dashboard session cookie for the key, as the sign-in form makes one. */
export async function sessionCookie(svc: { url: string }, key: string): Promise<string> {
  const response = await fetch(`${svc.url}/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { origin: svc.url, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ key }).toString(),
  });
  assert.equal(response.status, 303);
  return (response.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
}

async function pageResult(response: Response): Promise<PageResult> {
  return {
    status: response.status,
    location: response.headers.get('location'),
    text: await response.text(),
  };
}

/** GETs a dashboard page with the session's cookie. */
export async function getPage(
  svc: { url: string },
  cookie: string,
  path: string,
): Promise<PageResult> {
  const response = await fetch(`${svc.url}${path}`, {
    redirect: 'manual',
    headers: { accept: 'text/html', cookie },
  });
  return pageResult(response);
}

/** POSTs a form with the session's cookie, from `origin` (the dashboard's own by default). */
export async function postForm(
  svc: { url: string },
  cookie: string,
  path: string,
  fields: Record<string, string>,
  origin = svc.url,
): Promise<PageResult> {
  const response = await fetch(`${svc.url}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: {
      accept: 'text/html',
      origin,
      cookie,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams(fields).toString(),
  });
  return pageResult(response);
}
