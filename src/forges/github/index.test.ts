// The GitHub provider against the fake GitHub on loopback: the whole pull request cycle with a
// personal access token, with a GitHub App, on Enterprise Server, and with drafts refused.

import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import {
  type FakeGitHub,
  generateAppKeys,
  startFakeGitHub,
} from '../../../test/support/fake-github.ts';
import type { PullRequestInput } from '../types.ts';
import { createGitHubClient, id, provider } from './index.ts';

const token = 'ghp_patflow00000000000000000000000000000';
const repository = 'https://github.com/octo/hello.git';
const keys = generateAppKeys();

const input = (jobId: string, draft = true): PullRequestInput => ({
  head: `errand/${jobId}`,
  base: 'main',
  title: `Errand job ${jobId}`,
  body: 'What the agent did.',
  draft,
});

let gh: FakeGitHub | undefined;
afterEach(async () => {
  await gh?.close();
  gh = undefined;
});

async function start(
  options: Partial<Parameters<typeof startFakeGitHub>[0]> = {},
): Promise<FakeGitHub> {
  gh = await startFakeGitHub({ repos: ['octo/hello'], token, ...options });
  return gh;
}

describe('provider', () => {
  test('is registered as github and knows the public API URL', () => {
    assert.equal(id, 'github');
    assert.equal(provider.id, 'github');
    assert.equal(provider.defaultApiUrl('https://github.com/o/r.git'), 'https://api.github.com');
    assert.equal(provider.defaultApiUrl('git@github.com:o/r.git'), 'https://api.github.com');
    assert.equal(provider.defaultApiUrl('https://ghe.example.com/o/r.git'), undefined);
    assert.equal(provider.defaultApiUrl('https://gitlab.com/o/r.git'), undefined);
    assert.equal(provider.defaultApiUrl('not a url'), undefined);
  });
});

describe('personal access token', () => {
  test('create, find by owner:branch, update: one pull request per job', async () => {
    const gh = await start();
    const client = provider.create({ apiUrl: gh.apiUrl, repository, credentials: { token } });
    // Another job's pull request: a lookup by bare branch name would return it as ours.
    const other = await client.createPullRequest(input('other'));
    assert.equal(other.pullRequest.number, 1);

    assert.equal(await client.findPullRequest('errand/job1'), null);
    const created = await client.createPullRequest(input('job1'));
    assert.deepEqual(created, {
      pullRequest: { number: 2, url: `${gh.url}/octo/hello/pull/2`, draft: true, state: 'open' },
      notes: [],
    });
    const found = await client.findPullRequest('errand/job1');
    assert.deepEqual(found, created.pullRequest);

    const updated = await client.updatePullRequest(2, { title: 'New title', body: 'New body' });
    assert.deepEqual(updated, created.pullRequest);
    await client.updatePullRequest(2, { body: 'Only the body' });

    const pulls = gh.pullRequests('octo/hello').filter((p) => p.head === 'errand/job1');
    assert.equal(pulls.length, 1);
    assert.equal(pulls[0]?.title, 'New title');
    assert.equal(pulls[0]?.body, 'Only the body');

    const lookups = gh.requests.filter((r) => r.operation === 'pulls/list');
    assert.ok(lookups.length >= 2);
    for (const r of lookups) {
      assert.equal(r.query.head?.startsWith('octo:errand/'), true);
      assert.equal(r.query.state, 'all');
      assert.equal(r.headers.authorization, `token ${token}`);
    }
    const patch = gh.requests.filter((r) => r.operation === 'pulls/update').at(-1);
    assert.deepEqual(patch?.body, { body: 'Only the body' });
    gh.assertNoUnexpected();
  });

  test('prefers the open pull request and reports merged ones as merged', async () => {
    const gh = await start();
    const client = createGitHubClient({ apiUrl: gh.apiUrl, repository, credentials: { token } });
    const first = await client.createPullRequest(input('j', false));
    await client.updatePullRequest(first.pullRequest.number, { body: 'x' });
    gh.merge('octo/hello', first.pullRequest.number);
    assert.deepEqual(await client.findPullRequest('errand/j'), {
      ...first.pullRequest,
      state: 'merged',
    });

    const second = await client.createPullRequest(input('j', false));
    assert.equal(second.pullRequest.number, 2);
    assert.deepEqual(await client.findPullRequest('errand/j'), second.pullRequest);
    gh.assertNoUnexpected();
  });

  test('adopts the pull request an earlier attempt opened instead of failing', async () => {
    const gh = await start();
    const client = createGitHubClient({ apiUrl: gh.apiUrl, repository, credentials: { token } });
    const first = await client.createPullRequest(input('again'));
    const second = await client.createPullRequest(input('again'));
    assert.deepEqual(second, first);
    assert.equal(gh.pullRequests().length, 1);
  });

  test('drafts refused: opens a normal pull request and says so', async () => {
    const gh = await start({ draftsRefused: true });
    const client = createGitHubClient({ apiUrl: gh.apiUrl, repository, credentials: { token } });
    const created = await client.createPullRequest(input('d'));
    assert.equal(created.pullRequest.draft, false);
    assert.equal(created.notes.length, 1);
    assert.match(created.notes[0] ?? '', /draft pull requests.*octo\/hello.*normal pull request/i);
    const creates = gh.requests.filter((r) => r.operation === 'pulls/create');
    assert.deepEqual(
      creates.map((r) => [r.status, (r.body as { draft: boolean }).draft]),
      [
        [422, true],
        [201, false],
      ],
    );
    assert.equal(gh.pullRequests().length, 1);
    gh.assertNoUnexpected();
  });

  test('gitAuth: a Basic header for the repository host, carrying the token', async () => {
    const gh = await start();
    const client = createGitHubClient({ apiUrl: gh.apiUrl, repository, credentials: { token } });
    const auth = await client.gitAuth();
    assert.deepEqual(auth, {
      urlPrefix: 'https://github.com/',
      header: `Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`,
    });
  });

  test('uses the fetch it is given', async () => {
    const gh = await start();
    const seen: string[] = [];
    const fetch: typeof globalThis.fetch = (url, init) => {
      seen.push(String(url));
      return globalThis.fetch(url, init);
    };
    const client = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: { token },
      fetch,
    });
    await client.findPullRequest('errand/x');
    assert.equal(seen.length, 1);
    assert.match(seen[0] ?? '', /\/repos\/octo\/hello\/pulls\?/);
  });

  test('an aborted call rejects with the abort reason, not a ForgeError', async () => {
    const gh = await start();
    const client = createGitHubClient({ apiUrl: gh.apiUrl, repository, credentials: { token } });
    const controller = new AbortController();
    const reason = new Error('turn cancelled');
    controller.abort(reason);
    await assert.rejects(
      client.findPullRequest('errand/x', controller.signal),
      (err) => err === reason,
    );
  });
});

