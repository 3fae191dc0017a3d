// The dashboard's webhook pages against a real service: over HTTP with a real session, who may
// see and change them, cross-site posts, and refused input shown on the form; then in a real
// browser, an endpoint created with its secret shown once, a real delivery to a loopback
// receiver (verified with the Standard Webhooks reference library against the secret the page
// showed), a redelivery, rotation, disable and delete.
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import type { WebhookRecord } from '../../src/features/webhooks/types.ts';
import { createLogger } from '../../src/log.ts';
import { getPage, postForm, sessionCookie } from '../support/dashboard.ts';
import { RecordingRunner } from '../support/runners.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';
import { storeDelivery } from '../support/stored-deliveries.ts';
import { browserSkipReason, launchBrowser, signIn } from './browser.ts';

const HOSTILE = `<script>alert(1)</script>"><img src=x onerror=alert(1)>`;
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
// A public address written as one: no DNS lookup, which these machines may not have.
const PUBLIC_URL = 'https://1.1.1.1/errand-hooks';
const FAKE_WEBHOOK = 'whk_00000000000000000000';
const FAKE_DELIVERY = 'msg_00000000000000000000';

/** Every stored webhook and delivery: equal before and after means nothing was written. */
async function snapshot(svc: TestService): Promise<string> {
  const { db } = svc.service.ctx;
  const webhooks = await db.selectFrom('webhooks').selectAll().orderBy('id').execute();
  const deliveries = await db.selectFrom('webhook_deliveries').selectAll().orderBy('id').execute();
  return JSON.stringify({ webhooks, deliveries });
}

async function webhooksOf(svc: TestService, projectId: string): Promise<WebhookRecord[]> {
  const listed = await svc.request('GET', `/v2/admin/projects/${projectId}/webhooks`);
  assert.equal(listed.status, 200);
  return (JSON.parse(listed.text) as { webhooks: WebhookRecord[] }).webhooks;
}

async function webhookOf(svc: TestService, projectId: string, id: string): Promise<WebhookRecord> {
  const got = await svc.request('GET', `/v2/admin/projects/${projectId}/webhooks/${id}`);
  assert.equal(got.status, 200);
  return JSON.parse(got.text) as WebhookRecord;
}

