import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { makeTempDir, removeDir, testConfig } from '../../test/support/git.ts';
import { GitError } from './errors.ts';
import { checkBranchName, checkId, checkSourceRef, refCandidates } from './refs.ts';

let root: string;
before(async () => {
  root = await makeTempDir('refs');
});
after(() => removeDir(root));

async function refused(check: Promise<void>, pattern: RegExp): Promise<void> {
  await assert.rejects(check, (err) => {
    assert.ok(err instanceof GitError);
    assert.equal(err.code, 'invalid_input');
    assert.equal(err.transient, false);
    assert.match(err.message, pattern);
    return true;
  });
}

test('branch names: git-valid short names pass, the rest is refused', async () => {
  const cfg = testConfig(root);
  for (const ok of ['errand/job-1', 'errand/01JABCDEF', 'feature/x.y_z', 'main']) {
    await checkBranchName(cfg, ok);
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
  for (const [name, pattern] of bad) await refused(checkBranchName(cfg, name), pattern);
});

test('source refs: branches, tags, full refs and commit ids pass', async () => {
  const cfg = testConfig(root);
  for (const ok of [
    'main',
    'v1.2.3',
    'refs/heads/main',
    'refs/tags/v1',
    'deadbeef',
    'a'.repeat(40),
  ]) {
    await checkSourceRef(cfg, ok);
  }
  await refused(checkSourceRef(cfg, '--upload-pack=x'), /must not start with "-"/);
  await refused(checkSourceRef(cfg, 'main..evil'), /not a valid git ref name/);
  await refused(checkSourceRef(cfg, 'HEAD'), /not HEAD/);
  await refused(checkSourceRef(cfg, 'main@{1}'), /not a valid git ref name/);
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