describe('GitHub App', () => {
  const app = (installationId = '7') => ({
    appId: '42',
    installationId,
    privateKey: keys.privateKey,
  });

  test('mints an installation token with a JWT and uses it for API calls and git', async () => {
    const gh = await start({
      token: undefined,
      app: { appId: '42', installationId: '7', publicKey: keys.publicKey },
    });
    const client = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: { githubApp: app() },
    });
    await client.createPullRequest(input('a'));
    await client.findPullRequest('errand/a');
    const auth = await client.gitAuth();

    assert.equal(gh.installationTokens.length, 1, 'the token is cached');
    const minted = gh.installationTokens[0]?.token ?? '';
    assert.equal(
      auth?.header,
      `Authorization: Basic ${Buffer.from(`x-access-token:${minted}`).toString('base64')}`,
    );
    const [exchange, ...calls] = gh.requests;
    assert.equal(exchange?.operation, 'apps/create-installation-access-token');
    assert.equal(exchange?.auth, 'jwt');
    assert.match(String(exchange?.headers.authorization), /^bearer [\w-]+\.[\w-]+\.[\w-]+$/i);
    assert.equal(exchange?.body, undefined);
    for (const r of calls) {
      assert.equal(r.auth, 'installation');
      assert.equal(r.headers.authorization, `token ${minted}`);
    }
    gh.assertNoUnexpected();
  });

  test('refreshes the installation token before it expires', async () => {
    // 2-second tokens: the client refreshes them halfway, the fake refuses them after 2 s. The
    // client and the fake read one clock, which the test moves.
    let skew = 0;
    const now = () => Date.now() + skew;
    const gh = await start({
      token: undefined,
      app: { appId: '42', installationId: '7', publicKey: keys.publicKey, tokenTtlSeconds: 2 },
      now,
    });
    const client = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: { githubApp: app() },
      now,
    });
    await client.findPullRequest('errand/a');
    await client.findPullRequest('errand/a');
    assert.equal(gh.installationTokens.length, 1);
    skew += 1100;
    await client.findPullRequest('errand/a');
    assert.equal(gh.installationTokens.length, 2);
    const last = gh.requests.at(-1);
    assert.equal(last?.headers.authorization, `token ${gh.installationTokens[1]?.token}`);
    assert.ok(gh.requests.every((r) => r.status < 400));
    gh.assertNoUnexpected();
  });

  test('a revoked installation token is replaced once, then the call succeeds', async () => {
    const gh = await start({
      token: undefined,
      app: { appId: '42', installationId: '7', publicKey: keys.publicKey },
    });
    const client = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: { githubApp: app() },
    });
    await client.findPullRequest('errand/a');
    gh.revokeInstallationTokens();
    assert.equal(await client.findPullRequest('errand/a'), null);
    assert.equal(gh.installationTokens.length, 2);
  });

  test('concurrent calls share one token exchange', async () => {
    const gh = await start({
      token: undefined,
      app: { appId: '42', installationId: '7', publicKey: keys.publicKey },
    });
    const client = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: { githubApp: app() },
    });
    await Promise.all([
      client.findPullRequest('errand/a'),
      client.findPullRequest('errand/b'),
      client.gitAuth(),
    ]);
    assert.equal(gh.installationTokens.length, 1);
  });

  test('a private key with escaped newlines (from an environment variable) works', async () => {
    const gh = await start({
      token: undefined,
      app: { appId: '42', installationId: '7', publicKey: keys.publicKey },
    });
    const escaped = { ...app(), privateKey: keys.privateKey.replaceAll('\n', '\\n') };
    const client = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: { githubApp: escaped },
    });
    assert.equal(await client.findPullRequest('errand/a'), null);
  });
});

