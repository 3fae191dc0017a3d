// GitHub's deliveries read into ForgeEvents: the signature check over the body's bytes, and
// each event Errand reads in GitHub's payload shape, with the actions and cases it leaves.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, test } from 'node:test';
import { githubPayloads } from './github.ts';
import { MalformedPayloadError } from './shared.ts';

const SECRET = 'a-webhook-secret-of-github';
const repository = { id: 1, full_name: 'acme/app', html_url: 'https://github.com/acme/app' };
const user = (login: string, type = 'User') => ({ login, id: 11, type, site_admin: false });
const pull = {
  number: 7,
  title: 'Add the parser',
  body: null,
  html_url: 'https://github.com/acme/app/pull/7',
  state: 'open',
};
const headers = (event: string) => ({ 'x-github-event': event, 'x-github-delivery': 'd-1' });
const sign = (body: Buffer, secret = SECRET) =>
  `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

describe('GitHub webhook payloads', () => {
  test('the signature: good, wrong secret, changed body, missing, not sha256', () => {
    const body = Buffer.from('{"zen":"Keep it logically awesome."}');
    const verify = (signature: string | undefined, bytes = body) =>
      githubPayloads.verifySignature(
        signature === undefined ? {} : { 'x-hub-signature-256': signature },
        bytes,
        SECRET,
      );
    assert.equal(verify(sign(body)), true);
    assert.equal(verify(sign(body).toUpperCase().replace('SHA256=', 'sha256=')), true);
    assert.equal(verify(sign(body, 'another-secret')), false);
    assert.equal(verify(sign(body), Buffer.from('{"zen":"Keep it logically awesome!"}')), false);
    assert.equal(verify(undefined), false);
    assert.equal(verify(''), false);
    assert.equal(verify(sign(body).replace('sha256=', 'sha1=')), false);
  });

  test('an issue comment, on an issue and on a pull request', () => {
    const payload = (pr: boolean) => ({
      action: 'created',
      issue: {
        number: 3,
        title: 'Crash',
        body: 'It crashes',
        html_url: `https://github.com/acme/app/${pr ? 'pull' : 'issues'}/3`,
        ...(pr ? { pull_request: { url: 'u', html_url: 'h', merged_at: null } } : {}),
      },
      comment: {
        id: 99,
        body: '@errand fix it',
        html_url: 'https://github.com/acme/app/issues/3#issuecomment-99',
        user: user('octo'),
      },
      repository,
      sender: user('octo'),
    });
    for (const pr of [false, true]) {
      const [event, ...rest] = githubPayloads.readEvents(headers('issue_comment'), payload(pr));
      assert.equal(rest.length, 0);
      assert.deepEqual(event, {
        forge: 'github',
        deliveryId: 'd-1',
        key: 'github:issue-comment:99',
        type: 'comment',
        where: 'conversation',
        repositoryUrl: 'https://github.com/acme/app',
        author: { login: 'octo', id: '11', bot: false },
        thread: {
          kind: pr ? 'pull-request' : 'issue',
          number: 3,
          title: 'Crash',
          body: 'It crashes',
          url: `https://github.com/acme/app/${pr ? 'pull' : 'issues'}/3`,
        },
        commentId: '99',
        discussionId: null,
        body: '@errand fix it',
        url: 'https://github.com/acme/app/issues/3#issuecomment-99',
        anchor: null,
      });
    }
    const edited = { ...payload(false), action: 'edited' };
    assert.deepEqual(githubPayloads.readEvents(headers('issue_comment'), edited), []);
    const byBot = payload(true);
    byBot.comment.user = user('errand-app[bot]', 'Bot');
    assert.equal(githubPayloads.readEvents(headers('issue_comment'), byBot)[0]?.author.bot, true);
  });

  test('a review comment on a line, and one that is outdated', () => {
    const comment = {
      id: 5,
      body: '@errand rename',
      html_url: 'https://github.com/acme/app/pull/7#discussion_r5',
      user: user('octo'),
      path: 'src/a.ts',
      line: 12 as number | null,
      original_line: 10,
      diff_hunk: '@@ -1,2 +1,3 @@\n a\n+b',
      side: 'RIGHT',
    };
    const read = () =>
      githubPayloads.readEvents(headers('pull_request_review_comment'), {
        action: 'created',
        comment,
        pull_request: pull,
        repository,
        sender: user('octo'),
      })[0];
    const event = read();
    assert.ok(event?.type === 'comment');
    assert.equal(event.where, 'line');
    // Review comments are numbered apart from issue comments: a kind of their own in the key.
    assert.equal(event.key, 'github:review-comment:5');
    assert.deepEqual(event.anchor, { path: 'src/a.ts', line: 12, diffHunk: comment.diff_hunk });
    assert.equal(event.thread.kind, 'pull-request');
    assert.equal(event.thread.body, '');
    comment.line = null;
    const outdated = read();
    assert.ok(outdated?.type === 'comment');
    assert.equal(outdated.anchor?.line, 10);
  });

  test('a review with a body; one without is nothing to read', () => {
    const payload = (body: string | null, action = 'submitted') => ({
      action,
      review: {
        id: 8,
        body,
        html_url: 'https://github.com/acme/app/pull/7#pullrequestreview-8',
        user: user('octo'),
        state: 'commented',
      },
      pull_request: pull,
      repository,
      sender: user('octo'),
    });
    const [event] = githubPayloads.readEvents(headers('pull_request_review'), payload('@errand x'));
    assert.ok(event?.type === 'comment');
    assert.equal(event.where, 'review');
    assert.equal(event.commentId, '8');
    assert.equal(event.key, 'github:review:8');
    assert.deepEqual(githubPayloads.readEvents(headers('pull_request_review'), payload(null)), []);
    assert.deepEqual(
      githubPayloads.readEvents(headers('pull_request_review'), payload('x', 'dismissed')),
      [],
    );
  });

  test('an issue labeled; other issue actions are nothing to read', () => {
    const payload = (
      action: string,
      label?: { name: string },
      updatedAt = '2025-05-01T10:00:00Z',
    ) => ({
      action,
      issue: {
        id: 4004,
        number: 4,
        title: 'T',
        body: 'B',
        html_url: 'https://github.com/acme/app/issues/4',
        updated_at: updatedAt,
      },
      ...(label ? { label } : {}),
      repository,
      sender: user('maintainer'),
    });
    const [event] = githubPayloads.readEvents(
      headers('issues'),
      payload('labeled', { name: 'errand' }),
    );
    assert.ok(event?.type === 'labeled');
    assert.equal(event.label, 'errand');
    assert.equal(event.added, true);
    assert.equal(event.author.login, 'maintainer');
    assert.equal(event.thread.kind, 'issue');
    // The issue, the label and the issue's time of change: the label added again later is
    // another event; a label whose name has a colon cannot pass for another time.
    assert.equal(event.key, 'github:label:4004:errand:2025-05-01T10%3A00%3A00Z');
    const later = githubPayloads.readEvents(
      headers('issues'),
      payload('labeled', { name: 'errand' }, '2025-05-02T08:00:00Z'),
    )[0];
    assert.notEqual(later?.key, event.key);
    assert.deepEqual(githubPayloads.readEvents(headers('issues'), payload('opened')), []);
    assert.throws(
      () => githubPayloads.readEvents(headers('issues'), payload('labeled')),
      MalformedPayloadError,
    );
  });

  test('ping, unknown events and a missing delivery id', () => {
    assert.deepEqual(githubPayloads.readEvents(headers('ping'), { zen: 'z', hook_id: 1 }), []);
    assert.deepEqual(githubPayloads.readEvents(headers('push'), { ref: 'refs/heads/main' }), []);
    const body = {
      action: 'created',
      issue: { number: 3, title: 'T', body: null, html_url: 'h' },
      comment: { id: 1, body: 'b', html_url: 'h', user: user('o') },
      repository,
    };
    const [event] = githubPayloads.readEvents({ 'x-github-event': 'issue_comment' }, body);
    assert.match(event?.deliveryId ?? '', /^sha256:[0-9a-f]{64}$/);
    // The key is what the forge signed, whatever the delivery id says.
    const other = githubPayloads.readEvents(
      { 'x-github-event': 'issue_comment', 'x-github-delivery': 'another-id' },
      body,
    )[0];
    assert.equal(other?.key, event?.key);
  });

  test('a payload that is not GitHub’s shape names what is wrong', () => {
    assert.throws(
      () => githubPayloads.readEvents(headers('issue_comment'), { action: 'created', issue: {} }),
      (err: unknown) =>
        err instanceof MalformedPayloadError &&
        /issue_comment delivery .*issue\.number/.test(err.message),
    );
  });
});

