// The secrets section of a project's settings page against a real service, over HTTP with a real
// session: a secret set (a password field), replaced and deleted after a confirmation, stored
// sealed and never shown again, not even on a refused form; refusals shown with the API's
// message and changing nothing; project keys and cross-site posts refused; notices a link cannot
// make up; every value escaped.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { turnSecrets } from '../../src/projects/secrets.ts';
import { getPage, postForm, sessionCookie } from '../support/dashboard.ts';
import { startTestService, type TestService } from '../support/service.ts';

const HOSTILE = `<script>alert(1)</script>"><img src=x onerror=alert(1)>`;

describe('dashboard: project secrets', () => {
  let svc: TestService;
  let admin: string;
  let projectId: string;
  let settings: string;

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'dashboard-secrets-secret-key' },
    });
    admin = await sessionCookie(svc, svc.adminKey);
    projectId = (await svc.createProject({ name: HOSTILE })).id;
    settings = `/projects/${projectId}/settings`;
  });
  after(async () => {
    await svc?.close();
  });

  const stored = async () =>
    svc.service.ctx.db
      .selectFrom('project_secrets')
      .selectAll()
      .where('project_id', '=', projectId)
      .orderBy('name')
      .execute();
  const opened = async () =>
    Object.fromEntries(
      (await turnSecrets(svc.service.ctx, projectId)).map((s) => [s.name, [s.value, s.exposure]]),
    );

  test('the section: none yet, and a form with a password field that is never filled in', async () => {
    const res = await getPage(svc, admin, settings);
    assert.equal(res.status, 200);
    assert.match(res.text, /<h2 id="secrets">Secrets<\/h2>/);
    assert.match(res.text, /No secrets yet\./);
    assert.match(
      res.text,
      /<input id="secret-value" name="value" type="password"[^>]*\svalue=""[\s>]/,
    );
    assert.ok(!res.text.includes(HOSTILE), 'the project name is not escaped');
  });

  test('set, replace with another exposure, list without the value, delete after a confirmation', async () => {
    const value = 'dash-secret-value-0a9b8c7d';
    const set = await postForm(svc, admin, `/projects/${projectId}/secrets`, {
      name: 'NPM_TOKEN',
      value,
      exposure: 'setup',
    });
    assert.equal(set.status, 303, set.text);
    assert.equal(set.location, `${settings}?secret=NPM_TOKEN#secrets`);
    const after = await getPage(svc, admin, `${settings}?secret=NPM_TOKEN`);
    assert.match(after.text, /Secret NPM_TOKEN set\./);
    assert.match(
      after.text,
      /<td class="mono wrap">NPM_TOKEN<\/td>\s*<td data-label="Given to">setup<\/td>/,
    );
    assert.ok(!after.text.includes(value), 'the value is on the page');
    assert.deepEqual(await opened(), { NPM_TOKEN: [value, 'setup'] });

    const replaced = 'dash-secret-value-2-ffee';
    const again = await postForm(svc, admin, `/projects/${projectId}/secrets`, {
      name: ' NPM_TOKEN ',
      value: replaced,
      exposure: 'commands',
    });
    assert.equal(again.status, 303, again.text);
    assert.deepEqual(await opened(), { NPM_TOKEN: [replaced, 'commands'] });
    const listed = await getPage(svc, admin, settings);
    assert.match(listed.text, /setup and commands/);
    assert.ok(!listed.text.includes(replaced));
    assert.ok(!listed.text.includes(value));

    const confirm = await getPage(svc, admin, `/projects/${projectId}/secrets/NPM_TOKEN/delete`);
    assert.equal(confirm.status, 200);
    assert.match(confirm.text, /Delete the secret <code>NPM_TOKEN<\/code>/);
    assert.deepEqual(await opened(), { NPM_TOKEN: [replaced, 'commands'] });
    const deleted = await postForm(
      svc,
      admin,
      `/projects/${projectId}/secrets/NPM_TOKEN/delete`,
      {},
    );
    assert.equal(deleted.status, 303);
    assert.equal(deleted.location, `${settings}?deleted=NPM_TOKEN#secrets`);
    assert.match(
      (await getPage(svc, admin, `${settings}?deleted=NPM_TOKEN`)).text,
      /Secret NPM_TOKEN deleted\./,
    );
    assert.deepEqual(await stored(), []);
    const gone = await getPage(svc, admin, `/projects/${projectId}/secrets/NPM_TOKEN/delete`);
    assert.equal(gone.status, 404);
  });

  test('refusals: shown with the message, the name kept, the value never; nothing stored', async () => {
    const before = await stored();
    for (const [fields, message] of [
      [{ name: 'PATH', value: 'refused-value-1', exposure: 'setup' }, /PATH is reserved/],
      [
        { name: 'lower', value: 'refused-value-2', exposure: 'setup' },
        /is not a secret&#39;s name/,
      ],
      [{ name: 'SHORT', value: 'refused', exposure: 'setup' }, /at least 8 characters/],
      [
        { name: 'BAD_EXPOSURE', value: 'refused-value-3', exposure: 'model' },
        /&quot;exposure&quot; must be one of setup, commands/,
      ],
      [
        { name: HOSTILE, value: 'refused-value-4', exposure: 'setup' },
        /is not a secret&#39;s name/,
      ],
    ] as const) {
      const res = await postForm(svc, admin, `/projects/${projectId}/secrets`, { ...fields });
      assert.equal(res.status, 400, JSON.stringify(fields));
      assert.match(res.text, message);
      assert.ok(!res.text.includes(fields.value), 'a refused value is shown again');
      assert.ok(!res.text.includes(HOSTILE), 'a refused name is not escaped');
      // The settings form is still there, with the project's values.
      assert.match(res.text, /<button type="submit">Save<\/button>/);
    }
    const named = await postForm(svc, admin, `/projects/${projectId}/secrets`, {
      name: 'KEPT_NAME',
      value: 'short',
    });
    assert.match(named.text, /id="secret-name"[^>]*value="KEPT_NAME"/);
    assert.deepEqual(await stored(), before);
  });

  test('a notice a link makes up is not shown', async () => {
    for (const query of ['secret=NOT_THERE', `deleted=${encodeURIComponent(HOSTILE)}`]) {
      const res = await getPage(svc, admin, `${settings}?${query}`);
      assert.equal(res.status, 200);
      assert.doesNotMatch(res.text, /Secret .* (set|deleted)\./);
    }
  });

  test('a project key, and a post from another site, are refused and change nothing', async () => {
    await svc.request('PUT', `/v2/admin/projects/${projectId}/secrets/KEEP_ME`, {
      body: { value: 'kept-value-12345' },
    });
    const keyRes = await svc.request('POST', '/v2/admin/keys', { body: { projectId } });
    const projectSession = await sessionCookie(svc, keyRes.json.key as string);
    const before = await stored();
    const set = `/projects/${projectId}/secrets`;
    const del = `/projects/${projectId}/secrets/KEEP_ME/delete`;
    assert.equal((await getPage(svc, projectSession, del)).status, 403);
    for (const [cookie, origin] of [
      [projectSession, svc.url],
      [admin, 'https://evil.example'],
    ] as const) {
      const fields = { name: 'EVIL', value: 'evil-value-1234', exposure: 'commands' };
      assert.equal((await postForm(svc, cookie, set, fields, origin)).status, 403);
      assert.equal((await postForm(svc, cookie, del, {}, origin)).status, 403);
    }
    assert.deepEqual(await stored(), before);
  });
});
