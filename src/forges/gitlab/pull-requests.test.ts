// The GitLab client's pull request watch calls against the fake GitLab: a merge request's
// status and approvals, the checks of a commit, a job trace's tail, and the merge with GitLab's
// refusals; and the errors that stay errors.
import assert from 'node:assert/strict';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import { inspect } from 'node:util';
import {
  FAKE_GITLAB_HEAD,
  type FakeGitLab,
  startFakeGitLab,
} from '../../../test/support/fake-gitlab.ts';
import { ForgeError } from '../types.ts';
import { provider } from './index.ts';

const TOKEN = 'glpat-SECRET-token-0123456789';
const PROJECT = 'group/sub/project';
const HEAD = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
const heads = new Map<string, string>([['errand/job-1', HEAD]]);

const fake: FakeGitLab = await startFakeGitLab({
  token: TOKEN,
  projects: [PROJECT],
  heads: (repo, branch) => (repo === PROJECT ? heads.get(branch) : undefined),
});
after(() => fake.close());
beforeEach(() => fake.reset());
afterEach(() => fake.assertNoUnexpected());

function client(fetch?: typeof globalThis.fetch) {
  return provider.create({
    apiUrl: fake.apiUrl,
    repository: `${fake.url}/${PROJECT}.git`,
    credentials: { token: TOKEN },
    ...(fetch ? { fetch } : {}),
  });
}

const open = (extra: Parameters<FakeGitLab['addMergeRequest']>[1] | object = {}) =>
  fake.addMergeRequest(PROJECT, { sourceBranch: 'errand/job-1', ...extra });

function assertNoToken(text: string): void {
  assert.ok(!text.includes(TOKEN), `token leaked into: ${text}`);
}

async function forgeError(promise: Promise<unknown>): Promise<ForgeError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof ForgeError, `expected a ForgeError, got ${inspect(err)}`);
    assertNoToken(inspect(err, { depth: 10 }));
    return err;
  }
  assert.fail('expected the call to fail');
}

describe('GitLab: a merge request as the watch reads it', () => {
  it('says its state, head, base, labels, mergeability and approval', async () => {
    const mr = open();
    fake.addPullLabel(PROJECT, mr.iid, 'no-errand');
    const gl = client();
    assert.deepEqual(await gl.pullRequestStatus(mr.iid), {
      number: 1,
      url: `${fake.url}/${PROJECT}/-/merge_requests/1`,
      state: 'open',
      mergedAt: null,
      headSha: HEAD,
      base: 'main',
      mergeable: true,
      labels: ['no-errand'],
      draft: false,
      approved: false,
    });
    fake.approve(PROJECT, mr.iid, 'reviewer');
    assert.equal((await gl.pullRequestStatus(mr.iid)).approved, true);
    fake.setMergeable(PROJECT, mr.iid, null);
    assert.equal((await gl.pullRequestStatus(mr.iid)).mergeable, null);
    fake.setMergeable(PROJECT, mr.iid, false);
    assert.equal((await gl.pullRequestStatus(mr.iid)).mergeable, false);
    const calls = fake.requests.map((r) => `${r.method} ${r.path}`);
    assert.ok(calls.includes(`GET /api/v4/projects/${PROJECT}/merge_requests/1/approvals`));
  });

  it('a merged one says when; a closed one is closed; a head unknown falls back', async () => {
    const merged = open();
    fake.setState(PROJECT, merged.iid, 'merged');
    const status = await client().pullRequestStatus(merged.iid);
    assert.equal(status.state, 'merged');
    assert.match(status.mergedAt ?? '', /^\d{4}-\d\d-\d\dT/);
    const closed = fake.addMergeRequest(PROJECT, { sourceBranch: 'other', state: 'closed' });
    const read = await client().pullRequestStatus(closed.iid);
    assert.equal(read.state, 'closed');
    assert.equal(read.headSha, FAKE_GITLAB_HEAD);
  });

  it('an unknown merge request is a 404 ForgeError naming it', async () => {
    const err = await forgeError(client().pullRequestStatus(9));
    assert.equal(err.status, 404);
    assert.equal(err.transient, false);
    assert.match(err.message, /merge request !9/);
  });

  it('reads mergeability from GitLab versions before detailed_merge_status', async () => {
    const old = (mr: Record<string, unknown>) =>
      Response.json({
        iid: 3,
        web_url: 'https://gitlab.example.com/g/p/-/merge_requests/3',
        state: 'opened',
        sha: HEAD,
        target_branch: 'main',
        labels: [],
        ...mr,
      });
    for (const [fields, expected] of [
      [{ merge_status: 'unchecked' }, null],
      [{ merge_status: 'cannot_be_merged_recheck' }, null],
      [{ merge_status: 'cannot_be_merged' }, false],
      [{ merge_status: 'can_be_merged' }, true],
      [{ detailed_merge_status: 'need_rebase', merge_status: 'can_be_merged' }, false],
      [{ detailed_merge_status: 'not_approved', has_conflicts: false }, true],
      [{ detailed_merge_status: 'mergeable', has_conflicts: true }, false],
    ] as const) {
      const gl = client(async (input) =>
        String(input).endsWith('/approvals') ? Response.json({ approved: true }) : old(fields),
      );
      assert.equal((await gl.pullRequestStatus(3)).mergeable, expected, JSON.stringify(fields));
    }
  });
});

