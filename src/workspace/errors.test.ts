import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ExternalError } from '../errors.ts';
import { headerSecrets } from '../secrets/scrub.ts';
import { classifyGitFailure, GitError, makeScrubber, stderrSummary } from './errors.ts';

// Real stderr texts of git 2.39 (and ssh) for each kind of failure.
const STDERR: ReadonlyArray<readonly [string, string, boolean]> = [
  [
    "fatal: unable to access 'https://nope.invalid/a.git/': Could not resolve host: nope.invalid",
    'network',
    true,
  ],
  [
    "fatal: unable to access 'http://127.0.0.1:9/a.git/': Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server",
    'network',
    true,
  ],
  ['ssh: connect to host example.com port 22: Connection timed out', 'network', true],
  ['ssh: Could not resolve hostname nope.invalid: Name or service not known', 'network', true],
  ['error: RPC failed; HTTP 502 curl 22 The requested URL returned error: 502', 'server', true],
  [
    "fatal: unable to access 'https://h/a.git/': The requested URL returned error: 503",
    'server',
    true,
  ],
  [
    "fatal: unable to access 'https://h/a.git/': The requested URL returned error: 429",
    'server',
    true,
  ],
  ['fatal: early EOF\nfatal: index-pack failed', 'network', true],
  [
    "fatal: could not read Username for 'https://github.com': terminal prompts disabled",
    'auth',
    false,
  ],
  [
    "remote: Invalid username or password.\nfatal: Authentication failed for 'https://h/a.git/'",
    'auth',
    false,
  ],
  [
    "fatal: unable to access 'https://h/a.git/': The requested URL returned error: 403",
    'auth',
    false,
  ],
  [
    'git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.',
    'auth',
    false,
  ],
  [
    "remote: Repository not found.\nfatal: repository 'https://h/a.git/' not found",
    'not_found',
    false,
  ],
  [
    "fatal: unable to access 'https://h/a.git/': The requested URL returned error: 404",
    'not_found',
    false,
  ],
  ["fatal: '/srv/nope.git' does not appear to be a git repository", 'not_found', false],
  [
    "fatal: unable to access 'https://h/a.git/': The requested URL returned error: 301",
    'failed',
    false,
  ],
  ["fatal: transport 'ext' not allowed", 'invalid_input', false],
  [
    " ! [rejected]        HEAD -> errand/1 (fetch first)\nerror: failed to push some refs to 'x'",
    'diverged',
    false,
  ],
  ['!\tHEAD:refs/heads/errand/1\t[rejected] (non-fast-forward)', 'diverged', false],
  ['fatal: something nobody has seen before', 'failed', false],
];

for (const [stderr, code, transient] of STDERR) {
  test(`classifyGitFailure: ${stderr.slice(0, 70)} -> ${code}`, () => {
    const result = classifyGitFailure(stderr);
    assert.equal(result.code, code);
    assert.equal(result.transient, transient);
  });
}

test('GitError is an ExternalError of service "git" with its classification', () => {
  const err = new GitError('network', 'fetch failed', {
    transient: true,
    stderr: 'x',
    exitCode: 128,
  });
  assert.ok(err instanceof ExternalError);
  assert.equal(err.service, 'git');
  assert.equal(err.name, 'GitError');
  assert.equal(err.transient, true);
  assert.equal(err.exitCode, 128);
});

test('headerSecrets: the line, the value, the bare credential and, for Basic, user:token and the token', () => {
  const credential = Buffer.from('x-access-token:ghs_installation0123').toString('base64');
  assert.deepEqual(headerSecrets(`Authorization: Basic ${credential}`), [
    `Authorization: Basic ${credential}`,
    `Basic ${credential}`,
    credential,
    'x-access-token:ghs_installation0123',
    'ghs_installation0123',
  ]);
  assert.deepEqual(headerSecrets('Authorization: Bearer glpat-0123456789'), [
    'Authorization: Bearer glpat-0123456789',
    'Bearer glpat-0123456789',
    'glpat-0123456789',
  ]);
  // A header without a scheme: its value is the credential.
  assert.deepEqual(headerSecrets('PRIVATE-TOKEN: glpat-abcdef'), [
    'PRIVATE-TOKEN: glpat-abcdef',
    'glpat-abcdef',
  ]);
  // Basic is matched whatever its case; the decoded password is kept even without a user.
  const bare = Buffer.from(':t0ken-only').toString('base64');
  assert.deepEqual(headerSecrets(`authorization: basic ${bare}`).slice(-2), [
    ':t0ken-only',
    't0ken-only',
  ]);
  // Longest first, so scrubbing in order never leaves part of a longer form behind.
  const forms = headerSecrets(`Authorization: Basic ${credential}`);
  assert.deepEqual(
    forms,
    [...forms].sort((a, b) => b.length - a.length),
  );
});

test('makeScrubber removes the header, its value, the token and decoded basic credentials', () => {
  const bearer = makeScrubber({
    urlPrefix: 'https://h/',
    header: 'Authorization: Bearer s3cr3t-t0ken',
  });
  const text =
    'sent Authorization: Bearer s3cr3t-t0ken\nthen s3cr3t-t0ken alone\nBearer s3cr3t-t0ken';
  const scrubbed = bearer(text);
  assert.ok(!scrubbed.includes('s3cr3t-t0ken'), scrubbed);
  assert.match(scrubbed, /then \*\*\* alone/);

  const basicValue = Buffer.from('x-access-token:ghp_abcdefgh').toString('base64');
  const basic = makeScrubber({
    urlPrefix: 'https://h/',
    header: `Authorization: Basic ${basicValue}`,
  });
  const out = basic(`${basicValue} and ghp_abcdefgh and x-access-token:ghp_abcdefgh`);
  assert.ok(!out.includes('ghp_abcdefgh') && !out.includes(basicValue), out);

  const none = makeScrubber(undefined);
  assert.equal(
    none("fatal: unable to access 'https://me:pw@h/a.git/'"),
    "fatal: unable to access 'https://***@h/a.git/'",
  );
  assert.equal(none('> Authorization: Bearer zzz'), '> Authorization: ***');
});

test('stderrSummary keeps the last error lines and drops hints and progress', () => {
  const stderr = [
    'remote: Counting objects: 100% (3/3)',
    'hint: Updates were rejected because the tip of your current branch is behind',
    "error: failed to push some refs to 'x'",
    'fatal: the remote end hung up unexpectedly',
  ].join('\n');
  assert.equal(
    stderrSummary(stderr),
    "error: failed to push some refs to 'x' | fatal: the remote end hung up unexpectedly",
  );
  assert.ok(stderrSummary(`fatal: ${'x'.repeat(2000)}`).length <= 601);
});