describe('GitHub signals for the pull request watch', () => {
  const SHA = 'abc1230000000000000000000000000000000def';
  const pullRef = (number: number) => ({
    url: `https://api.github.com/repos/acme/app/pulls/${number}`,
    id: 500 + number,
    number,
    head: { ref: 'errand/j1', sha: SHA, repo: { id: 1, url: 'u', name: 'app' } },
    base: { ref: 'main', sha: 'b', repo: { id: 1, url: 'u', name: 'app' } },
  });
  const suite = (branch: string | null, pulls: number[]) => ({
    id: 77,
    head_branch: branch,
    head_sha: SHA,
    status: 'completed',
    conclusion: 'failure',
    pull_requests: pulls.map(pullRef),
  });
  const signal = (event: string, body: unknown) => githubPayloads.readSignal(headers(event), body);
  const checks = (numbers: number[], branches: string[]) => ({
    forge: 'github',
    deliveryId: 'd-1',
    repositoryUrl: 'https://github.com/acme/app',
    kind: 'checks',
    numbers,
    branches,
    sha: SHA,
  });

  test('a check run, a check suite and a workflow run name their commit, branch and pull requests', () => {
    const checkRun = {
      action: 'completed',
      check_run: {
        id: 9,
        name: 'test',
        head_sha: SHA,
        status: 'completed',
        conclusion: 'failure',
        check_suite: suite('errand/j1', [7]),
        pull_requests: [pullRef(7), pullRef(7)],
      },
      repository,
      sender: user('github-actions[bot]', 'Bot'),
    };
    assert.deepEqual(signal('check_run', checkRun), checks([7], ['errand/j1']));
    // Created or requested too: the watch asks the API what holds.
    assert.deepEqual(
      signal('check_run', { ...checkRun, action: 'created' }),
      checks([7], ['errand/j1']),
    );
    assert.deepEqual(
      signal('check_suite', {
        action: 'completed',
        check_suite: suite('errand/j1', [7, 8]),
        repository,
      }),
      checks([7, 8], ['errand/j1']),
    );
    // A fork's commit: no branch here, no pull request named.
    assert.deepEqual(
      signal('workflow_run', {
        action: 'completed',
        workflow: { id: 1 },
        workflow_run: { ...suite(null, []), name: 'CI', run_number: 3 },
        repository,
      }),
      checks([], []),
    );
  });

  test('a commit status names its commit and the branches that contain it', () => {
    const status = {
      id: 1,
      sha: SHA,
      name: 'acme/app',
      context: 'ci/ext',
      state: 'failure',
      description: 'Tests failed',
      target_url: 'https://ci.example.com/1',
      branches: [
        { name: 'errand/j1', commit: { sha: SHA, url: 'u' }, protected: false },
        { name: 'main', commit: { sha: 'other', url: 'u' }, protected: true },
      ],
      repository,
      sender: user('ci-bot', 'Bot'),
    };
    assert.deepEqual(signal('status', status), checks([], ['errand/j1', 'main']));
  });

  test('a pull request closed, reopened, pushed to or labelled, and a review', () => {
    const pr = {
      ...pull,
      merged: false,
      head: { ref: 'errand/j1', sha: SHA, label: 'acme:errand/j1' },
      base: { ref: 'main', sha: 'b', label: 'acme:main' },
    };
    const expected = {
      forge: 'github',
      deliveryId: 'd-1',
      repositoryUrl: 'https://github.com/acme/app',
      kind: 'pull-request',
      numbers: [7],
      branches: ['errand/j1'],
      sha: SHA,
    };
    for (const action of ['closed', 'reopened', 'synchronize', 'labeled', 'unlabeled']) {
      const body = { action, number: 7, pull_request: pr, repository, sender: user('octo') };
      assert.deepEqual(signal('pull_request', body), expected, action);
      // Nothing for the comment and label readers: a pull request's label is no issue label.
      assert.deepEqual(githubPayloads.readEvents(headers('pull_request'), body), [], action);
    }
    for (const action of ['opened', 'edited', 'assigned', 'review_requested']) {
      const body = { action, number: 7, pull_request: pr, repository, sender: user('octo') };
      assert.equal(signal('pull_request', body), null, action);
    }
    const review = (action: string, body: string | null) => ({
      action,
      review: {
        id: 8,
        body,
        html_url: 'https://github.com/acme/app/pull/7#pullrequestreview-8',
        user: user('octo'),
        state: 'approved',
      },
      pull_request: pr,
      repository,
      sender: user('octo'),
    });
    assert.deepEqual(signal('pull_request_review', review('submitted', null)), expected);
    assert.deepEqual(signal('pull_request_review', review('dismissed', null)), expected);
    assert.equal(signal('pull_request_review', review('edited', null)), null);
    // An approval without a body is no comment to answer.
    assert.deepEqual(
      githubPayloads.readEvents(headers('pull_request_review'), review('submitted', null)),
      [],
    );
  });

  test('the check events are no comment or label, and the comment events no signal', () => {
    const checkSuite = { action: 'completed', check_suite: suite('errand/j1', [7]), repository };
    for (const event of ['check_suite', 'check_run', 'workflow_run', 'status']) {
      assert.deepEqual(githubPayloads.readEvents(headers(event), checkSuite), [], event);
    }
    assert.equal(signal('issue_comment', { action: 'created' }), null);
    assert.equal(signal('issues', { action: 'labeled' }), null);
    assert.equal(signal('push', { ref: 'refs/heads/main' }), null);
    assert.equal(signal('ping', { zen: 'z' }), null);
    assert.equal(signal('star', { action: 'created' }), null);
  });

  test('a check or pull request payload that is not GitHub’s shape names what is wrong', () => {
    assert.throws(
      () => signal('check_run', { action: 'completed', check_run: { id: 1 }, repository }),
      (err: unknown) =>
        err instanceof MalformedPayloadError &&
        /check_run delivery .*check_run\.head_sha/.test(err.message),
    );
    assert.throws(
      () => signal('status', { sha: SHA, repository }),
      (err: unknown) => err instanceof MalformedPayloadError && /branches/.test(err.message),
    );
    assert.throws(
      () => signal('pull_request', { action: 'closed', pull_request: { number: 7 }, repository }),
      (err: unknown) =>
        err instanceof MalformedPayloadError && /pull_request\.head/.test(err.message),
    );
  });

  test('the webhook form lists the events the watch needs', () => {
    for (const event of [
      'Check runs',
      'Check suites',
      'Workflow runs',
      'Statuses',
      'Pull requests',
      'Pull request reviews',
    ]) {
      assert.ok(githubPayloads.webhookEvents.includes(event), event);
    }
  });
});
