import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  displayUrl,
  isLoopbackHost,
  parseRepositoryUrl,
  repositoryAsUrl,
  validateRepositoryUrl,
} from './url.ts';

type Row = readonly [url: string, allowLocal: boolean, expected: string];

// expected: the accepted kind, or "refused: <part of the reason>".
const ROWS: readonly Row[] = [
  ['https://github.com/acme/app.git', false, 'https'],
  ['https://github.com/acme/app', false, 'https'],
  ['HTTPS://gitlab.example.com:8443/group/sub/app.git', false, 'https'],
  ['https://[2001:db8::1]/acme/app.git', false, 'https'],
  ['ssh://git@github.com/acme/app.git', false, 'ssh'],
  ['ssh://github.com:2222/acme/app.git', false, 'ssh'],
  ['git+ssh://git@host/acme/app.git', false, 'ssh'],
  ['ssh://[::1]/repo.git', false, 'ssh'],
  ['git@github.com:acme/app.git', false, 'scp'],
  ['github.com:acme/app.git', false, 'scp'],
  ['git@[::1]:acme/app.git', false, 'scp'],
  ['/srv/git/app.git', true, 'local'],
  ['./relative/app', true, 'local'],
  ['app.git', true, 'local'],
  ['file:///srv/git/app.git', true, 'local'],
  ['http://127.0.0.1:8080/app.git', true, 'http'],
  ['http://localhost/app.git', true, 'http'],
  ['http://[::1]:9000/app.git', true, 'http'],
  // refused
  ['', true, 'refused: empty'],
  ['/srv/git/app.git', false, 'refused: local repositories are disabled'],
  ['./relative/app', false, 'refused: local repositories are disabled'],
  ['file:///srv/git/app.git', false, 'refused: local repositories are disabled'],
  ['FILE:///srv/git/app.git', false, 'refused: local repositories are disabled'],
  ['http://github.com/acme/app.git', false, 'refused: unencrypted'],
  ['http://github.com/acme/app.git', true, 'refused: unencrypted'],
  ['http://127.0.0.1/app.git', false, 'refused: unencrypted'],
  ['http://localhost:3000/app.git', false, 'refused: ERRAND_ALLOW_LOCAL_REPOS=true'],
  ['https://user:secret@github.com/acme/app.git', false, 'refused: credentials'],
  ['https://token@github.com/acme/app.git', false, 'refused: credentials'],
  ['ssh://git:secret@host/app.git', false, 'refused: password'],
  ['ext::sh -c touch% /tmp/pwned', true, 'refused: whitespace'],
  ['ext::sh', true, 'refused: remote helper'],
  ['fd::17', true, 'refused: remote helper'],
  ['foo::https://github.com/acme/app', true, 'refused: remote helper'],
  ['--upload-pack=touch /tmp/pwned', true, 'refused: whitespace'],
  ['--upload-pack=id', true, 'refused: must not start with "-"'],
  ['-oProxyCommand=id', true, 'refused: must not start with "-"'],
  ['ssh://-oProxyCommand=id/app.git', false, 'refused: must not be empty or start with "-"'],
  ['ssh://git@-oProxyCommand=id/app.git', false, 'refused: must not be empty or start with "-"'],
  ['-host:app.git', false, 'refused: must not start with "-"'],
  ['git@-host:app.git', false, 'refused: must not start with "-"'],
  ['host:', false, 'refused: no repository path'],
  ['https://github.com/acme/app.git\n', false, 'refused: control'],
  ['https://github.com/acme/a pp.git', false, 'refused: whitespace'],
  ['https://github.com/acme/app\u0000.git', false, 'refused: control'],
  ['https://github.com/acme/app\u202e.git', false, 'refused: control'],
  ['git://github.com/acme/app.git', false, 'refused: git://'],
  ['ftp://example.com/app.git', false, 'refused: unsupported URL scheme "ftp"'],
  ['javascript://alert(1)', false, 'refused: unsupported'],
  ['https://', false, 'refused: not a valid URL'],
  [`https://github.com/${'a'.repeat(3000)}`, false, 'refused: too long'],
];

