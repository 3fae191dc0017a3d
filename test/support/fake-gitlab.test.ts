import assert from 'node:assert/strict';
import { after, beforeEach, describe, it } from 'node:test';
import { type FakeGitLab, startFakeGitLab } from './fake-gitlab.ts';

const TOKEN = 'glpat-fake-token';
const fake: FakeGitLab = await startFakeGitLab({
  token: TOKEN,
  projects: ['group/sub/project', { path: 'team/app', branches: ['main', 'develop'] }],
});
after(() => fake.close());
beforeEach(() => fake.reset());

const MRS = `${fake.apiUrl}/projects/group%2Fsub%2Fproject/merge_requests`;
const auth = { 'private-token': TOKEN };

function call(
  url: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...auth, ...init.headers };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  return fetch(url, {
    method: init.method ?? 'GET',
    headers,
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
}

const mr = (extra: Record<string, unknown> = {}) => ({
  source_branch: 'errand/1',
  target_branch: 'main',
  title: 'T',
  description: 'D',
  ...extra,
});

describe('fake GitLab: state', () => {
  it('numbers merge requests per project and answers like GitLab', async () => {
    const res = await call(MRS, { method: 'POST', body: mr() });
    assert.equal(res.status, 201);
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.iid, 1);
    assert.equal(body.state, 'opened');
    assert.equal(body.draft, false);
    assert.equal(body.web_url, `${fake.url}/group/sub/project/-/merge_requests/1`);

    const other = await call(`${fake.apiUrl}/projects/team%2Fapp/merge_requests`, {
      method: 'POST',
      body: mr({ target_branch: 'develop', title: 'Draft: x' }),
    });
    const otherBody = (await other.json()) as Record<string, unknown>;
    assert.equal(otherBody.iid, 1);
    assert.equal(otherBody.draft, true);
    assert.equal(otherBody.id, 2);

    assert.equal(
      (await call(MRS, { method: 'POST', body: mr({ source_branch: 'b' }) })).status,
      201,
    );
    assert.deepEqual(
      fake.mergeRequests('group/sub/project').map((m) => m.iid),
      [1, 2],
    );
    assert.equal(fake.mergeRequests().length, 3);
    fake.assertNoUnexpected();
  });

  it('lists with state and source_branch filters, newest first, by path or numeric id', async () => {
    fake.addMergeRequest('group/sub/project', { sourceBranch: 'a', state: 'closed' });
    fake.addMergeRequest('group/sub/project', { sourceBranch: 'a' });
    fake.addMergeRequest('group/sub/project', { sourceBranch: 'b' });
    const all = (await (await call(`${MRS}?source_branch=a&state=all`)).json()) as Array<{
      iid: number;
    }>;
    assert.deepEqual(
      all.map((m) => m.iid),
      [2, 1],
    );
    const opened = (await (await call(`${MRS}?state=opened`)).json()) as Array<{ iid: number }>;
    assert.deepEqual(
      opened.map((m) => m.iid),
      [3, 2],
    );
    const byId = await call(`${fake.apiUrl}/projects/1/merge_requests/3`);
    assert.equal(((await byId.json()) as { source_branch: string }).source_branch, 'b');
    assert.equal((await call(`${MRS}?state=open`)).status, 400);
    fake.assertNoUnexpected();
  });

  it('updates title and description, and says 404 for an unknown merge request', async () => {
    await call(MRS, { method: 'POST', body: mr() });
    const res = await call(`${MRS}/1`, { method: 'PUT', body: { description: 'new' } });
    assert.equal(res.status, 200);
    assert.equal(fake.mergeRequests()[0]?.description, 'new');
    const missing = await call(`${MRS}/9`, { method: 'PUT', body: { description: 'x' } });
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), { message: '404 Not found' });
    fake.setState('group/sub/project', 1, 'merged');
    const merged = (await (await call(`${MRS}/1`)).json()) as Record<string, unknown>;
    assert.equal(merged.state, 'merged');
    fake.assertNoUnexpected();
  });
});

