// The pull request watch's calls on Gitea and Forgejo against the fake: the pull request's
// status with its reviews, the commit statuses as checks, their "log", and the merge, whose
// refusals are outcomes and whose failures are ForgeErrors without the token.
import assert from 'node:assert/strict';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { inspect } from 'node:util';
import { type FakeGitea, startFakeGitea } from '../../../test/support/fake-gitea.ts';
import { type CheckResult, ForgeError } from '../types.ts';
import { provider } from './index.ts';
import { checkState } from './pull-requests.ts';

const TOKEN = '0123456789abcdef0123456789abcdef01234567';
const REPO = 'acme/widgets';
const HEAD = 'c0ffee0000000000000000000000000000000001';
const heads = new Map<string, string>([['errand/job-1', HEAD]]);

const fake: FakeGitea = await startFakeGitea({
  token: TOKEN,
  repos: [REPO],
  heads: (repo, branch) => (repo === REPO ? heads.get(branch) : undefined),
});
after(() => fake.close());
beforeEach(() => {
  fake.reset();
  heads.set('errand/job-1', HEAD);
});
afterEach(() => fake.assertNoUnexpected());

const client = (token = TOKEN) =>
  provider.create({
    apiUrl: fake.apiUrl,
    repository: `${fake.url}/${REPO}.git`,
    credentials: { token },
  });

const openPull = (extra: { title?: string } = {}) =>
  fake.addPull(REPO, { head: 'errand/job-1', title: 'Fix the form', ...extra }).number;

async function forgeError(promise: Promise<unknown>): Promise<ForgeError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof ForgeError, `expected a ForgeError, got ${inspect(err)}`);
    for (const text of [err.message, String(err.cause), inspect(err, { depth: 10 })]) {
      assert.ok(!text.includes(TOKEN), `token leaked into: ${text}`);
    }
    return err;
  }
  assert.fail('expected the call to fail');
}

