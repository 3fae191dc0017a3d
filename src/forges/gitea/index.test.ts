import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { inspect } from 'node:util';
import { type FakeGitea, startFakeGitea } from '../../../test/support/fake-gitea.ts';
import { checkAuth } from '../../repository/auth.ts';
import { type ForgeClient, ForgeError, type PullRequestInput } from '../types.ts';
import { draftTitle, id, provider } from './index.ts';

const TOKEN = '0123456789abcdef0123456789abcdef01234567';
const REPO = 'acme/widgets';

const fake: FakeGitea = await startFakeGitea({
  token: TOKEN,
  repos: [REPO, { path: 'acme/tools', branches: ['main', 'develop'] }],
});
after(() => fake.close());
beforeEach(() => fake.reset());
afterEach(() => fake.assertNoUnexpected());

function client(overrides: { repository?: string; token?: string; fetch?: typeof fetch } = {}) {
  return provider.create({
    apiUrl: fake.apiUrl,
    repository: overrides.repository ?? `${fake.url}/${REPO}.git`,
    credentials: { token: overrides.token ?? TOKEN },
    ...(overrides.fetch ? { fetch: overrides.fetch } : {}),
  });
}

const input = (extra: Partial<PullRequestInput> = {}): PullRequestInput => ({
  head: 'errand/job-1',
  base: 'main',
  title: 'Fix the login form',
  body: 'What the agent did.',
  draft: false,
  ...extra,
});

async function forgeError(promise: Promise<unknown>): Promise<ForgeError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof ForgeError, `expected a ForgeError, got ${inspect(err)}`);
    assert.equal(err.service, 'gitea');
    assertNoToken(err);
    return err;
  }
  assert.fail('expected the call to fail');
}

function assertNoToken(err: Error): void {
  for (const text of [
    err.message,
    JSON.stringify(err),
    String(err.cause),
    inspect(err, { depth: 10 }),
    inspect(err.cause, { depth: 10 }),
  ]) {
    assert.ok(!text.includes(TOKEN), `token leaked into: ${text}`);
    assert.ok(!text.includes(Buffer.from(`errand:${TOKEN}`).toString('base64')));
  }
}

const listRequests = () =>
  fake.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/pulls'));

