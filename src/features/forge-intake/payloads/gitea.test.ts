// Gitea's and Forgejo's deliveries read into ForgeEvents: the signature (X-Gitea-Signature or
// X-Forgejo-Signature), the event named by X-Gitea-Event-Type (or only its family, on old
// versions), comments, reviews and label updates in Gitea's payload shape.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, test } from 'node:test';
import { giteaPayloads } from './gitea.ts';
import { MalformedPayloadError } from './shared.ts';

const SECRET = 'a-webhook-secret-of-gitea';
const repository = { id: 1, full_name: 'acme/app', html_url: 'https://git.example.com/acme/app' };
const user = (login: string, id = 5) => ({ id, login, username: login });
const issue = (pull: boolean, labels: string[] = [], updatedAt = '2025-05-01T10:00:00+02:00') => ({
  id: 60,
  number: 3,
  updated_at: updatedAt,
  title: 'Crash',
  body: 'Steps',
  html_url: `https://git.example.com/acme/app/${pull ? 'pulls' : 'issues'}/3`,
  labels: labels.map((name, i) => ({ id: i, name })),
  pull_request: pull ? { merged: false, merged_at: null, html_url: 'h' } : null,
});
const commentPayload = (pull: boolean, author = user('reviewer')) => ({
  action: 'created',
  issue: issue(pull),
  comment: {
    id: 31,
    body: '@errand go',
    html_url: 'https://git.example.com/acme/app/issues/3#issuecomment-31',
    user: author,
  },
  repository,
  sender: author,
  is_pull: pull,
});
const headers = (family: string, type?: string) => ({
  'x-gitea-event': family,
  ...(type ? { 'x-gitea-event-type': type } : {}),
  'x-gitea-delivery': 'g-1',
});

