// The fake GitHub must be at least as strict as GitHub, or the provider's tests prove nothing:
// these tests speak raw HTTP to it and check that it refuses what GitHub refuses.

import assert from 'node:assert/strict';
import { createSign } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type FakeGitHub, generateAppKeys, startFakeGitHub } from './fake-github.ts';

const token = 'ghp_faketesttoken0000000000000000000000';
const keys = generateAppKeys();
const otherKeys = generateAppKeys();

function jwt(privateKey: string, claims: Record<string, unknown>): string {
  const header = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT' })).toString('base64url');
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  const signature = createSign('sha256')
    .update(`${header}.${payload}`)
    .sign(privateKey, 'base64url');
  return `${header}.${payload}.${signature}`;
}

function appJwt(privateKey = keys.privateKey, overrides: Record<string, unknown> = {}): string {
  const now = Math.floor(Date.now() / 1000);
  return jwt(privateKey, { iat: now - 60, exp: now + 540, iss: '42', ...overrides });
}

async function call(
  gh: FakeGitHub,
  method: string,
  path: string,
  options: { body?: unknown; auth?: string | null; raw?: string } = {},
): Promise<{ status: number; body: unknown; headers: Headers }> {
  const headers: Record<string, string> = { 'user-agent': 'fake-github-test' };
  if (options.auth !== null) headers.authorization = options.auth ?? `token ${token}`;
  const response = await fetch(`${gh.apiUrl}${path}`, {
    method,
    headers,
    body: options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: text ? JSON.parse(text) : undefined,
    headers: response.headers,
  };
}

function messageOf(body: unknown): string {
  return typeof body === 'object' && body !== null && 'message' in body ? String(body.message) : '';
}

const newPull = { title: 'T', head: 'errand/a', base: 'main', body: 'B', draft: false };

describe('fake GitHub', () => {
  let gh: FakeGitHub;
  // The fake's clock: the real one, moved forward by a test instead of waiting.
  let skew = 0;
  before(async () => {
    gh = await startFakeGitHub({
      repos: ['octo/hello'],
      token,
      app: { appId: '42', installationId: '7', publicKey: keys.publicKey, tokenTtlSeconds: 60 },
      now: () => Date.now() + skew,
    });
  });
  after(() => gh.close());

  test('keeps pull requests, numbers them and filters by owner:branch only', async () => {
    const first = await call(gh, 'POST', '/repos/octo/hello/pulls', { body: newPull });
    assert.equal(first.status, 201);
    assert.equal(first.headers.get('location'), `${gh.apiUrl}/repos/octo/hello/pulls/1`);
    await call(gh, 'POST', '/repos/octo/hello/pulls', {
      body: { ...newPull, head: 'octo:errand/b' },
    });
    const pulls = gh.pullRequests('octo/hello');
    assert.deepEqual(
      pulls.map((p) => [p.number, p.head, p.htmlUrl]),
      [
        [1, 'errand/a', `${gh.url}/octo/hello/pull/1`],
        [2, 'errand/b', `${gh.url}/octo/hello/pull/2`],
      ],
    );

    const filtered = await call(gh, 'GET', '/repos/octo/hello/pulls?head=octo:errand/b&state=all');
    assert.deepEqual(
      (filtered.body as { number: number }[]).map((p) => p.number),
      [2],
    );
    const ownerIsCaseInsensitive = await call(
      gh,
      'GET',
      '/repos/octo/hello/pulls?head=OCTO:errand/b',
    );
    assert.equal((ownerIsCaseInsensitive.body as unknown[]).length, 1);
    // GitHub's trap, reproduced: a bare branch name filters nothing.
    const bare = await call(gh, 'GET', '/repos/octo/hello/pulls?head=errand/b&state=all');
    assert.deepEqual(
      (bare.body as { number: number }[]).map((p) => p.number),
      [2, 1],
    );

    const dup = await call(gh, 'POST', '/repos/octo/hello/pulls', { body: newPull });
    assert.equal(dup.status, 422);
    assert.match(JSON.stringify(dup.body), /A pull request already exists for octo:errand\/a/);

    const patched = await call(gh, 'PATCH', '/repos/octo/hello/pulls/1', {
      body: { body: 'new', state: 'closed' },
    });
    assert.equal(patched.status, 200);
    assert.equal(gh.pullRequests()[0]?.state, 'closed');
    gh.merge('octo/hello', 2);
    const merged = await call(gh, 'GET', '/repos/octo/hello/pulls/2');
    assert.equal((merged.body as { merged: boolean }).merged, true);
    const open = await call(gh, 'GET', '/repos/octo/hello/pulls');
    assert.deepEqual(open.body, []);
    gh.assertNoUnexpected();
  });

  test('refuses bodies the OpenAPI description forbids, and records them', async () => {
    const before = gh.unexpected.length;
    const wrongType = await call(gh, 'POST', '/repos/octo/hello/pulls', {
      body: { ...newPull, draft: 'yes' },
    });
    assert.equal(wrongType.status, 422);
    assert.match(messageOf(wrongType.body), /For 'body\/draft', "yes" is not a boolean/);
    const missing = await call(gh, 'POST', '/repos/octo/hello/pulls', {
      body: { title: 'T', head: 'x' },
    });
    assert.equal(missing.status, 422);
    assert.match(messageOf(missing.body), /"base" wasn't supplied/);
    const unknown = await call(gh, 'POST', '/repos/octo/hello/pulls', {
      body: { ...newPull, labels: ['x'] },
    });
    assert.equal(unknown.status, 422);
    assert.match(messageOf(unknown.body), /"labels" is not a permitted key/);
    const badEnum = await call(gh, 'PATCH', '/repos/octo/hello/pulls/1', {
      body: { state: 'merged' },
    });
    assert.equal(badEnum.status, 422);
    const notJson = await call(gh, 'POST', '/repos/octo/hello/pulls', { raw: '{"title":' });
    assert.equal(notJson.status, 400);
    assert.equal(gh.unexpected.length - before, 5);
    assert.throws(() => gh.assertNoUnexpected(), /unexpected request/);
    gh.unexpected.length = before;
  });

  test('refuses unknown query parameters, bad enums and non-numeric path parameters', async () => {
    const before = gh.unexpected.length;
    assert.equal((await call(gh, 'GET', '/repos/octo/hello/pulls?heads=octo:x')).status, 400);
    assert.equal((await call(gh, 'GET', '/repos/octo/hello/pulls?state=merged')).status, 422);
    assert.equal((await call(gh, 'GET', '/repos/octo/hello/pulls?per_page=lots')).status, 422);
    assert.equal(
      (await call(gh, 'PATCH', '/repos/octo/hello/pulls/abc', { body: {} })).status,
      404,
    );
    assert.equal(gh.unexpected.length - before, 4);
    gh.unexpected.length = before;
  });

  test('answers 404 to anything it does not serve, and records it', async () => {
    const before = gh.unexpected.length;
    assert.equal((await call(gh, 'GET', '/repos/octo/hello/issues')).status, 404);
    assert.equal((await call(gh, 'DELETE', '/repos/octo/hello/pulls/1')).status, 404);
    assert.equal((await call(gh, 'GET', '/api/v3/repos/octo/hello/pulls')).status, 404);
    assert.deepEqual(
      gh.unexpected.slice(before).map((r) => r.path),
      ['/repos/octo/hello/issues', '/repos/octo/hello/pulls/1', '/api/v3/repos/octo/hello/pulls'],
    );
    gh.unexpected.length = before;
  });

  test('enforces authentication and repository visibility like GitHub', async () => {
    assert.equal((await call(gh, 'GET', '/repos/octo/hello/pulls', { auth: null })).status, 401);
    const wrong = await call(gh, 'GET', '/repos/octo/hello/pulls', { auth: 'token ghp_wrong' });
    assert.equal(wrong.status, 401);
    assert.equal(messageOf(wrong.body), 'Bad credentials');
    assert.equal(
      (await call(gh, 'GET', '/repos/octo/hello/pulls', { auth: `Bearer ${token}` })).status,
      200,
    );
    assert.equal((await call(gh, 'GET', '/repos/octo/other/pulls')).status, 404);
    const noAgent = await fetch(`${gh.apiUrl}/repos/octo/hello/pulls`, {
      headers: { authorization: `token ${token}`, 'user-agent': '' },
    });
    assert.equal(noAgent.status, 403);
    gh.assertNoUnexpected();
  });

  test('mints installation tokens only for a JWT signed with the app key, and expires them', async () => {
    const path = '/app/installations/7/access_tokens';
    const minted = await call(gh, 'POST', path, { auth: `Bearer ${appJwt()}` });
    assert.equal(minted.status, 201);
    const { token: installationToken, expires_at } = minted.body as {
      token: string;
      expires_at: string;
    };
    assert.match(installationToken, /^ghs_/);
    assert.match(expires_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const used = await call(gh, 'GET', '/repos/octo/hello/pulls', {
      auth: `token ${installationToken}`,
    });
    assert.equal(used.status, 200);
    assert.equal(gh.requests.at(-1)?.auth, 'installation');

    const forged = await call(gh, 'POST', path, { auth: `Bearer ${appJwt(otherKeys.privateKey)}` });
    assert.equal(forged.status, 401);
    const tooLong = await call(gh, 'POST', path, {
      auth: `Bearer ${appJwt(keys.privateKey, { exp: Math.floor(Date.now() / 1000) + 3600 })}`,
    });
    assert.match(messageOf(tooLong.body), /too far in the future/);
    const expired = await call(gh, 'POST', path, {
      auth: `Bearer ${appJwt(keys.privateKey, { iat: 1, exp: 2 })}`,
    });
    assert.equal(expired.status, 401);
    const otherApp = await call(gh, 'POST', path, {
      auth: `Bearer ${appJwt(keys.privateKey, { iss: '43' })}`,
    });
    assert.equal(otherApp.status, 401);
    assert.equal((await call(gh, 'POST', path, { auth: `token ${token}` })).status, 401);
    assert.equal(
      (await call(gh, 'POST', '/app/installations/8/access_tokens', { auth: `Bearer ${appJwt()}` }))
        .status,
      404,
    );
    const badBody = await call(gh, 'POST', path, {
      auth: `Bearer ${appJwt()}`,
      body: { permissions: { contents: 'admin' } },
    });
    assert.equal(badBody.status, 422);
    gh.unexpected.pop();

    skew += 61_000;
    const stale = await call(gh, 'GET', '/repos/octo/hello/pulls', {
      auth: `token ${installationToken}`,
    });
    assert.equal(stale.status, 401);
    gh.assertNoUnexpected();
  });

  test('failNext injects errors with their headers, once each', async () => {
    gh.failNext(502);
    gh.failNext(403, { headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '123' } });
    const first = await call(gh, 'GET', '/repos/octo/hello/pulls');
    assert.equal(first.status, 502);
    const second = await call(gh, 'GET', '/repos/octo/hello/pulls');
    assert.equal(second.status, 403);
    assert.equal(second.headers.get('x-ratelimit-reset'), '123');
    assert.match(messageOf(second.body), /rate limit/);
    assert.equal((await call(gh, 'GET', '/repos/octo/hello/pulls')).status, 200);
    gh.assertNoUnexpected();
  });
});

describe('fake GitHub as Enterprise Server', () => {
  test('serves the API under /api/v3 only, checked against the GHES description', async () => {
    const gh = await startFakeGitHub({ repos: ['octo/hello'], token, enterprise: true });
    try {
      assert.equal(gh.apiUrl, `${gh.url}/api/v3`);
      const created = await call(gh, 'POST', '/repos/octo/hello/pulls', { body: newPull });
      assert.equal(created.status, 201);
      assert.equal((created.body as { html_url: string }).html_url, `${gh.url}/octo/hello/pull/1`);
      gh.assertNoUnexpected();
      const outside = await fetch(`${gh.url}/repos/octo/hello/pulls`, {
        headers: { authorization: `token ${token}`, 'user-agent': 'x' },
      });
      assert.equal(outside.status, 404);
      assert.equal(gh.unexpected.length, 1);
    } finally {
      await gh.close();
    }
  });

  test("drafts can be refused with GitHub's message", async () => {
    const gh = await startFakeGitHub({ repos: ['octo/hello'], token, draftsRefused: true });
    try {
      const draft = await call(gh, 'POST', '/repos/octo/hello/pulls', {
        body: { ...newPull, draft: true },
      });
      assert.equal(draft.status, 422);
      assert.equal(
        messageOf(draft.body),
        'Draft pull requests are not supported in this repository.',
      );
      assert.equal(
        (await call(gh, 'POST', '/repos/octo/hello/pulls', { body: newPull })).status,
        201,
      );
      gh.assertNoUnexpected();
    } finally {
      await gh.close();
    }
  });
});