describe('Gitea provider: pull requests', () => {
  it('registers as gitea', () => {
    assert.equal(id, 'gitea');
    assert.equal(provider.id, 'gitea');
    assert.equal(client().kind, 'gitea');
  });

  it('creates, finds and updates exactly one pull request', async () => {
    const gt = client();
    assert.equal(await gt.findPullRequest('errand/job-1'), null);

    const created = await gt.createPullRequest(input());
    const expected = {
      number: 1,
      url: `${fake.url}/${REPO}/pulls/1`,
      draft: false,
      state: 'open',
    };
    assert.deepEqual(created, { pullRequest: expected, notes: [] });
    assert.deepEqual(await gt.findPullRequest('errand/job-1'), expected);
    // Gitea answers an edit with 201; that is success too.
    assert.deepEqual(await gt.updatePullRequest(1, { body: 'Second turn.' }), expected);
    assert.deepEqual(
      await gt.updatePullRequest(1, { title: 'Fix the login form and tests', body: 'Third.' }),
      expected,
    );

    const stored = fake.pulls(REPO);
    assert.equal(stored.length, 1);
    assert.equal(stored[0]?.title, 'Fix the login form and tests');
    assert.equal(stored[0]?.body, 'Third.');
    assert.equal(stored[0]?.head, 'errand/job-1');
    assert.equal(stored[0]?.base, 'main');

    const post = fake.requests.find((r) => r.method === 'POST');
    assert.equal(post?.path, '/api/v1/repos/acme/widgets/pulls');
    assert.equal(post?.headers.authorization, `token ${TOKEN}`);
    assert.deepEqual(post?.body, {
      head: 'errand/job-1',
      base: 'main',
      title: 'Fix the login form',
      body: 'What the agent did.',
    });
    const patch = fake.requests.find((r) => r.method === 'PATCH');
    assert.deepEqual(patch?.body, { body: 'Second turn.' });
    assert.deepEqual(listRequests()[0]?.query, {
      state: 'open',
      sort: 'recentupdate',
      page: '1',
      limit: '50',
    });
  });

  it('opens a draft through the WIP: prefix and keeps it a draft on retitling', async () => {
    const gt = client();
    const { pullRequest } = await gt.createPullRequest(input({ draft: true }));
    assert.equal(pullRequest.draft, true);
    assert.equal(fake.pulls()[0]?.title, 'WIP: Fix the login form');
    const updated = await gt.updatePullRequest(1, { title: 'Better title', body: 'b' });
    assert.equal(updated.draft, true);
    assert.equal(fake.pulls()[0]?.title, 'WIP: Better title');
  });

  it('reads the draft field where Gitea sends it', async () => {
    const withDraft = await startFakeGitea({ token: TOKEN, repos: [REPO], draftField: true });
    try {
      const gt = provider.create({
        apiUrl: withDraft.apiUrl,
        repository: `${withDraft.url}/${REPO}`,
        credentials: { token: TOKEN },
      });
      assert.equal((await gt.createPullRequest(input({ draft: true }))).pullRequest.draft, true);
      withDraft.assertNoUnexpected();
    } finally {
      await withDraft.close();
    }
  });

  it('adopts the open pull request a crashed attempt opened instead of opening another', async () => {
    const first = await client().createPullRequest(input());
    const again = await client().createPullRequest(input({ title: 'Retry' }));
    assert.deepEqual(again.pullRequest, first.pullRequest);
    assert.equal(fake.pulls().length, 1);
    assert.equal(fake.requests.filter((r) => r.method === 'POST').length, 1);
  });

  it('adopts the pull request another worker opened between look-up and create (409)', async () => {
    const racing: typeof fetch = async (url, init) => {
      if (init?.method === 'POST') fake.addPull(REPO, { head: 'errand/job-1', title: 'Other' });
      return fetch(url, init);
    };
    const { pullRequest } = await client({ fetch: racing }).createPullRequest(input());
    assert.equal(pullRequest.number, 1);
    assert.equal(fake.pulls().length, 1);
    assert.deepEqual(
      fake.requests.map((r) => `${r.method} ${r.path} ${r.status}`),
      [
        'GET /api/v1/repos/acme/widgets/pulls 200',
        'POST /api/v1/repos/acme/widgets/pulls 409',
        'GET /api/v1/repos/acme/widgets/pulls/1 200',
      ],
    );
  });

  it('pages through the list to find an old pull request', async () => {
    fake.addPull(REPO, { head: 'errand/old' });
    for (let i = 0; i < 120; i++) fake.addPull(REPO, { head: `feature/${i}` });
    const found = await client().findPullRequest('errand/old');
    assert.equal(found?.number, 1);
    assert.equal(listRequests().length, 3);
  });

  it('stops paging at its bound, and the 409 still leads to the existing pull request', async () => {
    fake.addPull(REPO, { head: 'errand/job-1' });
    for (let i = 0; i < 1010; i++) fake.addPull(REPO, { head: `feature/${i}` });
    const { pullRequest } = await client().createPullRequest(input());
    assert.equal(pullRequest.number, 1);
    assert.equal(listRequests().length, 20);
    assert.equal(fake.pulls().length, 1011);
  });

  it('stops at the last page when the total is known', async () => {
    for (let i = 0; i < 60; i++) fake.addPull(REPO, { head: `feature/${i}` });
    assert.equal(await client().findPullRequest('errand/none'), null);
    // Two pages of open ones, two of all.
    assert.equal(listRequests().length, 4);
  });

  it('prefers an open pull request, else the latest, and maps merged and closed', async () => {
    fake.addPull(REPO, { head: 'errand/x', state: 'closed' });
    fake.addPull(REPO, { head: 'errand/x' });
    fake.addPull(REPO, {
      head: 'errand/y',
      state: 'closed',
      merged: true,
      headBranchDeleted: true,
    });
    fake.addPull(REPO, { head: 'errand/z', state: 'closed' });
    const gt = client();
    assert.deepEqual(await gt.findPullRequest('errand/x'), {
      number: 2,
      url: `${fake.url}/${REPO}/pulls/2`,
      draft: false,
      state: 'open',
    });
    // The head branch was deleted after merging: Gitea's `ref` is then refs/pull/3/head.
    assert.equal((await gt.findPullRequest('errand/y'))?.state, 'merged');
    assert.equal((await gt.findPullRequest('errand/z'))?.state, 'closed');
    fake.setState(REPO, 2, 'merged');
    assert.deepEqual(await gt.findPullRequest('errand/x'), {
      number: 2,
      url: `${fake.url}/${REPO}/pulls/2`,
      draft: false,
      state: 'merged',
    });
  });

  it('ignores a pull request from a fork with the same branch name', async () => {
    fake.addPull(REPO, { head: 'errand/job-1', headRepoId: 99 });
    assert.equal(await client().findPullRequest('errand/job-1'), null);
  });

  it('shortens a title Gitea would refuse', async () => {
    await client().createPullRequest(input({ title: 'y'.repeat(300) }));
    assert.equal(fake.pulls()[0]?.title.length, 255);
  });

  it('recognises the WIP spellings Gitea does', () => {
    assert.equal(draftTitle('[WIP] a', false), 'a');
    assert.equal(draftTitle('wip: a', true), 'WIP: a');
    assert.equal(draftTitle('', true), 'WIP: Errand changes');
  });
});