/** The text of the page's alert, as a reader of the page gets it. */
function alertText(html: string): string {
  const text = /<p class="notice error" role="alert">([^<]*)<\/p>/.exec(html)?.[1] ?? '';
  return text
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

describe('dashboard webhooks over HTTP', () => {
  let svc: TestService;
  let projectId: string;
  let webhookId: string;
  let admin: string;
  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'dashboard-webhooks-secret-key' },
    });
    projectId = (await svc.createProject({ name: 'hooked' })).id;
    const created = await svc.request('POST', `/v2/admin/projects/${projectId}/webhooks`, {
      body: { url: PUBLIC_URL, events: ['job.completed'] },
    });
    assert.equal(created.status, 201, created.text);
    webhookId = String(created.json.id);
    admin = await sessionCookie(svc, svc.adminKey);
  });
  after(async () => {
    await svc?.close();
  });

  const pagePaths = () => [
    `/projects/${projectId}/webhooks`,
    `/projects/${projectId}/webhooks/${webhookId}`,
    `/projects/${projectId}/webhooks/${webhookId}/delete`,
  ];
  const actionPaths = () => [
    `/projects/${projectId}/webhooks`,
    `/projects/${projectId}/webhooks/${webhookId}`,
    `/projects/${projectId}/webhooks/${webhookId}/enabled`,
    `/projects/${projectId}/webhooks/${webhookId}/rotate`,
    `/projects/${projectId}/webhooks/${webhookId}/delete`,
    `/projects/${projectId}/webhooks/${webhookId}/deliveries/${FAKE_DELIVERY}/redeliver`,
  ];
  const actionFields = {
    url: 'https://1.1.1.2/planted',
    'event:job.failed': '1',
    enabled: 'false',
    overlapHours: '0',
  };

  test('the settings page links to the webhooks; the list shows each endpoint and never a secret', async () => {
    const settings = await getPage(svc, admin, `/projects/${projectId}/settings`);
    assert.equal(settings.status, 200);
    assert.ok(settings.text.includes(`href="/projects/${projectId}/webhooks"`));
    const list = await getPage(svc, admin, `/projects/${projectId}/webhooks`);
    assert.equal(list.status, 200);
    assert.equal(list.location, null);
    assert.ok(list.text.includes(PUBLIC_URL));
    assert.ok(list.text.includes(webhookId));
    assert.ok(!list.text.includes('whsec_'), 'a secret on the list');
    const detail = await getPage(svc, admin, `/projects/${projectId}/webhooks/${webhookId}`);
    assert.equal(detail.status, 200);
    assert.ok(!detail.text.includes('whsec_'), 'a secret on the webhook page');
    assert.match(detail.text, /No deliveries yet\./);
  });

  test('without a session a browser is sent to sign in, a script gets 401, and nothing is written', async () => {
    const before = await snapshot(svc);
    for (const path of pagePaths()) {
      const browserGet = await getPage(svc, '', path);
      assert.equal(browserGet.status, 303, path);
      assert.equal(browserGet.location, '/', path);
      const scriptGet = await fetch(`${svc.url}${path}`);
      assert.equal(scriptGet.status, 401, path);
      assert.equal(((await scriptGet.json()) as { code: string }).code, 'unauthorized');
    }
    for (const path of actionPaths()) {
      assert.equal((await postForm(svc, '', path, actionFields)).status, 401, path);
    }
    assert.equal(await snapshot(svc), before);
  });

  test("a project key's session gets 403 on every webhook page and action, and writes nothing", async () => {
    const { key } = await svc.createProjectKey(projectId);
    const cookie = await sessionCookie(svc, key);
    const before = await snapshot(svc);
    for (const path of pagePaths()) {
      const page = await getPage(svc, cookie, path);
      assert.equal(page.status, 403, path);
      assert.match(alertText(page.text), /needs an admin key/, path);
    }
    for (const path of actionPaths()) {
      assert.equal((await postForm(svc, cookie, path, actionFields)).status, 403, path);
    }
    assert.equal(await snapshot(svc), before);
    const projects = await getPage(svc, cookie, '/projects');
    assert.ok(!projects.text.includes('/webhooks'), 'a project key is shown no webhooks link');
  });

  test('a cross-site post is refused with 403 and writes nothing', async () => {
    const before = await snapshot(svc);
    for (const path of actionPaths()) {
      const forged = await postForm(svc, admin, path, actionFields, 'http://evil.example');
      assert.equal(forged.status, 403, path);
    }
    assert.equal(await snapshot(svc), before);
  });

  test('refused input re-renders the form with the message and what was typed; nothing is written', async () => {
    const before = await snapshot(svc);
    const list = `/projects/${projectId}/webhooks`;
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ url: 'not a url', 'event:job.completed': '1' }, /url/i],
      [{ url: 'https://127.0.0.1/hook', 'event:job.completed': '1' }, /only public addresses/],
      [{ url: 'https://10.1.2.3/hook', 'event:job.completed': '1' }, /only public addresses/],
      [{ url: 'http://1.1.1.1/hook', 'event:job.completed': '1' }, /https/],
      [{ url: PUBLIC_URL }, /"events"/],
      [
        { url: PUBLIC_URL, 'event:job.completed': '1', description: 'x'.repeat(501) },
        /"description"/,
      ],
    ];
    for (const [fields, message] of cases) {
      const page = await postForm(svc, admin, list, fields);
      assert.equal(page.status, 400, `${JSON.stringify(fields)}: ${alertText(page.text)}`);
      assert.match(alertText(page.text), message, JSON.stringify(fields));
      assert.ok(
        page.text.includes(`value="${fields.url?.replace(/"/g, '&quot;')}"`),
        'the typed URL is kept',
      );
      assert.ok(!page.text.includes('whsec_'));
    }

    const detail = `/projects/${projectId}/webhooks/${webhookId}`;
    const edit = await postForm(svc, admin, detail, {
      url: 'https://192.168.0.1/x',
      'event:job.completed': '1',
      enabled: '1',
    });
    assert.equal(edit.status, 400);
    assert.match(alertText(edit.text), /only public addresses/);
    assert.ok(edit.text.includes('value="https://192.168.0.1/x"'));
    const noEvents = await postForm(svc, admin, detail, { url: PUBLIC_URL, enabled: '1' });
    assert.equal(noEvents.status, 400);
    assert.match(alertText(noEvents.text), /"events"/);

    for (const overlapHours of ['soon', '169', '-1', '1.5']) {
      const rotate = await postForm(svc, admin, `${detail}/rotate`, { overlapHours });
      assert.equal(rotate.status, 400, overlapHours);
      assert.match(alertText(rotate.text), /whole number of hours from 0 to 168/);
      assert.ok(!rotate.text.includes('whsec_'));
    }
    const toggle = await postForm(svc, admin, `${detail}/enabled`, { enabled: 'maybe' });
    assert.equal(toggle.status, 400);
    assert.match(alertText(toggle.text), /"enabled" must be true or false/);
    assert.equal(await snapshot(svc), before);
  });

  test('an unknown or malformed webhook or delivery is a 404 page, and another project cannot reach it', async () => {
    const other = (await svc.createProject({ name: 'another' })).id;
    const before = await snapshot(svc);
    for (const path of [
      `/projects/${projectId}/webhooks/${FAKE_WEBHOOK}`,
      `/projects/${projectId}/webhooks/not-an-id`,
      `/projects/${other}/webhooks/${webhookId}`,
      `/projects/${other}/webhooks/${webhookId}/delete`,
      '/projects/prj_00000000000000000000/webhooks',
    ]) {
      const page = await getPage(svc, admin, path);
      assert.equal(page.status, 404, path);
      assert.match(alertText(page.text), /not found/, path);
    }
    for (const path of [
      `/projects/${other}/webhooks/${webhookId}/delete`,
      `/projects/${other}/webhooks/${webhookId}/enabled`,
      `/projects/${projectId}/webhooks/${FAKE_WEBHOOK}/rotate`,
      `/projects/${projectId}/webhooks/${webhookId}/deliveries/${FAKE_DELIVERY}/redeliver`,
      `/projects/${projectId}/webhooks/${webhookId}/deliveries/not-an-id/redeliver`,
    ]) {
      const page = await postForm(svc, admin, path, { enabled: 'false', overlapHours: '0' });
      assert.equal(page.status, 404, path);
    }
    const badCursor = await getPage(
      svc,
      admin,
      `/projects/${projectId}/webhooks/${webhookId}?cursor=nonsense`,
    );
    assert.equal(badCursor.status, 400);
    assert.equal(await snapshot(svc), before);
  });

  test('the delivery log: newest first with attempts; redeliver; a pending one cannot be', async () => {
    const job = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'to be told about' },
    });
    assert.equal(job.status, 201);
    const jobId = String(job.json.id);
    const t0 = Date.now() - 120_000;
    const older = await storeDelivery(svc, {
      webhookId,
      jobId,
      type: 'job.completed',
      state: 'failed',
      attempts: [
        { status: 503, latencyMs: 41 },
        { status: null, error: `connection refused ${HOSTILE}`, latencyMs: 3 },
      ],
      createdAt: new Date(t0),
    });
    const newer = await storeDelivery(svc, {
      webhookId,
      jobId,
      type: 'job.completed',
      state: 'pending',
      attempts: [],
      createdAt: new Date(t0 + 60_000),
    });
    const detail = `/projects/${projectId}/webhooks/${webhookId}`;
    const page = await getPage(svc, admin, detail);
    assert.equal(page.status, 200);
    assert.ok(page.text.indexOf(newer) < page.text.indexOf(older), 'newest first');
    assert.ok(page.text.includes('<td data-label="Status">503</td>'));
    assert.ok(page.text.includes('<td data-label="Latency">41 ms</td>'));
    assert.ok(page.text.includes('connection refused &lt;script&gt;'), 'the error is escaped');
    assert.ok(!page.text.includes(HOSTILE));
    assert.ok(page.text.includes(`/deliveries/${older}/redeliver`));
    assert.ok(!page.text.includes(`/deliveries/${newer}/redeliver`), 'no button for a pending one');

    const pending = await postForm(svc, admin, `${detail}/deliveries/${newer}/redeliver`, {});
    assert.equal(pending.status, 409);
    assert.match(alertText(pending.text), /pending/);

    const again = await postForm(svc, admin, `${detail}/deliveries/${older}/redeliver`, {});
    assert.equal(again.status, 303);
    assert.equal(again.location, `${detail}?done=${older}#deliveries`);
    const shown = await getPage(svc, admin, `${detail}?done=${older}`);
    assert.ok(shown.text.includes(`Delivery ${older} is queued again.`));
    const stored = await svc.service.ctx.db
      .selectFrom('webhook_deliveries')
      .select('state')
      .where('id', '=', older)
      .executeTakeFirstOrThrow();
    assert.equal(stored.state, 'pending');

    // A disabled endpoint's delivery is not sent again: the page says why.
    const failed = await storeDelivery(svc, {
      webhookId,
      jobId,
      type: 'job.completed',
      state: 'failed',
      attempts: [{ status: 500, latencyMs: 5 }],
      createdAt: new Date(t0 + 90_000),
    });
    assert.equal(
      (await postForm(svc, admin, `${detail}/enabled`, { enabled: 'false' })).status,
      303,
    );
    const refused = await postForm(svc, admin, `${detail}/deliveries/${failed}/redeliver`, {});
    assert.equal(refused.status, 409);
    assert.match(alertText(refused.text), /disabled/);
    assert.equal(
      (await postForm(svc, admin, `${detail}/enabled`, { enabled: 'true' })).status,
      303,
    );

    // Pages of 20, newest first: these come between the first two, so the oldest moves on.
    for (let i = 0; i < 20; i++) {
      await storeDelivery(svc, {
        webhookId,
        jobId,
        type: 'job.completed',
        state: 'delivered',
        attempts: [{ status: 200, latencyMs: 1 }],
        createdAt: new Date(t0 + (i + 1) * 1000),
      });
    }
    const first = await getPage(svc, admin, detail);
    assert.ok(!first.text.includes(older), 'the oldest are on the next page');
    const next = /href="([^"]*\?cursor=[^"#]+)#deliveries">Older deliveries/.exec(first.text)?.[1];
    assert.ok(next, 'a link to older deliveries');
    const second = await getPage(svc, admin, next.replace(/&amp;/g, '&'));
    assert.equal(second.status, 200);
    assert.equal((second.text.match(/class="card delivery"/g) ?? []).length, 3);
  });

  test('create, update, enable, rotate and delete over HTTP; the secret only in the answer to create and rotate', async () => {
    const list = `/projects/${projectId}/webhooks`;
    const created = await postForm(svc, admin, list, {
      url: 'https://1.1.1.1/second',
      'event:job.failed': '1',
      'event:job.archived': '1',
      'event:not.a.type': '1',
      description: 'second one',
    });
    assert.equal(created.status, 201, alertText(created.text));
    const secret = /<code id="new-secret">([^<]+)<\/code>/.exec(created.text)?.[1] ?? '';
    assert.match(secret, SECRET);
    assert.match(created.text, /will not be shown\s+again/);
    const stored = await webhooksOf(svc, projectId);
    const made = stored.find((w) => w.url === 'https://1.1.1.1/second');
    assert.ok(made);
    assert.deepEqual(made.events, ['job.failed', 'job.archived']);
    const again = await getPage(svc, admin, list);
    assert.ok(!again.text.includes(secret), 'the secret is shown again');

    const detail = `${list}/${made.id}`;
    const saved = await postForm(svc, admin, detail, {
      url: 'https://1.1.1.1/second-moved',
      'event:turn.finished': '1',
      description: '',
    });
    assert.equal(saved.status, 303);
    assert.equal(saved.location, `${detail}?done=saved`);
    const updated = await webhookOf(svc, projectId, made.id);
    assert.equal(updated.url, 'https://1.1.1.1/second-moved');
    assert.deepEqual(updated.events, ['turn.finished']);
    assert.equal(updated.description, null);
    assert.equal(updated.enabled, false, 'an unticked Enabled box disables it');
    const enabled = await postForm(svc, admin, `${detail}/enabled`, { enabled: 'true' });
    assert.equal(enabled.status, 303);
    assert.equal(enabled.location, list);
    assert.equal((await webhookOf(svc, projectId, made.id)).enabled, true);

    const rotated = await postForm(svc, admin, `${detail}/rotate`, { overlapHours: '0' });
    assert.equal(rotated.status, 200);
    const newSecret = /<code id="new-secret">([^<]+)<\/code>/.exec(rotated.text)?.[1] ?? '';
    assert.match(newSecret, SECRET);
    assert.notEqual(newSecret, secret);
    assert.ok(!(await getPage(svc, admin, detail)).text.includes(newSecret));

    const confirm = await getPage(svc, admin, `${detail}/delete`);
    assert.equal(confirm.status, 200);
    assert.match(confirm.text, /This cannot be undone/);
    const deleted = await postForm(svc, admin, `${detail}/delete`, {});
    assert.equal(deleted.status, 303);
    assert.equal(deleted.location, list);
    const gone = await svc.request('GET', `/v2/admin/projects/${projectId}/webhooks/${made.id}`);
    assert.equal(gone.status, 404);
  });
});

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** Verifies a delivery as a receiver would, with the specification's reference library. */
function verify(secret: string, delivery: Received): unknown {
  const header = (name: string) => String(delivery.headers[name] ?? '');
  return new Webhook(secret).verify(delivery.body, {
    'webhook-id': header('webhook-id'),
    'webhook-timestamp': header('webhook-timestamp'),
    'webhook-signature': header('webhook-signature'),
  });
}

