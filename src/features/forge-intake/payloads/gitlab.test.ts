// GitLab's deliveries read into ForgeEvents: the token check, notes on issues and merge
// requests (diff notes on a line among them), and issue updates that add labels, in GitLab's
// payload shape, with the notes and updates Errand leaves; and into the pull request watch's
// signals (pipelines, jobs, merge requests).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { gitlabPayloads } from './gitlab.ts';
import { MalformedPayloadError } from './shared.ts';

const project = {
  id: 3,
  web_url: 'https://gitlab.example.com/group/app',
  path_with_namespace: 'group/app',
};
const user = (username: string) => ({ id: 21, name: username, username, email: '[REDACTED]' });
const headers = (event: string) => ({
  'x-gitlab-event': event,
  'x-gitlab-event-uuid': 'uuid-1',
  'idempotency-key': 'key-1',
});
const mr = {
  iid: 4,
  title: 'Add the parser',
  description: 'Made by Errand',
  url: 'https://gitlab.example.com/group/app/-/merge_requests/4',
};

function note(
  attributes: Record<string, unknown>,
  on: Record<string, unknown> = { merge_request: mr },
) {
  return {
    object_kind: 'note',
    event_type: 'note',
    user: user('reviewer'),
    project_id: 3,
    project,
    object_attributes: {
      id: 70,
      note: '@errand rename',
      noteable_type: 'MergeRequest',
      discussion_id: 'a'.repeat(40),
      url: `${mr.url}#note_70`,
      type: null,
      position: null,
      action: 'create',
      ...attributes,
    },
    ...on,
  };
}

