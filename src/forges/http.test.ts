import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  errorDetail,
  normalizeApiUrl,
  pathBelowBase,
  rateLimitResetSeconds,
  readForgeRepository,
  retryAfterSeconds,
} from './http.ts';
import { ForgeError } from './types.ts';

describe('readForgeRepository', () => {
  it('reads the spellings git accepts, nested paths included', () => {
    const cases: Array<[string, string, string, string]> = [
      ['https://gitlab.com/group/sub/project.git', 'https', 'gitlab.com', 'group/sub/project'],
      ['https://GitLab.example.com:8443/g/p/', 'https', 'gitlab.example.com:8443', 'g/p'],
      ['http://127.0.0.1:3000/owner/repo', 'http', '127.0.0.1:3000', 'owner/repo'],
      ['ssh://git@gitea.example.com:2222/owner/repo.git', 'ssh', 'gitea.example.com', 'owner/repo'],
      ['ssh://gitea.example.com/owner/repo', 'ssh', 'gitea.example.com', 'owner/repo'],
      ['git@gitlab.com:group/sub/project.git', 'ssh', 'gitlab.com', 'group/sub/project'],
      ['gitlab.com:group/project', 'ssh', 'gitlab.com', 'group/project'],
    ];
    for (const [url, scheme, host, path] of cases) {
      const parsed = readForgeRepository(url);
      assert.deepEqual(
        parsed && [parsed.scheme, parsed.host, parsed.path],
        [scheme, host, path],
        url,
      );
      assert.deepEqual(parsed?.segments, path.split('/'));
    }
  });

  it('refuses credentials, queries, odd characters and other schemes', () => {
    for (const url of [
      'https://user:pw@gitlab.com/g/p',
      'https://user@gitlab.com/g/p',
      'ssh://git:pw@host/g/p',
      'https://gitlab.com/g/p?x=1',
      'https://gitlab.com/g/p#frag',
      'https://gitlab.com/g%2Fh/p',
      'https://gitlab.com/g//p',
      'https://gitlab.com/',
      'file:///srv/repo.git',
      'ext::sh -c touch% /tmp/x',
      'git://gitlab.com/g/p',
      '-oProxyCommand=x:g/p',
      '/srv/repo.git',
      '',
    ]) {
      assert.equal(readForgeRepository(url), undefined, url);
    }
  });
});

describe('API URLs', () => {
  it('completes and checks an API URL', () => {
    const api = (url: string) => normalizeApiUrl('gitlab', 'GitLab', url, '/api/v4').href;
    assert.equal(api('https://gitlab.example.com'), 'https://gitlab.example.com/api/v4');
    assert.equal(api('https://h/gitlab/'), 'https://h/gitlab/api/v4');
    assert.equal(api('https://h/gitlab/api/v4/'), 'https://h/gitlab/api/v4');
    for (const bad of [
      'gitlab.example.com',
      'ftp://h/api/v4',
      'https://u:p@h/api/v4',
      'https://h/api/v4?x',
    ]) {
      assert.throws(
        () => api(bad),
        (err) => err instanceof ForgeError && !err.transient,
        bad,
      );
    }
  });

  it('removes the sub-path a forge is installed under from the repository path', () => {
    const repo = readForgeRepository('https://h.example/gitlab/group/project.git');
    assert.ok(repo);
    const below = (api: string) => pathBelowBase(repo, new URL(api), '/api/v4');
    assert.deepEqual(below('https://h.example/gitlab/api/v4'), ['group', 'project']);
    assert.deepEqual(below('https://h.example/api/v4'), ['gitlab', 'group', 'project']);
    assert.deepEqual(below('https://other.example/gitlab/api/v4'), ['gitlab', 'group', 'project']);
  });
});

describe('waiting times', () => {
  const now = Date.parse('2025-06-01T12:00:00Z');
  it('reads Retry-After as seconds or an HTTP date', () => {
    assert.equal(retryAfterSeconds(new Headers({ 'retry-after': '120' }), now), 120);
    assert.equal(retryAfterSeconds(new Headers({ 'retry-after': '0' }), now), 0);
    const date = new Date(now + 42_000).toUTCString();
    assert.equal(retryAfterSeconds(new Headers({ 'retry-after': date }), now), 42);
    const past = new Date(now - 42_000).toUTCString();
    assert.equal(retryAfterSeconds(new Headers({ 'retry-after': past }), now), 0);
    assert.equal(retryAfterSeconds(new Headers({ 'retry-after': 'soon' }), now), undefined);
    assert.equal(retryAfterSeconds(new Headers(), now), undefined);
    assert.equal(retryAfterSeconds(new Headers({ 'retry-after': '99999999' }), now), 86_400);
  });

  it('reads RateLimit-Reset as a Unix time or as seconds', () => {
    const epoch = String(now / 1000 + 75);
    assert.equal(rateLimitResetSeconds(new Headers({ 'ratelimit-reset': epoch }), now), 75);
    assert.equal(rateLimitResetSeconds(new Headers({ 'ratelimit-reset': '30' }), now), 30);
    assert.equal(rateLimitResetSeconds(new Headers({ 'x-ratelimit-reset': epoch }), now), 75);
    assert.equal(rateLimitResetSeconds(new Headers(), now), undefined);
  });
});

describe('errorDetail', () => {
  it('reads the shapes GitLab and Gitea send', () => {
    assert.equal(errorDetail({ message: '404 Project Not Found' }), '404 Project Not Found');
    assert.equal(errorDetail({ message: ['a', 'b'] }), 'a; b');
    assert.equal(
      errorDetail({ message: { title: ["can't be blank"], base: ['is invalid'] } }),
      "title can't be blank; base is invalid",
    );
    assert.equal(
      errorDetail({ error: 'insufficient_scope', error_description: 'needs api' }),
      'insufficient_scope; needs api',
    );
    assert.equal(errorDetail({ message: 'not found', url: 'https://h/api/swagger' }), 'not found');
    assert.equal(errorDetail('<html>'), '');
    assert.equal(errorDetail({ message: 'x'.repeat(500) }).length, 301);
  });
});
