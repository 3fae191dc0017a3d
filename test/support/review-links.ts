// What a reader of a forge thread gets from what Errand wrote there (a pull request's body, a
// comment): no job's review token, and links to review pages that, followed without a dashboard
// session, answer exactly as a job that does not exist.
import assert from 'node:assert/strict';
import { randomJobId } from './route-cases.ts';
import type { TestService } from './service.ts';

/** An answer as a reader sees it, without the request id every answer has of its own. */
async function seen(url: string, browser: boolean): Promise<string> {
  const res = await fetch(url, browser ? { headers: { accept: 'text/html' } } : {});
  let body = await res.text();
  if (res.headers.get('content-type')?.startsWith('application/json')) {
    const { requestId: _, ...rest } = JSON.parse(body) as Record<string, unknown>;
    body = JSON.stringify(rest);
  }
  return `${res.status} ${res.headers.get('content-type')}\n${body}`;
}

/** Checks `text`, written on a forge, as above; returns how many review links it holds. */
export async function assertRevealsNoJob(svc: TestService, text: string): Promise<number> {
  const tokens = await svc.service.ctx.db.selectFrom('jobs').select('review_token').execute();
  for (const { review_token } of tokens)
    assert.ok(!text.includes(review_token), `a job's review token is on the forge: ${text}`);
  const links = [...text.matchAll(/https?:\/\/[^\s)<>"']*\/review\/[^\s)<>"']*/g)].map((m) => m[0]);
  for (const link of links) {
    assert.ok(!link.includes('?'), `a review link on the forge carries a query: ${link}`);
    // Asked of the service running now (a link written before a restart names the one before).
    const asked = `${svc.url}${new URL(link).pathname}`;
    for (const browser of [false, true]) {
      const followed = await seen(asked, browser);
      assert.match(followed, /^404 /, `${link} opened: ${followed}`);
      assert.equal(followed, await seen(`${svc.url}/review/${randomJobId()}`, browser), link);
    }
  }
  return links.length;
}