describe('Gitea provider: repositories and URLs', () => {
  it('reads https, ssh and scp-style URLs', async () => {
    fake.addPull(REPO, { head: 'errand/job-1' });
    for (const repository of [
      `${fake.url}/${REPO}`,
      `ssh://git@gitea.example.com:2222/${REPO}.git`,
      `git@gitea.example.com:${REPO}.git`,
    ]) {
      assert.equal((await client({ repository }).findPullRequest('errand/job-1'))?.number, 1);
    }
  });

  it('works with an instance under a sub-path, the API URL given without /api/v1', async () => {
    const sub = await startFakeGitea({ token: TOKEN, repos: [REPO], basePath: '/gitea' });
    try {
      const gt = provider.create({
        apiUrl: `${sub.url}/`,
        repository: `${sub.url}/${REPO}.git`,
        credentials: { token: TOKEN },
      });
      const { pullRequest } = await gt.createPullRequest(input());
      assert.equal(pullRequest.url, `${sub.url}/${REPO}/pulls/1`);
      assert.equal((await gt.gitAuth())?.urlPrefix, `${sub.url}/`);
      sub.assertNoUnexpected();
    } finally {
      await sub.close();
    }
  });

  it('has no default API URL', () => {
    assert.equal(provider.defaultApiUrl('https://gitea.com/acme/widgets.git'), undefined);
    assert.equal(provider.defaultApiUrl('https://codeberg.org/acme/widgets.git'), undefined);
  });

  it('gives git Basic auth with the token as password, which Gitea accepts', async () => {
    const auth = await client().gitAuth();
    assert.ok(auth);
    assert.equal(auth.urlPrefix, `${fake.url}/`);
    assert.equal(checkAuth(auth, true), null);
    const encoded = auth.header.replace(/^Authorization: Basic /, '');
    assert.equal(Buffer.from(encoded, 'base64').toString(), `errand:${TOKEN}`);
    // The same header authenticates against the (fake's model of) Gitea's Basic auth.
    const [name, value] = auth.header.split(': ');
    const res = await fetch(`${fake.apiUrl}/repos/${REPO}/pulls`, {
      headers: { [name ?? '']: value ?? '' },
    });
    assert.equal(res.status, 200);
    assert.equal(
      await client({ repository: `git@gitea.example.com:${REPO}.git` }).gitAuth(),
      undefined,
    );
  });

  it('refuses a configuration it cannot use, without the token in the message', async () => {
    const cases: Array<[() => ForgeClient, RegExp]> = [
      [() => client({ token: '' }), /No Gitea token configured/],
      [
        () => client({ repository: `${fake.url}/acme/group/widgets` }),
        /not a Gitea repository URL/,
      ],
      [() => client({ repository: `${fake.url}/widgets` }), /not a Gitea repository URL/],
      [
        () => client({ repository: `https://u:${TOKEN}@gitea.example.com/a/b` }),
        /not a Gitea repository URL/,
      ],
      [
        () =>
          provider.create({
            apiUrl: 'gitea.example.com',
            repository: 'https://gitea.example.com/a/b',
            credentials: { token: TOKEN },
          }),
        /Gitea API URL must be an http\(s\) URL/,
      ],
    ];
    for (const [make, pattern] of cases) {
      const err = await forgeError(Promise.resolve().then(make));
      assert.match(err.message, pattern);
      assert.equal(err.transient, false);
    }
  });
});