describe('GitHub Enterprise Server', () => {
  test('uses the /api/v3 base URL and the enterprise host for git', async () => {
    const gh = await start({ enterprise: true });
    const client = provider.create({
      apiUrl: `${gh.apiUrl}/`,
      repository: 'https://ghe.example.com/octo/hello',
      credentials: { token },
    });
    const created = await client.createPullRequest(input('e'));
    assert.equal(created.pullRequest.url, `${gh.url}/octo/hello/pull/1`);
    assert.deepEqual(await client.findPullRequest('errand/e'), created.pullRequest);
    assert.equal((await client.gitAuth())?.urlPrefix, 'https://ghe.example.com/');
    assert.ok(gh.requests.every((r) => r.path.startsWith('/api/v3/repos/octo/hello/pulls')));
    gh.assertNoUnexpected();
  });

  test('a GitHub App on Enterprise Server exchanges its JWT under /api/v3', async () => {
    const gh = await start({
      enterprise: true,
      token: undefined,
      app: { appId: '42', installationId: '7', publicKey: keys.publicKey },
    });
    const client = provider.create({
      apiUrl: gh.apiUrl,
      repository: 'git@ghe.example.com:octo/hello.git',
      credentials: { githubApp: { appId: '42', installationId: '7', privateKey: keys.privateKey } },
    });
    await client.createPullRequest(input('e'));
    assert.equal(gh.requests[0]?.path, '/api/v3/app/installations/7/access_tokens');
    gh.assertNoUnexpected();
  });
});

describe('answering on the forge', () => {
  test('write access: admin, maintain and write may; triage, read and unknown users may not', async () => {
    const gh = await start();
    const client = provider.create({ apiUrl: gh.apiUrl, repository, credentials: { token } });
    const levels = ['admin', 'maintain', 'write', 'triage', 'read', 'none'] as const;
    for (const level of levels) gh.setPermission('octo/hello', `u-${level}`, level);
    const answers: Record<string, boolean> = {};
    for (const level of [...levels, 'ghost']) {
      answers[level] = await client.canWrite({ login: `u-${level}`, id: '1' });
    }
    assert.deepEqual(answers, {
      admin: true,
      maintain: true,
      write: true,
      triage: false,
      read: false,
      none: false,
      ghost: false,
    });
    gh.assertNoUnexpected();
  });

  test("a reply to a reply in a line comment's thread goes to the thread's first comment", async () => {
    const gh = await start();
    const client = provider.create({ apiUrl: gh.apiUrl, repository, credentials: { token } });
    const { pullRequest } = await client.createPullRequest(input('job1', false));
    const line = { path: 'a.ts', line: 3, diffHunk: '@@ -1 +1 @@\n+x' };
    const first = gh.addComment('octo/hello', {
      number: pullRequest.number,
      author: 'reviewer',
      body: 'hmm',
      kind: 'line',
      ...line,
    });
    const second = gh.addComment('octo/hello', {
      number: pullRequest.number,
      author: 'reviewer',
      body: '@errand fix it',
      kind: 'line',
      inReplyTo: first.id,
      ...line,
    });
    const ref = {
      thread: { kind: 'pull-request' as const, number: pullRequest.number },
      where: 'line' as const,
      commentId: String(second.id),
      discussionId: null,
    };
    await client.acknowledge(ref);
    await client.reply(ref, 'done');
    const answer = gh.comments('octo/hello').find((c) => c.body === 'done');
    assert.equal(answer?.inReplyTo, first.id);
    assert.deepEqual(
      gh.reactions('octo/hello').map((r) => [r.on, r.id, r.content]),
      [['review-comment', second.id, 'eyes']],
    );
    gh.assertNoUnexpected();
  });
});
