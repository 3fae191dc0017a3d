import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, beforeEach, describe, it } from 'node:test';
import { giteaPayloads } from '../../src/features/forge-intake/payloads/gitea.ts';
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

describe('fake Gitea: what the pull request watch reads', () => {
  const HEAD = 'c0ffee0000000000000000000000000000000001';
  const STATUSES = `${fake.apiUrl}/repos/acme/widgets/commits/${HEAD}/statuses`;
  const open = () => fake.addPull('acme/widgets', { head: 'errand/1' }).number;
  const json = async (res: Response) => (await res.json()) as Record<string, unknown>;

  it('serves a pull request’s labels, mergeability and head as set', async () => {
    const headed = await startFakeGitea({
      token: TOKEN,
      repos: ['o/r'],
      heads: (repo, branch) => (repo === 'o/r' && branch === 'errand/1' ? HEAD : undefined),
    });
    try {
      const number = headed.addPull('o/r', { head: 'errand/1' }).number;
      headed.addPullLabel('o/r', number, 'no-errand');
      headed.addPullLabel('o/r', number, 'no-errand');
      const body = await json(await call(`${headed.apiUrl}/repos/o/r/pulls/${number}`));
      assert.equal((body.head as { sha: string }).sha, HEAD);
      assert.deepEqual(
        (body.labels as Array<{ name: string }>).map((l) => l.name),
        ['no-errand'],
      );
      assert.equal(body.mergeable, true);
      headed.setMergeable('o/r', number, null);
      // Gitea has no null: still checking reads as false.
      assert.equal(
        (await json(await call(`${headed.apiUrl}/repos/o/r/pulls/${number}`))).mergeable,
        false,
      );
      const other = headed.addPull('o/r', { head: 'other' }).number;
      const fixed = await json(await call(`${headed.apiUrl}/repos/o/r/pulls/${other}`));
      assert.equal((fixed.head as { sha: string }).sha, '1'.repeat(40));
      headed.assertNoUnexpected();
    } finally {
      await headed.close();
    }
  });

  it('lists a commit’s statuses newest first, paged, each run kept', async () => {
    fake.setCheck('acme/widgets', HEAD, { name: 'ci', state: 'pending' });
    fake.setCheck('acme/widgets', HEAD, {
      name: 'ci',
      state: 'failure',
      log: 'x\nAssertionError: 1 != 2\n',
    });
    fake.setCheck('acme/widgets', HEAD, { name: 'lint', state: 'success', summary: 'Clean' });
    const res = await call(STATUSES);
    assert.equal(res.headers.get('x-total-count'), '3');
    const list = (await res.json()) as Array<Record<string, unknown>>;
    assert.deepEqual(
      list.map((st) => [st.context, st.status, st.description]),
      [
        ['lint', 'success', 'Clean'],
        ['ci', 'failure', 'AssertionError: 1 != 2'],
        ['ci', 'pending', 'Waiting to run'],
      ],
    );
    assert.match(String(list[0]?.target_url), /^\/acme\/widgets\/actions\/runs\/\d+\/jobs\/0$/);
    const page = (await (await call(`${STATUSES}?limit=2&page=2`)).json()) as unknown[];
    assert.equal(page.length, 1);
    const failing = (await (await call(`${STATUSES}?state=failure`)).json()) as unknown[];
    assert.equal(failing.length, 1);
    assert.deepEqual(
      await (await call(`${fake.apiUrl}/repos/acme/widgets/commits/abc/statuses`)).json(),
      [],
    );
    fake.assertNoUnexpected();
  });

  it('lists reviews and their verdicts', async () => {
    const number = open();
    fake.approve('acme/widgets', number, 'ann');
    fake.addReview('acme/widgets', number, {
      login: 'bob',
      state: 'REQUEST_CHANGES',
      dismissed: true,
    });
    const list = (await (await call(`${PULLS}/${number}/reviews`)).json()) as Array<
      Record<string, unknown>
    >;
    assert.deepEqual(
      list.map((r) => [(r.user as { login: string }).login, r.state, r.dismissed]),
      [
        ['ann', 'APPROVED', false],
        ['bob', 'REQUEST_CHANGES', true],
      ],
    );
    assert.equal((await call(`${PULLS}/99/reviews`)).status, 404);
    fake.assertNoUnexpected();
  });

  it('merges as Gitea does, and refuses as it does', async () => {
    const number = open();
    const merge = (body: Record<string, unknown>, n = number) =>
      call(`${PULLS}/${n}/merge`, { method: 'POST', body });
    assert.equal((await merge({})).status, 422);
    assert.equal((await merge({ Do: 'fast' })).status, 422);
    const moved = await merge({ Do: 'merge', head_commit_id: HEAD });
    assert.equal(moved.status, 409);
    assert.equal((await json(moved)).message, 'head out of date');
    fake.blockMerges('acme/widgets', 'not allowed to merge [reason: protected]');
    const blocked = await merge({ Do: 'merge' });
    assert.equal(blocked.status, 405);
    assert.equal((await json(blocked)).message, 'not allowed to merge [reason: protected]');
    fake.blockMerges('acme/widgets', null);
    fake.setMergeable('acme/widgets', number, false);
    assert.equal((await merge({ Do: 'merge' })).status, 405);
    fake.setMergeable('acme/widgets', number, true);
    const done = await merge({ Do: 'rebase', head_commit_id: '1'.repeat(40) });
    assert.equal(done.status, 200);
    assert.equal(await done.text(), '');
    assert.deepEqual(fake.merges(), [
      { repo: 'acme/widgets', number, method: 'rebase', sha: '1'.repeat(40) },
    ]);
    const merged = fake.pulls()[0];
    assert.equal(merged?.merged, true);
    assert.ok(merged?.mergedAt);
    const again = await merge({ Do: 'merge' });
    assert.equal(again.status, 405);
    assert.equal((await json(again)).message, '');
    const closed = fake.addPull('acme/widgets', { head: 'errand/2', state: 'closed' }).number;
    assert.equal((await merge({ Do: 'merge' }, closed)).status, 404);
    const draft = fake.addPull('acme/widgets', { head: 'errand/3', title: '[WIP] x' }).number;
    assert.equal(
      (await json(await merge({ Do: 'merge' }, draft))).message,
      'Work in progress PRs cannot be merged',
    );
    assert.equal(fake.merges().length, 1);
    fake.assertNoUnexpected();
  });

  it('forgets statuses, reviews, blocks and merges on reset', async () => {
    const number = open();
    fake.setCheck('acme/widgets', HEAD, { name: 'ci', state: 'success' });
    fake.approve('acme/widgets', number, 'ann');
    fake.blockMerges('acme/widgets', 'no');
    fake.reset();
    assert.deepEqual(fake.statuses('acme/widgets', HEAD), []);
    assert.deepEqual(fake.merges(), []);
    const again = open();
    assert.equal(
      (await call(`${PULLS}/${again}/merge`, { method: 'POST', body: { Do: 'merge' } })).status,
      200,
    );
  });
});

