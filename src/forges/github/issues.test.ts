// An issue read through GitHub's issues endpoint against the fake GitHub on loopback: an issue's
// text, a pull request's number answered as one, and the issues GitHub has not.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { withPull } from '../../../test/support/github-pull.ts';
import { ForgeError } from '../types.ts';

/** The fake with one open pull request (#1, "Errand job"). */
const start = withPull();

describe('issues', () => {
  test("an issue's title, body, state and page; GitHub's null body is empty", async () => {
    const { gh, client } = await start();
    const opened = gh.openIssue('octo/hello', {
      title: 'Login fails with a + in the e-mail',
      body: 'Steps: sign in as a+b@example.com.',
      author: 'reporter',
    });
    assert.deepEqual(await client.issue(opened.number), {
      number: opened.number,
      title: 'Login fails with a + in the e-mail',
      body: 'Steps: sign in as a+b@example.com.',
      state: 'open',
      url: opened.htmlUrl,
      pullRequest: false,
    });
    const closed = gh.openIssue('octo/hello', { title: 'Done', author: 'r', state: 'closed' });
    assert.deepEqual(await client.issue(closed.number), {
      number: closed.number,
      title: 'Done',
      body: '',
      state: 'closed',
      url: closed.htmlUrl,
      pullRequest: false,
    });
    assert.deepEqual(
      gh.requests.filter((r) => r.operation === 'issues/get').map((r) => r.path),
      [`/repos/octo/hello/issues/${opened.number}`, `/repos/octo/hello/issues/${closed.number}`],
    );
  });

  test("a pull request's number answers with its title and description", async () => {
    const { client } = await start();
    const issue = await client.issue(1);
    assert.equal(issue?.pullRequest, true);
    assert.equal(issue?.title, 'Errand job');
    assert.equal(issue?.body, 'What the agent did.');
    assert.match(issue?.url ?? '', /\/octo\/hello\/pull\/1$/);
  });

  test('an issue GitHub has not is undefined; GitHub failing is a ForgeError', async () => {
    const { gh, client } = await start();
    assert.equal(await client.issue(404), undefined);
    gh.failNext(410, { message: 'Issues are disabled for this repo' });
    assert.equal(await client.issue(1), undefined);
    gh.failNext(502);
    await assert.rejects(
      client.issue(1),
      (err: unknown) => err instanceof ForgeError && err.transient && err.status === 502,
    );
    gh.failNext(403, { message: 'Resource not accessible by personal access token' });
    await assert.rejects(
      client.issue(1),
      (err: unknown) =>
        err instanceof ForgeError &&
        !err.transient &&
        /read issue #1/.test(err.message) &&
        /the token needs the 'Issues: read' permission \(fine-grained\)/.test(err.message),
    );
  });
});
