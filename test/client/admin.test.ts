// The typed client's admin calls against a real Errand (in this process) with the admin key:
// projects, keys, webhooks and their deliveries, each answer the record the API stores, and
// the refusals (a project key, an unknown id) as ErrandErrors with Errand's codes.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ErrandClient, ErrandError } from '../../src/client/index.ts';
import { startFakeGitHub } from '../support/fake-github.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { storeDelivery } from '../support/stored-deliveries.ts';

async function expectError(promise: Promise<unknown>): Promise<ErrandError> {
  const err = await promise.then(
    () => assert.fail('expected an ErrandError'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ErrandError, `not an ErrandError: ${String(err)}`);
  return err;
}

describe('typed client: the admin API', () => {
  let svc: TestService;
  let admin: ErrandClient;

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: {
        ERRAND_SECRET_KEY: 'client-admin-test-secret-key',
        // Loopback receivers: the address rule has its own tests.
        ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true',
      },
    });
    admin = new ErrandClient({ baseUrl: svc.url, apiKey: svc.adminKey });
  });
  after(async () => {
    await svc?.close();
  });

  test('projects: create, get, update, list', async () => {
    const created = await admin.createProject({
      name: 'typed',
      repository: svc.database.dataDir,
      ref: 'main',
      commandTimeoutSeconds: 30,
      checkCommand: 'npm test',
    });
    assert.match(created.id, /^prj_/);
    assert.equal(created.commandTimeoutSeconds, 30);
    assert.equal(created.checkCommand, 'npm test');
    assert.deepEqual(await admin.getProject(created.id), created);
    const updated = await admin.updateProject(created.id, {
      name: 'typed again',
      commandTimeoutSeconds: null,
      checkCommand: null,
    });
    assert.equal(updated.name, 'typed again');
    assert.equal(updated.checkCommand, null);
    assert.notEqual(updated.commandTimeoutSeconds, 30, 'null returns to the default');
    const stored = await svc.request('GET', `/v2/admin/projects/${created.id}`);
    assert.deepEqual(updated, stored.json);
    const listed = await admin.listProjects();
    assert.deepEqual(
      listed.find((p) => p.id === created.id),
      updated,
    );
    const refused = await expectError(admin.createProject({ name: 'x', repository: 'ext::sh' }));
    assert.equal(refused.status, 400);
    assert.match(refused.serverMessage ?? '', /repository/);
    const missing = await expectError(admin.getProject('prj_00000000000000000000'));
    assert.equal(missing.code, 'not_found');
    assert.ok(missing.requestId);
  });

  test('projects: a forge webhook secret, shown once; the handle and the label', async () => {
    const project = await admin.createProject({
      name: 'on github',
      repository: 'https://github.com/acme/app.git',
      forgeHandle: 'helper',
    });
    assert.equal(project.forgeWebhookSecretSet, false);
    assert.equal(project.forgeHandle, 'helper');
    assert.equal(project.forgeLabel, 'errand');
    const made = await admin.createForgeWebhookSecret(project.id);
    assert.match(made.secret, /^[0-9A-Za-z]{40}$/);
    assert.equal(made.url, `${svc.url}/v2/forges/${project.id}/webhook`);
    assert.ok(made.events.includes('Pull request review comments'));
    assert.equal(made.project.forgeWebhookSecretSet, true);
    const read = await admin.getProject(project.id);
    assert.deepEqual(read, made.project);
    assert.ok(!JSON.stringify(read).includes(made.secret));
    const plain = await admin.createProject({ name: 'plain', repository: svc.database.dataDir });
    const refused = await expectError(admin.createForgeWebhookSecret(plain.id));
    assert.equal(refused.status, 400);
    assert.match(refused.serverMessage ?? '', /plain git/);
  });

  test('projects: an issue of the forge, the one it has not, a project without one', async () => {
    const token = 'ghp_clientissues0123456789abcdefghij';
    const gh = await startFakeGitHub({ repos: ['acme/app'], token });
    try {
      const project = await admin.createProject({
        name: 'issues',
        repository: `${gh.url}/acme/app.git`,
        forge: 'github',
        forgeUrl: gh.apiUrl,
        forgeToken: token,
      });
      const opened = gh.openIssue('acme/app', {
        title: 'Totals are off by one',
        body: 'The last line is skipped.',
        author: 'customer',
      });
      assert.deepEqual(await admin.getForgeIssue(project.id, opened.number), {
        forge: 'github',
        number: opened.number,
        title: 'Totals are off by one',
        body: 'The last line is skipped.',
        state: 'open',
        url: opened.htmlUrl,
        pullRequest: false,
      });
      const missing = await expectError(admin.getForgeIssue(project.id, 77));
      assert.equal(missing.code, 'not_found');
      assert.match(missing.serverMessage ?? '', /no issue #77/);
      const plain = await admin.createProject({ name: 'plain', repository: svc.database.dataDir });
      const refused = await expectError(admin.getForgeIssue(plain.id, 1));
      assert.equal(refused.code, 'bad_request');
      const asked = gh.requests.length;
      await assert.rejects(admin.getForgeIssue(project.id, 0), TypeError);
      assert.equal(gh.requests.length, asked);
      gh.assertNoUnexpected();
    } finally {
      await gh.close();
    }
  });

  test('keys: create (shown once), list without secrets, revoke', async () => {
    const project = await admin.createProject({ name: 'keys', repository: svc.database.dataDir });
    const created = await admin.createKey({ projectId: project.id, name: 'ci' });
    assert.match(created.key, /^errand_/);
    assert.equal(created.projectId, project.id);
    const listed = await admin.listKeys();
    assert.ok(listed.some((k) => k.id === created.id));
    assert.ok(!JSON.stringify(listed).includes(created.key));
    // The new key works for its project's jobs, and not for the admin API.
    const scoped = new ErrandClient({ baseUrl: svc.url, apiKey: created.key });
    const forbidden = await expectError(scoped.listProjects());
    assert.equal(forbidden.code, 'forbidden');
    assert.equal(forbidden.status, 403);
    const revoked = await admin.revokeKey(created.id);
    assert.ok(revoked.revokedAt);
    const unauthorized = await expectError(scoped.listProjects());
    assert.equal(unauthorized.status, 401);
  });

  test('webhooks: create (the secret once), get, update, rotate, deliveries, redeliver, delete', async () => {
    const project = await admin.createProject({ name: 'hooks', repository: svc.database.dataDir });
    const hooks = new ErrandClient({
      baseUrl: svc.url,
      apiKey: svc.adminKey,
      projectId: project.id,
    });
    const created = await hooks.createWebhook({
      url: 'http://127.0.0.1:9/hook',
      events: ['job.completed', 'job.failed'],
      description: 'typed',
    });
    assert.match(created.secret, /^whsec_/);
    const got = await hooks.getWebhook(created.id);
    assert.ok(!('secret' in got), 'get shows the secret');
    assert.deepEqual(
      (await hooks.listWebhooks()).map((w) => w.id),
      [created.id],
    );
    const unknownType = await expectError(
      hooks.updateWebhook(created.id, { events: ['job.nope'] }),
    );
    assert.equal(unknownType.status, 400);
    const updated = await hooks.updateWebhook(created.id, { enabled: false, description: null });
    assert.equal(updated.enabled, false);
    assert.equal(updated.description, null);
    const rotated = await hooks.rotateWebhookSecret(created.id, { overlapSeconds: 0 });
    assert.notEqual(rotated.secret, created.secret);
    assert.equal(rotated.previousSecretExpiresAt, null);

    const job = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      body: { prompt: 'something to be notified about' },
    });
    const delivery = await storeDelivery(svc, {
      webhookId: created.id,
      jobId: String(job.json.id),
      type: 'job.failed',
      state: 'failed',
      attempts: [{ status: 500, latencyMs: 5 }],
      createdAt: new Date(Date.now() - 60_000),
    });
    const page = await hooks.listDeliveries(created.id, { limit: 10 });
    assert.deepEqual(
      page.deliveries.map((d) => [d.id, d.state]),
      [[delivery, 'failed']],
    );
    assert.equal(page.nextCursor, null);
    // A disabled endpoint takes no redelivery: Errand's 409, as a typed error.
    const refused = await expectError(hooks.redeliver(created.id, delivery));
    assert.equal(refused.code, 'conflict');
    await hooks.updateWebhook(created.id, { enabled: true });
    const again = await hooks.redeliver(created.id, delivery);
    assert.equal(again.state, 'pending');

    await hooks.deleteWebhook(created.id);
    const gone = await expectError(hooks.getWebhook(created.id));
    assert.equal(gone.code, 'not_found');
    // Every webhook call is in a project: without one it is refused before any request.
    await assert.rejects(admin.listWebhooks(), TypeError);
  });

  test('secrets: set (created, then replaced), list without values, delete; refusals typed', async () => {
    const project = await admin.createProject({
      name: 'with secrets',
      repository: svc.database.dataDir,
    });
    const secrets = new ErrandClient({
      baseUrl: svc.url,
      apiKey: svc.adminKey,
      projectId: project.id,
    });
    const value = 'typed-client-secret-value-7f3e';
    const first = await secrets.setSecret('NPM_TOKEN', { value });
    assert.equal(first.created, true);
    assert.equal(first.secret.name, 'NPM_TOKEN');
    assert.equal(first.secret.exposure, 'setup');
    const second = await secrets.setSecret('NPM_TOKEN', { value, exposure: 'commands' });
    assert.equal(second.created, false);
    assert.equal(second.secret.exposure, 'commands');
    const listed = await secrets.listSecrets();
    assert.deepEqual(listed, [second.secret]);
    assert.ok(!JSON.stringify(listed).includes(value));
    const reserved = await expectError(secrets.setSecret('LD_PRELOAD', { value }));
    assert.equal(reserved.code, 'bad_request');
    assert.match(reserved.serverMessage ?? '', /LD_PRELOAD is reserved/);
    assert.ok(!reserved.message.includes(value));
    await secrets.deleteSecret('NPM_TOKEN');
    assert.deepEqual(await secrets.listSecrets(), []);
    const gone = await expectError(secrets.deleteSecret('NPM_TOKEN'));
    assert.equal(gone.code, 'not_found');
    await assert.rejects(admin.listSecrets(), TypeError);
    await assert.rejects(secrets.setSecret('', { value }), TypeError);
  });
});
