// How GitHub's refusals and failures reach the job: the message the user reads, whether the
// queue retries and after how long, and that no credential ever appears in any of it.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { inspect } from 'node:util';
import {
  type FakeGitHub,
  generateAppKeys,
  startFakeGitHub,
} from '../../../test/support/fake-github.ts';
import type { ForgeClient, PullRequestInput } from '../types.ts';
import { ForgeError } from '../types.ts';
import { rateLimitWait } from './errors.ts';
import { createGitHubClient } from './index.ts';

const token = 'ghp_errorcase0000000000000000000000000000';
const repository = 'https://github.com/octo/hello.git';
const keys = generateAppKeys();
const otherKeys = generateAppKeys();
const input: PullRequestInput = {
  head: 'errand/e',
  base: 'main',
  title: 'T',
  body: 'B',
  draft: false,
};

/** Every rendering of an error a logger or a job record could end up with. */
function renderings(err: ForgeError): string {
  const cause = err.cause;
  return [
    err.message,
    String(err),
    err.stack ?? '',
    inspect(err, { depth: 10, showHidden: true }),
    JSON.stringify(err),
    cause instanceof Error
      ? `${String(cause)} ${cause.stack ?? ''}`
      : JSON.stringify(cause ?? null),
    inspect(cause, { depth: 10, showHidden: true }),
  ].join('\n');
}

function assertNoSecret(err: ForgeError, secrets: string[]): void {
  const text = renderings(err);
  for (const secret of secrets) {
    assert.equal(
      text.includes(secret),
      false,
      `a credential leaked into the error: ${err.message}`,
    );
  }
  // The PEM body, line by line: a partial quote is a leak too.
  for (const line of keys.privateKey
    .split('\n')
    .filter((l) => l.length > 20 && !l.startsWith('-----'))) {
    assert.equal(text.includes(line), false, 'the private key leaked into the error');
  }
}

async function failure(run: () => Promise<unknown>): Promise<ForgeError> {
  try {
    await run();
  } catch (err) {
    assert.ok(err instanceof ForgeError, `expected a ForgeError, got ${String(err)}`);
    assert.equal(err.service, 'github');
    return err;
  }
  assert.fail('expected the call to fail');
}