function watchDialogs(page: Page): string[] {
  const dialogs: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  return dialogs;
}

describe('dashboard webhooks in a browser', { skip: browserSkipReason }, () => {
  let svc: TestService;
  let browser: Browser;
  let receiver: Server;
  let receiverUrl: string;
  const received: Received[] = [];
  let logged = '';
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      logged += String(chunk);
      done();
    },
  });
  before(async () => {
    receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      request.on('end', () => {
        received.push({ headers: request.headers, body });
        response.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
    svc = await startTestService({
      log: createLogger('trace', logSink),
      // Turns complete at once: this is about what the webhook is told, not the agent.
      runner: new RecordingRunner(async () => ({ summary: 'done' })),
      env: {
        ERRAND_SECRET_KEY: 'dashboard-webhooks-browser-key',
        ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true',
      },
    });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
    receiver?.close();
  });

  test('create an endpoint and see its secret once; a real delivery in the log, redelivered; rotate, disable, delete', async () => {
    const project = await svc.createProject({ name: 'browser hooks' });
    const context = await browser.newContext();
    const page = await context.newPage();
    const dialogs = watchDialogs(page);
    await signIn(page, svc.url, svc.adminKey);
    await page
      .getByRole('row', { name: /browser hooks/ })
      .getByRole('link', { name: 'Settings' })
      .click();
    await page.getByRole('link', { name: 'Webhooks of this project' }).click();
    const list = `${svc.url}/projects/${project.id}/webhooks`;
    await page.waitForURL(list);
    await page.getByText('No webhooks yet.').waitFor();

    // A refused address is shown on the form, which keeps what was typed.
    await page.getByLabel('URL').fill('ftp://127.0.0.1/nope');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    await page.getByRole('alert').waitFor();
    assert.equal(await page.getByLabel('URL').inputValue(), 'ftp://127.0.0.1/nope');

    await page.getByLabel('URL').fill(receiverUrl);
    for (const box of await page.getByRole('checkbox').all()) await box.uncheck();
    await page.getByRole('checkbox', { name: 'job.completed' }).check();
    await page.getByLabel('Description').fill(HOSTILE);
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const secret = (await page.locator('#new-secret').textContent())?.trim() ?? '';
    assert.match(secret, SECRET);
    await page.getByText('will not be shown again').waitFor();
    await page.getByRole('button', { name: 'Copy' }).waitFor();
    const row = page.getByRole('row', { name: new RegExp(receiverUrl.replace(/[./]/g, '\\$&')) });
    await row.getByText(HOSTILE, { exact: true }).waitFor();
    await row.getByText('job.completed', { exact: true }).waitFor();
    await row.getByText('enabled', { exact: true }).waitFor();

    // Shown once: the same page loaded again has no secret.
    await page.goto(list);
    assert.ok(!(await page.content()).includes(secret), 'the secret is shown again');
    assert.equal(await page.locator('#new-secret').count(), 0);

    // A job that completes: the receiver is told, signed with the secret the page showed.
    const job = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      body: { prompt: 'something worth a webhook' },
    });
    assert.equal(job.status, 201);
    const first = await waitFor('the delivery', async () => received[0], 30_000);
    const payload = verify(secret, first) as { type: string; data: unknown };
    assert.equal(payload.type, 'job.completed');
    const deliveryId = String(first.headers['webhook-id']);

    await row.getByRole('link', { name: 'Deliveries and settings' }).click();
    const delivery = page.getByRole('region', { name: `Delivery ${deliveryId}` });
    await delivery.getByText('delivered', { exact: true }).waitFor({ timeout: 10_000 });
    await delivery.getByRole('cell', { name: '200', exact: true }).waitFor();
    await delivery.getByRole('link', { name: String(job.json.id) }).waitFor();

    await delivery.getByRole('button', { name: 'Redeliver' }).click();
    await page.getByText(`Delivery ${deliveryId} is queued again.`).waitFor();
    const second = await waitFor('the redelivery', async () => received[1], 30_000);
    assert.equal(second.headers['webhook-id'], deliveryId, 'the same webhook-id');
    assert.equal(second.body, first.body, 'the same payload');
    verify(secret, second);
    await waitFor('the second attempt in the log', async () => {
      await page.reload();
      return (await delivery.getByRole('cell', { name: '200', exact: true }).count()) === 2
        ? true
        : undefined;
    });

    // Rotation: the new secret is shown once; the old one still signs for the overlap.
    await page.getByLabel('Overlap in hours').fill('2');
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = (await page.locator('#new-secret').textContent())?.trim() ?? '';
    assert.match(rotated, SECRET);
    assert.notEqual(rotated, secret);
    await page.getByText('signs too until').waitFor();
    await delivery.getByRole('button', { name: 'Redeliver' }).click();
    await page.getByText(`Delivery ${deliveryId} is queued again.`).waitFor();
    const third = await waitFor('the redelivery after rotation', async () => received[2]);
    verify(rotated, third);
    verify(secret, third);
    assert.ok(!(await page.content()).includes(rotated), 'the new secret is shown again');

    // Disable from the list, then delete after the confirmation.
    await page.goto(list);
    await row.getByRole('button', { name: 'Disable' }).click();
    await page.waitForURL(list);
    await row.getByText('disabled', { exact: true }).waitFor();
    const [stored] = await webhooksOf(svc, project.id);
    assert.equal(stored?.enabled, false);
    await row.getByRole('link', { name: 'Deliveries and settings' }).click();
    await page.getByRole('link', { name: 'Delete this webhook…' }).click();
    await page.getByText('This cannot be undone').waitFor();
    await page.getByRole('button', { name: 'Delete' }).click();
    await page.waitForURL(list);
    await page.getByText('No webhooks yet.').waitFor();
    assert.deepEqual(await webhooksOf(svc, project.id), []);

    assert.deepEqual(dialogs, []);
    assert.equal(await page.locator('img').count(), 0);
    await context.close();
    assert.ok(logged.length > 0, 'the service logged');
    for (const shown of [secret, rotated]) {
      assert.ok(!logged.includes(shown), 'a webhook secret in the log');
      assert.ok(!logged.includes(shown.slice('whsec_'.length)), 'a webhook secret in the log');
    }
  });
});
