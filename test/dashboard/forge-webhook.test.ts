// The dashboard's forge webhook page against a real service, over HTTP with a real session:
// the URL to paste into the forge and the events to select; a secret made by Errand shown
// once and never again, one the admin chose, its removal; refused input shown on the form and
// changing nothing; project keys and cross-site posts refused; the events the forge sent, with
// what became of each and why; every value escaped.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { getPage, postForm, sessionCookie } from '../support/dashboard.ts';
import { startTestService, type TestService } from '../support/service.ts';

const HOSTILE = `<script>alert(1)</script>"><img src=x onerror=alert(1)>`;

/** A page, or with `fields` a form posted from `origin`. */
const request = (
  svc: TestService,
  cookie: string,
  path: string,
  fields?: Record<string, string>,
  origin = svc.url,
) => (fields ? postForm(svc, cookie, path, fields, origin) : getPage(svc, cookie, path));

describe('dashboard: forge webhook page', () => {
  let svc: TestService;
  let admin: string;
  let projectId: string;
  let page: string;

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'dashboard-forge-webhook-secret-key' },
    });
    admin = await sessionCookie(svc, svc.adminKey);
    const res = await svc.request('POST', '/v2/admin/projects', {
      body: { name: HOSTILE, repository: 'https://github.com/acme/app.git' },
    });
    assert.equal(res.status, 201, res.text);
    projectId = res.json.id as string;
    page = `/projects/${projectId}/forge-webhook`;
  });
  after(async () => {
    await svc?.close();
  });

  const stored = async () =>
    svc.service.ctx.db
      .selectFrom('projects')
      .select(['forge_webhook_secret', 'forge_handle', 'forge_label', 'updated_at'])
      .where('id', '=', projectId)
      .executeTakeFirstOrThrow();

  test('the page: the URL, the content type, the events; linked from the settings', async () => {
    const settings = await request(svc, admin, `/projects/${projectId}/settings`);
    assert.ok(settings.text.includes(`href="${page}"`));
    const res = await request(svc, admin, page);
    assert.equal(res.status, 200);
    assert.ok(res.text.includes(`${svc.url}/v2/forges/${projectId}/webhook`));
    assert.ok(res.text.includes('<code>application/json</code>'));
    for (const event of [
      'Issue comments',
      'Issues',
      'Pull request review comments',
      'Pull request reviews',
      'Pushes',
    ])
      assert.ok(res.text.includes(`<li>${event}</li>`), event);
    assert.match(res.text, /<strong>none<\/strong>: every delivery is refused/);
    assert.ok(res.text.includes('<code>@errand</code>'));
    assert.ok(!res.text.includes(HOSTILE), 'the project name is not escaped');
    assert.match(res.text, /Events received<\/h2>[\s\S]*None in the last 30 days/);
  });

  test('the events received, newest first: what became of each and why, every value escaped', async () => {
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'Add notes' },
    });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    const event = (key: string, minutesAgo: number) => ({
      project_id: projectId,
      key,
      delivery_id: `delivery-${key}`,
      forge: 'github' as const,
      received_at: new Date(Date.now() - minutesAgo * 60_000),
    });
    await svc.service.ctx.db
      .insertInto('forge_events')
      .values([
        {
          ...event('github:issue-comment:1', 30),
          kind: 'comment',
          thread_kind: 'issue',
          thread_number: 12,
          author: HOSTILE,
          // Only a forge's http(s) address becomes a link.
          url: 'javascript:alert(1)',
          repeats: 2,
          last_delivery_id: 'delivery-replayed',
          outcome: 'refused',
          reason: `@${HOSTILE} has no write access; told in the thread`,
        },
        {
          ...event('github:review:2', 10),
          kind: 'review',
          thread_kind: 'pull-request',
          thread_number: 3,
          author: 'maintainer',
          url: 'https://github.com/acme/app/pull/3#pullrequestreview-2',
          outcome: 'accepted',
          reason: 'a follow-up of its job',
          job_id: jobId,
          turn: 2,
        },
        {
          ...event('github:issue-comment:3', 5),
          kind: 'comment',
          thread_kind: 'issue',
          thread_number: 14,
          author: 'newcomer',
          url: 'https://github.com/acme/app/issues/14#issuecomment-3',
        },
      ])
      .execute();
    const res = await request(svc, admin, page);
    assert.equal(res.status, 200);
    assert.ok(!res.text.includes(HOSTILE), 'a value from the forge is not escaped');
    assert.ok(!res.text.includes('href="javascript:'), 'a javascript: address is a link');
    const rows = res.text.split('<tr>').slice(2);
    assert.equal(rows.length, 3, 'one row per event');
    const [newest, accepted, refused] = rows as [string, string, string];
    assert.match(
      newest,
      /comment on issue <a href="https:\/\/github\.com\/acme\/app\/issues\/14#issuecomment-3" rel="noreferrer">#14<\/a> by @newcomer/,
    );
    assert.match(newest, /<span class="badge pending">queued<\/span>/);
    assert.match(
      accepted,
      /review on pull request <a href="https:\/\/github\.com\/acme\/app\/pull\/3#pullrequestreview-2" rel="noreferrer">#3<\/a> by @maintainer/,
    );
    assert.match(accepted, /<span class="badge delivered">accepted<\/span>/);
    assert.ok(
      accepted.includes(
        `a follow-up of its job: <a class="mono" href="/projects/${projectId}/jobs/${jobId}">${jobId}</a>, turn 2`,
      ),
    );
    assert.match(refused, /comment on issue <span class="mono">#12<\/span> by @&lt;script&gt;/);
    assert.match(refused, /\(delivered 3 times\)/);
    assert.match(refused, /<span class="badge failed">refused<\/span>/);
    assert.match(refused, /has no write access; told in the thread/);

    // Only the refused ones: in a busy repository, the comments that never named Errand (each
    // recorded, as ignored) do not hide them.
    const onlyRefused = await request(svc, admin, `${page}?outcome=refused`);
    assert.equal(onlyRefused.status, 200);
    const refusedRows = onlyRefused.text.split('<tr>').slice(2);
    assert.equal(refusedRows.length, 1);
    assert.match(refusedRows[0] ?? '', /has no write access/);
    assert.match(onlyRefused.text, /<option value="refused" selected>refused<\/option>/);
    const noneFailed = await request(svc, admin, `${page}?outcome=failed`);
    assert.match(noneFailed.text, /None failed in the last 30 days/);
    const unknown = await request(svc, admin, `${page}?outcome=${encodeURIComponent(HOSTILE)}`);
    assert.equal(unknown.status, 400);
    assert.match(
      unknown.text,
      /&quot;outcome&quot; must be one of queued, accepted, ignored, refused, failed/,
    );
    assert.ok(!unknown.text.includes(HOSTILE));
  });

  test('a made secret is shown once, stored sealed, and never shown again', async () => {
    const made = await request(svc, admin, `${page}/secret`, {});
    assert.equal(made.status, 200, made.text);
    const secret = /<code id="new-secret">([0-9A-Za-z]{40})<\/code>/.exec(made.text)?.[1];
    assert.ok(secret, 'the new secret is on the page');
    assert.match(made.text, /shown this once/);
    const row = await stored();
    assert.ok(row.forge_webhook_secret?.startsWith('v1.'));
    assert.ok(!row.forge_webhook_secret?.includes(secret));
    for (const path of [page, `/projects/${projectId}/settings`, '/projects']) {
      const again = await request(svc, admin, path);
      assert.equal(again.status, 200, path);
      assert.ok(!again.text.includes(secret), `${path} shows the secret again`);
    }
    assert.match((await request(svc, admin, page)).text, /set \(never shown again\)/);
  });

  test('a chosen secret, the handle and the label are saved; the secret can be removed', async () => {
    const saved = await request(svc, admin, page, {
      forgeWebhookSecret: 'chosen-secret-value-42',
      forgeHandle: 'helper',
      forgeLabel: 'ai: fix',
    });
    assert.equal(saved.status, 303, saved.text);
    assert.equal(saved.location, `${page}?saved=1`);
    const after = await request(svc, admin, `${page}?saved=1`);
    assert.match(after.text, /Saved\./);
    assert.ok(after.text.includes('<code>@helper</code>'));
    assert.ok(!after.text.includes('chosen-secret-value-42'));
    const row = await stored();
    assert.equal(row.forge_handle, 'helper');
    assert.equal(row.forge_label, 'ai: fix');
    // An empty secret field keeps the secret; the box removes it.
    const kept = await request(svc, admin, page, { forgeHandle: 'helper', forgeLabel: 'ai: fix' });
    assert.equal(kept.status, 303);
    assert.equal((await stored()).forge_webhook_secret, row.forge_webhook_secret);
    const removed = await request(svc, admin, page, {
      clearSecret: '1',
      forgeHandle: 'helper',
      forgeLabel: 'ai: fix',
    });
    assert.equal(removed.status, 303);
    assert.equal((await stored()).forge_webhook_secret, null);
  });

  test('refused input is shown on the form and changes nothing', async () => {
    const before = await stored();
    for (const [fields, message] of [
      [{ forgeHandle: '@helper', forgeLabel: 'x' }, /without the @/],
      [
        { forgeHandle: 'helper', forgeLabel: '  ' },
        /&quot;forgeLabel&quot; must be 1 to 100 characters/,
      ],
      [
        { forgeWebhookSecret: 'short', forgeHandle: 'helper', forgeLabel: 'x' },
        /&quot;forgeWebhookSecret&quot; must be 16 to 256 characters/,
      ],
    ] as const) {
      const res = await request(svc, admin, page, { ...fields });
      assert.equal(res.status, 400, JSON.stringify(fields));
      assert.match(res.text, message);
      assert.ok(!res.text.includes('short"'), 'a refused secret is shown again');
    }
    assert.deepEqual(await stored(), before);
  });

  test('a project key, and a post from another site, are refused', async () => {
    const keyRes = await svc.request('POST', '/v2/admin/keys', { body: { projectId } });
    const projectSession = await sessionCookie(svc, keyRes.json.key as string);
    const before = await stored();
    assert.equal((await request(svc, projectSession, page)).status, 403);
    assert.equal((await request(svc, projectSession, `${page}/secret`, {})).status, 403);
    const crossSite = await request(svc, admin, `${page}/secret`, {}, 'https://evil.example');
    assert.equal(crossSite.status, 403);
    assert.deepEqual(await stored(), before);
  });
});
