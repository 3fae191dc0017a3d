// `errand project forge-webhook` and the forge webhook flags of `errand project update`, as a
// user runs them: the real `errand` process talking to a running service's admin API. A made
// secret is printed once with the URL and the events to give the forge, and never again.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type Run, runCli } from '../support/process.ts';
import { startTestService, type TestService } from '../support/service.ts';

describe('errand project: the forge webhook', () => {
  let svc: TestService;
  let projectId: string;

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'cli-forge-webhook-test-secret-key' },
    });
    const res = await svc.request('POST', '/v2/admin/projects', {
      body: { name: 'on github', repository: 'https://github.com/acme/app.git' },
    });
    assert.equal(res.status, 201, res.text);
    projectId = res.json.id as string;
  });
  after(async () => {
    await svc?.close();
  });

  const cli = (args: string[]): Promise<Run> => runCli(svc, args);
  const ok = (run: Run): Run => {
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stderr, '');
    return run;
  };

  test('forge-webhook prints a new secret once, with the URL and the events', async () => {
    const run = ok(await cli(['project', 'forge-webhook', projectId]));
    const secret =
      /secret \(shown once, it will not be shown again\):\n {2}([0-9A-Za-z]{40})\n/.exec(
        run.stdout,
      )?.[1];
    assert.ok(secret, run.stdout);
    assert.match(
      run.stdout,
      new RegExp(`payload URL: +${svc.url}/v2/forges/${projectId}/webhook\\n`),
    );
    assert.match(run.stdout, /content type: application\/json/);
    assert.match(
      run.stdout,
      /events: +Check runs, Check suites, Issue comments, Issues, Pull request review comments, Pull request reviews, Pull requests, Pushes, Statuses, Workflow runs\n/,
    );
    assert.match(run.stdout, /mention @errand, and issues labelled 'errand'/);
    for (const args of [
      ['project', 'list', '--json'],
      ['project', 'update', projectId, '--name', 'on github', '--json'],
    ]) {
      const again = ok(await cli(args));
      assert.ok(!again.stdout.includes(secret), `${args.join(' ')} shows the secret`);
    }
    // The printed secret is the one deliveries are checked with: GitHub's ping signed with it
    // is let in, one signed with another is not.
    const ping = JSON.stringify({ zen: 'Anything added dilutes everything else.', hook_id: 1 });
    const send = (key: string) =>
      fetch(`${svc.url}/v2/forges/${projectId}/webhook`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'ping',
          'x-github-delivery': 'ping-1',
          'x-hub-signature-256': `sha256=${createHmac('sha256', key).update(ping).digest('hex')}`,
        },
        body: ping,
      });
    assert.equal((await send(secret)).status, 200);
    assert.equal((await send(`${secret}x`)).status, 401);
  });

  test('update sets a chosen secret, the handle and the label; an empty secret removes it', async () => {
    const set = JSON.parse(
      ok(
        await cli([
          'project',
          'update',
          projectId,
          '--forge-webhook-secret',
          'a-secret-we-chose-1234',
          '--forge-handle',
          'helper-bot',
          '--forge-label',
          'ai fix',
          '--json',
        ]),
      ).stdout,
    ) as Record<string, unknown>;
    assert.equal(set.forgeWebhookSecretSet, true);
    assert.equal(set.forgeHandle, 'helper-bot');
    assert.equal(set.forgeLabel, 'ai fix');
    assert.ok(!JSON.stringify(set).includes('a-secret-we-chose-1234'));
    const cleared = JSON.parse(
      ok(await cli(['project', 'update', projectId, '--forge-webhook-secret', '', '--json']))
        .stdout,
    ) as Record<string, unknown>;
    assert.equal(cleared.forgeWebhookSecretSet, false);
  });

  test('a refused handle is said, and changes nothing', async () => {
    const before = (await svc.request('GET', `/v2/admin/projects/${projectId}`)).text;
    const run = await cli(['project', 'update', projectId, '--forge-handle', '@errand']);
    assert.equal(run.code, 1, run.stderr);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /"forgeHandle" must be the name comments mention, without the @/);
    assert.equal((await svc.request('GET', `/v2/admin/projects/${projectId}`)).text, before);
  });
});
