import assert from 'node:assert/strict';
import { after, beforeEach, describe, it } from 'node:test';
import { gitlabPayloads } from '../../src/features/forge-intake/payloads/gitlab.ts';
import { startFakeForgeServer } from './fake-forge-server.ts';
import { FAKE_GITLAB_HEAD, type FakeGitLab, startFakeGitLab } from './fake-gitlab.ts';

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

describe('fake GitLab: what the pull request watch reads', () => {
  const HEAD = 'd'.repeat(40);
  const API = `${fake.apiUrl}/projects/group%2Fsub%2Fproject`;
  const json = async (url: string) => (await (await call(url)).json()) as Record<string, unknown>;
  const list = async (url: string) =>
    (await (await call(url)).json()) as Array<Record<string, unknown>>;

  it("serves a commit's pipeline, its jobs (a rerun replaces a run), statuses and traces", async () => {
    fake.setCheck('group/sub/project', HEAD, { name: 'test', state: 'failure', log: 'first' });
    fake.setCheck('group/sub/project', HEAD, { name: 'test', state: 'success', log: 'second' });
    fake.setCheck('group/sub/project', HEAD, { name: 'lint', state: 'pending' });
    fake.addStatus('group/sub/project', HEAD, {
      name: 'ci/jenkins',
      state: 'failed',
      description: 'red',
      targetUrl: 'https://ci.example/1',
    });
    const pipelines = await list(`${API}/pipelines?sha=${HEAD}&order_by=id&sort=desc`);
    assert.equal(pipelines.length, 1);
    // The posted status sits on the commit's pipeline, as on GitLab, and fails it.
    assert.equal(pipelines[0]?.status, 'failed');
    assert.equal(pipelines[0]?.source, 'push');
    const jobs = await list(`${API}/pipelines/${pipelines[0]?.id}/jobs?per_page=100`);
    assert.deepEqual(
      jobs.map((j) => [j.name, j.status]),
      [
        ['lint', 'running'],
        ['test', 'success'],
      ],
    );
    const withRetried = await list(
      `${API}/pipelines/${pipelines[0]?.id}/jobs?include_retried=true`,
    );
    assert.equal(withRetried.length, 3);
    const statuses = await list(`${API}/repository/commits/${HEAD}/statuses`);
    assert.deepEqual(statuses.map((s) => s.name).sort(), ['ci/jenkins', 'lint', 'test']);
    const jenkins = statuses.find((s) => s.name === 'ci/jenkins');
    assert.equal(jenkins?.description, 'red');
    assert.equal(jenkins?.target_url, 'https://ci.example/1');
    const test = jobs.find((j) => j.name === 'test');
    const trace = await call(`${API}/jobs/${test?.id}/trace`);
    assert.equal(trace.headers.get('content-type'), 'text/plain');
    assert.equal(await trace.text(), 'second');
    assert.equal((await call(`${API}/jobs/1/trace`)).status, 404);
    assert.deepEqual(await list(`${API}/pipelines?sha=${'e'.repeat(40)}`), []);
    fake.assertNoUnexpected();
  });

  it('pages jobs with X-Next-Page', async () => {
    for (let i = 0; i < 25; i++)
      fake.setCheck('group/sub/project', HEAD, { name: `j${i}`, state: 'success' });
    const [pipeline] = await list(`${API}/pipelines?sha=${HEAD}`);
    const first = await call(`${API}/pipelines/${pipeline?.id}/jobs`);
    assert.equal(first.headers.get('x-next-page'), '2');
    assert.equal(((await first.json()) as unknown[]).length, 20);
    const last = await call(`${API}/pipelines/${pipeline?.id}/jobs?page=2`);
    assert.equal(last.headers.get('x-next-page'), '');
    assert.equal(((await last.json()) as unknown[]).length, 5);
  });

  it("a merge request's head, labels, mergeability and approvals", async () => {
    const heads = await startFakeGitLab({
      token: TOKEN,
      projects: ['g/p'],
      heads: (repo, branch) => (repo === 'g/p' && branch === 'errand/1' ? HEAD : undefined),
    });
    try {
      heads.addMergeRequest('g/p', { sourceBranch: 'errand/1' });
      heads.addMergeRequest('g/p', { sourceBranch: 'unknown' });
      const url = `${heads.apiUrl}/projects/g%2Fp/merge_requests`;
      assert.equal((await json(`${url}/1`)).sha, HEAD);
      assert.equal((await json(`${url}/2`)).sha, FAKE_GITLAB_HEAD);
      heads.addPullLabel('g/p', 1, 'no-errand');
      heads.setMergeable('g/p', 1, null);
      let mr = await json(`${url}/1`);
      assert.deepEqual(mr.labels, ['no-errand']);
      assert.equal(mr.detailed_merge_status, 'checking');
      heads.setMergeable('g/p', 1, false);
      mr = await json(`${url}/1`);
      assert.equal(mr.detailed_merge_status, 'conflict');
      assert.equal(mr.has_conflicts, true);
      assert.equal((await json(`${url}/1/approvals`)).approved, false);
      heads.approve('g/p', 1, 'reviewer');
      const approvals = await json(`${url}/1/approvals`);
      assert.equal(approvals.approved, true);
      assert.deepEqual(approvals.approved_by, [
        { user: { id: 0, username: 'reviewer', name: 'reviewer', state: 'active' } },
      ]);
      heads.assertNoUnexpected();
    } finally {
      await heads.close();
    }
  });

  it('merges as GitLab does: 401 blocked, 405 not open or draft, 422 conflict, 409 moved head', async () => {
    const merge = (iid: number, body: Record<string, unknown>) =>
      call(`${MRS}/${iid}/merge`, { method: 'PUT', body });
    fake.addMergeRequest('group/sub/project', { sourceBranch: 'errand/1' });
    fake.blockMerges('group/sub/project', 'Protected branch');
    const blocked = await merge(1, { sha: FAKE_GITLAB_HEAD });
    assert.equal(blocked.status, 401);
    assert.deepEqual(await blocked.json(), { message: 'Protected branch' });
    fake.blockMerges('group/sub/project', null);
    fake.setMergeable('group/sub/project', 1, false);
    const conflict = await merge(1, { sha: FAKE_GITLAB_HEAD });
    assert.equal(conflict.status, 422);
    assert.deepEqual(await conflict.json(), { message: 'Branch cannot be merged' });
    fake.setMergeable('group/sub/project', 1, true);
    const moved = await merge(1, { sha: 'f'.repeat(40) });
    assert.equal(moved.status, 409);
    assert.deepEqual(await moved.json(), {
      message: `SHA does not match HEAD of source branch: ${FAKE_GITLAB_HEAD}`,
    });
    const done = await merge(1, { sha: FAKE_GITLAB_HEAD, squash: true });
    assert.equal(done.status, 200);
    const body = (await done.json()) as Record<string, unknown>;
    assert.equal(body.state, 'merged');
    assert.match(String(body.merged_at), /^2025-/);
    assert.match(String(body.merge_commit_sha), /^[0-9a-f]{40}$/);
    assert.equal((await merge(1, {})).status, 405);
    fake.addMergeRequest('group/sub/project', { sourceBranch: 'b', title: 'Draft: x' });
    assert.equal((await merge(2, {})).status, 405);
    assert.equal((await merge(9, {})).status, 404);
    assert.deepEqual(fake.merges(), [
      { repo: 'group/sub/project', number: 1, method: 'squash', sha: FAKE_GITLAB_HEAD },
    ]);
    await merge(2, { strategy: 'rebase' });
    assert.match(fake.unexpected.join('\n'), /unknown field strategy/);
  });
});