// Where the fake's deliveries go: a loopback server that keeps what it is sent.
const SECRET = 'a-webhook-secret-of-gitea';
const received: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
    res.writeHead(202, { 'content-type': 'application/json' }).end('{}');
  });
});
server.listen(0, '127.0.0.1');
await once(server, 'listening');
after(() => new Promise<void>((resolve) => server.close(() => resolve())));
const target = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;

describe('fake Gitea: the watch’s deliveries', () => {
  beforeEach(() => {
    received.length = 0;
  });

  /** The last delivery, checked and read as Errand reads it. */
  const last = () => {
    const delivery = received.at(-1);
    assert.ok(delivery);
    const body: unknown = JSON.parse(delivery.body);
    assert.equal(
      giteaPayloads.verifySignature(delivery.headers, Buffer.from(delivery.body), SECRET),
      true,
    );
    return {
      body,
      signal: giteaPayloads.readSignal(delivery.headers, body),
      events: giteaPayloads.readEvents(delivery.headers, body),
    };
  };

  it('a check is a signed `status` of the commit, recorded as the API lists it', async () => {
    const sha = 'c0ffee0000000000000000000000000000000002';
    fake.setCheck('acme/widgets', sha, {
      name: 'ci',
      state: 'failure',
      summary: 'Failing after 9s',
    });
    await fake.sendWebhook(target, SECRET, {
      type: 'check',
      sha,
      branch: 'errand/1',
      name: 'ci',
      state: 'failure',
    });
    const { body, signal, events } = last();
    assert.deepEqual(events, []);
    assert.equal(signal?.kind, 'checks');
    assert.equal(signal?.sha, sha);
    const payload = body as Record<string, unknown>;
    assert.equal(payload.description, 'Failing after 9s');
    assert.match(String(payload.target_url), new RegExp(`^${fake.url}/acme/widgets/actions/runs/`));
    // The status the test set, not a second one.
    assert.equal(fake.statuses('acme/widgets', sha).length, 1);
    // A delivery of a new state is a new status.
    await fake.sendWebhook(target, SECRET, {
      type: 'check',
      sha,
      branch: 'errand/1',
      name: 'ci',
      state: 'success',
    });
    assert.deepEqual(
      fake.statuses('acme/widgets', sha).map((st) => st.status),
      ['failure', 'success'],
    );
  });

  it('pull request changes and an approval read as signals; the API agrees with them', async () => {
    const number = fake.addPull('acme/widgets', { head: 'errand/1' }).number;
    for (const action of ['synchronize', 'labeled', 'closed', 'reopened', 'merged'] as const) {
      await fake.sendWebhook(target, SECRET, {
        type: 'pull-request',
        pull: number,
        action,
        ...(action === 'labeled' ? { label: 'no-errand' } : {}),
      });
      const { signal, events } = last();
      assert.deepEqual(events, []);
      assert.deepEqual(
        signal && [signal.kind, signal.numbers, signal.branches],
        ['pull-request', [number], ['errand/1']],
        action,
      );
    }
    const pr = fake.pulls()[0];
    assert.deepEqual([pr?.labels, pr?.merged, pr?.state], [['no-errand'], true, 'closed']);
    const merged = last().body as { action: string; pull_request: { merged: boolean } };
    assert.deepEqual([merged.action, merged.pull_request.merged], ['closed', true]);

    const next = fake.addPull('acme/widgets', { head: 'errand/2' }).number;
    await fake.sendWebhook(target, SECRET, { type: 'approval', pull: next });
    const approval = last();
    assert.deepEqual(approval.events, []);
    assert.deepEqual(approval.signal?.numbers, [next]);
    assert.equal(received.at(-1)?.headers['x-gitea-event-type'], 'pull_request_review_approved');
    const reviews = (await (await call(`${PULLS}/${next}/reviews`)).json()) as Array<{
      state: string;
    }>;
    assert.deepEqual(
      reviews.map((r) => r.state),
      ['APPROVED'],
    );
  });
});