describe('Gitea and Forgejo webhook payloads', () => {
  test('the signature: Gitea’s, Forgejo’s, wrong secret, changed body, missing', () => {
    const body = Buffer.from('{"action":"created"}');
    const hex = createHmac('sha256', SECRET).update(body).digest('hex');
    assert.equal(giteaPayloads.verifySignature({ 'x-gitea-signature': hex }, body, SECRET), true);
    assert.equal(giteaPayloads.verifySignature({ 'x-forgejo-signature': hex }, body, SECRET), true);
    assert.equal(
      giteaPayloads.verifySignature({ 'x-gitea-signature': hex }, body, 'other-secret'),
      false,
    );
    assert.equal(
      giteaPayloads.verifySignature(
        { 'x-gitea-signature': hex },
        Buffer.from('{"action":"edited"}'),
        SECRET,
      ),
      false,
    );
    assert.equal(giteaPayloads.verifySignature({}, body, SECRET), false);
  });

  test('a comment on an issue and on a pull request', () => {
    const [onIssue] = giteaPayloads.readEvents(
      headers('issue_comment', 'issue_comment'),
      commentPayload(false),
    );
    assert.deepEqual(onIssue, {
      forge: 'gitea',
      deliveryId: 'g-1',
      key: 'gitea:comment:31',
      type: 'comment',
      where: 'conversation',
      repositoryUrl: repository.html_url,
      author: { login: 'reviewer', id: '5', bot: false },
      thread: {
        kind: 'issue',
        number: 3,
        title: 'Crash',
        body: 'Steps',
        url: 'https://git.example.com/acme/app/issues/3',
      },
      commentId: '31',
      discussionId: null,
      body: '@errand go',
      url: 'https://git.example.com/acme/app/issues/3#issuecomment-31',
      anchor: null,
    });
    const [onPull] = giteaPayloads.readEvents(
      headers('issue_comment', 'pull_request_comment'),
      commentPayload(true),
    );
    assert.equal(onPull?.thread.kind, 'pull-request');
    const edited = { ...commentPayload(false), action: 'edited' };
    assert.deepEqual(
      giteaPayloads.readEvents(headers('issue_comment', 'issue_comment'), edited),
      [],
    );
  });

  test('bots: Gitea Actions, the ghost, apps', () => {
    for (const [author, bot] of [
      [user('gitea-actions', -2), true],
      [user('Ghost', -1), true],
      [user('renovate[bot]', 40), true],
      [user('robot', 41), false],
    ] as const) {
      const [event] = giteaPayloads.readEvents(
        headers('issue_comment', 'issue_comment'),
        commentPayload(false, author),
      );
      assert.equal(event?.author.bot, bot, author.login);
    }
  });

  test('a review with a body, named exactly or (old versions) by its family only', () => {
    const review = (content: string) => ({
      action: 'reviewed',
      number: 3,
      pull_request: {
        number: 3,
        title: 'Parser',
        body: '',
        html_url: 'https://git.example.com/acme/app/pulls/3',
      },
      repository,
      sender: user('reviewer'),
      review: { type: 'pull_request_review_comment', content },
    });
    for (const h of [
      headers('pull_request_comment', 'pull_request_review_comment'),
      headers('pull_request_approved', 'pull_request_review_approved'),
      headers('pull_request_comment'),
      {
        ...headers('pull_request_comment', 'pull_request_review_comment'),
        'x-forgejo-event-type': 'pull_request_review_comment',
      },
    ]) {
      const [event] = giteaPayloads.readEvents(h, review('@errand split it'));
      assert.ok(event?.type === 'comment', JSON.stringify(h));
      assert.equal(event.where, 'review');
      assert.equal(event.commentId, '');
      assert.equal(event.url, 'https://git.example.com/acme/app/pulls/3');
    }
    // The payload names no review id: the signed payload as a whole names the review, the same
    // under any delivery id, another for another review.
    const key = (h: Record<string, string>, content: string) =>
      giteaPayloads.readEvents(h, review(content))[0]?.key;
    const exact = headers('pull_request_comment', 'pull_request_review_comment');
    assert.match(key(exact, 'a') ?? '', /^gitea:review:[0-9a-f]{64}$/);
    assert.equal(key({ ...exact, 'x-gitea-delivery': 'g-2' }, 'a'), key(exact, 'a'));
    assert.notEqual(key(exact, 'b'), key(exact, 'a'));
    assert.deepEqual(
      giteaPayloads.readEvents(
        headers('pull_request_approved', 'pull_request_review_approved'),
        review(''),
      ),
      [],
    );
  });

  test('labels updated: an event per label the issue has now', () => {
    const payload = (action: string, labels: string[], updatedAt?: string) => ({
      action,
      number: 3,
      issue: issue(false, labels, updatedAt),
      repository,
      sender: user('maintainer'),
    });
    const events = giteaPayloads.readEvents(
      headers('issues', 'issue_label'),
      payload('label_updated', ['bug', 'errand']),
    );
    // Not which label was added: that the issue carries each.
    assert.deepEqual(
      events.map((e) => (e.type === 'labeled' ? [e.label, e.added] : [])),
      [
        ['bug', false],
        ['errand', false],
      ],
    );
    assert.equal(events[0]?.author.login, 'maintainer');
    // The issue, the label and the issue's time of change (Gitea updates it at every change of
    // the labels): a later change is another event, the same delivery sent again is not.
    assert.equal(events[1]?.key, 'gitea:label:60:errand:2025-05-01T10%3A00%3A00%2B02%3A00');
    const later = giteaPayloads.readEvents(
      headers('issues', 'issue_label'),
      payload('label_updated', ['errand'], '2025-05-01T10:00:05+02:00'),
    );
    assert.notEqual(later[0]?.key, events[1]?.key);
    assert.deepEqual(
      giteaPayloads.readEvents(headers('issues', 'issue_label'), payload('label_cleared', [])),
      [],
    );
    assert.deepEqual(
      giteaPayloads.readEvents(headers('issues', 'issues'), payload('opened', ['errand'])),
      [],
    );
  });

  test('other events are nothing to read; a wrong shape is refused', () => {
    assert.deepEqual(
      giteaPayloads.readEvents(headers('push', 'push'), { ref: 'refs/heads/main' }),
      [],
    );
    assert.deepEqual(
      giteaPayloads.readEvents(headers('pull_request', 'pull_request_review_request'), {
        action: 'review_requested',
      }),
      [],
    );
    assert.throws(
      () =>
        giteaPayloads.readEvents(headers('issue_comment', 'issue_comment'), {
          action: 'created',
        }),
      MalformedPayloadError,
    );
  });
});