describe('personal access token errors', () => {
  let gh: FakeGitHub;
  let client: ForgeClient;
  before(async () => {
    gh = await startFakeGitHub({ repos: ['octo/hello'], token });
    client = createGitHubClient({ apiUrl: gh.apiUrl, repository, credentials: { token } });
  });
  after(() => gh.close());

  test('401: bad credentials, not transient', async () => {
    const wrong = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: { token: 'ghp_wrongtoken' },
    });
    const err = await failure(() => wrong.findPullRequest('errand/e'));
    assert.match(err.message, /^GitHub refused the credentials \(401\): check the token/);
    assert.equal(err.transient, false);
    assert.equal(err.status, 401);
    assertNoSecret(err, ['ghp_wrongtoken', token]);
  });

  test('403 without rate limit: names the missing permissions, not transient', async () => {
    gh.failNext(403, {
      headers: { 'x-accepted-github-permissions': 'pull_requests=write' },
      message: 'Resource not accessible by personal access token',
    });
    const err = await failure(() => client.createPullRequest(input));
    assert.match(err.message, /GitHub refused to open a pull request in octo\/hello \(403\)/);
    assert.match(
      err.message,
      /the token needs the 'Pull requests: write' and 'Contents: write' permissions \(fine-grained\) or the 'repo' scope \(classic\)/,
    );
    assert.match(err.message, /GitHub accepts: pull_requests=write/);
    assert.match(err.message, /Resource not accessible by personal access token/);
    assert.equal(err.transient, false);
    assertNoSecret(err, [token]);
  });

  test('403 primary rate limit: transient, retry when the window resets', async () => {
    const reset = Math.floor(Date.now() / 1000) + 120;
    gh.failNext(403, {
      headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset) },
    });
    const err = await failure(() => client.findPullRequest('errand/e'));
    assert.equal(err.transient, true);
    assert.ok(
      err.retryAfterSeconds !== undefined &&
        err.retryAfterSeconds >= 119 &&
        err.retryAfterSeconds <= 121,
    );
    assert.match(err.message, /rate limit/i);
  });

  test('403 and 429 secondary rate limits: transient, retry-after honoured', async () => {
    gh.failNext(403, { headers: { 'retry-after': '30' } });
    const err = await failure(() => client.updatePullRequest(1, { body: 'x' }));
    assert.equal(err.transient, true);
    assert.equal(err.retryAfterSeconds, 30);

    gh.failNext(429, { headers: { 'retry-after': '7' } });
    const err429 = await failure(() => client.findPullRequest('errand/e'));
    assert.equal(err429.transient, true);
    assert.equal(err429.retryAfterSeconds, 7);

    // GitHub sometimes names a secondary limit only in the message: wait at least a minute.
    gh.failNext(403, { message: 'You have exceeded a secondary rate limit.' });
    const bare = await failure(() => client.findPullRequest('errand/e'));
    assert.equal(bare.transient, true);
    assert.equal(bare.retryAfterSeconds, 60);
  });

  test('404: the repository is missing or invisible, not transient', async () => {
    const missing = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository: 'https://github.com/octo/gone',
      credentials: { token },
    });
    const err = await failure(() => missing.findPullRequest('errand/e'));
    assert.match(
      err.message,
      /^GitHub repository octo\/gone not found, or the token cannot see it/,
    );
    assert.equal(err.transient, false);
    assert.equal(err.status, 404);

    const pr = await failure(() => client.updatePullRequest(99, { body: 'x' }));
    assert.match(pr.message, /pull request octo\/hello#99 not found/);
    assert.equal(pr.transient, false);
  });

  test('5xx: transient, retry-after passed on when given', async () => {
    for (const status of [500, 502, 503]) {
      gh.failNext(status);
      const err = await failure(() => client.findPullRequest('errand/e'));
      assert.equal(err.transient, true, `${status}`);
      assert.equal(err.status, status);
      assert.equal(err.retryAfterSeconds, undefined);
    }
    gh.failNext(503, { headers: { 'retry-after': '12' } });
    const err = await failure(() => client.createPullRequest(input));
    assert.equal(err.retryAfterSeconds, 12);
    assertNoSecret(err, [token]);
  });

  test("422 other than drafts: not transient, GitHub's reason quoted", async () => {
    const err = await failure(() => client.createPullRequest({ ...input, head: 'main' }));
    assert.equal(err.transient, false);
    assert.equal(err.status, 422);
    assert.match(err.message, /No commits between main and main/);
  });

  test('network failure: transient', async () => {
    const closed = await startFakeGitHub({ repos: ['octo/hello'], token });
    await closed.close();
    const offline = createGitHubClient({
      apiUrl: closed.apiUrl,
      repository,
      credentials: { token },
    });
    const err = await failure(() => offline.findPullRequest('errand/e'));
    assert.equal(err.transient, true);
    assert.match(err.message, /GitHub could not be reached/);
    assertNoSecret(err, [token]);
  });

  test("an answer that is not GitHub's (wrong API URL) is refused, not trusted", async () => {
    const html: typeof globalThis.fetch = async () =>
      new Response('<html>sign in</html>', {
        status: 200,
        headers: { 'content-type': 'text/html' },
      });
    const wrong = createGitHubClient({
      apiUrl: 'https://ghe.example.com',
      repository,
      credentials: { token },
      fetch: html,
    });
    const err = await failure(() => wrong.findPullRequest('errand/e'));
    assert.equal(err.transient, false);
    assert.match(err.message, /unexpected response.*check the API URL/);
  });

  test('no request the fake did not expect was sent', () => {
    gh.assertNoUnexpected();
  });
});