// Stands in for Errand: keeps each delivery the fake sends.
const received: Array<{ headers: Record<string, unknown>; body: unknown }> = [];
const receiver = await startFakeForgeServer(
  ({ req, text }, res) => {
    received.push({ headers: { ...req.headers }, body: JSON.parse(text) });
    res.writeHead(202).end('{}');
  },
  (err) => assert.fail(String(err)),
);
after(() => receiver.close());

describe('fake GitLab: the watch webhooks it sends', () => {
  beforeEach(() => {
    received.length = 0;
  });
  const HEAD = 'd'.repeat(40);

  /** The delivery as Errand's reader takes it. */
  const sent = async (delivery: Parameters<FakeGitLab['sendWebhook']>[2]) => {
    await fake.sendWebhook(`${receiver.origin}/hook`, 'secret-1234567890', delivery);
    const last = received.at(-1);
    assert.ok(last);
    const headers = Object.fromEntries(
      Object.entries(last.headers).map(([k, v]) => [k, typeof v === 'string' ? v : undefined]),
    );
    assert.equal(headers['x-gitlab-token'], 'secret-1234567890');
    return { headers, body: last.body, signal: gitlabPayloads.readSignal(headers, last.body) };
  };

  it('a check is a Pipeline Hook with its jobs, for a merge request when it names one', async () => {
    fake.addMergeRequest('group/sub/project', { sourceBranch: 'errand/1' });
    fake.setCheck('group/sub/project', HEAD, { name: 'lint', state: 'success' });
    const branch = await sent({
      type: 'check',
      sha: HEAD,
      branch: 'errand/1',
      name: 'test',
      state: 'failure',
    });
    assert.equal(branch.headers['x-gitlab-event'], 'Pipeline Hook');
    assert.deepEqual(
      branch.signal && [branch.signal.kind, branch.signal.branches, branch.signal.sha],
      ['checks', ['errand/1'], HEAD],
    );
    const body = branch.body as {
      object_attributes: { status: string };
      builds: Array<{ name: string; status: string }>;
    };
    assert.equal(body.object_attributes.status, 'failed');
    assert.deepEqual(
      body.builds.map((b) => [b.name, b.status]),
      [
        ['lint', 'success'],
        ['test', 'failed'],
      ],
    );
    const forMr = await sent({
      type: 'check',
      sha: HEAD,
      branch: 'errand/1',
      name: 'test',
      state: 'success',
      pulls: [1],
    });
    assert.deepEqual(forMr.signal?.numbers, [1]);
    assert.deepEqual(forMr.signal?.branches, ['errand/1']);
  });

  it('pull request changes and approvals are Merge Request Hooks', async () => {
    fake.addMergeRequest('group/sub/project', { sourceBranch: 'errand/1' });
    fake.addPullLabel('group/sub/project', 1, 'bug');
    const actions: Array<[Parameters<FakeGitLab['sendWebhook']>[2], string]> = [
      [{ type: 'pull-request', pull: 1, action: 'closed' }, 'close'],
      [{ type: 'pull-request', pull: 1, action: 'merged' }, 'merge'],
      [{ type: 'pull-request', pull: 1, action: 'reopened' }, 'reopen'],
      [{ type: 'pull-request', pull: 1, action: 'synchronize' }, 'update'],
      [{ type: 'pull-request', pull: 1, action: 'labeled', label: 'no-errand' }, 'update'],
      [{ type: 'approval', pull: 1 }, 'approved'],
    ];
    for (const [delivery, action] of actions) {
      const { headers, body, signal } = await sent(delivery);
      assert.equal(headers['x-gitlab-event'], 'Merge Request Hook');
      const attributes = (body as { object_attributes: Record<string, unknown> }).object_attributes;
      assert.equal(attributes.action, action);
      assert.deepEqual(signal && [signal.kind, signal.numbers, signal.branches, signal.sha], [
        'pull-request',
        [1],
        ['errand/1'],
        FAKE_GITLAB_HEAD,
      ]);
    }
    const labeled = received.at(-2)?.body as {
      changes: {
        labels: { previous: Array<{ title: string }>; current: Array<{ title: string }> };
      };
    };
    assert.deepEqual(
      labeled.changes.labels.current.map((l) => l.title),
      ['bug', 'no-errand'],
    );
    assert.deepEqual(
      labeled.changes.labels.previous.map((l) => l.title),
      ['bug'],
    );
    const update = received.at(-3)?.body as { object_attributes: { oldrev?: string } };
    assert.match(update.object_attributes.oldrev ?? '', /^[0-9a-f]{40}$/);
  });
});