describe('GitLab: the checks of a commit', () => {
  it("the latest pipeline's jobs, each name at its latest run, and posted statuses", async () => {
    fake.setCheck(PROJECT, HEAD, { name: 'test', state: 'failure', log: 'boom' });
    fake.setCheck(PROJECT, HEAD, { name: 'lint', state: 'pending' });
    fake.setCheck(PROJECT, HEAD, { name: 'test', state: 'success' });
    fake.addStatus(PROJECT, HEAD, {
      name: 'ci/jenkins',
      state: 'failed',
      description: 'Build #12 failed',
      targetUrl: 'https://jenkins.example.com/job/12',
    });
    fake.setCheck(PROJECT, 'b'.repeat(40), { name: 'other-commit', state: 'failure' });
    const checks = await client().checks(HEAD);
    const byName = Object.fromEntries(checks.map((c) => [c.name, c]));
    assert.deepEqual(Object.keys(byName).sort(), ['ci/jenkins', 'lint', 'test']);
    assert.equal(byName.test?.state, 'success');
    assert.match(byName.test?.id ?? '', /^\d+$/);
    assert.equal(byName.test?.url, `${fake.url}/${PROJECT}/-/jobs/${byName.test?.id}`);
    assert.equal(byName.lint?.state, 'pending');
    assert.deepEqual(byName['ci/jenkins'], {
      id: byName['ci/jenkins']?.id,
      name: 'ci/jenkins',
      state: 'failure',
      url: 'https://jenkins.example.com/job/12',
      summary: 'Build #12 failed',
    });
    assert.match(byName['ci/jenkins']?.id ?? '', /^status:\d+$/);
  });

  it('a failed job says why; a commit without pipelines has no checks', async () => {
    fake.setCheck(PROJECT, HEAD, { name: 'test', state: 'failure' });
    const [check] = await client().checks(HEAD);
    assert.equal(check?.state, 'failure');
    assert.equal(check?.summary, 'script failure');
    assert.deepEqual(await client().checks('c'.repeat(40)), []);
  });

  it('reads every page of a long pipeline', async () => {
    for (let i = 0; i < 130; i++) {
      fake.setCheck(PROJECT, HEAD, { name: `job-${i}`, state: 'success' });
    }
    const checks = await client().checks(HEAD);
    assert.equal(checks.length, 130);
    const pages = fake.requests
      .filter((r) => r.path.endsWith('/jobs'))
      .map((r) => [r.query.page, r.query.per_page]);
    assert.deepEqual(pages, [
      ['1', '100'],
      ['2', '100'],
    ]);
  });

  it('maps GitLab job states: allowed failures and optional manual jobs fail nothing', async () => {
    const job = (id: number, status: string, allow_failure = false) => ({
      id,
      name: `${status}${allow_failure ? '-allowed' : ''}`,
      status,
      allow_failure,
      web_url: `https://gitlab.example.com/g/p/-/jobs/${id}`,
    });
    const jobs = [
      job(1, 'success'),
      job(2, 'skipped'),
      job(3, 'failed'),
      job(4, 'failed', true),
      job(5, 'canceled'),
      job(6, 'manual', true),
      job(7, 'manual'),
      job(8, 'running'),
      job(9, 'waiting_for_resource'),
    ];
    const gl = client(async (input) => {
      const url = new URL(String(input));
      if (url.pathname.endsWith('/pipelines')) {
        return Response.json([{ id: 5, status: 'running', source: 'push' }]);
      }
      if (url.pathname.endsWith('/jobs')) return Response.json(jobs);
      return Response.json([]);
    });
    const states = Object.fromEntries((await gl.checks(HEAD)).map((c) => [c.name, c.state]));
    assert.deepEqual(states, {
      success: 'success',
      skipped: 'success',
      failed: 'failure',
      'failed-allowed': 'success',
      canceled: 'failure',
      'manual-allowed': 'success',
      manual: 'pending',
      running: 'pending',
      waiting_for_resource: 'pending',
    });
  });

  it("leaves the jobs among the commit's statuses, and those of an older pipeline", async () => {
    const gl = client(async (input) => {
      const url = new URL(String(input));
      if (url.pathname.endsWith('/pipelines')) {
        return Response.json([
          { id: 30, status: 'success', source: 'merge_request_event' },
          { id: 20, status: 'failed', source: 'push' },
          { id: 10, status: 'success', source: 'external' },
        ]);
      }
      if (url.pathname.endsWith('/pipelines/30/jobs')) {
        return Response.json([{ id: 301, name: 'test', status: 'success' }]);
      }
      const status = (id: number, name: string, pipeline_id: number, status = 'failed') => ({
        id,
        name,
        status,
        pipeline_id,
        target_url: null,
        description: null,
      });
      return Response.json([
        status(301, 'test', 30, 'success'),
        status(201, 'branch-only', 20),
        status(302, 'security/scan', 30, 'success'),
        status(101, 'ci/jenkins', 10),
      ]);
    });
    const names = (await gl.checks(HEAD)).map((c) => c.name).sort();
    assert.deepEqual(names, ['ci/jenkins', 'security/scan', 'test']);
  });
});

