import assert from 'node:assert/strict';
import { after, beforeEach, describe, it } from 'node:test';
import { type FakeGitea, startFakeGitea } from './fake-gitea.ts';

const TOKEN = 'fake-gitea-token-0123';
const fake: FakeGitea = await startFakeGitea({
  token: TOKEN,
  repos: ['acme/widgets', { path: 'acme/tools', branches: ['main', 'develop'] }],
});
after(() => fake.close());
beforeEach(() => fake.reset());

const PULLS = `${fake.apiUrl}/repos/acme/widgets/pulls`;

function call(
  url: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { authorization: `token ${TOKEN}`, ...init.headers };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  return fetch(url, {
    method: init.method ?? 'GET',
    headers,
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
}

const pr = (extra: Record<string, unknown> = {}) => ({
  head: 'errand/1',
  base: 'main',
  title: 'T',
  body: 'B',
  ...extra,
});

describe('fake Gitea: state', () => {
  it('numbers pull requests per repository and answers like Gitea', async () => {
    const res = await call(PULLS, { method: 'POST', body: pr() });
    assert.equal(res.status, 201);
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.number, 1);
    assert.equal(body.state, 'open');
    assert.equal(body.merged, false);
    assert.equal(body.html_url, `${fake.url}/acme/widgets/pulls/1`);
    assert.equal('draft' in body, false);
    assert.deepEqual((body.head as Record<string, unknown>).label, 'errand/1');

    const other = await call(`${fake.apiUrl}/repos/acme/tools/pulls`, {
      method: 'POST',
      body: pr({ base: 'develop' }),
    });
    assert.equal(((await other.json()) as { number: number }).number, 1);
    assert.equal(fake.pulls('acme/widgets').length, 1);
    assert.equal(fake.pulls().length, 2);
    fake.assertNoUnexpected();
  });

  it('pages lists with limit (capped at 50), page and X-Total-Count', async () => {
    for (let i = 0; i < 70; i++) fake.addPull('acme/widgets', { head: `f/${i}` });
    fake.setState('acme/widgets', 3, 'closed');
    const first = await call(`${PULLS}?state=all&limit=100&page=1`);
    assert.equal(first.headers.get('x-total-count'), '70');
    assert.equal(((await first.json()) as unknown[]).length, 50);
    const second = await call(`${PULLS}?state=all&limit=100&page=2`);
    assert.equal(((await second.json()) as unknown[]).length, 20);
    const open = await call(`${PULLS}?limit=10`);
    assert.equal(open.headers.get('x-total-count'), '69');
    const recent = (await (
      await call(`${PULLS}?state=all&sort=recentupdate&limit=1`)
    ).json()) as Array<{
      number: number;
    }>;
    assert.equal(recent[0]?.number, 3);
    fake.assertNoUnexpected();
  });

  it('edits title and body and answers 201, as Gitea does', async () => {
    await call(PULLS, { method: 'POST', body: pr() });
    const res = await call(`${PULLS}/1`, { method: 'PATCH', body: { title: 'New', body: 'x' } });
    assert.equal(res.status, 201);
    assert.equal(fake.pulls()[0]?.title, 'New');
    const missing = await call(`${PULLS}/7`, { method: 'PATCH', body: { body: 'x' } });
    assert.equal(missing.status, 404);
    fake.setState('acme/widgets', 1, 'merged');
    const merged = (await (await call(`${PULLS}/1`)).json()) as Record<string, unknown>;
    assert.equal(merged.state, 'closed');
    assert.equal(merged.merged, true);
    fake.assertNoUnexpected();
  });
});

describe('fake Gitea: strictness', () => {
  it('accepts token, Bearer and Basic (token as password) and nothing else', async () => {
    const none = await fetch(PULLS);
    assert.equal(none.status, 401);
    assert.equal(((await none.json()) as { message: string }).message, 'token is required');
    assert.equal((await call(PULLS, { headers: { authorization: 'token nope' } })).status, 401);
    assert.equal(
      (await call(PULLS, { headers: { authorization: `Bearer ${TOKEN}` } })).status,
      200,
    );
    const basic = (user: string, password: string) =>
      `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
    assert.equal(
      (await call(PULLS, { headers: { authorization: basic('anyone', TOKEN) } })).status,
      200,
    );
    assert.equal((await call(PULLS, { headers: { authorization: basic(TOKEN, '') } })).status, 200);
    assert.equal(
      (await call(PULLS, { headers: { authorization: basic(TOKEN, 'pw') } })).status,
      401,
    );
  });

  it('validates bodies as Gitea does', async () => {
    const missing = await call(PULLS, { method: 'POST', body: { title: 'T' } });
    assert.equal(missing.status, 422);
    assert.equal(((await missing.json()) as { message: string }).message, '[Head, Base]: Required');
    assert.equal((await call(PULLS, { method: 'POST', body: pr({ title: 1 }) })).status, 422);
    assert.equal((await call(PULLS, { method: 'POST', body: pr({ head: 'main' }) })).status, 422);
    const base = await call(PULLS, { method: 'POST', body: pr({ base: 'nope' }) });
    assert.equal(base.status, 404);
    assert.deepEqual(await base.json(), { message: 'not found', url: `${fake.url}/api/swagger` });
    fake.assertNoUnexpected();
  });

  it('refuses a second open pull request for the same branches with 409', async () => {
    await call(PULLS, { method: 'POST', body: pr() });
    const again = await call(PULLS, { method: 'POST', body: pr() });
    assert.equal(again.status, 409);
    assert.match(
      ((await again.json()) as { message: string }).message,
      /^pull request already exists for these targets \[id: 1, issue_id: 1, .*head_branch: errand\/1, base_branch: main\]$/,
    );
    fake.setState('acme/widgets', 1, 'merged');
    assert.equal((await call(PULLS, { method: 'POST', body: pr() })).status, 201);
  });

  it('checks the head branch when asked to', async () => {
    const strict = await startFakeGitea({ token: TOKEN, repos: ['o/r'], requireHeadBranch: true });
    try {
      const url = `${strict.apiUrl}/repos/o/r/pulls`;
      assert.equal((await call(url, { method: 'POST', body: pr() })).status, 404);
      strict.addBranch('o/r', 'errand/1');
      assert.equal((await call(url, { method: 'POST', body: pr() })).status, 201);
    } finally {
      await strict.close();
    }
  });

  it('refuses writes with a read-only token', async () => {
    const ro = await startFakeGitea({ token: TOKEN, repos: ['o/r'], access: 'read' });
    try {
      const url = `${ro.apiUrl}/repos/o/r/pulls`;
      assert.equal((await call(url)).status, 200);
      const res = await call(url, { method: 'POST', body: pr() });
      assert.equal(res.status, 403);
      assert.match(((await res.json()) as { message: string }).message, /write:repository/);
    } finally {
      await ro.close();
    }
  });

  it('reports unsupported endpoints, unknown fields and parameters as unexpected', async () => {
    assert.equal((await call(`${PULLS}/main/errand/1`)).status, 404);
    await call(PULLS, { method: 'POST', body: pr({ description: 'GitLab spelling' }) });
    await call(`${PULLS}?head=errand/1`);
    await call(`${fake.apiUrl}/repos/acme/widgets/issues`);
    await call(`${PULLS}/1`, { method: 'DELETE' });
    assert.equal(fake.unexpected.length, 5);
    assert.match(fake.unexpected.join('\n'), /unknown field description/);
    assert.match(fake.unexpected.join('\n'), /unknown query parameter head/);
    assert.throws(() => fake.assertNoUnexpected(), /unexpected requests/);
  });

  it('fails the next request once, as asked, and records everything', async () => {
    fake.failNext(502, { 'retry-after': '2' });
    const failed = await call(PULLS);
    assert.equal(failed.status, 502);
    assert.equal(failed.headers.get('retry-after'), '2');
    assert.equal((await call(PULLS)).status, 200);
    assert.deepEqual(
      fake.requests.map((r) => [r.method, r.path, r.status]),
      [
        ['GET', '/api/v1/repos/acme/widgets/pulls', 502],
        ['GET', '/api/v1/repos/acme/widgets/pulls', 200],
      ],
    );
    fake.assertNoUnexpected();
  });
});
