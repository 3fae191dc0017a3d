// The fake GitHub must be at least as strict as GitHub, or the provider's tests prove nothing:
// these tests speak raw HTTP to it and check that it refuses what GitHub refuses.

import assert from 'node:assert/strict';
import { createSign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
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

describe('fake GitHub: the pull request watch', () => {
  const HEAD = '3333333333333333333333333333333333333333';
  let gh: FakeGitHub;
  let branchHead: string | undefined = HEAD;
  before(async () => {
    gh = await startFakeGitHub({
      repos: ['octo/hello'],
      token,
      heads: (repo, branch) =>
        repo === 'octo/hello' && branch === 'errand/w' ? branchHead : undefined,
    });
    await call(gh, 'POST', '/repos/octo/hello/pulls', {
      body: { ...newPull, head: 'errand/w' },
    });
  });
  after(() => gh.close());

  test("a pull request's head is the branch's commit; mergeable and labels are its state", async () => {
    const read = async () =>
      (await call(gh, 'GET', '/repos/octo/hello/pulls/1')).body as {
        head: { sha: string };
        mergeable: boolean | null;
        mergeable_state: string;
        labels: { name: string }[];
      };
    assert.equal((await read()).head.sha, HEAD);
    assert.equal((await read()).mergeable, true);
    branchHead = undefined;
    assert.match((await read()).head.sha, /^[0-9a-f]{40}$/);
    assert.notEqual((await read()).head.sha, HEAD);
    branchHead = HEAD;
    gh.setMergeable('octo/hello', 1, null);
    assert.equal((await read()).mergeable_state, 'unknown');
    gh.setMergeable('octo/hello', 1, false);
    assert.equal((await read()).mergeable_state, 'dirty');
    gh.setMergeable('octo/hello', 1, true);
    gh.addPullLabel('octo/hello', 1, 'no-errand');
    gh.addPullLabel('octo/hello', 1, 'no-errand');
    assert.deepEqual(
      (await read()).labels.map((l) => l.name),
      ['no-errand'],
    );
    gh.assertNoUnexpected();
  });

  test('check runs: the latest of each name by default, all with filter=all, paged', async () => {
    gh.setCheck('octo/hello', HEAD, { name: 'build', state: 'failure', log: 'boom\n' });
    gh.setCheck('octo/hello', HEAD, { name: 'build', state: 'pending' });
    gh.setCheck('octo/hello', HEAD, { name: 'lint', state: 'success', summary: 'clean' });
    type Runs = {
      total_count: number;
      check_runs: { name: string; status: string; conclusion: string | null }[];
    };
    const latest = (await call(gh, 'GET', `/repos/octo/hello/commits/${HEAD}/check-runs`))
      .body as Runs;
    assert.equal(latest.total_count, 2);
    assert.deepEqual(
      latest.check_runs.map((r) => [r.name, r.status, r.conclusion]),
      [
        ['lint', 'completed', 'success'],
        ['build', 'in_progress', null],
      ],
    );
    const all = (
      await call(
        gh,
        'GET',
        `/repos/octo/hello/commits/${HEAD}/check-runs?filter=all&per_page=1&page=3`,
      )
    ).body as Runs;
    assert.equal(all.total_count, 3);
    assert.deepEqual(
      all.check_runs.map((r) => r.conclusion),
      ['failure'],
    );
    gh.assertNoUnexpected();
  });

  test('commit statuses: the latest of each context, and the combined state', async () => {
    const sha = '4444444444444444444444444444444444444444';
    const combined = async () =>
      (await call(gh, 'GET', `/repos/octo/hello/commits/${sha}/status`)).body as {
        state: string;
        total_count: number;
        statuses: { context: string; state: string }[];
      };
    assert.deepEqual(await combined().then((c) => [c.state, c.total_count]), ['pending', 0]);
    gh.setStatus('octo/hello', sha, { context: 'ci', state: 'pending' });
    gh.setStatus('octo/hello', sha, { context: 'ci', state: 'success' });
    assert.deepEqual(await combined().then((c) => [c.state, c.total_count]), ['success', 1]);
    gh.setStatus('octo/hello', sha, { context: 'ext', state: 'error' });
    assert.equal((await combined()).state, 'failure');
    gh.assertNoUnexpected();
  });

  test('a job log: a redirect to signed storage that refuses the token and a bad signature', async () => {
    const sha = '5555555555555555555555555555555555555555';
    gh.setCheck('octo/hello', sha, { name: 'test', state: 'failure', log: 'line 1\nline 2\n' });
    const runs = (await call(gh, 'GET', `/repos/octo/hello/commits/${sha}/check-runs`)).body as {
      check_runs: { id: number; app: { slug: string } }[];
    };
    const run = runs.check_runs[0];
    assert.equal(run?.app.slug, 'github-actions');
    const redirect = await fetch(`${gh.apiUrl}/repos/octo/hello/actions/jobs/${run?.id}/logs`, {
      headers: { 'user-agent': 't', authorization: `token ${token}` },
      redirect: 'manual',
    });
    await redirect.arrayBuffer();
    assert.equal(redirect.status, 302);
    const location = redirect.headers.get('location') ?? '';
    assert.match(location, /\/_storage\/job-logs\/\d+\?sig=[0-9a-f]{64}$/);
    const log = await fetch(location);
    assert.equal(log.status, 200);
    assert.equal(await log.text(), 'line 1\nline 2\n');
    const forged = await fetch(location.replace(/sig=./, 'sig=x'));
    await forged.arrayBuffer();
    assert.equal(forged.status, 403);
    gh.assertNoUnexpected();
    const before = gh.unexpected.length;
    const withToken = await fetch(location, { headers: { authorization: `token ${token}` } });
    await withToken.arrayBuffer();
    assert.equal(withToken.status, 400);
    assert.equal(gh.unexpected.length, before + 1);
    assert.match(gh.unexpected.at(-1)?.unexpected ?? '', /token was sent to the log storage/);
    gh.unexpected.pop();
  });

  test('reviews list as GitHub gives them', async () => {
    gh.approve('octo/hello', 1, 'alice');
    gh.review('octo/hello', 1, 'bob', 'CHANGES_REQUESTED');
    const list = (await call(gh, 'GET', '/repos/octo/hello/pulls/1/reviews')).body as {
      user: { login: string };
      state: string;
      commit_id: string;
    }[];
    assert.deepEqual(
      list.map((r) => [r.user.login, r.state, r.commit_id]),
      [
        ['alice', 'APPROVED', HEAD],
        ['bob', 'CHANGES_REQUESTED', HEAD],
      ],
    );
    gh.assertNoUnexpected();
  });

  test('the merge API refuses as GitHub does, then merges and records it', async () => {
    const merge = (body: unknown) => call(gh, 'PUT', '/repos/octo/hello/pulls/1/merge', { body });
    const moved = await merge({ sha: '6'.repeat(40) });
    assert.deepEqual(
      [moved.status, messageOf(moved.body)],
      [409, 'Head branch was modified. Review and try the merge again.'],
    );
    gh.setMergeable('octo/hello', 1, false);
    const conflict = await merge({ sha: HEAD });
    assert.deepEqual(
      [conflict.status, messageOf(conflict.body)],
      [405, 'Pull Request is not mergeable'],
    );
    gh.setMergeable('octo/hello', 1, true);
    gh.blockMerges('octo/hello', 'Required status check "test" is failing.');
    const blocked = await merge({ sha: HEAD });
    assert.deepEqual(
      [blocked.status, messageOf(blocked.body)],
      [405, 'Required status check "test" is failing.'],
    );
    const badMethod = await merge({ sha: HEAD, merge_method: 'octopus' });
    assert.equal(badMethod.status, 422);
    gh.unexpected.pop();
    gh.blockMerges('octo/hello', null);
    assert.deepEqual(gh.merges(), []);
    const done = await merge({ sha: HEAD, merge_method: 'squash' });
    assert.equal(done.status, 200);
    assert.equal((done.body as { merged: boolean }).merged, true);
    assert.deepEqual(gh.merges(), [{ repo: 'octo/hello', number: 1, method: 'squash', sha: HEAD }]);
    const pull = (await call(gh, 'GET', '/repos/octo/hello/pulls/1')).body as {
      merged: boolean;
      merged_at: string | null;
      head: { sha: string };
    };
    assert.equal(pull.merged, true);
    assert.match(pull.merged_at ?? '', /Z$/);
    branchHead = undefined;
    assert.equal(
      ((await call(gh, 'GET', '/repos/octo/hello/pulls/1')).body as { head: { sha: string } }).head
        .sha,
      HEAD,
      'a merged pull request keeps the head it merged',
    );
    branchHead = HEAD;
    const again = await merge({ sha: HEAD });
    assert.equal(again.status, 405);
    gh.assertNoUnexpected();
  });
});

describe('fake GitHub: webhook deliveries for the pull request watch', () => {
  const HEAD = '7777777777777777777777777777777777777777';
  let gh: FakeGitHub;
  let server: Server;
  let target = '';
  const received: { event: string; body: Record<string, unknown> }[] = [];
  before(async () => {
    gh = await startFakeGitHub({ repos: ['octo/hello'], token, heads: () => HEAD });
    await call(gh, 'POST', '/repos/octo/hello/pulls', { body: { ...newPull, head: 'errand/d' } });
    server = createServer((req, res) => {
      let text = '';
      req.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      req.on('end', () => {
        received.push({
          event: String(req.headers['x-github-event']),
          body: JSON.parse(text) as Record<string, unknown>,
        });
        res.end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    target = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hook`;
  });
  after(async () => {
    await gh.close();
    await new Promise((resolve) => server.close(resolve));
  });
  const last = () => received.at(-1) ?? { event: '', body: {} };

  test('a check: check_run with its commit, branch and pull requests; the API agrees', async () => {
    gh.setCheck('octo/hello', HEAD, { name: 'test', state: 'failure', log: 'the log\n' });
    await gh.sendWebhook(target, 's', {
      type: 'check',
      sha: HEAD,
      branch: 'errand/d',
      name: 'test',
      state: 'failure',
      pulls: [1],
    });
    const { event, body } = last();
    assert.equal(event, 'check_run');
    assert.equal(body.action, 'completed');
    const run = body.check_run as {
      id: number;
      head_sha: string;
      conclusion: string;
      check_suite: { head_branch: string };
      pull_requests: { number: number }[];
    };
    assert.equal(run.head_sha, HEAD);
    assert.equal(run.conclusion, 'failure');
    assert.equal(run.check_suite.head_branch, 'errand/d');
    assert.deepEqual(
      run.pull_requests.map((p) => p.number),
      [1],
    );
    const runs = (await call(gh, 'GET', `/repos/octo/hello/commits/${HEAD}/check-runs`)).body as {
      check_runs: { id: number }[];
    };
    assert.deepEqual(
      runs.check_runs.map((r) => r.id),
      [run.id],
      'the same run, not a new one',
    );
    await gh.sendWebhook(target, 's', {
      type: 'check',
      sha: HEAD,
      branch: 'errand/d',
      name: 'test',
      state: 'success',
    });
    assert.equal((last().body.check_run as { conclusion: string }).conclusion, 'success');
    const after = (await call(gh, 'GET', `/repos/octo/hello/commits/${HEAD}/check-runs`)).body as {
      check_runs: { conclusion: string }[];
    };
    assert.deepEqual(
      after.check_runs.map((r) => r.conclusion),
      ['success'],
    );
    gh.assertNoUnexpected();
  });

  test('pull request changes and an approval: the payload and the API say the same', async () => {
    await gh.sendWebhook(target, 's', {
      type: 'pull-request',
      pull: 1,
      action: 'labeled',
      label: 'no-errand',
    });
    assert.equal(last().event, 'pull_request');
    assert.equal(last().body.action, 'labeled');
    assert.equal((last().body.label as { name: string }).name, 'no-errand');
    await gh.sendWebhook(target, 's', { type: 'pull-request', pull: 1, action: 'synchronize' });
    assert.equal(last().body.after, HEAD);
    await gh.sendWebhook(target, 's', { type: 'approval', pull: 1 });
    assert.equal(last().event, 'pull_request_review');
    const review = last().body.review as { state: string; body: string | null; commit_id: string };
    assert.deepEqual([review.state, review.body, review.commit_id], ['approved', null, HEAD]);
    await gh.sendWebhook(target, 's', { type: 'approval', pull: 1 });
    const reviews = (await call(gh, 'GET', '/repos/octo/hello/pulls/1/reviews')).body as unknown[];
    assert.equal(reviews.length, 1, 'approving again adds no review');
    await gh.sendWebhook(target, 's', { type: 'pull-request', pull: 1, action: 'merged' });
    assert.equal(last().body.action, 'closed');
    assert.equal((last().body.pull_request as { merged: boolean }).merged, true);
    const pull = (await call(gh, 'GET', '/repos/octo/hello/pulls/1')).body as {
      merged: boolean;
      labels: { name: string }[];
    };
    assert.equal(pull.merged, true);
    assert.deepEqual(
      pull.labels.map((l) => l.name),
      ['no-errand'],
    );
    assert.deepEqual(gh.merges(), [], 'merged by a person, not through the API');
    gh.assertNoUnexpected();
  });
});