describe('fake GitLab: strictness', () => {
  it('wants the token as PRIVATE-TOKEN or Bearer', async () => {
    const none = await fetch(MRS);
    assert.equal(none.status, 401);
    assert.deepEqual(await none.json(), { message: '401 Unauthorized' });
    assert.equal((await call(MRS, { headers: { 'private-token': 'nope' } })).status, 401);
    const bearer = await fetch(MRS, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(bearer.status, 200);
  });

  it('validates bodies as GitLab does', async () => {
    const missing = await call(MRS, { method: 'POST', body: { title: 'T' } });
    assert.equal(missing.status, 400);
    assert.deepEqual(await missing.json(), {
      error: 'source_branch is missing, target_branch is missing',
    });
    const wrongType = await call(MRS, { method: 'POST', body: mr({ title: 5 }) });
    assert.equal(wrongType.status, 400);
    const long = await call(MRS, { method: 'POST', body: mr({ title: 'x'.repeat(256) }) });
    assert.deepEqual(await long.json(), {
      message: { title: ['is too long (maximum is 255 characters)'] },
    });
    const same = await call(MRS, { method: 'POST', body: mr({ source_branch: 'main' }) });
    assert.equal(same.status, 422);
    const target = await call(MRS, { method: 'POST', body: mr({ target_branch: 'nope' }) });
    assert.equal(target.status, 422);
    assert.deepEqual(await target.json(), { message: ['Target branch "nope" does not exist'] });
    const noParams = await call(`${MRS}/1`, { method: 'PUT', body: {} });
    assert.equal(noParams.status, 400);
    fake.assertNoUnexpected();
  });

  it('refuses a second open merge request for the same branches with 409', async () => {
    assert.equal((await call(MRS, { method: 'POST', body: mr() })).status, 201);
    const again = await call(MRS, { method: 'POST', body: mr() });
    assert.equal(again.status, 409);
    assert.deepEqual(await again.json(), {
      message: ['Another open merge request already exists for this source branch: !1'],
    });
    fake.setState('group/sub/project', 1, 'closed');
    assert.equal((await call(MRS, { method: 'POST', body: mr() })).status, 201);
  });

  it('checks the source branch when asked to', async () => {
    const strict = await startFakeGitLab({
      token: TOKEN,
      projects: ['g/p'],
      requireSourceBranch: true,
    });
    try {
      const url = `${strict.apiUrl}/projects/g%2Fp/merge_requests`;
      const res = await call(url, { method: 'POST', body: mr() });
      assert.deepEqual(await res.json(), { message: ['Source branch "errand/1" does not exist'] });
      strict.addBranch('g/p', 'errand/1');
      assert.equal((await call(url, { method: 'POST', body: mr() })).status, 201);
    } finally {
      await strict.close();
    }
  });

  it('says which project is missing the GitLab way', async () => {
    const res = await call(`${fake.apiUrl}/projects/group%2Fnope/merge_requests`);
    assert.equal(res.status, 404);
    assert.deepEqual(await res.json(), { message: '404 Project Not Found' });
    fake.assertNoUnexpected();
  });

  it('refuses writes with a read_api token', async () => {
    const ro = await startFakeGitLab({ token: TOKEN, projects: ['g/p'], access: 'read' });
    try {
      const url = `${ro.apiUrl}/projects/g%2Fp/merge_requests`;
      assert.equal((await call(url)).status, 200);
      const res = await call(url, { method: 'POST', body: mr() });
      assert.equal(res.status, 403);
      assert.equal(((await res.json()) as { error: string }).error, 'insufficient_scope');
    } finally {
      await ro.close();
    }
  });

  it('reports unsupported endpoints, unknown fields and parameters as unexpected', async () => {
    const res = await call(`${fake.apiUrl}/projects/group%2Fsub%2Fproject/issues`);
    assert.equal(res.status, 404);
    await call(MRS, { method: 'POST', body: mr({ body: 'GitHub spelling' }) });
    await call(`${MRS}?sourceBranch=x`);
    await call(`${fake.apiUrl}/projects/group%2Fsub%2Fproject/merge_requests/1`, {
      method: 'DELETE',
    });
    await fetch(`${fake.url}/group/sub/project`);
    assert.equal(fake.unexpected.length, 5);
    assert.match(fake.unexpected.join('\n'), /unsupported endpoint/);
    assert.match(fake.unexpected.join('\n'), /unknown field body/);
    assert.match(fake.unexpected.join('\n'), /unknown query parameter sourceBranch/);
    assert.throws(() => fake.assertNoUnexpected(), /unexpected requests/);
  });

  it('fails the next request once, as asked, and records everything', async () => {
    fake.failNext(503, { 'retry-after': '4' });
    const failed = await call(MRS);
    assert.equal(failed.status, 503);
    assert.equal(failed.headers.get('retry-after'), '4');
    assert.deepEqual(await failed.json(), { message: '503 Service Unavailable' });
    fake.failNext(429);
    assert.equal(await (await call(MRS)).text(), 'Retry later');
    assert.equal((await call(MRS)).status, 200);
    assert.deepEqual(
      fake.requests.map((r) => [r.method, r.path, r.status]),
      [
        ['GET', '/api/v4/projects/group/sub/project/merge_requests', 503],
        ['GET', '/api/v4/projects/group/sub/project/merge_requests', 429],
        ['GET', '/api/v4/projects/group/sub/project/merge_requests', 200],
      ],
    );
    fake.assertNoUnexpected();
  });
});