describe('validateRepositoryUrl', () => {
  for (const [url, allowLocal, expected] of ROWS) {
    test(`${JSON.stringify(url.slice(0, 60))} allowLocal=${allowLocal} -> ${expected}`, () => {
      const result = validateRepositoryUrl(url, allowLocal);
      if (expected.startsWith('refused: ')) {
        assert.equal(result.ok, false, `expected refusal, got ${JSON.stringify(result)}`);
        if (!result.ok)
          assert.match(result.reason, new RegExp(escapeRegExp(expected.slice(9)), 'i'));
      } else {
        assert.deepEqual(result, { ok: true, kind: expected });
      }
    });
  }

  test('the reason for plain http says why and what to use instead', () => {
    const result = validateRepositoryUrl('http://example.com/app.git', false);
    assert.deepEqual(result, {
      ok: false,
      reason: 'plain http:// sends code and credentials unencrypted; use https://',
    });
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

test('displayUrl drops user info and query strings but keeps the rest', () => {
  assert.equal(
    displayUrl('https://user:tok@github.com/acme/app.git?private_token=abc'),
    'https://github.com/acme/app.git',
  );
  assert.equal(displayUrl('git@github.com:acme/app.git'), 'git@github.com:acme/app.git');
  assert.equal(displayUrl('/srv/git/app.git'), '/srv/git/app.git');
});

test('isLoopbackHost', () => {
  for (const host of ['localhost', '127.0.0.1', '127.1.2.3', '[::1]', '::1']) {
    assert.equal(isLoopbackHost(host), true, host);
  }
  for (const host of ['example.com', '10.0.0.1', '127.0.0.1.nip.io', 'localhost.evil.com']) {
    assert.equal(isLoopbackHost(host), false, host);
  }
});

test('parseRepositoryUrl reads host, port, user and path from the raw text', () => {
  const read = (url: string) => {
    const parsed = parseRepositoryUrl(url);
    assert.ok(parsed.ok, url);
    const { kind, hostname, port, user, hasPassword, hasQuery, path } = parsed.url;
    return [kind, hostname, port, user, hasPassword, hasQuery, path];
  };
  assert.deepEqual(read('HTTPS://GitHub.com:8443/Acme/App.git?x=1'), [
    'https',
    'github.com',
    '8443',
    undefined,
    false,
    true,
    '/Acme/App.git',
  ]);
  assert.deepEqual(read('ssh://git:pw@[::1]:2222/a/b'), [
    'ssh',
    '[::1]',
    '2222',
    'git',
    true,
    false,
    '/a/b',
  ]);
  assert.deepEqual(read('github.com:acme/app.git'), [
    'scp',
    'github.com',
    undefined,
    undefined,
    false,
    false,
    'acme/app.git',
  ]);
  assert.deepEqual(read('/srv/git/app.git'), [
    'local',
    '',
    undefined,
    undefined,
    false,
    false,
    '/srv/git/app.git',
  ]);
  for (const url of ['https://a.example\\@b.example/x/y', 'https://a.example/x/%2E%2e/y']) {
    assert.equal(parseRepositoryUrl(url).ok, false, url);
  }
});

test('repositoryAsUrl: a job record shows its repository as a URL in every case', () => {
  const cases: [string, string][] = [
    ['https://github.com/acme/app.git', 'https://github.com/acme/app.git'],
    ['ssh://git@gitlab.example.com:2222/g/app.git', 'ssh://git@gitlab.example.com:2222/g/app.git'],
    ['git@github.com:acme/app.git', 'ssh://git@github.com/acme/app.git'],
    ['deploy@git.example.com:/srv/git/app.git', 'ssh://deploy@git.example.com/srv/git/app.git'],
    ['/srv/repos/app', 'file:///srv/repos/app'],
    ['file:///srv/repos/app.git', 'file:///srv/repos/app.git'],
  ];
  for (const [stored, shown] of cases) assert.equal(repositoryAsUrl(stored), shown, stored);
});
