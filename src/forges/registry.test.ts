// The forge providers, the registry and the checkout read repository URLs through one parser.
// These are the addresses on which the four parsers that came before it disagreed: each row
// says what every reader now concludes, so a reader drifting from the others fails here.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { inferForgeKind } from '../projects/forge.ts';
import { validateRepositoryUrl } from '../repository/url.ts';
import { parseRepository } from './github/repository.ts';
import { readForgeRepository } from './http.ts';

function githubHost(url: string): string | undefined {
  try {
    return parseRepository(url).host;
  } catch {
    return undefined;
  }
}

describe('one reading of a repository URL', () => {
  test('an scp-like address without a user names its host for every reader', () => {
    // The registry's own pattern wanted `user@`, so this GitHub remote was a plain git remote.
    const url = 'github.com:acme/app.git';
    assert.deepEqual(validateRepositoryUrl(url, false), { ok: true, kind: 'scp' });
    assert.equal(inferForgeKind(url), 'github');
    assert.equal(readForgeRepository(url)?.host, 'github.com');
    // GitHub's ssh side knows only the git user: still refused by the GitHub provider.
    assert.equal(githubHost(url), undefined);
  });

  test('a backslash in the authority is refused by every reader', () => {
    // URL reads `\` as `/` (host github.com); curl reads `github.com\` as a user name and
    // connects to evil.example: the token's host and git's host would differ.
    const url = 'https://github.com\\@evil.example/acme/app.git';
    assert.equal(new URL(url).hostname, 'github.com');
    const check = validateRepositoryUrl(url, false);
    assert.equal(check.ok, false);
    assert.match(check.ok ? '' : check.reason, /backslash/);
    assert.equal(inferForgeKind(url), 'git');
    assert.equal(readForgeRepository(url), undefined);
    assert.equal(githubHost(url), undefined);
  });

  test('percent-encoded dot segments are refused, not resolved to another repository', () => {
    // URL resolves `%2e%2e` (github.com/acme/app), git sends it as written.
    const url = 'https://github.com/other/%2e%2e/acme/app.git';
    assert.equal(new URL(url).pathname, '/acme/app.git');
    const check = validateRepositoryUrl(url, false);
    assert.equal(check.ok, false);
    assert.match(check.ok ? '' : check.reason, /"\." or "\.\." path segments/);
    assert.equal(githubHost(url), undefined);
    assert.equal(readForgeRepository(url), undefined);
    assert.equal(validateRepositoryUrl('https://github.com/acme/../app.git', false).ok, false);
    assert.equal(validateRepositoryUrl('git@github.com:acme/./app.git', false).ok, false);
  });

  test('an IPv6 scp-like address is read by the forges as the checkout reads it', () => {
    const url = 'git@[::1]:owner/repo.git';
    assert.deepEqual(validateRepositoryUrl(url, false), { ok: true, kind: 'scp' });
    assert.deepEqual(readForgeRepository(url)?.host, '[::1]');
    assert.equal(inferForgeKind(url), 'git');
  });

  test('a host URL would rewrite (non-ASCII, percent-encoded, short IPv4) is refused, not translated', () => {
    for (const url of [
      'https://gith%75b.com/acme/app',
      'https://bücher.example/acme/app',
      'http://127.1/acme/app',
      'https://0x7f.0.0.1/acme/app',
    ]) {
      const check = validateRepositoryUrl(url, true);
      assert.equal(check.ok, false, url);
      assert.match(check.ok ? '' : check.reason, /written as git will use it/, url);
      assert.equal(inferForgeKind(url), 'git', url);
      assert.equal(githubHost(url), undefined, url);
    }
  });

  test('the default https port is no part of the host for any forge', () => {
    const url = 'https://github.com:443/acme/app.git';
    assert.equal(githubHost(url), 'github.com');
    assert.equal(readForgeRepository(url)?.host, 'github.com');
    assert.equal(inferForgeKind(url), 'github');
    assert.equal(
      readForgeRepository('https://gitlab.example.com:8443/g/p')?.host,
      'gitlab.example.com:8443',
    );
  });

  test('the public forges are inferred from every spelling of their address', () => {
    for (const [url, kind] of [
      ['https://github.com/acme/app', 'github'],
      ['ssh://git@github.com:22/acme/app.git', 'github'],
      ['git@GitHub.com:acme/app.git', 'github'],
      ['https://gitlab.com/group/sub/app', 'gitlab'],
      ['git@gitlab.com:group/app.git', 'gitlab'],
      ['https://git.example.com/acme/app', 'git'],
      ['/srv/git/app.git', 'git'],
      ['file:///srv/git/app.git', 'git'],
      ['not a url', 'git'],
    ] as const) {
      assert.equal(inferForgeKind(url), kind, url);
    }
  });
});