describe('Gitea provider: errors', () => {
  it('401: says Gitea refused the token', async () => {
    const err = await forgeError(client({ token: 'wrong-token-0000' }).findPullRequest('b'));
    assert.equal(err.status, 401);
    assert.equal(err.transient, false);
    assert.match(err.message, /^Gitea refused the token \(401\)/);
  });

  it('403: names the scope the token needs', async () => {
    const ro = await startFakeGitea({ token: TOKEN, repos: [REPO], access: 'read' });
    try {
      const gt = provider.create({
        apiUrl: ro.apiUrl,
        repository: `${ro.url}/${REPO}`,
        credentials: { token: TOKEN },
      });
      const err = await forgeError(gt.createPullRequest(input()));
      assert.equal(err.status, 403);
      assert.equal(err.transient, false);
      assert.match(err.message, /write:repository/);
      assert.match(err.message, /write:issue/);
      ro.assertNoUnexpected();
    } finally {
      await ro.close();
    }
  });

  it('404: names the repository and is not transient', async () => {
    const err = await forgeError(
      client({ repository: `${fake.url}/acme/missing` }).findPullRequest('b'),
    );
    assert.equal(err.status, 404);
    assert.equal(err.transient, false);
    assert.match(err.message, /Gitea repository acme\/missing not found/);
  });

  it('404 on create names the branches too (Gitea answers an unknown base with 404)', async () => {
    const err = await forgeError(client().createPullRequest(input({ base: 'nope' })));
    assert.equal(err.status, 404);
    assert.match(err.message, /no branch "nope" or "errand\/job-1"/);
  });

  it('404 on a pull request names the pull request', async () => {
    const err = await forgeError(client().updatePullRequest(42, { title: 't', body: 'x' }));
    assert.match(err.message, /pull request #42 not found in acme\/widgets/);
  });

  it('422: passes on what Gitea said', async () => {
    const err = await forgeError(client().createPullRequest(input({ head: 'main' })));
    assert.equal(err.status, 422);
    assert.equal(err.transient, false);
    assert.match(err.message, /There are no changes between the head and the base/);
  });

  it('429 and 5xx: transient, honouring Retry-After', async () => {
    fake.failNext(429, { 'retry-after': '12' });
    let err = await forgeError(client().findPullRequest('b'));
    assert.equal(err.transient, true);
    assert.equal(err.retryAfterSeconds, 12);

    fake.failNext(429, { 'retry-after': new Date(Date.now() + 45_000).toUTCString() });
    err = await forgeError(client().findPullRequest('b'));
    assert.ok(err.retryAfterSeconds !== undefined && Math.abs(err.retryAfterSeconds - 45) <= 2);

    for (const status of [500, 502, 503, 504]) {
      fake.failNext(status);
      err = await forgeError(client().updatePullRequest(1, { body: 'x' }));
      assert.equal(err.status, status);
      assert.equal(err.transient, true);
    }
  });

  it('network failure: transient', async () => {
    const port = await closedPort();
    const gt = provider.create({
      apiUrl: `http://127.0.0.1:${port}/api/v1`,
      repository: `http://127.0.0.1:${port}/${REPO}`,
      credentials: { token: TOKEN },
    });
    const err = await forgeError(gt.createPullRequest(input()));
    assert.equal(err.transient, true);
    assert.match(err.message, /could not be reached/);
  });

  it('an answer that is not Gitea JSON is refused', async () => {
    fake.failNext(200, {}, [{ number: 'one' }]);
    const err = await forgeError(client().findPullRequest('b'));
    assert.equal(err.transient, false);
    assert.match(err.message, /check the API URL/);
  });

  it('never puts the token in a message, even when Gitea echoes it', async () => {
    fake.failNext(400, {}, { message: `bad credential ${TOKEN}`, url: 'x' });
    const err = await forgeError(client().findPullRequest('b'));
    assert.match(err.message, /bad credential \[redacted\]/);
  });
});

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  assert.ok(address && typeof address === 'object');
  return address.port;
}

