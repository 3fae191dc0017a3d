// The dashboard in a real browser against a real service: signing in with the admin key,
// creating a project, its API keys page (projectId, create, revoke), sign-out; and the
// security cases: no session, cross-site posts, a project key's reach, escaping, revocation.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { dashboard } from '../../src/dashboard/plugin.ts';
import { SESSION_COOKIE, signIn as signInSession } from '../../src/dashboard/sessions.ts';
import { buildApp } from '../../src/http/app.ts';
import { recordProgress, recordReviewDiff } from '../../src/jobs/lifecycle.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { browserSkipReason, launchBrowser, signIn } from './browser.ts';

const HOSTILE = `<script>alert(1)</script>"><img src=x onerror=alert(1)>`;

/** Fails the test on any dialog: an alert means injected script ran. */
function watchDialogs(page: Page): string[] {
  const dialogs: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  return dialogs;
}

describe('dashboard', { skip: browserSkipReason }, () => {
  let svc: TestService;
  let browser: Browser;
  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'dashboard-test-secret-key' },
    });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
  });

  test('sign in with the admin key, create a project, read its projectId, create and revoke a key, sign out', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const dialogs = watchDialogs(page);

    const signInResponse = await page.goto(`${svc.url}/`);
    const csp = signInResponse?.headers()['content-security-policy'] ?? '';
    assert.match(csp, /script-src 'self'/);
    assert.doesNotMatch(csp, /unsafe-inline/);
    await signIn(page, svc.url, svc.adminKey);

    const [cookie] = await context.cookies();
    assert.equal(cookie?.name, 'errand_session');
    assert.equal(cookie?.httpOnly, true);
    assert.equal(cookie?.sameSite, 'Strict');
    assert.equal(cookie?.secure, false, 'Secure only when ERRAND_PUBLIC_URL is https');
    assert.notEqual(cookie?.value, svc.adminKey);
    assert.ok(!page.url().includes(svc.adminKey));
    assert.ok(!(await page.content()).includes(svc.adminKey));
    assert.deepEqual(
      await page.evaluate(() => [localStorage.length, sessionStorage.length]),
      [0, 0],
    );

    // A refused create shows the service's message and keeps what was typed.
    await page.getByLabel('Name', { exact: true }).fill('refused');
    await page.getByLabel('Repository').fill(svc.database.dataDir);
    await page.getByLabel('Default model').fill('not a model');
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.getByRole('alert').getByText('"model" must look like provider:model').waitFor();
    assert.equal(await page.getByLabel('Repository').inputValue(), svc.database.dataDir);
    const listed = await svc.request('GET', '/v2/admin/projects');
    assert.equal((listed.json.projects as unknown[]).length, 0, 'a refused create writes nothing');

    await page.getByLabel('Name', { exact: true }).fill(HOSTILE);
    await page.getByLabel('Default model').fill('');
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.waitForURL(`${svc.url}/projects`);
    const row = page.getByRole('row', { name: /alert/ });
    await row.getByText(HOSTILE, { exact: true }).waitFor();
    assert.equal(await page.locator('img').count(), 0, 'the name renders as text');

    await row.getByRole('link', { name: 'API keys' }).click();
    const projectId = (await page.locator('#project-id-value').textContent())?.trim() ?? '';
    assert.match(projectId, /^prj_/);
    const project = await svc.request('GET', `/v2/admin/projects/${projectId}`);
    assert.equal(project.status, 200);
    assert.equal(project.json.name, HOSTILE);
    assert.match(
      (await page.locator('#curl-example').textContent()) ?? '',
      new RegExp(`${svc.url}/v2/agent/${projectId}/job`),
    );

    await page.getByLabel('Name').fill('from the browser');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.locator('#new-key').textContent())?.trim() ?? '';
    assert.match(key, /^errand_/);
    await page.getByText('server-side secret').waitFor();
    const used = await svc.request('GET', `/v2/agent/${projectId}/jobs`, { key });
    assert.equal(used.status, 200, 'the new key works on the API');
    // Shown once: the page after a reload lists the key by its first characters only.
    await page.goto(`${svc.url}/projects/${projectId}/keys`);
    assert.ok(!(await page.content()).includes(key));
    const keyRow = page.getByRole('row', { name: /from the browser/ });
    await keyRow.getByText(`${key.slice(0, 11)}…`).waitFor();

    await keyRow.getByRole('link', { name: 'Revoke…' }).click();
    await page.getByText('This cannot be undone').waitFor();
    await page.getByRole('button', { name: 'Revoke' }).click();
    await page.waitForURL(`${svc.url}/projects/${projectId}/keys`);
    assert.equal(await keyRow.getByRole('link', { name: 'Revoke…' }).count(), 0);
    assert.equal((await svc.request('GET', `/v2/agent/${projectId}/jobs`, { key })).status, 401);

    const response = await page.reload();
    assert.equal(response?.headers()['cache-control'], 'no-store');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${svc.url}/`);
    await page.goBack();
    await page.getByLabel('API key').waitFor();
    assert.ok(!(await page.content()).includes(projectId), 'back after sign-out shows no data');
    assert.deepEqual(dialogs, []);
    await context.close();
  });

  test('without a session every page sends a browser to sign in, and a script gets 401', async () => {
    const project = await svc.createProject({ name: 'no session' });
    const pages = [
      '/projects',
      `/projects/${project.id}/settings`,
      `/projects/${project.id}/keys`,
      `/projects/${project.id}/jobs`,
      `/projects/${project.id}/jobs/job_00000000000000000000`,
      `/projects/${project.id}/jobs/job_00000000000000000000/events`,
      `/projects/${project.id}/jobs/job_00000000000000000000/archive`,
      '/keys',
      '/keys/key_00000000000000000000/revoke',
      '/tokens',
      '/tokens/tok_00000000000000000000/revoke',
    ];
    for (const path of pages) {
      const browserGet = await fetch(`${svc.url}${path}`, {
        headers: { accept: 'text/html' },
        redirect: 'manual',
      });
      assert.equal(browserGet.status, 303, path);
      assert.equal(browserGet.headers.get('location'), '/', path);
      const scriptGet = await fetch(`${svc.url}${path}`);
      assert.equal(scriptGet.status, 401, path);
      assert.equal(((await scriptGet.json()) as { code: string }).code, 'unauthorized');
    }
    const actions = [
      '/projects',
      `/projects/${project.id}/settings`,
      `/projects/${project.id}/keys`,
      `/projects/${project.id}/jobs`,
      `/projects/${project.id}/jobs/job_00000000000000000000/message`,
      `/projects/${project.id}/jobs/job_00000000000000000000/archive`,
      '/keys',
      '/keys/key_00000000000000000000/revoke',
      '/tokens',
      '/tokens/tok_00000000000000000000/revoke',
    ];
    const before = await svc.request('GET', '/v2/admin/keys');
    for (const path of actions) {
      const post = await fetch(`${svc.url}${path}`, {
        method: 'POST',
        headers: { origin: svc.url, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'name=x&repository=x',
      });
      assert.equal(post.status, 401, path);
    }
    assert.deepEqual((await svc.request('GET', '/v2/admin/keys')).json, before.json);

    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${svc.url}/projects/${project.id}/keys`);
    await page.getByLabel('API key').waitFor();
    await context.close();
  });

  test('a cross-site form post is refused and writes nothing', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, svc.url, svc.adminKey);
    const before = (await svc.request('GET', '/v2/admin/projects')).json;
    // Another site (localhost is not the same site as 127.0.0.1) with a form that posts here.
    const target = `${svc.url}/projects`;
    const evil: Server = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(`<form method="post" action="${target}">
          <input name="name" value="planted"><input name="repository" value="${svc.database.dataDir}">
          <button>go</button></form>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = evil.address() as AddressInfo;
      await page.goto(`http://localhost:${port}/`);
      const [response] = await Promise.all([
        page.waitForResponse(target),
        page.getByRole('button', { name: 'go' }).click(),
      ]);
      assert.equal(response.status(), 403);
    } finally {
      evil.close();
    }
    // The same from a script that forges the Origin but carries the session cookie.
    const [cookie] = await context.cookies();
    const forged = await fetch(target, {
      method: 'POST',
      headers: {
        origin: 'http://evil.example',
        cookie: `${cookie?.name}=${cookie?.value}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: `name=planted&repository=${encodeURIComponent(svc.database.dataDir)}`,
    });
    assert.equal(forged.status, 403);
    assert.deepEqual((await svc.request('GET', '/v2/admin/projects')).json, before);
    await context.close();
  });

  test("a project key's session sees only its project, no keys and no settings; revoking the key ends it", async () => {
    const mine = await svc.createProject({ name: 'mine' });
    const other = await svc.createProject({ name: 'other project' });
    const { id: keyId, key } = await svc.createProjectKey(mine.id);
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, svc.url, key);
    await page.getByRole('cell', { name: /mine/ }).waitFor();
    assert.equal(await page.getByText('other project').count(), 0);
    assert.equal(await page.getByRole('link', { name: 'API keys' }).count(), 0);
    assert.equal(await page.getByRole('link', { name: 'Admin keys' }).count(), 0);
    for (const path of [
      `/projects/${other.id}/keys`,
      `/projects/${mine.id}/keys`,
      `/projects/${mine.id}/settings`,
      '/keys',
      `/keys/${keyId}/revoke`,
    ]) {
      const response = await page.goto(`${svc.url}${path}`);
      assert.equal(response?.status(), 403, path);
      await page.getByRole('alert').getByText('needs an admin key').waitFor();
    }
    const revoked = await svc.request('POST', `/v2/admin/keys/${keyId}/revoke`);
    assert.equal(revoked.status, 200);
    await page.goto(`${svc.url}/projects`);
    await page.waitForURL(`${svc.url}/`);
    await page.getByLabel('API key').waitFor();
    await context.close();
  });

  test('settings: an edit is saved through the service, a stored token is never shown again', async () => {
    const project = await svc.createProject({ name: 'to edit' });
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, svc.url, svc.adminKey);
    await page.goto(`${svc.url}/projects/${project.id}/settings`);
    await page.getByLabel('Ref').fill('not..a ref');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('alert').getByText('is not a valid git ref name').waitFor();
    assert.equal((await svc.request('GET', `/v2/admin/projects/${project.id}`)).json.ref, 'main');
    await page.getByLabel('Ref').fill('develop');
    await page.getByLabel('Name', { exact: true }).fill('edited');
    const token = 'tok-never-shown-again-0123456789';
    await page.getByLabel('Or a token to store (encrypted)').fill(token);
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').getByText('Saved.').waitFor();
    const stored = await svc.request('GET', `/v2/admin/projects/${project.id}`);
    assert.equal(stored.json.ref, 'develop');
    assert.equal(stored.json.name, 'edited');
    assert.equal((stored.json.forge as { credentials: string }).credentials, 'stored-token');
    await page.getByText('a stored token (never shown again)').waitFor();
    assert.ok(!(await page.content()).includes(token));
    assert.equal(await page.getByLabel('Or a token to store (encrypted)').inputValue(), '');

    // Saving with the credential fields left empty keeps them; the checkbox removes them.
    await page.getByLabel('Ref').fill('main');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').getByText('Saved.').waitFor();
    const kept = await svc.request('GET', `/v2/admin/projects/${project.id}`);
    assert.equal((kept.json.forge as { credentials: string }).credentials, 'stored-token');
    await page.getByLabel('Remove the credentials').check();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').getByText('Saved.').waitFor();
    const removed = await svc.request('GET', `/v2/admin/projects/${project.id}`);
    assert.equal((removed.json.forge as { credentials: string }).credentials, 'none');

    // Budgets, in dollars: a bad amount is refused naming the field; an emptied one is removed.
    await page
      .locator('#month-spend')
      .getByText(/^Spent in \d{4}-\d{2} \(UTC\): \$0\.00, estimated/)
      .waitFor();
    await page.getByLabel('Per calendar month (UTC)').fill('25');
    await page.getByLabel('Per job (all its turns)').fill('lots');
    await page.getByRole('button', { name: 'Save' }).click();
    await page
      .getByRole('alert')
      .getByText('"jobBudgetUsd" must be a number of US dollars')
      .waitFor();
    await page.getByLabel('Per job (all its turns)').fill('$1.50');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').getByText('Saved.').waitFor();
    const budgeted = await svc.request('GET', `/v2/admin/projects/${project.id}`);
    assert.equal(budgeted.json.jobBudgetUsd, 1.5);
    assert.equal(budgeted.json.monthlyBudgetUsd, 25);
    await page.locator('#month-spend').getByText('of the monthly budget of $25.00').waitFor();
    assert.equal(await page.getByLabel('Per job (all its turns)').inputValue(), '1.5');
    await page.getByLabel('Per job (all its turns)').fill('');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').getByText('Saved.').waitFor();
    const unbudgeted = await svc.request('GET', `/v2/admin/projects/${project.id}`);
    assert.equal(unbudgeted.json.jobBudgetUsd, null);
    assert.equal(unbudgeted.json.monthlyBudgetUsd, 25);
    await context.close();
  });

  test('jobs of a project: newest first, prompts as text, status filter, pagination, a new job from the page', async () => {
    const project = await svc.createProject({ name: 'with jobs' });
    const other = await svc.createProject({ name: 'someone else' });
    const { key } = await svc.createProjectKey(project.id);
    for (let i = 1; i <= 20; i++) {
      const made = await svc.request('POST', `/v2/agent/${project.id}/job`, {
        key,
        body: { prompt: `older job ${i}` },
      });
      assert.equal(made.status, 201);
    }
    const hostile = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      key,
      body: { prompt: `${HOSTILE} [x](javascript:alert(1))` },
    });
    assert.equal(hostile.status, 201);
    const archived = await svc.request(
      'POST',
      `/v2/agent/${project.id}/job/${hostile.json.id}/archive`,
      { key },
    );
    assert.equal(archived.status, 200);

    const context = await browser.newContext();
    const page = await context.newPage();
    const dialogs = watchDialogs(page);
    await signIn(page, svc.url, key);
    await page.getByRole('link', { name: 'Jobs' }).click();
    await page.waitForURL(`${svc.url}/projects/${project.id}/jobs`);
    const rows = page.locator('tbody tr');
    assert.equal(await rows.count(), 20, 'a page holds 20 jobs');
    // Newest first: the hostile prompt, rendered as text, archived.
    await rows.first().getByText(`${HOSTILE} [x](javascript:alert(1))`).waitFor();
    await rows.first().getByText('archived', { exact: true }).waitFor();
    assert.equal(await page.locator('img').count(), 0);
    assert.equal(await page.locator('a[href^="javascript"]').count(), 0);
    await page.getByRole('link', { name: 'Older jobs' }).click();
    assert.equal(await rows.count(), 1);
    await rows.first().getByText('older job 1', { exact: true }).waitFor();

    await page.goto(`${svc.url}/projects/${project.id}/jobs`);
    await page.getByLabel('Status').selectOption('archived');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/status=archived/);
    assert.equal(await rows.count(), 1);

    // A refused prompt shows the API's message and writes nothing; a good one creates a job.
    await page.getByLabel('Prompt').fill('   ');
    await page.getByRole('button', { name: 'Create job' }).click();
    await page.getByRole('alert').waitFor();
    const before = await svc.request('GET', `/v2/agent/${project.id}/jobs?limit=100`, { key });
    assert.equal((before.json.jobs as unknown[]).length, 21);
    await page.getByLabel('Prompt').fill('made in the dashboard');
    await page.getByRole('button', { name: 'Create job' }).click();
    await page
      .getByRole('status')
      .getByText(/Job job_\w+ created/)
      .waitFor();
    await rows.first().getByText('made in the dashboard').waitFor();
    const after = await svc.request('GET', `/v2/agent/${project.id}/jobs?limit=1`, { key });
    assert.equal((after.json.jobs as { status: string }[])[0]?.status, 'active');

    const response = await page.goto(`${svc.url}/projects/${other.id}/jobs`);
    assert.equal(response?.status(), 403);
    assert.deepEqual(dialogs, []);
    await context.close();
  });

  test('a job: its facts, the progress log filling in without a reload, the diff, a follow-up, archive', async () => {
    const project = await svc.createProject({ name: 'one job' });
    const made = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      body: { prompt: `first ${HOSTILE}` },
    });
    assert.equal(made.status, 201);
    const jobId = made.json.id as string;
    const { ctx } = svc.service;
    await recordReviewDiff(
      ctx,
      jobId,
      [
        `diff --git a/${HOSTILE}.txt b/${HOSTILE}.txt`,
        'new file mode 100644',
        '--- /dev/null',
        `+++ b/${HOSTILE}.txt`,
        '@@ -0,0 +1 @@',
        `+${HOSTILE}`,
        '',
      ].join('\n'),
      false,
    );
    const context = await browser.newContext();
    const page = await context.newPage();
    const dialogs = watchDialogs(page);
    let navigations = 0;
    page.on('framenavigated', () => navigations++);
    await signIn(page, svc.url, svc.adminKey);
    await page.goto(`${svc.url}/projects/${project.id}/jobs/${jobId}`);
    await page.locator('#job-status').getByText('active').waitFor();
    await page.getByText(`first ${HOSTILE}`).waitFor();
    // Nothing used yet: no tokens, nothing spent.
    await page.locator('#job-usage').getByText('0 tokens in, 0 out; $0.00').waitFor();
    // A status event reads as what changed, not as the job record it carries.
    await page.locator('#events').getByText('active, turn 1 queued', { exact: true }).waitFor();
    assert.ok(!((await page.locator('#events').textContent()) ?? '').includes('"status"'));
    const loaded = navigations;

    const start = Date.now();
    await recordProgress(ctx, jobId, 1, 'tool.call', {
      id: 'call_1',
      name: 'edit_file',
      summary: `edit ${HOSTILE}`,
    });
    await page.locator('#events').getByText(`edit ${HOSTILE}`).waitFor({ timeout: 5000 });
    assert.ok(Date.now() - start < 2500, 'a new event shows within 2 s');
    assert.equal(navigations, loaded, 'without a reload');
    assert.equal(await page.locator('img').count(), 0);
    assert.ok((await page.locator('main').textContent())?.includes(`+${HOSTILE}`) ?? false);

    await page.getByLabel('Prompt').fill('and a follow-up');
    await page.getByRole('button', { name: 'Send follow-up' }).click();
    await page.getByRole('region', { name: 'Turn 2' }).getByText('and a follow-up').waitFor();

    await page.getByRole('link', { name: 'Archive this job…' }).click();
    await page.getByRole('button', { name: 'Archive' }).click();
    await page.locator('#job-status').getByText('archived').waitFor();
    await page.locator('#events').getByText('archived', { exact: true }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Send follow-up' }).count(), 0);
    const stored = await svc.request('GET', `/v2/agent/${project.id}/job/${jobId}`);
    assert.equal(stored.json.status, 'archived');
    assert.deepEqual(dialogs, []);
    await context.close();
  });

  test('--no-dashboard: no pages and no sessions, the API and the review page unchanged', async () => {
    const { ctx } = svc.service;
    const app = await buildApp({ ...ctx, config: { ...ctx.config, dashboard: false } }, [
      dashboard,
    ]);
    try {
      const page = await app.inject({
        method: 'GET',
        url: '/',
        headers: { accept: 'text/html' },
      });
      assert.equal(page.statusCode, 404);
      const signIn = await app.inject({
        method: 'POST',
        url: '/sign-in',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: `key=${svc.adminKey}`,
      });
      assert.notEqual(signIn.statusCode, 303);
      assert.equal(signIn.headers['set-cookie'], undefined);
      const api = await app.inject({
        method: 'GET',
        url: '/v2/admin/projects',
        headers: { authorization: `Bearer ${svc.adminKey}` },
      });
      assert.equal(api.statusCode, 200);
      // The review page is not one of the dashboard's pages: it stays (its link's token opens
      // it; without sessions, a cookie opens nothing).
      const review = await app.inject({ method: 'GET', url: '/review/job_00000000000000000000' });
      assert.equal(review.statusCode, 404);
      assert.match(review.json().error, /^no review page here for this link/);
      const project = await svc.createProject({ name: 'reviewed without a dashboard' });
      const made = await svc.request('POST', `/v2/agent/${project.id}/job`, {
        body: { prompt: 'review me' },
      });
      const jobId = made.json.id as string;
      const { review_token } = await ctx.db
        .selectFrom('jobs')
        .select('review_token')
        .where('id', '=', jobId)
        .executeTakeFirstOrThrow();
      const byToken = await app.inject({
        method: 'GET',
        url: `/review/${jobId}?token=${review_token}`,
      });
      assert.equal(byToken.statusCode, 200);
      const { id: session } = await signInSession(ctx.db, svc.adminKey);
      const bySession = await app.inject({
        method: 'GET',
        url: `/review/${jobId}`,
        headers: { cookie: `${SESSION_COOKIE}=${session}` },
      });
      assert.equal(bySession.statusCode, 404);
    } finally {
      await app.close();
    }
  });
});

describe('dashboard behind https', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_PUBLIC_URL: 'https://errand.example.com' },
    });
  });
  after(async () => {
    await svc?.close();
  });

  test('the session cookie is Secure, and a form from the public origin is accepted', async () => {
    const signIn = await fetch(`${svc.url}/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        origin: 'https://errand.example.com',
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: `key=${svc.adminKey}`,
    });
    assert.equal(signIn.status, 303);
    const cookie = signIn.headers.get('set-cookie') ?? '';
    assert.match(cookie, /^errand_session=[0-9A-Za-z]{43}; /);
    assert.match(cookie, /; HttpOnly/);
    assert.match(cookie, /; SameSite=Strict/);
    assert.match(cookie, /; Secure/);
    assert.ok(!cookie.includes(svc.adminKey));
    // The key's page shows the public address in its curl example.
    const project = await svc.createProject({ name: 'public' });
    const page = await fetch(`${svc.url}/projects/${project.id}/keys`, {
      headers: { accept: 'text/html', cookie: cookie.split(';')[0] ?? '' },
    });
    assert.equal(page.status, 200);
    assert.match(await page.text(), /https:\/\/errand\.example\.com\/v2\/agent\/prj_/);
  });
});
