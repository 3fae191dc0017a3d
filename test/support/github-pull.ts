// What the tests of the GitHub client's pull request watch calls share (src/forges/github/
// checks.test.ts, pull-requests.test.ts): the fake GitHub with one open pull request, #1 of
// `errand/job`, whose head is HEAD, and the client on it.

import { afterEach } from 'node:test';
import { provider } from '../../src/forges/github/index.ts';
import type { ForgeClient } from '../../src/forges/types.ts';
import { type FakeGitHub, startFakeGitHub } from './fake-github.ts';

export const TOKEN = 'ghp_prwatch000000000000000000000000000000';
export const HEAD = '1111111111111111111111111111111111111111';
export const OTHER = '2222222222222222222222222222222222222222';
const REPOSITORY = 'https://github.com/octo/hello.git';

type Started = { gh: FakeGitHub; client: ForgeClient };

/**
 * A test file's `start`: each test's fake is checked for unexpected requests and closed after
 * the test (an afterEach of the file that calls this).
 */
export function withPull(): (options?: { enterprise?: boolean }) => Promise<Started> {
  let gh: FakeGitHub | undefined;
  afterEach(async () => {
    gh?.assertNoUnexpected();
    await gh?.close();
    gh = undefined;
  });
  return async (options = {}) => {
    const started = await startWithPull(options);
    gh = started.gh;
    return started;
  };
}

async function startWithPull(options: { enterprise?: boolean } = {}): Promise<Started> {
  const gh = await startFakeGitHub({
    repos: ['octo/hello'],
    token: TOKEN,
    heads: (repo, branch) => (repo === 'octo/hello' && branch === 'errand/job' ? HEAD : undefined),
    ...options,
  });
  const client = provider.create({
    apiUrl: gh.apiUrl,
    repository: REPOSITORY,
    credentials: { token: TOKEN },
  });
  await client.createPullRequest({
    head: 'errand/job',
    base: 'main',
    title: 'Errand job',
    body: 'What the agent did.',
    draft: false,
  });
  return { gh, client };
}