describe('GitLab webhook payloads', () => {
  test('the token: the same, another, missing', () => {
    const body = Buffer.from('{}');
    assert.equal(
      gitlabPayloads.verifySignature({ 'x-gitlab-token': 'tok-123456789' }, body, 'tok-123456789'),
      true,
    );
    assert.equal(
      gitlabPayloads.verifySignature({ 'x-gitlab-token': 'tok-12345678' }, body, 'tok-123456789'),
      false,
    );
    assert.equal(gitlabPayloads.verifySignature({}, body, 'tok-123456789'), false);
    assert.equal(gitlabPayloads.verifySignature({ 'x-gitlab-token': '' }, body, ''), false);
  });

  test('a note on a merge request, and a diff note on a line', () => {
    const [plain] = gitlabPayloads.readEvents(headers('Note Hook'), note({}));
    assert.deepEqual(plain, {
      forge: 'gitlab',
      deliveryId: 'key-1',
      key: 'gitlab:note:70',
      type: 'comment',
      where: 'conversation',
      repositoryUrl: project.web_url,
      author: { login: 'reviewer', id: '21', bot: false },
      thread: {
        kind: 'pull-request',
        number: 4,
        title: mr.title,
        body: mr.description,
        url: mr.url,
      },
      commentId: '70',
      discussionId: 'a'.repeat(40),
      body: '@errand rename',
      url: `${mr.url}#note_70`,
      anchor: null,
    });
    const [line] = gitlabPayloads.readEvents(
      headers('Note Hook'),
      note({
        type: 'DiffNote',
        position: {
          old_path: 'a.ts',
          new_path: 'b.ts',
          old_line: null,
          new_line: 9,
          position_type: 'text',
        },
      }),
    );
    assert.ok(line?.type === 'comment');
    assert.equal(line.where, 'line');
    assert.deepEqual(line.anchor, { path: 'b.ts', line: 9, diffHunk: '' });
    const [removed] = gitlabPayloads.readEvents(
      headers('Note Hook'),
      note({
        type: 'DiffNote',
        position: { old_path: 'a.ts', new_path: 'a.ts', old_line: 5, new_line: null },
      }),
    );
    assert.ok(removed?.type === 'comment');
    assert.equal(removed.anchor?.line, 5);
  });

  test('a note on an issue, a confidential one, and the notes Errand leaves', () => {
    const issue = {
      iid: 2,
      title: 'Crash',
      description: null,
      url: `${project.web_url}/-/issues/2`,
    };
    const onIssue = note({ noteable_type: 'Issue', url: `${issue.url}#note_70` }, { issue });
    for (const event of ['Note Hook', 'Confidential Note Hook']) {
      const [read] = gitlabPayloads.readEvents(headers(event), onIssue);
      assert.equal(read?.thread.kind, 'issue');
      assert.equal(read?.thread.body, '');
    }
    assert.deepEqual(
      gitlabPayloads.readEvents(headers('Note Hook'), note({ action: 'update' })),
      [],
    );
    assert.deepEqual(
      gitlabPayloads.readEvents(
        headers('Note Hook'),
        note({ noteable_type: 'Commit' }, { commit: { id: 'abc' } }),
      ),
      [],
    );
  });

  test('bots: project and group access tokens, service accounts', () => {
    for (const [username, bot] of [
      ['project_12_bot_0f3e5c1a2b4d6e8f0a1b2c3d4e5f6a7b', true],
      ['group_8_bot_ab12', true],
      ['service_account_group_5_0a1b2c', true],
      ['project_manager', false],
      ['reviewer', false],
    ] as const) {
      const payload = { ...note({}), user: user(username) };
      assert.equal(
        gitlabPayloads.readEvents(headers('Note Hook'), payload)[0]?.author.bot,
        bot,
        username,
      );
    }
  });

  test('an issue update: each added label is an event; removed or unchanged ones are not', () => {
    const labels = (...titles: string[]) => titles.map((title, i) => ({ id: i, title }));
    const update = (
      previous: string[],
      current: string[],
      updatedAt = '2025-05-01 10:00:00 UTC',
    ) => ({
      object_kind: 'issue',
      event_type: 'issue',
      user: user('maintainer'),
      project,
      object_attributes: {
        id: 902,
        iid: 2,
        updated_at: updatedAt,
        title: 'Crash',
        description: 'Steps',
        url: `${project.web_url}/-/issues/2`,
        action: 'update',
      },
      labels: labels(...current),
      changes: { labels: { previous: labels(...previous), current: labels(...current) } },
    });
    const added = gitlabPayloads.readEvents(
      headers('Issue Hook'),
      update(['bug'], ['bug', 'errand', 'p1']),
    );
    assert.deepEqual(
      added.map((e) => (e.type === 'labeled' ? [e.label, e.added] : [])),
      [
        ['errand', true],
        ['p1', true],
      ],
    );
    assert.equal(added[0]?.author.login, 'maintainer');
    // The issue, the label and the issue's time of change: the label added again later (after
    // it was removed) is another event, the same delivery sent again is not.
    assert.deepEqual(
      added.map((e) => e.key),
      [
        'gitlab:label:902:errand:2025-05-01%2010%3A00%3A00%20UTC',
        'gitlab:label:902:p1:2025-05-01%2010%3A00%3A00%20UTC',
      ],
    );
    const again = gitlabPayloads.readEvents(
      headers('Issue Hook'),
      update([], ['errand'], '2025-05-03 09:00:00 UTC'),
    );
    assert.notEqual(again[0]?.key, added[0]?.key);
    assert.equal(added[0]?.thread.body, 'Steps');
    assert.deepEqual(gitlabPayloads.readEvents(headers('Issue Hook'), update(['errand'], [])), []);
    const { changes: _, ...titleOnly } = update([], []);
    assert.deepEqual(gitlabPayloads.readEvents(headers('Issue Hook'), titleOnly), []);
  });

  test('the delivery id: Idempotency-Key, else X-Gitlab-Event-UUID (before GitLab 17.4)', () => {
    const old = { 'x-gitlab-event': 'Note Hook', 'x-gitlab-event-uuid': 'uuid-2' };
    const [event] = gitlabPayloads.readEvents(old, note({}));
    assert.equal(event?.deliveryId, 'uuid-2');
    // Whichever id the delivery has, the note's id names the event.
    assert.equal(event?.key, gitlabPayloads.readEvents(headers('Note Hook'), note({}))[0]?.key);
  });

  test('other hooks are nothing to read; a wrong shape is refused', () => {
    assert.deepEqual(gitlabPayloads.readEvents(headers('Push Hook'), { object_kind: 'push' }), []);
    assert.throws(
      () =>
        gitlabPayloads.readEvents(headers('Note Hook'), {
          object_kind: 'note',
          user: user('x'),
        }),
      MalformedPayloadError,
    );
  });

  test("the events to tick include the watch's", () => {
    for (const event of ['Merge request events', 'Pipeline events', 'Job events']) {
      assert.ok(gitlabPayloads.webhookEvents.includes(event), event);
    }
  });
});