describe('GitLab: a check log', () => {
  it("is the end of the job's trace, cut at a line start, without colours", async () => {
    const lines = Array.from({ length: 2000 }, (_, i) => `\u001b[32mline ${i} é\u001b[0m`);
    const log = `section_start:1700000000:step_script\r\u001b[0K${lines.join('\n')}\n`;
    fake.setCheck(PROJECT, HEAD, { name: 'test', state: 'failure', log });
    const [check] = await client().checks(HEAD);
    assert.ok(check);
    const tail = await client().checkLog(check, 200);
    assert.ok(Buffer.byteLength(tail) <= 200);
    assert.match(tail, /^line \d+ é\n/);
    assert.ok(tail.endsWith('line 1999 é\n'));
    assert.ok(!tail.includes('\u001b'));
    const whole = await client().checkLog(check, 1_000_000);
    assert.ok(whole.startsWith('line 0 é\n'));
    const trace = fake.requests.find((r) => r.path.endsWith('/trace'));
    assert.equal(trace?.path, `/api/v4/projects/${PROJECT}/jobs/${check.id}/trace`);
  });

  it('of a posted status is its description and link, as GitLab keeps no log of it', async () => {
    const log = await client().checkLog(
      {
        id: 'status:5',
        name: 'ci/jenkins',
        state: 'failure',
        url: 'https://jenkins.example.com/job/12',
        summary: 'Build #12 failed',
      },
      1000,
    );
    assert.equal(log, 'Build #12 failed\nhttps://jenkins.example.com/job/12');
    assert.equal(fake.requests.length, 0);
  });

  it('a trace GitLab redirects is not followed (the token would go along)', async () => {
    fake.setCheck(PROJECT, HEAD, { name: 'test', state: 'failure', log: 'x' });
    const [check] = await client().checks(HEAD);
    assert.ok(check);
    fake.failNext(302, { location: 'https://storage.example.com/trace?sig=1' });
    const err = await forgeError(client().checkLog(check, 100));
    assert.equal(err.status, 302);
  });

  it('a missing job is a 404 ForgeError; a failing GitLab a transient one', async () => {
    const check = { id: '999', name: 'x', state: 'failure' as const, url: null, summary: null };
    const missing = await forgeError(client().checkLog(check, 100));
    assert.equal(missing.status, 404);
    assert.match(missing.message, /job 999/);
    fake.failNext(503);
    const down = await forgeError(client().checkLog(check, 100));
    assert.equal(down.transient, true);
  });
});