describe('answering on the forge', () => {
  it('write access: owner, admin and write may; read and unknown users may not', async () => {
    for (const level of ['owner', 'admin', 'write', 'read', 'none'] as const)
      fake.setPermission(REPO, `u-${level}`, level);
    const answers: Record<string, boolean> = {};
    for (const level of ['owner', 'admin', 'write', 'read', 'none', 'ghost'])
      answers[level] = await client().canWrite({ login: `u-${level}`, id: '1' });
    assert.deepEqual(answers, {
      owner: true,
      admin: true,
      write: true,
      read: false,
      none: false,
      ghost: false,
    });
  });

  it('a token whose user may not ask about others is refused, saying what it needs', async () => {
    fake.failNext(403, {}, { message: 'collaborators can query only their own', url: '' });
    const err = await forgeError(client().canWrite({ login: 'someone', id: '1' }));
    assert.equal(err.transient, false);
    assert.match(err.message, /administrator of the repository/);
  });

  it('a review takes no reaction of its own: the pull request gets the 👀', async () => {
    const { pullRequest } = await client().createPullRequest(input());
    await client().acknowledge({
      thread: { kind: 'pull-request', number: pullRequest.number },
      where: 'review',
      commentId: '',
      discussionId: null,
    });
    assert.deepEqual(
      fake.reactions(REPO).map((r) => [r.on, r.id, r.content]),
      [['issue', pullRequest.number, 'eyes']],
    );
  });
});

describe('issues', () => {
  it("reads an issue's title, body, state and page; a pull request's number reads as one", async () => {
    const opened = fake.openIssue(REPO, {
      title: 'Login fails with a + in the e-mail',
      body: 'Steps: sign in as a+b@example.com.',
      author: 'reporter',
    });
    assert.deepEqual(await client().issue(opened.number), {
      number: opened.number,
      title: 'Login fails with a + in the e-mail',
      body: 'Steps: sign in as a+b@example.com.',
      state: 'open',
      url: opened.htmlUrl,
      pullRequest: false,
    });
    const { pullRequest } = await client().createPullRequest(
      input({ title: 'Accept + in e-mails', body: 'Escapes the address before the lookup.' }),
    );
    assert.deepEqual(await client().issue(pullRequest.number), {
      number: pullRequest.number,
      title: 'Accept + in e-mails',
      body: 'Escapes the address before the lookup.',
      state: 'open',
      url: pullRequest.url,
      pullRequest: true,
    });
    fake.openIssue(REPO, { title: 'Done', author: 'reporter', state: 'closed' });
    assert.equal((await client().issue(3))?.state, 'closed');
  });

  it('an issue Gitea does not have is undefined; other failures are ForgeErrors', async () => {
    assert.equal(await client().issue(99), undefined);
    fake.failNext(500);
    const down = await forgeError(client().issue(1));
    assert.equal(down.transient, true);
    fake.failNext(200, {}, { number: 1, title: 'no page' });
    const odd = await forgeError(client().issue(1));
    assert.match(odd.message, /not its API's JSON/);
    await assert.rejects(client({ token: 'wrong' }).issue(1), /refused the token \(401\)/);
  });
});
