import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { inspect } from 'node:util';
import { type FakeGitLab, startFakeGitLab } from '../../../test/support/fake-gitlab.ts';
import { checkAuth } from '../../repository/auth.ts';
import { type ForgeClient, ForgeError, type PullRequestInput } from '../types.ts';
import { draftTitle, id, provider } from './index.ts';

const TOKEN = 'glpat-SECRET-token-0123456789';
const PROJECT = 'group/sub/project';

const fake: FakeGitLab = await startFakeGitLab({
  token: TOKEN,
  projects: [PROJECT, { path: 'team/app', branches: ['main', 'develop'] }],
});
after(() => fake.close());
beforeEach(() => fake.reset());
afterEach(() => fake.assertNoUnexpected());

function client(overrides: { repository?: string; token?: string; fetch?: typeof fetch } = {}) {
  return provider.create({
    apiUrl: fake.apiUrl,
    repository: overrides.repository ?? `${fake.url}/${PROJECT}.git`,
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
    assert.equal(err.service, 'gitlab');
    assertNoToken(err);
    return err;
  }
  assert.fail('expected the call to fail');
}

function assertNoToken(err: Error, token = TOKEN): void {
  for (const text of [
    err.message,
    JSON.stringify(err),
    String(err.cause),
    inspect(err, { depth: 10 }),
    inspect(err.cause, { depth: 10 }),
  ]) {
    assert.ok(!text.includes(token), `token leaked into: ${text}`);
    assert.ok(!text.includes(Buffer.from(`oauth2:${token}`).toString('base64')));
  }
}

describe('GitLab provider: merge requests', () => {
  it('registers as gitlab', () => {
    assert.equal(id, 'gitlab');
    assert.equal(provider.id, 'gitlab');
    assert.equal(client().kind, 'gitlab');
  });

  it('creates, finds and updates exactly one merge request in a nested group', async () => {
    const gl = client();
    assert.equal(await gl.findPullRequest('errand/job-1'), null);

    const created = await gl.createPullRequest(input());
    const expected = {
      number: 1,
      url: `${fake.url}/${PROJECT}/-/merge_requests/1`,
      draft: false,
      state: 'open',
    };
    assert.deepEqual(created, { pullRequest: expected, notes: [] });
    assert.deepEqual(await gl.findPullRequest('errand/job-1'), expected);

    assert.deepEqual(await gl.updatePullRequest(1, { body: 'Second turn.' }), expected);
    assert.deepEqual(
      await gl.updatePullRequest(1, { title: 'Fix the login form and tests', body: 'Third.' }),
      expected,
    );

    const stored = fake.mergeRequests(PROJECT);
    assert.equal(stored.length, 1);
    assert.equal(stored[0]?.title, 'Fix the login form and tests');
    assert.equal(stored[0]?.description, 'Third.');
    assert.equal(stored[0]?.sourceBranch, 'errand/job-1');
    assert.equal(stored[0]?.targetBranch, 'main');

    // The project is addressed by its encoded full path, authenticated by a Bearer token.
    const post = fake.requests.find((r) => r.method === 'POST');
    assert.equal(post?.rawPath, '/api/v4/projects/group%2Fsub%2Fproject/merge_requests');
    assert.equal(post?.headers.authorization, `Bearer ${TOKEN}`);
    assert.deepEqual(post?.body, {
      source_branch: 'errand/job-1',
      target_branch: 'main',
      title: 'Fix the login form',
      description: 'What the agent did.',
    });
    const find = fake.requests.find((r) => r.method === 'GET');
    assert.deepEqual(find?.query, {
      source_branch: 'errand/job-1',
      state: 'all',
      per_page: '100',
    });
  });

  it('opens a draft through the title prefix and keeps it a draft on retitling', async () => {
    const gl = client();
    const { pullRequest } = await gl.createPullRequest(input({ draft: true }));
    assert.equal(pullRequest.draft, true);
    assert.equal(fake.mergeRequests()[0]?.title, 'Draft: Fix the login form');

    const updated = await gl.updatePullRequest(1, { title: 'Better title', body: 'b' });
    assert.equal(updated.draft, true);
    assert.equal(fake.mergeRequests()[0]?.title, 'Draft: Better title');
  });

  it('does not turn a ready merge request back into a draft', async () => {
    const gl = client();
    await gl.createPullRequest(input({ draft: false }));
    const updated = await gl.updatePullRequest(1, { title: 'Draft: sneaky', body: 'b' });
    assert.equal(updated.draft, false);
    assert.equal(fake.mergeRequests()[0]?.title, 'sneaky');
  });

  it('adopts the open merge request a crashed attempt opened instead of opening another', async () => {
    const first = await client().createPullRequest(input());
    // The worker died before recording it; the retried turn runs with a fresh client.
    const again = await client().createPullRequest(input({ title: 'Retry' }));
    assert.deepEqual(again.pullRequest, first.pullRequest);
    assert.equal(fake.mergeRequests().length, 1);
    assert.equal(fake.requests.filter((r) => r.method === 'POST').length, 1);
  });

  it('adopts the merge request another worker opened between look-up and create (409)', async () => {
    const racing: typeof fetch = async (url, init) => {
      if (init?.method === 'POST') {
        fake.addMergeRequest(PROJECT, { sourceBranch: 'errand/job-1', title: 'Other worker' });
      }
      return fetch(url, init);
    };
    const { pullRequest } = await client({ fetch: racing }).createPullRequest(input());
    assert.equal(pullRequest.number, 1);
    assert.equal(fake.mergeRequests().length, 1);
    const statuses = fake.requests.map((r) => `${r.method} ${r.status}`);
    assert.deepEqual(statuses, ['GET 200', 'POST 409', 'GET 200']);
  });

  it('prefers an open merge request, else the newest, and maps every state', async () => {
    fake.addMergeRequest(PROJECT, { sourceBranch: 'errand/x', state: 'closed' });
    fake.addMergeRequest(PROJECT, { sourceBranch: 'errand/x', state: 'opened' });
    fake.addMergeRequest(PROJECT, { sourceBranch: 'errand/x', state: 'merged' });
    fake.addMergeRequest(PROJECT, { sourceBranch: 'errand/y', state: 'merged' });
    fake.addMergeRequest(PROJECT, { sourceBranch: 'errand/z', state: 'locked' });
    fake.addMergeRequest(PROJECT, { sourceBranch: 'errand/w', state: 'closed' });
    const gl = client();
    assert.deepEqual(await gl.findPullRequest('errand/x'), {
      number: 2,
      url: `${fake.url}/${PROJECT}/-/merge_requests/2`,
      draft: false,
      state: 'open',
    });
    assert.equal((await gl.findPullRequest('errand/y'))?.state, 'merged');
    assert.equal((await gl.findPullRequest('errand/z'))?.state, 'open');
    assert.equal((await gl.findPullRequest('errand/w'))?.state, 'closed');
    fake.setState(PROJECT, 2, 'closed');
    assert.equal((await gl.findPullRequest('errand/x'))?.number, 3);
  });

  it('opens a new merge request when the only one for the branch was closed', async () => {
    fake.addMergeRequest(PROJECT, { sourceBranch: 'errand/job-1', state: 'closed' });
    const { pullRequest } = await client().createPullRequest(input());
    assert.equal(pullRequest.number, 2);
  });

  it('ignores a merge request from a fork with the same branch name', async () => {
    fake.addMergeRequest(PROJECT, { sourceBranch: 'errand/job-1', sourceProjectId: 99 });
    assert.equal(await client().findPullRequest('errand/job-1'), null);
  });

  it('shortens a title GitLab would refuse', async () => {
    const { pullRequest } = await client().createPullRequest(
      input({ title: 'x'.repeat(400), draft: true }),
    );
    assert.equal(pullRequest.draft, true);
    const title = fake.mergeRequests()[0]?.title ?? '';
    assert.equal(title.length, 255);
    assert.ok(title.startsWith('Draft: xxx') && title.endsWith('…'));
  });

  it('recognises the draft spellings GitLab does', () => {
    assert.equal(draftTitle('[Draft] a', false), 'a');
    assert.equal(draftTitle('(draft) a', true), 'Draft: a');
    assert.equal(draftTitle('DRAFT: a', true), 'Draft: a');
    assert.equal(draftTitle('  ', false), 'Errand changes');
  });
});

describe('GitLab provider: repositories and URLs', () => {
  it('reads nested groups from https, ssh and scp-style URLs', async () => {
    fake.addMergeRequest(PROJECT, { sourceBranch: 'errand/job-1' });
    for (const repository of [
      `${fake.url}/${PROJECT}`,
      `${fake.url}/${PROJECT}/`,
      `ssh://git@gitlab.example.com:2222/${PROJECT}.git`,
      `git@gitlab.example.com:${PROJECT}.git`,
    ]) {
      const found = await client({ repository }).findPullRequest('errand/job-1');
      assert.equal(found?.number, 1, repository);
    }
    for (const r of fake.requests) {
      assert.equal(r.rawPath, '/api/v4/projects/group%2Fsub%2Fproject/merge_requests');
    }
  });

  it('works with a self-managed instance under a sub-path', async () => {
    const sub = await startFakeGitLab({ token: TOKEN, projects: ['g/p'], basePath: '/gitlab' });
    try {
      // Configured without /api/v4: the client completes it.
      const gl = provider.create({
        apiUrl: sub.url,
        repository: `${sub.url}/g/p.git`,
        credentials: { token: TOKEN },
      });
      const { pullRequest } = await gl.createPullRequest(input());
      assert.equal(pullRequest.url, `${sub.url}/g/p/-/merge_requests/1`);
      assert.equal(sub.requests[0]?.rawPath, '/gitlab/api/v4/projects/g%2Fp/merge_requests');
      const auth = await gl.gitAuth();
      assert.equal(auth?.urlPrefix, `${sub.url}/`);
      sub.assertNoUnexpected();
    } finally {
      await sub.close();
    }
  });

  it('knows gitlab.com and nothing else', () => {
    for (const repository of [
      'https://gitlab.com/group/sub/project.git',
      'git@gitlab.com:group/project.git',
      'ssh://git@gitlab.com/group/project.git',
    ]) {
      assert.equal(provider.defaultApiUrl(repository), 'https://gitlab.com/api/v4', repository);
    }
    assert.equal(provider.defaultApiUrl('https://gitlab.example.com/group/project.git'), undefined);
    assert.equal(provider.defaultApiUrl('not a url'), undefined);
  });

  it('gives git a Basic header for oauth2 scoped to the host, and none for ssh', async () => {
    const auth = await client().gitAuth();
    assert.ok(auth);
    assert.equal(auth.urlPrefix, `${fake.url}/`);
    const encoded = auth.header.replace(/^Authorization: Basic /, '');
    assert.equal(Buffer.from(encoded, 'base64').toString(), `oauth2:${TOKEN}`);
    assert.equal(checkAuth(auth, true), null);

    const https = await client({
      repository: `https://gitlab.example.com/${PROJECT}.git`,
    }).gitAuth();
    assert.equal(https?.urlPrefix, 'https://gitlab.example.com/');
    assert.equal(checkAuth(https ?? { urlPrefix: '', header: '' }, false), null);
    assert.equal(
      await client({ repository: `git@gitlab.example.com:${PROJECT}.git` }).gitAuth(),
      undefined,
    );
  });

  it('refuses a configuration it cannot use, without the token in the message', async () => {
    const cases: Array<[() => ForgeClient, RegExp]> = [
      [() => client({ token: '' }), /No GitLab token configured/],
      [
        () => client({ repository: `${fake.url}/project-without-group` }),
        /not a GitLab project URL/,
      ],
      [
        () => client({ repository: `https://user:${TOKEN}@gitlab.example.com/g/p` }),
        /not a GitLab project URL/,
      ],
      [() => client({ repository: `${fake.url}/g/../p` }), /not a GitLab project URL/],
      [() => client({ repository: 'file:///tmp/repo' }), /not a GitLab project URL/],
      [
        () =>
          provider.create({
            apiUrl: `https://x:${TOKEN}@gitlab.example.com/api/v4`,
            repository: 'https://gitlab.example.com/g/p',
            credentials: { token: TOKEN },
          }),
        /API URL must be an http\(s\) URL without credentials/,
      ],
    ];
    for (const [make, pattern] of cases) {
      const err = await forgeError(Promise.resolve().then(make));
      assert.match(err.message, pattern);
      assert.equal(err.transient, false);
    }
  });
});

describe('GitLab provider: errors', () => {
  it('401: says GitLab refused the token', async () => {
    const err = await forgeError(client({ token: 'glpat-wrong-token-123' }).findPullRequest('b'));
    assert.equal(err.status, 401);
    assert.equal(err.transient, false);
    assert.match(err.message, /^GitLab refused the token \(401\)/);
    assert.ok(!err.message.includes('glpat-wrong-token-123'));
  });

  it('403: names the scope and role the token needs', async () => {
    const ro = await startFakeGitLab({ token: TOKEN, projects: [PROJECT], access: 'read' });
    try {
      const gl = provider.create({
        apiUrl: ro.apiUrl,
        repository: `${ro.url}/${PROJECT}`,
        credentials: { token: TOKEN },
      });
      const err = await forgeError(gl.createPullRequest(input()));
      assert.equal(err.status, 403);
      assert.equal(err.transient, false);
      assert.match(err.message, /api scope/);
      assert.match(err.message, /Developer role/);
      assert.match(err.message, /insufficient_scope/);
      ro.assertNoUnexpected();
    } finally {
      await ro.close();
    }
  });

  it('404: names the project path and is not transient', async () => {
    const err = await forgeError(
      client({ repository: `${fake.url}/group/missing` }).findPullRequest('b'),
    );
    assert.equal(err.status, 404);
    assert.equal(err.transient, false);
    assert.match(err.message, /GitLab project group\/missing not found/);
  });

  it('404 on a merge request names the merge request', async () => {
    const err = await forgeError(client().updatePullRequest(42, { body: 'x' }));
    assert.match(err.message, /merge request !42 not found in group\/sub\/project/);
  });

  it('422: passes on what GitLab said about an unknown target branch', async () => {
    const err = await forgeError(client().createPullRequest(input({ base: 'nope' })));
    assert.equal(err.status, 422);
    assert.equal(err.transient, false);
    assert.match(err.message, /Target branch "nope" does not exist/);
  });

  it('429: transient, honouring Retry-After in seconds or as a date, and RateLimit-Reset', async () => {
    fake.failNext(429, { 'retry-after': '7' });
    let err = await forgeError(client().findPullRequest('b'));
    assert.equal(err.status, 429);
    assert.equal(err.transient, true);
    assert.equal(err.retryAfterSeconds, 7);
    assert.match(err.message, /rate limit/);

    fake.failNext(429, { 'retry-after': new Date(Date.now() + 30_000).toUTCString() });
    err = await forgeError(client().findPullRequest('b'));
    assert.ok(err.retryAfterSeconds !== undefined && Math.abs(err.retryAfterSeconds - 30) <= 2);

    fake.failNext(429, { 'ratelimit-reset': String(Math.floor(Date.now() / 1000) + 90) });
    err = await forgeError(client().findPullRequest('b'));
    assert.ok(err.retryAfterSeconds !== undefined && Math.abs(err.retryAfterSeconds - 90) <= 2);

    fake.failNext(429);
    err = await forgeError(client().findPullRequest('b'));
    assert.equal(err.retryAfterSeconds, 60);
  });

  it('5xx: transient, without mistaking a rate-limit window for a wait', async () => {
    // GitLab.com sends RateLimit-* on every answer; only a 429 makes them a wait.
    fake.failNext(502, { 'ratelimit-reset': String(Math.floor(Date.now() / 1000) + 50) });
    const err = await forgeError(client().findPullRequest('b'));
    assert.equal(err.transient, true);
    assert.equal(err.retryAfterSeconds, undefined);
  });

  it('5xx: transient', async () => {
    for (const status of [500, 502, 503]) {
      fake.failNext(status, status === 503 ? { 'retry-after': '3' } : {});
      const err = await forgeError(client().createPullRequest(input()));
      assert.equal(err.status, status);
      assert.equal(err.transient, true);
      assert.equal(err.retryAfterSeconds, status === 503 ? 3 : undefined);
    }
  });

  it('network failure: transient, naming where it tried', async () => {
    const port = await closedPort();
    const gl = provider.create({
      apiUrl: `http://127.0.0.1:${port}/api/v4`,
      repository: `http://127.0.0.1:${port}/${PROJECT}`,
      credentials: { token: TOKEN },
    });
    const err = await forgeError(gl.findPullRequest('b'));
    assert.equal(err.transient, true);
    assert.equal(err.status, undefined);
    assert.match(err.message, /could not be reached/);
    assert.match(err.message, /ECONNREFUSED/);
  });

  it('a redirect is not followed (it would carry the token elsewhere)', async () => {
    fake.failNext(301, { location: 'https://elsewhere.example/api/v4/projects' });
    const err = await forgeError(client().findPullRequest('b'));
    assert.equal(err.status, 301);
    assert.equal(err.transient, false);
    assert.match(err.message, /redirected .* to https:\/\/elsewhere\.example\/api\/v4\/projects/);
    assert.equal(fake.requests.length, 1);
  });

  it('an answer that is not GitLab JSON is refused, pointing at the API URL', async () => {
    fake.failNext(200, {}, '<html>sign in</html>');
    const err = await forgeError(client().findPullRequest('b'));
    assert.equal(err.transient, false);
    assert.match(err.message, /check the API URL/);
  });

  it('a cancelled call rejects with the abort reason, not a ForgeError', async () => {
    const controller = new AbortController();
    const reason = new Error('job archived');
    controller.abort(reason);
    await assert.rejects(client().findPullRequest('b', controller.signal), (err) => err === reason);
  });

  it('never puts the token in a message, even when GitLab echoes it', async () => {
    fake.failNext(400, {}, { message: { title: [`token ${TOKEN} is not a title`] } });
    const err = await forgeError(client().createPullRequest(input()));
    assert.match(err.message, /\[redacted\] is not a title/);
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
  it('write access: Developer and above may; Reporter, Guest and non-members may not', async () => {
    const levels = { developer: 30, maintainer: 40, owner: 50, reporter: 20, guest: 10 };
    let id = 7000;
    const answers: Record<string, boolean> = {};
    for (const [name, level] of Object.entries(levels)) {
      fake.addUser({ username: name, id: ++id }, level);
      answers[name] = await client().canWrite({ login: name, id: String(id) });
    }
    answers.stranger = await client().canWrite({ login: 'stranger', id: '999999' });
    assert.deepEqual(answers, {
      developer: true,
      maintainer: true,
      owner: true,
      reporter: false,
      guest: false,
      stranger: false,
    });
  });

  it("a reply goes into the note's discussion; a note without one gets a note of its own", async () => {
    const { pullRequest } = await client().createPullRequest(input());
    const asked = fake.addNote(PROJECT, {
      on: 'merge_request',
      iid: pullRequest.number,
      author: 'reviewer',
      body: '@errand rename it',
    });
    const ref = {
      thread: { kind: 'pull-request' as const, number: pullRequest.number },
      where: 'conversation' as const,
      commentId: String(asked.id),
      discussionId: asked.discussionId,
    };
    await client().acknowledge(ref);
    // Again (an event tried again after its 👀): GitLab's "already been taken" is no failure.
    await client().acknowledge(ref);
    await client().reply(ref, 'renamed');
    await client().reply({ ...ref, discussionId: null }, 'also here');
    const notes = fake.notes(PROJECT).filter((n) => n.author === 'errand-bot');
    assert.deepEqual(
      notes.map((n) => [n.body, n.discussionId === asked.discussionId]),
      [
        ['renamed', true],
        ['also here', false],
      ],
    );
    assert.deepEqual(
      fake.awards(PROJECT).map((a) => [a.noteId, a.name]),
      [[asked.id, 'eyes']],
    );
  });
});

describe('issues', () => {
  it("reads an issue's title, description, state and page by its iid", async () => {
    const opened = fake.openIssue(PROJECT, {
      title: 'Login fails with a + in the e-mail',
      description: 'Steps: sign in as a+b@example.com.',
      author: 'reporter',
    });
    fake.openIssue(PROJECT, { title: 'Old and done', author: 'reporter', state: 'closed' });
    assert.deepEqual(await client().issue(opened.iid), {
      number: opened.iid,
      title: 'Login fails with a + in the e-mail',
      body: 'Steps: sign in as a+b@example.com.',
      state: 'open',
      url: opened.webUrl,
      pullRequest: false,
    });
    // GitLab's null description is an empty body.
    assert.deepEqual(await client().issue(2), {
      number: 2,
      title: 'Old and done',
      body: '',
      state: 'closed',
      url: `${fake.url}/${PROJECT}/-/issues/2`,
      pullRequest: false,
    });
    const read = fake.requests.filter((r) => r.method === 'GET' && r.path.includes('/issues/'));
    assert.deepEqual(
      read.map((r) => r.rawPath),
      [
        `/api/v4/projects/${encodeURIComponent(PROJECT)}/issues/1`,
        `/api/v4/projects/${encodeURIComponent(PROJECT)}/issues/2`,
      ],
    );
  });

  it('an issue GitLab does not have is undefined; other failures are ForgeErrors', async () => {
    assert.equal(await client().issue(41), undefined);
    fake.failNext(503);
    const down = await forgeError(client().issue(1));
    assert.equal(down.transient, true);
    assert.equal(down.status, 503);
    fake.failNext(403, {}, { message: '403 Forbidden' });
    const refused = await forgeError(client().issue(1));
    assert.equal(refused.transient, false);
    assert.match(refused.message, /read issue #1/);
    await assert.rejects(client({ token: 'glpat-wrong' }).issue(1), /refused the token \(401\)/);
  });
});