describe('GitLab: the merge', () => {
  it('merges at the head it was given, squashing when asked', async () => {
    const mr = open();
    const outcome = await client().mergePullRequest(mr.iid, { method: 'squash', sha: HEAD });
    assert.equal(outcome.merged, true);
    assert.match(outcome.merged ? (outcome.sha ?? '') : '', /^[0-9a-f]{40}$/);
    assert.deepEqual(fake.merges(), [{ repo: PROJECT, number: 1, method: 'squash', sha: HEAD }]);
    const put = fake.requests.find((r) => r.method === 'PUT');
    assert.deepEqual(put?.body, { sha: HEAD, squash: true });
    const status = await client().pullRequestStatus(mr.iid);
    assert.equal(status.state, 'merged');
    assert.notEqual(status.mergedAt, null);
  });

  it("merge and rebase leave the merge method to the project's setting", async () => {
    for (const method of ['merge', 'rebase'] as const) {
      fake.reset();
      const mr = open();
      assert.equal((await client().mergePullRequest(mr.iid, { method, sha: HEAD })).merged, true);
      assert.deepEqual(fake.requests.find((r) => r.method === 'PUT')?.body, {
        sha: HEAD,
        squash: false,
      });
    }
  });

  it("GitLab's refusals are outcomes with GitLab's words, never errors", async () => {
    const gl = client();
    const mr = open();
    const moved = await gl.mergePullRequest(mr.iid, { method: 'merge', sha: 'b'.repeat(40) });
    assert.equal(moved.merged, false);
    assert.match(moved.merged ? '' : moved.reason, /\(409\).*SHA does not match HEAD/);

    fake.setMergeable(PROJECT, mr.iid, false);
    const conflict = await gl.mergePullRequest(mr.iid, { method: 'merge', sha: HEAD });
    assert.match(conflict.merged ? '' : conflict.reason, /\(422\).*Branch cannot be merged/);
    fake.setMergeable(PROJECT, mr.iid, true);

    fake.blockMerges(PROJECT, 'You are not allowed to merge into main');
    const blocked = await gl.mergePullRequest(mr.iid, { method: 'merge', sha: HEAD });
    assert.match(blocked.merged ? '' : blocked.reason, /\(401\).*not allowed to merge into main/);
    fake.blockMerges(PROJECT, null);

    const draft = fake.addMergeRequest(PROJECT, {
      sourceBranch: 'errand/job-1',
      title: 'Draft: x',
    });
    const notReady = await gl.mergePullRequest(draft.iid, { method: 'merge', sha: HEAD });
    assert.match(notReady.merged ? '' : notReady.reason, /\(405\).*merge check/);

    assert.equal((await gl.mergePullRequest(mr.iid, { method: 'merge', sha: HEAD })).merged, true);
    const again = await gl.mergePullRequest(mr.iid, { method: 'merge', sha: HEAD });
    assert.equal(again.merged, false);
    assert.deepEqual(fake.merges().length, 1);
  });

  it('a merge GitLab tried and failed is a refusal with its merge_error', async () => {
    const gl = client(async () =>
      Response.json({
        iid: 3,
        web_url: 'https://gitlab.example.com/g/p/-/merge_requests/3',
        state: 'opened',
        sha: HEAD,
        target_branch: 'main',
        merge_error: 'Merge failed: the pre-receive hook refused it',
      }),
    );
    const outcome = await gl.mergePullRequest(3, { method: 'merge', sha: HEAD });
    assert.deepEqual(outcome, {
      merged: false,
      reason: 'GitLab did not merge !3: Merge failed: the pre-receive hook refused it',
    });
  });

  it('a token without the api scope, a missing merge request, an outage stay errors', async () => {
    const mr = open();
    const ro = await startFakeGitLab({ token: TOKEN, projects: [PROJECT], access: 'read' });
    try {
      ro.addMergeRequest(PROJECT, { sourceBranch: 'errand/job-1' });
      const scoped = provider.create({
        apiUrl: ro.apiUrl,
        repository: `${ro.url}/${PROJECT}.git`,
        credentials: { token: TOKEN },
      });
      const err = await forgeError(scoped.mergePullRequest(1, { method: 'merge', sha: HEAD }));
      assert.equal(err.status, 403);
      assert.match(err.message, /api scope/);
    } finally {
      await ro.close();
    }
    const missing = await forgeError(client().mergePullRequest(9, { method: 'merge', sha: HEAD }));
    assert.equal(missing.status, 404);
    fake.failNext(502);
    const down = await forgeError(
      client().mergePullRequest(mr.iid, { method: 'merge', sha: HEAD }),
    );
    assert.equal(down.transient, true);
    assert.deepEqual(fake.merges(), []);
  });

  it('never puts the token in a refusal, even when GitLab echoes it', async () => {
    const mr = open();
    fake.blockMerges(PROJECT, `token ${TOKEN} may not merge`);
    const outcome = await client().mergePullRequest(mr.iid, { method: 'merge', sha: HEAD });
    assert.equal(outcome.merged, false);
    assertNoToken(outcome.merged ? '' : outcome.reason);
  });
});
