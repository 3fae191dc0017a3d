// The pull request watch's calls about a pull request against the fake GitHub on loopback: its
// status and approvals (every page of reviews), and the merge with GitHub's refusals.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { HEAD, OTHER, TOKEN, withPull } from '../../../test/support/github-pull.ts';
import { ForgeError } from '../types.ts';

/** The fake with one open pull request (#1, head `errand/job`) whose head is HEAD. */
const start = withPull();

describe('pull request status', () => {
  test('state, head, base, mergeability and labels as GitHub says them', async () => {
    const { gh, client } = await start();
    const status = await client.pullRequestStatus(1);
    assert.deepEqual(status, {
      number: 1,
      url: `${gh.url}/octo/hello/pull/1`,
      state: 'open',
      mergedAt: null,
      headSha: HEAD,
      base: 'main',
      mergeable: true,
      labels: [],
      draft: false,
      approved: false,
    });
    gh.setMergeable('octo/hello', 1, null);
    gh.addPullLabel('octo/hello', 1, 'no-errand');
    const later = await client.pullRequestStatus(1);
    assert.equal(later.mergeable, null);
    assert.deepEqual(later.labels, ['no-errand']);
    gh.setMergeable('octo/hello', 1, false);
    assert.equal((await client.pullRequestStatus(1)).mergeable, false);
    gh.merge('octo/hello', 1);
    const merged = await client.pullRequestStatus(1);
    assert.equal(merged.state, 'merged');
    assert.match(merged.mergedAt ?? '', /^\d{4}-\d\d-\d\dT/);
  });

  test("approved: each reviewer's latest approval or change request counts", async () => {
    const { gh, client } = await start();
    const approved = async () => (await client.pullRequestStatus(1)).approved;
    gh.review('octo/hello', 1, 'carol', 'COMMENTED');
    assert.equal(await approved(), false, 'a comment approves nothing');
    gh.approve('octo/hello', 1, 'alice');
    assert.equal(await approved(), true);
    gh.review('octo/hello', 1, 'alice', 'COMMENTED');
    assert.equal(await approved(), true, 'a later comment keeps the approval');
    gh.review('octo/hello', 1, 'bob', 'CHANGES_REQUESTED');
    assert.equal(await approved(), false, 'a change request stands against it');
    gh.review('octo/hello', 1, 'bob', 'DISMISSED');
    assert.equal(await approved(), false, 'a dismissed review changes nothing');
    gh.approve('octo/hello', 1, 'bob');
    assert.equal(await approved(), true, "bob's latest is now an approval");
  });

  test('reads every page of reviews', async () => {
    const { gh, client } = await start();
    for (let i = 0; i < 130; i++) gh.approve('octo/hello', 1, `reviewer${i}`);
    gh.review('octo/hello', 1, 'last', 'CHANGES_REQUESTED');
    assert.equal((await client.pullRequestStatus(1)).approved, false);
    const pages = gh.requests.filter((r) => r.operation === 'pulls/list-reviews');
    assert.deepEqual(
      pages.map((r) => r.query.page),
      ['1', '2'],
    );
  });

  test('an unknown pull request is a ForgeError naming it', async () => {
    const { client } = await start();
    await assert.rejects(
      client.pullRequestStatus(9),
      (err: unknown) => err instanceof ForgeError && err.status === 404 && /#9/.test(err.message),
    );
  });
});

describe('merge', () => {
  test('merges the head with the method asked, once', async () => {
    const { gh, client } = await start();
    const outcome = await client.mergePullRequest(1, { method: 'squash', sha: HEAD });
    assert.equal(outcome.merged, true);
    assert.ok(outcome.merged && typeof outcome.sha === 'string');
    assert.deepEqual(gh.merges(), [{ repo: 'octo/hello', number: 1, method: 'squash', sha: HEAD }]);
    assert.equal((await client.pullRequestStatus(1)).state, 'merged');
    assert.deepEqual(await client.mergePullRequest(1, { method: 'squash', sha: HEAD }), {
      merged: false,
      reason: 'Pull Request is not mergeable',
    });
    assert.equal(gh.merges().length, 1);
  });

  test("refusals are outcomes in GitHub's words: moved head, conflict, branch protection", async () => {
    const { gh, client } = await start();
    assert.deepEqual(await client.mergePullRequest(1, { method: 'merge', sha: OTHER }), {
      merged: false,
      reason: 'Head branch was modified. Review and try the merge again.',
    });
    gh.setMergeable('octo/hello', 1, false);
    assert.deepEqual(await client.mergePullRequest(1, { method: 'merge', sha: HEAD }), {
      merged: false,
      reason: 'Pull Request is not mergeable',
    });
    gh.setMergeable('octo/hello', 1, true);
    gh.blockMerges(
      'octo/hello',
      'At least 1 approving review is required by reviewers with write access.',
    );
    assert.deepEqual(await client.mergePullRequest(1, { method: 'rebase', sha: HEAD }), {
      merged: false,
      reason: 'At least 1 approving review is required by reviewers with write access.',
    });
    gh.failNext(422, { message: 'Merge commits are not allowed on this repository.' });
    assert.deepEqual(await client.mergePullRequest(1, { method: 'merge', sha: HEAD }), {
      merged: false,
      reason: 'Merge commits are not allowed on this repository.',
    });
    assert.deepEqual(gh.merges(), []);
    gh.blockMerges('octo/hello', null);
    assert.equal((await client.mergePullRequest(1, { method: 'rebase', sha: HEAD })).merged, true);
  });

  test('GitHub failing is an error, not a refusal', async () => {
    const { gh, client } = await start();
    gh.failNext(502);
    await assert.rejects(
      client.mergePullRequest(1, { method: 'merge', sha: HEAD }),
      (err: unknown) => err instanceof ForgeError && err.transient && err.status === 502,
    );
    gh.failNext(403);
    await assert.rejects(
      client.mergePullRequest(1, { method: 'merge', sha: HEAD }),
      (err: unknown) => err instanceof ForgeError && !err.transient && !err.message.includes(TOKEN),
    );
    assert.deepEqual(gh.merges(), []);
  });
});
