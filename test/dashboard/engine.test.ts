// The engine on the dashboard's project pages, in a real browser against a real service: chosen
// with a select when a project is created and in its settings, shown again as stored, and the
// service's refusals (not installed, a model it does not run) shown on the form, saving nothing.
// The server's engines directory is a temporary one where a small local package, installed by
// the real install code, stands in for Codex.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { type ServiceWithCodex, startServiceWithCodex } from '../support/engine-package.ts';
import type { TestService } from '../support/service.ts';
import { browserSkipReason, launchBrowser, signIn } from './browser.ts';

describe('dashboard: a project engine', { skip: browserSkipReason }, () => {
  let server: ServiceWithCodex;
  let svc: TestService;
  let browser: Browser;
  before(async () => {
    server = await startServiceWithCodex();
    svc = server.svc;
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('created with an engine, changed in the settings, refusals shown on the form', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, svc.url, svc.adminKey);

    // A new project: Errand's own is selected until another is chosen.
    assert.equal(await page.getByLabel('Engine', { exact: true }).inputValue(), 'errand');
    await page.getByLabel('Name', { exact: true }).fill('on codex');
    await page.getByLabel('Repository').fill(svc.database.dataDir);
    await page.getByLabel('Default model').fill('anthropic:claude-sonnet-4-5');
    await page
      .getByLabel('Engine', { exact: true })
      .selectOption({ label: 'Codex (openai: models)' });
    await page.getByRole('button', { name: 'Create project' }).click();
    await page
      .getByRole('alert')
      .getByText(
        "engine codex cannot run model 'anthropic:claude-sonnet-4-5': it talks to openai: models only",
      )
      .waitFor();
    // The form keeps the choice.
    assert.equal(await page.getByLabel('Engine', { exact: true }).inputValue(), 'codex');
    const none = await svc.request('GET', '/v2/admin/projects');
    assert.deepEqual(none.json.projects, []);
    await page.getByLabel('Default model').fill('openai:gpt-5');
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.getByRole('cell', { name: 'on codex' }).waitFor();
    const created = await svc.request('GET', '/v2/admin/projects');
    const [project] = created.json.projects as { id: string; engine: string }[];
    assert.equal(project?.engine, 'codex');

    // The settings show it; another engine that is not installed is refused with the command.
    await page.goto(`${svc.url}/projects/${project?.id}/settings`);
    assert.equal(await page.getByLabel('Engine', { exact: true }).inputValue(), 'codex');
    await page.getByLabel('Engine', { exact: true }).selectOption('opencode');
    await page.getByRole('button', { name: 'Save' }).click();
    await page
      .getByRole('alert')
      .getByText(
        'engine opencode is not installed on the server: run `errand engine install opencode` there',
      )
      .waitFor();
    const kept = await svc.request('GET', `/v2/admin/projects/${project?.id}`);
    assert.equal(kept.json.engine, 'codex');

    await page.getByLabel('Engine', { exact: true }).selectOption('errand');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').getByText('Saved.').waitFor();
    const saved = await svc.request('GET', `/v2/admin/projects/${project?.id}`);
    assert.equal(saved.json.engine, 'errand');
    assert.equal(await page.getByLabel('Engine', { exact: true }).inputValue(), 'errand');
    await context.close();
  });
});