describe('GitLab signals for the pull request watch', () => {
  const pipeline = (attributes: Record<string, unknown>, mergeRequest: unknown = null) => ({
    object_kind: 'pipeline',
    object_attributes: {
      id: 31,
      iid: 7,
      ref: 'errand/job-1',
      tag: false,
      sha: 'a'.repeat(40),
      source: 'push',
      status: 'failed',
      ...attributes,
    },
    merge_request: mergeRequest,
    user: user('reviewer'),
    project,
    commit: { id: 'a'.repeat(40) },
    builds: [{ id: 90, name: 'test', status: 'failed' }],
  });

  test('a branch pipeline names its branch and commit', () => {
    assert.deepEqual(gitlabPayloads.readSignal(headers('Pipeline Hook'), pipeline({})), {
      forge: 'gitlab',
      deliveryId: 'key-1',
      repositoryUrl: project.web_url,
      kind: 'checks',
      numbers: [],
      branches: ['errand/job-1'],
      sha: 'a'.repeat(40),
    });
  });

  test('a merge request pipeline names its merge request and source branch', () => {
    const signal = gitlabPayloads.readSignal(
      headers('Pipeline Hook'),
      pipeline(
        { ref: 'refs/merge-requests/4/head', source: 'merge_request_event' },
        { id: 88, iid: 4, source_branch: 'errand/job-1', target_branch: 'main', url: mr.url },
      ),
    );
    assert.deepEqual(signal?.numbers, [4]);
    assert.deepEqual(signal?.branches, ['errand/job-1']);
    // Without the merge request object, its ref still names it.
    const bare = gitlabPayloads.readSignal(
      headers('Pipeline Hook'),
      pipeline({ ref: 'refs/merge-requests/5/merge' }),
    );
    assert.deepEqual([bare?.numbers, bare?.branches], [[5], []]);
    const tag = gitlabPayloads.readSignal(
      headers('Pipeline Hook'),
      pipeline({ ref: 'v1.0', tag: true }),
    );
    assert.deepEqual([tag?.numbers, tag?.branches], [[], []]);
  });

  test('a job names its branch and commit; older GitLab names the project in repository', () => {
    const job = {
      object_kind: 'build',
      ref: 'errand/job-1',
      tag: false,
      before_sha: '0'.repeat(40),
      sha: 'b'.repeat(40),
      build_id: 90,
      build_name: 'test',
      build_stage: 'test',
      build_status: 'failed',
      pipeline_id: 31,
      project_id: 3,
      user: user('reviewer'),
      commit: { id: 'b'.repeat(40) },
      repository: {
        name: 'app',
        url: 'git@gitlab.example.com:group/app.git',
        homepage: project.web_url,
      },
    };
    const signal = gitlabPayloads.readSignal(headers('Job Hook'), job);
    assert.deepEqual(signal, {
      forge: 'gitlab',
      deliveryId: 'key-1',
      repositoryUrl: project.web_url,
      kind: 'checks',
      numbers: [],
      branches: ['errand/job-1'],
      sha: 'b'.repeat(40),
    });
    const withProject = { ...job, project: { ...project, web_url: 'https://gl.example/a/b' } };
    assert.equal(
      gitlabPayloads.readSignal(headers('Job Hook'), withProject)?.repositoryUrl,
      'https://gl.example/a/b',
    );
  });

  test('a merge request event, whatever its action, names the merge request and its head', () => {
    for (const action of ['open', 'update', 'close', 'reopen', 'merge', 'approved', 'approval']) {
      const signal = gitlabPayloads.readSignal(headers('Merge Request Hook'), {
        object_kind: 'merge_request',
        event_type: 'merge_request',
        user: user('reviewer'),
        project,
        object_attributes: {
          id: 88,
          iid: 4,
          title: mr.title,
          source_branch: 'errand/job-1',
          target_branch: 'main',
          state: 'opened',
          action,
          last_commit: { id: 'c'.repeat(40), message: 'm' },
          url: mr.url,
        },
        labels: [],
        changes: {},
      });
      assert.deepEqual(signal, {
        forge: 'gitlab',
        deliveryId: 'key-1',
        repositoryUrl: project.web_url,
        kind: 'pull-request',
        numbers: [4],
        branches: ['errand/job-1'],
        sha: 'c'.repeat(40),
      });
    }
  });

  test("other hooks are no signal, and the watch's hooks are no ForgeEvent", () => {
    assert.equal(gitlabPayloads.readSignal(headers('Note Hook'), note({})), null);
    assert.equal(gitlabPayloads.readSignal(headers('Push Hook'), { object_kind: 'push' }), null);
    assert.equal(gitlabPayloads.readSignal(headers('Deployment Hook'), {}), null);
    assert.deepEqual(gitlabPayloads.readEvents(headers('Pipeline Hook'), pipeline({})), []);
    assert.deepEqual(
      gitlabPayloads.readEvents(headers('Merge Request Hook'), { object_kind: 'merge_request' }),
      [],
    );
    assert.equal(gitlabPayloads.readPush(headers('Pipeline Hook'), pipeline({})), null);
  });

  test('a watch hook that is not what GitLab sends is refused', () => {
    for (const [event, body] of [
      ['Pipeline Hook', { object_kind: 'pipeline', project }],
      ['Job Hook', { object_kind: 'build', ref: 'main', sha: 'a' }],
      ['Merge Request Hook', { object_kind: 'merge_request', project, object_attributes: {} }],
      ['Pipeline Hook', { object_kind: 'note' }],
    ] as const) {
      assert.throws(
        () => gitlabPayloads.readSignal(headers(event), body),
        MalformedPayloadError,
        event,
      );
    }
  });
});
