import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { GitError } from './errors.ts';
import { checkBranchName, checkId, checkSourceRef, isValidRefName, refCandidates } from './refs.ts';

function refused(check: () => void, pattern: RegExp): void {
  assert.throws(check, (err) => {
    assert.ok(err instanceof GitError);
    assert.equal(err.code, 'invalid_input');
    assert.equal(err.transient, false);
    assert.match(err.message, pattern);
    return true;
  });
}

test('branch names: git-valid short names pass, the rest is refused', () => {
  for (const ok of ['errand/job-1', 'errand/01JABCDEF', 'feature/x.y_z', 'main']) {
    checkBranchName(ok);
  }
  const bad: Array<readonly [string, RegExp]> = [
    ['-f', /must not start with "-"/],
    ['--force', /must not start with "-"/],
    ['errand/-x', /must not start with "-"/],
    ['errand/a b', /whitespace/],
    ['errand/a\nb', /whitespace|control/],
    ['errand/a\\b', /backslash/],
    ['errand/a..b', /not a valid git ref name/],
    ['errand/a.lock', /not a valid git ref name/],
    ['errand/a~1', /not a valid git ref name/],
    ['errand/a^', /not a valid git ref name/],
    ['errand/a:b', /not a valid git ref name/],
    ['errand/@{0}', /not a valid git ref name/],
    ['errand/', /not a valid git ref name/],
    ['refs/heads/x', /short branch name/],
    ['HEAD', /short branch name/],
    ['', /1-255 characters/],
    ['a'.repeat(300), /1-255 characters/],
  ];
  for (const [name, pattern] of bad) refused(() => checkBranchName(name), pattern);
});

test('source refs: branches, tags, full refs and commit ids pass', () => {
  for (const ok of [
    'main',
    'v1.2.3',
    'refs/heads/main',
    'refs/tags/v1',
    'deadbeef',
    'a'.repeat(40),
  ]) {
    checkSourceRef(ok);
  }
  refused(() => checkSourceRef('--upload-pack=x'), /must not start with "-"/);
  refused(() => checkSourceRef('main..evil'), /not a valid git ref name/);
  refused(() => checkSourceRef('HEAD'), /not HEAD/);
  refused(() => checkSourceRef('main@{1}'), /not a valid git ref name/);
});

test('refCandidates prefers branches, then tags, then a commit id', () => {
  assert.deepEqual(refCandidates('main'), ['refs/heads/main', 'refs/tags/main']);
  assert.deepEqual(refCandidates('refs/tags/v1'), ['refs/tags/v1']);
  assert.deepEqual(refCandidates('abc1234'), [
    'refs/heads/abc1234',
    'refs/tags/abc1234',
    'abc1234',
  ]);
});

test('ids that become folder names cannot climb out of their folder', () => {
  for (const ok of ['p1', '01JABC', 'job_1.2-3']) checkId('jobId', ok);
  for (const bad of ['', '..', '.', '../x', 'a/b', '.hidden', '-x', 'a b', 'x'.repeat(129)]) {
    assert.throws(() => checkId('jobId', bad), GitError, bad);
  }
});

test('ref names: every verdict is the one `git check-ref-format` gives', async () => {
  const run = promisify(execFile);
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1' };
  const gitAccepts = async (ref: string): Promise<boolean> => {
    try {
      await run('git', ['check-ref-format', ref], {
        env: { ...env, GIT_CONFIG_GLOBAL: '/dev/null' },
      });
      return true;
    } catch (err) {
      if ((err as { code?: unknown }).code === 1) return false;
      throw err;
    }
  };
  // Every short tail over the characters with a rule of their own, then single odd characters.
  const alphabet = ['a', '.', '/', '@', '{', '*', 'é'];
  let tails = [''];
  const names: string[] = [];
  for (let length = 1; length <= 3; length++) {
    tails = tails.flatMap((tail) => alphabet.map((c) => tail + c));
    names.push(...tails.map((tail) => `refs/heads/${tail}`));
  }
  for (const c of [' ', '\t', '\x01', '\x1f', '\x7f', '~', '^', ':', '?', '[', ']', '\\', '}']) {
    names.push(`refs/heads/a${c}b`, `refs/heads/${c}`);
  }
  names.push(
    '@',
    'refs',
    'refs/heads/a.lock',
    'refs/heads/a.lock/b',
    'refs/heads/a.locked',
    'refs/heads/.lock',
    'refs/heads/a.lo',
    'refs/heads/a/.b',
    'refs/heads/a./b',
    'refs/heads/-x',
    'refs/heads/x@',
    'refs/heads/@',
    '/refs/heads/a',
    'refs//heads',
    'refs/heads/errand/job_01JABCDEF',
    'refs/tags/v1.2.3',
    'refs/heads/€uro/日本',
  );
  const verdicts: string[] = [];
  for (let i = 0; i < names.length; i += 16) {
    const batch = names.slice(i, i + 16);
    const fromGit = await Promise.all(batch.map(gitAccepts));
    for (const [k, name] of batch.entries()) {
      if (isValidRefName(name) !== fromGit[k]) {
        verdicts.push(`${JSON.stringify(name)}: git says ${fromGit[k] ? 'valid' : 'invalid'}`);
      }
    }
  }
  assert.deepEqual(verdicts, []);
  // The corpus holds both kinds, so the comparison means something.
  assert.ok(names.some(isValidRefName) && !names.every(isValidRefName));
});