describe('Gitea and Forgejo signals to the pull request watch', () => {
  const SHA = 'c0ffee0000000000000000000000000000000001';
  const pull = (extra: Record<string, unknown> = {}) => ({
    id: 70,
    number: 3,
    title: 'Fix',
    body: '',
    html_url: 'https://git.example.com/acme/app/pulls/3',
    state: 'open',
    merged: false,
    head: { label: 'errand/job-1', ref: 'errand/job-1', sha: SHA, repo_id: 1 },
    base: { label: 'main', ref: 'main', sha: '0'.repeat(40), repo_id: 1 },
    ...extra,
  });
  const pullPayload = (action: string, extra: Record<string, unknown> = {}) => ({
    action,
    number: 3,
    pull_request: pull(extra),
    requested_reviewer: null,
    repository,
    sender: user('maintainer'),
    commit_id: '',
    review: null,
  });
  const statusPayload = {
    commit: { id: SHA, message: 'x', url: `${repository.html_url}/commit/${SHA}` },
    context: 'ci / test (push)',
    created_at: '2025-05-01T10:00:00Z',
    description: 'Failing after 41s',
    id: 9,
    repository,
    sender: user('gitea-actions', -2),
    sha: SHA,
    state: 'failure',
    target_url: 'https://git.example.com/acme/app/actions/runs/4/jobs/0',
    updated_at: '2025-05-01T10:00:00Z',
  };
  const base = { forge: 'gitea', deliveryId: 'g-1', repositoryUrl: repository.html_url };

  test('a commit status names its commit, no branch and no pull request', () => {
    assert.deepEqual(giteaPayloads.readSignal(headers('status', 'status'), statusPayload), {
      ...base,
      kind: 'checks',
      numbers: [],
      branches: [],
      sha: SHA,
    });
    // Old versions name only the family, which for a status is the event.
    assert.equal(giteaPayloads.readSignal(headers('status'), statusPayload)?.kind, 'checks');
    // Forgejo's own headers.
    const forgejo = {
      'x-forgejo-event': 'status',
      'x-forgejo-event-type': 'status',
      'x-forgejo-delivery': 'f-1',
    };
    assert.equal(giteaPayloads.readSignal(forgejo, statusPayload)?.deliveryId, 'f-1');
  });

  test('a pull request closed (or merged), reopened, pushed to, relabelled', () => {
    const expected = {
      ...base,
      kind: 'pull-request',
      numbers: [3],
      branches: ['errand/job-1'],
      sha: null,
    };
    for (const [type, action] of [
      ['pull_request', 'closed'],
      ['pull_request', 'reopened'],
      ['pull_request_sync', 'synchronized'],
      ['pull_request_label', 'label_updated'],
      ['pull_request_label', 'label_cleared'],
    ] as const) {
      assert.deepEqual(
        giteaPayloads.readSignal(headers('pull_request', type), pullPayload(action)),
        expected,
        `${type} ${action}`,
      );
    }
    const merged = pullPayload('closed', { merged: true, state: 'closed' });
    assert.deepEqual(
      giteaPayloads.readSignal(headers('pull_request', 'pull_request'), merged),
      expected,
    );
    // Old versions: the family only; the action tells a change from an assignment.
    assert.deepEqual(
      giteaPayloads.readSignal(headers('pull_request'), pullPayload('closed')),
      expected,
    );
    // The head branch deleted after the merge: its name is still the label.
    const deleted = pullPayload('closed', {
      head: { label: 'errand/job-1', ref: 'refs/pull/3/head', sha: SHA, repo_id: 1 },
    });
    assert.deepEqual(
      giteaPayloads.readSignal(headers('pull_request', 'pull_request'), deleted)?.branches,
      ['errand/job-1'],
    );
  });

  test('reviews: approved, changes asked, commented; with or without a body', () => {
    const review = (type: string, content: string) => ({
      ...pullPayload('reviewed'),
      review: { type, content },
    });
    for (const [family, type] of [
      ['pull_request_approved', 'pull_request_review_approved'],
      ['pull_request_rejected', 'pull_request_review_rejected'],
      ['pull_request_comment', 'pull_request_review_comment'],
    ] as const) {
      for (const content of ['', 'Looks good']) {
        const signal = giteaPayloads.readSignal(headers(family, type), review(type, content));
        assert.equal(signal?.kind, 'pull-request', `${type} ${JSON.stringify(content)}`);
        assert.deepEqual(signal?.numbers, [3]);
      }
    }
    // Old versions: an approval's family names it.
    assert.equal(
      giteaPayloads.readSignal(headers('pull_request_approved'), review('x', ''))?.kind,
      'pull-request',
    );
    // An approval without a body is no comment for Errand to answer.
    assert.deepEqual(
      giteaPayloads.readEvents(
        headers('pull_request_approved', 'pull_request_review_approved'),
        review('pull_request_review_approved', ''),
      ),
      [],
    );
  });

  test('nothing for the watch: other actions and events', () => {
    for (const [type, action] of [
      ['pull_request', 'opened'],
      ['pull_request', 'edited'],
      ['pull_request_assign', 'assigned'],
      ['pull_request_review_request', 'review_requested'],
      ['pull_request_milestone', 'milestoned'],
    ] as const) {
      assert.equal(
        giteaPayloads.readSignal(headers('pull_request', type), pullPayload(action)),
        null,
        type,
      );
    }
    assert.equal(giteaPayloads.readSignal(headers('pull_request'), pullPayload('assigned')), null);
    assert.equal(
      giteaPayloads.readSignal(
        headers('issue_comment', 'pull_request_comment'),
        commentPayload(true),
      ),
      null,
    );
    assert.equal(
      giteaPayloads.readSignal(headers('push', 'push'), { ref: 'refs/heads/main' }),
      null,
    );
    assert.equal(giteaPayloads.readSignal({}, statusPayload), null);
  });

  test('the watch’s events are no comment or label, and no push', () => {
    for (const [h, body] of [
      [headers('status', 'status'), statusPayload],
      [headers('pull_request', 'pull_request'), pullPayload('closed')],
      [headers('pull_request', 'pull_request_sync'), pullPayload('synchronized')],
      [headers('pull_request', 'pull_request_label'), pullPayload('label_updated')],
    ] as const) {
      assert.deepEqual(giteaPayloads.readEvents(h, body), []);
      assert.equal(giteaPayloads.readPush(h, body), null);
    }
  });

  test('a payload that is not Gitea’s is refused', () => {
    const { sha: _sha, ...noSha } = statusPayload;
    assert.throws(
      () => giteaPayloads.readSignal(headers('status', 'status'), noSha),
      MalformedPayloadError,
    );
    assert.throws(
      () => giteaPayloads.readSignal(headers('pull_request', 'pull_request'), { action: 'closed' }),
      MalformedPayloadError,
    );
    assert.throws(
      () =>
        giteaPayloads.readSignal(headers('pull_request_approved', 'pull_request_review_approved'), {
          ...pullPayload('reviewed'),
          pull_request: { number: 'three' },
        }),
      MalformedPayloadError,
    );
  });

  test('the events to tick include the watch’s', () => {
    for (const event of [
      'Status',
      'Pull Request',
      'Pull Request Synchronized',
      'Pull Request Labeled',
      'Pull Request Reviewed',
    ]) {
      assert.ok(giteaPayloads.webhookEvents.includes(event), event);
    }
  });
});