describe('GitHub App errors', () => {
  let gh: FakeGitHub;
  before(async () => {
    gh = await startFakeGitHub({
      repos: ['octo/hello'],
      app: { appId: '42', installationId: '7', publicKey: keys.publicKey },
    });
  });
  after(() => gh.close());

  const jwts = () =>
    gh.requests
      .map((r) => String(r.headers.authorization ?? '').replace(/^bearer /i, ''))
      .filter((t) => t.split('.').length === 3);

  test('a JWT signed with the wrong key: 401 naming the app credentials, nothing secret', async () => {
    const client = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: {
        githubApp: { appId: '42', installationId: '7', privateKey: otherKeys.privateKey },
      },
    });
    const err = await failure(() => client.createPullRequest(input));
    assert.match(
      err.message,
      /GitHub refused the GitHub App's credentials \(401\): check the app id and private key/,
    );
    assert.equal(err.transient, false);
    const sent = jwts();
    assert.ok(sent.length > 0);
    assertNoSecret(err, [...sent, otherKeys.privateKey]);
    for (const line of otherKeys.privateKey
      .split('\n')
      .filter((l) => l.length > 20 && !l.startsWith('-----'))) {
      assert.equal(renderings(err).includes(line), false);
    }
  });

  test('an unknown installation: 404 naming the installation id', async () => {
    const client = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: { githubApp: { appId: '42', installationId: '8', privateKey: keys.privateKey } },
    });
    const err = await failure(() => client.gitAuth());
    assert.match(err.message, /GitHub App installation 8 not found/);
    assert.equal(err.transient, false);
    assertNoSecret(err, jwts());
  });

  test('errors after the exchange never quote the installation token', async () => {
    const client = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: { githubApp: { appId: '42', installationId: '7', privateKey: keys.privateKey } },
    });
    await client.findPullRequest('errand/e');
    gh.failNext(403);
    const err = await failure(() => client.createPullRequest(input));
    assert.match(
      err.message,
      /the GitHub App needs the 'Pull requests: write' and 'Contents: write'/,
    );
    const minted = gh.installationTokens.map((t) => t.token);
    assert.ok(minted.length > 0);
    assertNoSecret(err, [...minted, ...jwts()]);

    gh.failNext(502);
    const transient = await failure(() => client.findPullRequest('errand/e'));
    assert.equal(transient.transient, true);
    assertNoSecret(transient, [...minted, ...jwts()]);
  });

  test('a token exchange that keeps failing on the server is transient', async () => {
    const client = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: { githubApp: { appId: '42', installationId: '7', privateKey: keys.privateKey } },
    });
    gh.failNext(500);
    const err = await failure(() => client.findPullRequest('errand/e'));
    assert.equal(err.transient, true);
    assert.match(err.message, /create a GitHub App installation token/);
  });

  test('a key that is not a PEM RSA key, without quoting it', async () => {
    const garbage =
      '-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbC10aGF0LW11c3Qtbm90LWxlYWs=\n-----END RSA PRIVATE KEY-----';
    const client = createGitHubClient({
      apiUrl: gh.apiUrl,
      repository,
      credentials: { githubApp: { appId: '42', installationId: '7', privateKey: garbage } },
    });
    const err = await failure(() => client.findPullRequest('errand/e'));
    assert.match(err.message, /private key is not a PEM RSA private key/);
    assert.equal(err.transient, false);
    assertNoSecret(err, ['c2VjcmV0LWtleS1tYXRlcmlhbC10aGF0LW11c3Qtbm90LWxlYWs']);
  });

  test('no request the fake did not expect was sent', () => {
    gh.assertNoUnexpected();
  });
});

describe('configuration errors', () => {
  test('refused at creation, not transient, without echoing credentials', () => {
    const cases: [Parameters<typeof createGitHubClient>[0], RegExp][] = [
      [{ apiUrl: 'https://api.github.com', repository, credentials: {} }, /No GitHub credentials/],
      [
        {
          apiUrl: 'https://api.github.com',
          repository: 'https://x:ghp_inurl@github.com/o/r',
          credentials: { token },
        },
        /not a GitHub repository URL/,
      ],
      [
        {
          apiUrl: 'https://api.github.com',
          repository: 'https://github.com/o',
          credentials: { token },
        },
        /not a GitHub repository URL/,
      ],
      [
        { apiUrl: 'ftp://api.github.com', repository, credentials: { token } },
        /API URL must be an http\(s\) URL/,
      ],
      [
        {
          apiUrl: 'https://api.github.com',
          repository,
          credentials: { githubApp: { appId: '42', installationId: 'abc', privateKey: 'k' } },
        },
        /installation id must be a positive number/,
      ],
      [
        {
          apiUrl: 'https://api.github.com',
          repository,
          credentials: { githubApp: { appId: 'x y', installationId: '7', privateKey: 'k' } },
        },
        /App id/,
      ],
    ];
    for (const [options, message] of cases) {
      assert.throws(
        () => createGitHubClient(options),
        (err: unknown) => {
          assert.ok(err instanceof ForgeError);
          assert.match(err.message, message);
          assert.equal(err.transient, false);
          assertNoSecret(err, [token, 'ghp_inurl']);
          return true;
        },
      );
    }
  });
});

describe('rateLimitWait', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  test('reads the headers GitHub sends', () => {
    assert.equal(rateLimitWait(403, { 'retry-after': '5' }, '', now), 5);
    assert.equal(
      rateLimitWait(429, { 'retry-after': 'Wed, 01 Jan 2025 00:00:09 GMT' }, '', now),
      9,
    );
    assert.equal(
      rateLimitWait(
        403,
        { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(now / 1000 + 42) },
        '',
        now,
      ),
      42,
    );
    assert.equal(
      rateLimitWait(
        403,
        { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(now / 1000 - 5) },
        '',
        now,
      ),
      1,
    );
    assert.equal(
      rateLimitWait(403, { 'x-ratelimit-remaining': '10' }, 'Resource not accessible', now),
      undefined,
    );
    assert.equal(rateLimitWait(500, { 'retry-after': '5' }, '', now), undefined);
  });
});
