// The checks of a commit against the fake GitHub on loopback: check runs and commit statuses
// across pages, each name at its latest; a check's log through the storage redirect, without
// the token, and bounded to its tail.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { FakeGitHub } from '../../../test/support/fake-github.ts';
import { HEAD, OTHER, TOKEN, withPull } from '../../../test/support/github-pull.ts';
import { type CheckResult, type ForgeClient, ForgeError } from '../types.ts';

/** The fake with one open pull request (#1, head `errand/job`) whose head is HEAD. */
const start = withPull();

describe('checks', () => {
  test('check runs and commit statuses, each name at its latest', async () => {
    const { gh, client } = await start();
    gh.setCheck('octo/hello', HEAD, { name: 'build', state: 'failure', summary: 'exit code 1' });
    gh.setCheck('octo/hello', HEAD, { name: 'build', state: 'success' });
    gh.setCheck('octo/hello', HEAD, { name: 'lint', state: 'pending' });
    gh.setCheck('octo/hello', HEAD, { name: 'test', state: 'failure', summary: '2 failed' });
    gh.setCheck('octo/hello', OTHER, { name: 'elsewhere', state: 'failure' });
    gh.setStatus('octo/hello', HEAD, { context: 'ci/ext', state: 'success' });
    gh.setStatus('octo/hello', HEAD, {
      context: 'ci/ext',
      state: 'error',
      description: 'The build errored',
      targetUrl: 'https://ci.example.com/b/7',
    });
    gh.setStatus('octo/hello', HEAD, { context: 'deploy', state: 'pending' });
    const checks = await client.checks(HEAD);
    const byName = new Map(checks.map((c) => [c.name, c]));
    assert.deepEqual([...byName.keys()].sort(), ['build', 'ci/ext', 'deploy', 'lint', 'test']);
    assert.equal(checks.length, 5);
    assert.equal(byName.get('build')?.state, 'success');
    assert.equal(byName.get('lint')?.state, 'pending');
    const failed = byName.get('test');
    assert.equal(failed?.state, 'failure');
    assert.equal(failed?.summary, '2 failed');
    assert.match(failed?.id ?? '', /^\d+$/);
    assert.match(failed?.url ?? '', /\/octo\/hello\/runs\/\d+$/);
    assert.deepEqual(byName.get('ci/ext'), {
      id: 'status:ci/ext',
      name: 'ci/ext',
      state: 'failure',
      url: 'https://ci.example.com/b/7',
      summary: 'The build errored',
    });
    assert.equal(byName.get('deploy')?.state, 'pending');
    assert.deepEqual(await client.checks(OTHER).then((c) => c.map((x) => x.name)), ['elsewhere']);
  });

  test('reads every page of check runs', async () => {
    const { gh, client } = await start();
    for (let i = 0; i < 150; i++)
      gh.setCheck('octo/hello', HEAD, { name: `job ${i}`, state: 'success' });
    const checks = await client.checks(HEAD);
    assert.equal(checks.length, 150);
    const pages = gh.requests.filter((r) => r.operation === 'checks/list-for-ref');
    assert.deepEqual(
      pages.map((r) => [r.query.page, r.query.per_page, r.query.filter]),
      [
        ['1', '100', 'latest'],
        ['2', '100', 'latest'],
      ],
    );
  });

  test('no checks at all: an empty list', async () => {
    const { client } = await start();
    assert.deepEqual(await client.checks(OTHER), []);
  });
});

describe('check logs', () => {
  const failing = async (
    gh: FakeGitHub,
    client: ForgeClient,
    log: string,
  ): Promise<CheckResult> => {
    gh.setCheck('octo/hello', HEAD, {
      name: 'test',
      state: 'failure',
      summary: 'Process completed with exit code 1.',
      log,
    });
    const check = (await client.checks(HEAD)).find((c) => c.name === 'test');
    assert.ok(check);
    return check;
  };

  for (const enterprise of [false, true]) {
    test(`the output and the Actions job's log, from storage without the token${enterprise ? ' (Enterprise Server)' : ''}`, async () => {
      const { gh, client } = await start({ enterprise });
      const check = await failing(gh, client, 'npm test\nnot ok 1 - parses\nexit 1\n');
      const log = await client.checkLog(check, 10_000);
      assert.equal(
        log,
        'Process completed with exit code 1.\n\nnpm test\nnot ok 1 - parses\nexit 1\n',
      );
      const download = gh.requests.find(
        (r) => r.operation === 'actions/download-job-logs-for-workflow-run',
      );
      assert.equal(download?.status, 302);
      assert.equal(download?.headers.authorization, `token ${TOKEN}`);
      const storage = gh.requests.find((r) => r.path.startsWith('/_storage/'));
      assert.equal(storage?.status, 200);
      assert.equal(storage?.headers.authorization, undefined, 'the token stays with the API');
    });
  }

  test('at most maxBytes of the tail, cut at a line start', async () => {
    const { gh, client } = await start();
    const lines = Array.from({ length: 50_000 }, (_, i) => `line ${i} ✓ ${'x'.repeat(i % 37)}`);
    const check = await failing(gh, client, `${lines.join('\n')}\n`);
    const log = await client.checkLog(check, 2_000);
    assert.ok(Buffer.byteLength(log, 'utf8') <= 2_000, `${Buffer.byteLength(log)} bytes`);
    assert.ok(log.startsWith('Process completed with exit code 1.\n\n'));
    const body = log.slice('Process completed with exit code 1.\n\n'.length);
    assert.match(body, /^line \d+ ✓/, 'starts at a line start');
    assert.ok(body.endsWith(`${lines.at(-1)}\n`), 'keeps the last line');
    assert.ok(body.length > 1_000, 'fills the room it has');
  });

  test("a commit status's log is its description and its page", async () => {
    const { gh, client } = await start();
    gh.setStatus('octo/hello', HEAD, {
      context: 'ci/ext',
      state: 'failure',
      description: 'Tests failed',
      targetUrl: 'https://ci.example.com/b/9',
    });
    const [check] = await client.checks(HEAD);
    assert.ok(check);
    const before = gh.requests.length;
    assert.equal(await client.checkLog(check, 1_000), 'Tests failed\nhttps://ci.example.com/b/9');
    assert.equal(gh.requests.length, before, 'asks GitHub nothing');
    assert.equal(await client.checkLog(check, 0), '');
  });

  test('GitHub failing is a ForgeError; a check run it does not know is one too', async () => {
    const { gh, client } = await start();
    const check = await failing(gh, client, 'the log\n');
    gh.failNext(502);
    await assert.rejects(
      client.checkLog(check, 1_000),
      (err: unknown) => err instanceof ForgeError && err.transient,
    );
    await assert.rejects(
      client.checkLog({ ...check, id: '999' }, 1_000),
      (err: unknown) => err instanceof ForgeError && err.status === 404,
    );
    assert.equal(await client.checkLog({ ...check, id: 'not-a-number' }, 1_000), '');
  });
});