describe('Gitea: a pull request’s status', () => {
  it('reads state, head, base, labels and mergeability', async () => {
    const number = openPull();
    fake.addPullLabel(REPO, number, 'no-errand');
    const status = await client().pullRequestStatus(number);
    assert.deepEqual(status, {
      number,
      url: `${fake.url}/${REPO}/pulls/${number}`,
      state: 'open',
      mergedAt: null,
      headSha: HEAD,
      base: 'main',
      mergeable: true,
      labels: ['no-errand'],
      draft: false,
      approved: false,
    });
    // The head moves with the branch.
    heads.set('errand/job-1', 'c0ffee0000000000000000000000000000000002');
    assert.equal(
      (await client().pullRequestStatus(number)).headSha,
      'c0ffee0000000000000000000000000000000002',
    );
  });

  it('a conflict is not mergeable; a draft’s mergeability is unknown (Gitea says false)', async () => {
    const number = openPull();
    fake.setMergeable(REPO, number, false);
    assert.equal((await client().pullRequestStatus(number)).mergeable, false);
    const draft = fake.addPull(REPO, { head: 'errand/job-2', title: 'WIP: Fix' }).number;
    assert.equal((await client().pullRequestStatus(draft)).mergeable, null);
  });

  it('merged and closed', async () => {
    const number = openPull();
    fake.setState(REPO, number, 'merged');
    const merged = await client().pullRequestStatus(number);
    assert.equal(merged.state, 'merged');
    assert.match(merged.mergedAt ?? '', /^2025-01-01T/);
    assert.equal(merged.mergeable, null);
    const other = fake.addPull(REPO, { head: 'errand/job-3' }).number;
    fake.setState(REPO, other, 'closed');
    const closed = await client().pullRequestStatus(other);
    assert.equal(closed.state, 'closed');
    assert.equal(closed.mergedAt, null);
  });

  it('approved: each reviewer’s latest verdict counts, comments and dismissed reviews do not', async () => {
    const number = openPull();
    const approved = async () => (await client().pullRequestStatus(number)).approved;
    fake.addReview(REPO, number, { login: 'ann', state: 'COMMENT' });
    assert.equal(await approved(), false);
    fake.approve(REPO, number, 'ann');
    assert.equal(await approved(), true);
    fake.addReview(REPO, number, { login: 'ann', state: 'COMMENT' });
    assert.equal(await approved(), true, 'a later comment leaves the approval standing');
    fake.addReview(REPO, number, { login: 'bob', state: 'REQUEST_CHANGES' });
    assert.equal(await approved(), false, 'changes asked by another reviewer');
    fake.approve(REPO, number, 'bob');
    assert.equal(await approved(), true, 'the one who asked approves now');
    fake.addReview(REPO, number, { login: 'cy', state: 'REQUEST_CHANGES', dismissed: true });
    assert.equal(await approved(), true, 'a dismissed review is gone');
    fake.addReview(REPO, number, { login: 'ann', state: 'REQUEST_CHANGES' });
    assert.equal(await approved(), false, 'ann changed her mind');
  });

  it('reads every page of reviews', async () => {
    const number = openPull();
    for (let i = 0; i < 60; i++) fake.addReview(REPO, number, { login: `u${i}`, state: 'COMMENT' });
    fake.addReview(REPO, number, { login: 'late', state: 'APPROVED' });
    assert.equal((await client().pullRequestStatus(number)).approved, true);
    const pages = fake.requests.filter((r) => r.path.endsWith('/reviews'));
    assert.deepEqual(
      pages.map((r) => r.query.page),
      ['1', '2'],
    );
  });

  it('a pull request that is not there is a ForgeError naming it', async () => {
    const err = await forgeError(client().pullRequestStatus(9));
    assert.equal(err.status, 404);
    assert.equal(err.transient, false);
    assert.match(err.message, /pull request #9 not found in acme\/widgets/);
  });
});

describe('Gitea: checks and their logs', () => {
  it('each context at its latest status, in Errand’s states, with absolute links', async () => {
    fake.setCheck(REPO, HEAD, { name: 'ci / test (push)', state: 'pending' });
    fake.setCheck(REPO, HEAD, {
      name: 'ci / test (push)',
      state: 'failure',
      summary: 'Failing after 41s',
    });
    fake.setCheck(REPO, HEAD, { name: 'lint', state: 'warning' });
    fake.setCheck(REPO, HEAD, { name: 'deploy', state: 'error', url: 'https://ci.example/7' });
    fake.setCheck(REPO, HEAD, { name: 'docs', state: 'pending', url: 'javascript:alert(1)' });
    fake.setCheck(REPO, 'another', { name: 'other', state: 'success' });
    const checks = await client().checks(HEAD);
    const failing = fake.statuses(REPO, HEAD)[1];
    assert.deepEqual(checks, [
      {
        id: 'ci / test (push)',
        name: 'ci / test (push)',
        state: 'failure',
        url: `${fake.url}/${REPO}/actions/runs/${failing?.id}/jobs/0`,
        summary: 'Failing after 41s',
      },
      {
        id: 'deploy',
        name: 'deploy',
        state: 'failure',
        url: 'https://ci.example/7',
        summary: 'Has been cancelled',
      },
      { id: 'docs', name: 'docs', state: 'pending', url: null, summary: 'Waiting to run' },
      {
        id: 'lint',
        name: 'lint',
        state: 'success',
        url: `${fake.url}/${REPO}/actions/runs/${fake.statuses(REPO, HEAD)[2]?.id}/jobs/0`,
        summary: 'Successful in 3s, with warnings',
      },
    ]);
    // A new run of a context replaces the last one.
    fake.setCheck(REPO, HEAD, { name: 'ci / test (push)', state: 'success' });
    const again = await client().checks(HEAD);
    assert.equal(again.find((c) => c.name === 'ci / test (push)')?.state, 'success');
  });

  it('reads every page of statuses; none is an empty list', async () => {
    assert.deepEqual(await client().checks(HEAD), []);
    for (let i = 0; i < 70; i++) fake.setCheck(REPO, HEAD, { name: 'ci', state: 'pending' });
    fake.setCheck(REPO, HEAD, { name: 'first', state: 'failure' });
    fake.requests.length = 0;
    const checks = await client().checks(HEAD);
    assert.deepEqual(
      checks.map((c) => [c.name, c.state]),
      [
        ['ci', 'pending'],
        ['first', 'failure'],
      ],
    );
    assert.deepEqual(
      fake.requests.map((r) => r.query.page),
      ['1', '2'],
    );
  });

  it('the states Gitea has, and ones it may add', () => {
    assert.equal(checkState('success'), 'success');
    assert.equal(checkState('warning'), 'success');
    assert.equal(checkState('skipped'), 'success');
    assert.equal(checkState('failure'), 'failure');
    assert.equal(checkState('error'), 'failure');
    assert.equal(checkState('pending'), 'pending');
    assert.equal(checkState('queued'), 'pending');
  });

  it('the log is the description and the link, its tail bounded', async () => {
    const check: CheckResult = {
      id: 'ci',
      name: 'ci',
      state: 'failure',
      url: 'https://git.example.com/acme/widgets/actions/runs/4/jobs/0',
      summary: 'Failing after 41s',
    };
    const gt = client();
    assert.equal(
      await gt.checkLog(check, 4096),
      'Failing after 41s\nDetails: https://git.example.com/acme/widgets/actions/runs/4/jobs/0',
    );
    // Cut at a line start: the description goes, the link stays.
    assert.equal(
      await gt.checkLog(check, 80),
      'Details: https://git.example.com/acme/widgets/actions/runs/4/jobs/0',
    );
    assert.equal(await gt.checkLog({ ...check, summary: null, url: null }, 100), '');
    // It asks Gitea nothing: there is no log to fetch.
    assert.equal(fake.requests.length, 0);
  });
});

describe('Gitea: merging', () => {
  it('merges with the method and the head, and says into which commit', async () => {
    const number = openPull();
    const outcome = await client().mergePullRequest(number, { method: 'squash', sha: HEAD });
    assert.equal(outcome.merged, true);
    assert.ok(outcome.merged && /^[0-9a-f]{40}$/.test(outcome.sha ?? ''));
    assert.deepEqual(fake.merges(), [{ repo: REPO, number, method: 'squash', sha: HEAD }]);
    const request = fake.requests.find((r) => r.method === 'POST');
    assert.deepEqual(request?.body, { Do: 'squash', head_commit_id: HEAD });
    const status = await client().pullRequestStatus(number);
    assert.equal(status.state, 'merged');
    assert.ok(status.mergedAt);
  });

  it('each method is Gitea’s style of the same name', async () => {
    for (const method of ['merge', 'rebase'] as const) {
      fake.reset();
      const number = openPull();
      assert.equal((await client().mergePullRequest(number, { method, sha: HEAD })).merged, true);
      assert.equal(fake.merges()[0]?.method, method);
    }
  });

  it('refusals are outcomes in Gitea’s words: head moved, protection, conflict, draft, merged, closed', async () => {
    const gt = client();
    const refused = async (number: number, sha = HEAD) => {
      const outcome = await gt.mergePullRequest(number, { method: 'merge', sha });
      assert.ok(!outcome.merged, 'expected a refusal');
      assert.ok(!outcome.reason.includes(TOKEN));
      return outcome.reason;
    };
    const number = openPull();
    assert.match(await refused(number, 'f'.repeat(40)), /409.*Gitea said: "head out of date"/);
    fake.blockMerges(
      REPO,
      'not allowed to merge [reason: Not all required status checks successful.]',
    );
    assert.match(await refused(number), /405.*Not all required status checks successful/);
    fake.blockMerges(REPO, null);
    fake.setMergeable(REPO, number, false);
    assert.match(await refused(number), /405.*Please try again later/);
    fake.setMergeable(REPO, number, null);
    assert.match(await refused(number), /405/);
    const draft = fake.addPull(REPO, { head: 'errand/job-2', title: 'WIP: x' }).number;
    assert.match(await refused(draft), /Work in progress PRs cannot be merged/);
    const merged = fake.addPull(REPO, { head: 'errand/job-3' }).number;
    fake.setState(REPO, merged, 'merged');
    assert.equal(await refused(merged), 'the pull request is merged already');
    const closed = fake.addPull(REPO, { head: 'errand/job-4' }).number;
    fake.setState(REPO, closed, 'closed');
    assert.equal(await refused(closed), 'the pull request is closed');
    assert.deepEqual(fake.merges(), []);
  });

  it('failures are ForgeErrors: a missing pull request, a read-only token, Gitea down', async () => {
    const missing = await forgeError(client().mergePullRequest(5, { method: 'merge', sha: HEAD }));
    assert.equal(missing.status, 404);
    const number = openPull();
    const readOnly = await startFakeGitea({ token: TOKEN, repos: [REPO], access: 'read' });
    try {
      readOnly.addPull(REPO, { head: 'errand/job-1' });
      const ro = provider.create({
        apiUrl: readOnly.apiUrl,
        repository: `${readOnly.url}/${REPO}.git`,
        credentials: { token: TOKEN },
      });
      const err = await forgeError(ro.mergePullRequest(1, { method: 'merge', sha: HEAD }));
      assert.equal(err.status, 403);
      assert.equal(err.transient, false);
      assert.match(err.message, /write:repository/);
    } finally {
      await readOnly.close();
    }
    fake.failNext(502);
    const down = await forgeError(
      client().mergePullRequest(number, { method: 'merge', sha: HEAD }),
    );
    assert.equal(down.transient, true);
    fake.failNext(401);
    const token = await forgeError(client().checks(HEAD));
    assert.equal(token.transient, false);
  });

  it('a merge done stays done when its commit cannot be read afterwards', async () => {
    const number = openPull();
    let merged = false;
    const gt = provider.create({
      apiUrl: fake.apiUrl,
      repository: `${fake.url}/${REPO}.git`,
      credentials: { token: TOKEN },
      // Gitea goes away right after it merged.
      fetch: async (input, init) => {
        if (merged) throw new TypeError('fetch failed');
        const response = await fetch(input, init);
        merged = init?.method === 'POST';
        return response;
      },
    });
    assert.deepEqual(await gt.mergePullRequest(number, { method: 'merge', sha: HEAD }), {
      merged: true,
      sha: null,
    });
    assert.equal(fake.merges().length, 1);
  });
});
