// The environments of a project on its settings page, against a real service: the maintenance
// command and the key files in the form (saved, shown again, a bad glob refused with the API's
// message and nothing changed), the background builds the form and the secrets ask for, the
// snapshots the workers keep (listed, one key or all dropped, a rebuild asked for), notices a
// link cannot make up, project keys and cross-site posts refused, every value escaped; and in a
// real browser, the buttons at a phone's width.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { getPage, postForm, sessionCookie } from '../support/dashboard.ts';
import { takeEnvironmentBuildRequests } from '../support/route-cases.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { browserSkipReason, launchBrowser, signIn } from './browser.ts';

const HOSTILE = `<script>alert(1)</script>"><img src=x onerror=alert(1)>`;
const KEY = 'ab12'.repeat(16);
/** A key still kept when the notices and the refusals are tested. */
const KEPT = 'cd34'.repeat(16);

describe('dashboard: project environments', () => {
  let svc: TestService;
  let admin: string;
  let projectId: string;
  let settings: string;

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'dashboard-environments-secret-key' },
    });
    admin = await sessionCookie(svc, svc.adminKey);
    const res = await svc.request('POST', '/v2/admin/projects', {
      body: { name: 'node app', repository: svc.database.dataDir, setupCommand: 'npm ci' },
    });
    assert.equal(res.status, 201, res.text);
    projectId = res.json.id ?? '';
    settings = `/projects/${projectId}/settings`;
    assert.deepEqual(await takeEnvironmentBuildRequests(svc, projectId), ['created']);
  });
  after(async () => {
    await svc?.close();
  });

  const keep = (key: string, worker: string, lastUsed: string, sizeBytes = 327_155_712) =>
    svc.service.ctx.db
      .insertInto('environments')
      .values({
        project_id: projectId,
        key,
        worker,
        size_bytes: sizeBytes,
        files: 31_250,
        build_ms: 64_200,
        base_commit: 'c'.repeat(40),
        last_used_at: new Date(lastUsed),
      })
      .execute();
  const keys = async () =>
    (
      await svc.service.ctx.db
        .selectFrom('environments')
        .select(['key', 'worker'])
        .where('project_id', '=', projectId)
        .orderBy('key')
        .orderBy('worker')
        .execute()
    ).map((r) => `${r.key}@${r.worker}`);
  /** The builds asked for the project since the last look (the queue keeps one waiting). */
  const builds = (id = projectId) => takeEnvironmentBuildRequests(svc, id);
  /** The settings form as the page fills it in, with `over` changed. */
  const settingsForm = async (over: Record<string, string>) => {
    const project = (await svc.request('GET', `/v2/admin/projects/${projectId}`)).json;
    return {
      name: project.name ?? '',
      repository: project.repository ?? '',
      ref: project.ref ?? '',
      commandsEnabled: '1',
      setupCommand: project.setupCommand ?? '',
      maintenanceCommand: project.maintenanceCommand ?? '',
      environmentKeyFiles: (project.environmentKeyFiles ?? []).join('\n'),
      networkSetup: project.network?.setup ?? 'none',
      networkCommands: project.network?.commands ?? 'none',
      networkAllow: (project.network?.allow ?? []).join('\n'),
      ...over,
    };
  };

  test('the section: none kept yet, a Rebuild button; a project without a setup has none', async () => {
    const res = await getPage(svc, admin, settings);
    assert.equal(res.status, 200);
    assert.match(res.text, /<h2 id="environments">Environments<\/h2>/);
    assert.match(res.text, /No environment kept yet/);
    assert.match(res.text, /<button type="submit">Rebuild<\/button>/);
    assert.doesNotMatch(res.text, /Delete all/);
    const plain = await svc.createProject({ name: 'no setup' });
    const other = await getPage(svc, admin, `/projects/${plain.id}/settings`);
    assert.match(other.text, /has no setup command, so it has no environment/);
    assert.doesNotMatch(other.text, />Rebuild</);
  });

  test('the form: maintenance command and key files saved and shown again; a bad glob refused, nothing changed', async () => {
    const saved = await postForm(
      svc,
      admin,
      settings,
      await settingsForm({
        maintenanceCommand: 'npm run build',
        environmentKeyFiles: 'package-lock.json\r\n\r\n  packages/*/package.json  \r\n',
      }),
    );
    assert.equal(saved.status, 303, saved.text);
    const project = (await svc.request('GET', `/v2/admin/projects/${projectId}`)).json;
    assert.equal(project.maintenanceCommand, 'npm run build');
    assert.deepEqual(project.environmentKeyFiles, ['package-lock.json', 'packages/*/package.json']);
    // The key files changed: a build was asked for; the maintenance command alone would not.
    assert.deepEqual(await builds(), ['settings']);
    const page = await getPage(svc, admin, settings);
    assert.match(page.text, /id="maintenanceCommand"[^>]*value="npm run build"/);
    assert.match(
      page.text,
      /<textarea id="environmentKeyFiles"[^>]*>package-lock.json\npackages\/\*\/package.json<\/textarea>/,
    );

    const before = await svc.request('GET', `/v2/admin/projects/${projectId}`);
    const refused = await postForm(
      svc,
      admin,
      settings,
      await settingsForm({ environmentKeyFiles: 'go.sum\n../secrets/key.pem' }),
    );
    assert.equal(refused.status, 400);
    assert.match(
      refused.text,
      /invalid &quot;environmentKeyFiles\[1\]&quot;: glob &quot;..\/secrets\/key.pem&quot; leaves the checkout/,
    );
    // The refused form keeps what was typed.
    assert.match(refused.text, />go.sum\n..\/secrets\/key.pem<\/textarea>/);
    assert.deepEqual(
      (await svc.request('GET', `/v2/admin/projects/${projectId}`)).json,
      before.json,
    );
    assert.deepEqual(await builds(), []);

    // Emptied, the field is the default again.
    const reset = await postForm(
      svc,
      admin,
      settings,
      await settingsForm({ environmentKeyFiles: '' }),
    );
    assert.equal(reset.status, 303);
    const now = (await svc.request('GET', `/v2/admin/projects/${projectId}`)).json;
    assert.equal(now.environmentKeyFiles, null);
    assert.deepEqual(await builds(), ['settings']);
  });

  test('an empty field keeps a project’s "no key files" ([], set through the API)', async () => {
    await svc.request('PATCH', `/v2/admin/projects/${projectId}`, {
      body: { environmentKeyFiles: [] },
    });
    await builds();
    const saved = await postForm(svc, admin, settings, await settingsForm({ name: 'node app' }));
    assert.equal(saved.status, 303);
    const project = (await svc.request('GET', `/v2/admin/projects/${projectId}`)).json;
    assert.deepEqual(project.environmentKeyFiles, []);
    assert.deepEqual(await builds(), [], 'a save that changed nothing asked for a build');
    await svc.request('PATCH', `/v2/admin/projects/${projectId}`, {
      body: { environmentKeyFiles: null },
    });
  });

  test('a new project with a setup command asks for a build; a secret set or deleted asks for another', async () => {
    const made = await postForm(svc, admin, '/projects', {
      name: 'python app',
      repository: svc.database.dataDir,
      commandsEnabled: '1',
      setupCommand: 'python -m venv .venv && .venv/bin/pip install -r requirements.txt',
      networkSetup: 'allowlist',
      networkAllow: '@pypi',
    });
    assert.equal(made.status, 303, made.text);
    const list = (await svc.request('GET', '/v2/admin/projects')).json.projects ?? [];
    const python = list.find((p) => p.name === 'python app');
    assert.ok(python);
    assert.deepEqual(await builds(python.id), ['created']);
    const set = await postForm(svc, admin, `/projects/${python.id}/secrets`, {
      name: 'PIP_INDEX_URL',
      value: 'https://token:abcdef123456@pypi.example.com/simple',
      exposure: 'setup',
    });
    assert.equal(set.status, 303, set.text);
    assert.deepEqual(await builds(python.id), ['settings']);
    const deleted = await postForm(
      svc,
      admin,
      `/projects/${python.id}/secrets/PIP_INDEX_URL/delete`,
      {},
    );
    assert.equal(deleted.status, 303);
    assert.deepEqual(await builds(python.id), ['settings']);
  });

  test('the snapshots: listed with the key shortened, sizes and times for a reader, values escaped', async () => {
    await keep(KEY, 'worker-a', '2026-11-20T08:00:00.000Z');
    await keep(KEY, HOSTILE, '2026-11-21T09:30:00.000Z', 1_536);
    const res = await getPage(svc, admin, settings);
    assert.match(res.text, new RegExp(`<td class="mono" title="${KEY}">${KEY.slice(0, 12)}…</td>`));
    assert.match(res.text, /<td data-label="Size">312 MB<\/td>/);
    assert.match(res.text, /<td data-label="Size">1.5 KB<\/td>/);
    assert.match(res.text, /<td data-label="Files">31,250<\/td>/);
    assert.match(res.text, /<td data-label="Build">1 min 4 s<\/td>/);
    assert.match(res.text, /2026-11-21 09:30 UTC/);
    assert.ok(!res.text.includes(HOSTILE), 'a worker name is not escaped');
    // The one used last comes first.
    assert.ok(res.text.indexOf('&lt;script&gt;') < res.text.indexOf('worker-a'));
    assert.match(res.text, /Delete all/);
  });

  test('delete one key (every worker), then all; rebuild asks for a build', async () => {
    await keep('other-key', 'worker-a', '2026-11-19T08:00:00.000Z');
    const one = await postForm(svc, admin, `/projects/${projectId}/environments/${KEY}/delete`, {});
    assert.equal(one.status, 303, one.text);
    assert.equal(one.location, `${settings}?dropped=${KEY}#environments`);
    assert.deepEqual(await keys(), ['other-key@worker-a']);
    const page = await getPage(svc, admin, `${settings}?dropped=${KEY}`);
    assert.match(page.text, new RegExp(`Environment ${KEY.slice(0, 12)}… was deleted\\.`));
    const again = await postForm(
      svc,
      admin,
      `/projects/${projectId}/environments/${KEY}/delete`,
      {},
    );
    assert.equal(again.status, 404);
    assert.match(again.text, /has no environment/);

    const all = await postForm(svc, admin, `/projects/${projectId}/environments/delete`, {});
    assert.equal(all.status, 303);
    assert.deepEqual(await keys(), []);
    assert.match(
      (await getPage(svc, admin, `${settings}?dropped=all`)).text,
      /Every environment was deleted\./,
    );

    await builds();
    const rebuilt = await postForm(svc, admin, `/projects/${projectId}/environments/rebuild`, {});
    assert.equal(rebuilt.status, 303, rebuilt.text);
    assert.equal(rebuilt.location, `${settings}?rebuilt=1#environments`);
    assert.deepEqual(await builds(), ['rebuild']);
    assert.match(
      (await getPage(svc, admin, `${settings}?rebuilt=1`)).text,
      /A rebuild was requested/,
    );
  });

  test('rebuild of a project without a setup command: refused on the page, nothing queued', async () => {
    const plain = await svc.createProject({ name: 'still no setup' });
    const res = await postForm(svc, admin, `/projects/${plain.id}/environments/rebuild`, {});
    assert.equal(res.status, 400);
    assert.match(res.text, /has no setup command, so it has no environment to build/);
    assert.match(res.text, /<button type="submit">Save<\/button>/);
    assert.deepEqual(await builds(plain.id), []);
  });

  test('a notice a link makes up is not shown', async () => {
    await keep(KEPT, 'worker-a', '2026-11-19T08:00:00.000Z');
    const plain = await svc.createProject({ name: 'no setup, no rebuild' });
    for (const [path, notice] of [
      [`${settings}?dropped=${KEPT}`, /was deleted/],
      [`${settings}?dropped=not-a-digest`, /was deleted/],
      [`${settings}?dropped=all`, /Every environment was deleted/],
      [`${settings}?dropped=${encodeURIComponent(HOSTILE)}`, /&lt;script/],
      [`/projects/${plain.id}/settings?rebuilt=1`, /A rebuild was requested/],
    ] as const) {
      const res = await getPage(svc, admin, path);
      assert.equal(res.status, 200);
      assert.doesNotMatch(res.text, notice, path);
    }
  });

  test('a project key, and a post from another site, are refused and change nothing', async () => {
    const keyRes = await svc.request('POST', '/v2/admin/keys', { body: { projectId } });
    const projectSession = await sessionCookie(svc, keyRes.json.key as string);
    const before = await keys();
    await builds();
    for (const [cookie, origin] of [
      [projectSession, svc.url],
      [admin, 'https://evil.example'],
    ] as const) {
      for (const path of ['rebuild', 'delete', `${KEPT}/delete`]) {
        const res = await postForm(
          svc,
          cookie,
          `/projects/${projectId}/environments/${path}`,
          {},
          origin,
        );
        assert.equal(res.status, 403, `${path} from ${origin}`);
      }
    }
    assert.deepEqual(await keys(), before);
    assert.deepEqual(await builds(), []);
  });

  describe('in a browser', { skip: browserSkipReason }, () => {
    let browser: Browser;
    before(async () => {
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
    });

    test('at a phone’s width: each row names its columns; Delete and Rebuild work', async () => {
      await keep(KEY, 'worker-phone', '2026-11-22T08:00:00.000Z');
      const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
      const page = await context.newPage();
      await signIn(page, svc.url, svc.adminKey);
      await page.goto(`${svc.url}${settings}`);
      const section = page.locator('section[aria-labelledby="environments"]');
      await section.getByText('worker-phone').waitFor();
      // Each cell says what it is once the header row is gone.
      // Read in the page: tsconfig has no DOM types, so the browser's globals are named here.
      const label = await section
        .locator('td[data-label="Size"]')
        .first()
        .evaluate(
          (td) =>
            (
              globalThis as unknown as {
                getComputedStyle(el: unknown, pseudo: string): { content: string };
              }
            ).getComputedStyle(td, '::before').content,
        );
      assert.equal(label, '"Size: "');
      const width = await page.evaluate(
        () =>
          (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } })
            .document.documentElement.scrollWidth,
      );
      assert.ok(width <= 390, `the page scrolls sideways: ${width} px`);
      await section
        .getByRole('button', { name: `Delete environment ${KEY.slice(0, 12)}… (every worker)` })
        .click();
      await page
        .getByRole('status')
        .getByText(`Environment ${KEY.slice(0, 12)}… was deleted.`)
        .waitFor();
      assert.ok(!(await keys()).includes(`${KEY}@worker-phone`));
      await builds();
      await section.getByRole('button', { name: 'Rebuild' }).click();
      await page.getByRole('status').getByText('A rebuild was requested').waitFor();
      assert.deepEqual(await builds(), ['rebuild']);
      await context.close();
    });
  });
});
