// The pull request watch on the dashboard, in a real browser against a real service: its
// settings in the "Pull request watch" section of the project forms (the defaults shown on a new
// project, chosen at creation, changed and refused in the settings), and a job's page saying
// what the forge last said of its pull request, with a link to each failed check.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { PrRecord } from '../../src/records/pr.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { browserSkipReason, launchBrowser, signIn } from './browser.ts';

const HOSTILE = `<script>alert(1)</script>"><img src=x onerror=alert(1)>`;

/** The watch's fields as the form shows them. */
async function shown(page: Page) {
  return {
    autofixAttempts: await page
      .getByLabel('Turns in a row that may fix failing checks')
      .inputValue(),
    autofixChecks: await page.getByLabel('Checks that count').inputValue(),
    autoMerge: await page.getByLabel('Merge the pull request', { exact: true }).inputValue(),
    mergeMethod: await page.getByLabel('Merge method', { exact: true }).inputValue(),
    conflictStrategy: await page.getByLabel('When it conflicts with its base').inputValue(),
  };
}

describe('dashboard: the pull request watch', { skip: browserSkipReason }, () => {
  let svc: TestService;
  let browser: Browser;
  before(async () => {
    svc = await startTestService({ worker: false });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
  });

  test('its settings: the defaults on a new project, chosen at creation, changed, refused', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, svc.url, svc.adminKey);

    await page.getByRole('group', { name: 'Pull request watch' }).waitFor();
    assert.deepEqual(await shown(page), {
      autofixAttempts: '',
      autofixChecks: '',
      autoMerge: 'off',
      mergeMethod: 'merge',
      conflictStrategy: 'merge',
    });
    await page.getByLabel('Name', { exact: true }).fill('watched');
    await page.getByLabel('Repository').fill(svc.database.dataDir);
    await page.getByLabel('Checks that count').fill('ci/*\n  build (ubuntu, node 24)  \n\n');
    await page
      .getByLabel('Merge the pull request', { exact: true })
      .selectOption({ label: 'When every check passed' });
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.getByRole('cell', { name: 'watched' }).waitFor();
    const listed = await svc.request('GET', '/v2/admin/projects');
    const [project] = listed.json.projects as Record<string, unknown>[];
    const id = String(project?.id);
    assert.equal(project?.autofixAttempts, 2, 'an empty count is the default');
    assert.deepEqual(project?.autofixChecks, ['ci/*', 'build (ubuntu, node 24)']);
    assert.equal(project?.autoMerge, 'green');

    await page.goto(`${svc.url}/projects/${id}/settings`);
    assert.deepEqual(await shown(page), {
      autofixAttempts: '2',
      autofixChecks: 'ci/*\nbuild (ubuntu, node 24)',
      autoMerge: 'green',
      mergeMethod: 'merge',
      conflictStrategy: 'merge',
    });
    // A count out of range is refused naming the field, and saves nothing; the form keeps it.
    await page.getByLabel('Turns in a row that may fix failing checks').fill('11');
    await page.getByLabel('Merge method', { exact: true }).selectOption('squash');
    await page.getByRole('button', { name: 'Save' }).click();
    await page
      .getByRole('alert')
      .getByText('"autofixAttempts" must be a whole number from 0 to 10')
      .waitFor();
    assert.equal(await page.getByLabel('Merge method', { exact: true }).inputValue(), 'squash');
    const kept = await svc.request('GET', `/v2/admin/projects/${id}`);
    assert.equal(kept.json.autofixAttempts, 2);
    assert.equal(kept.json.mergeMethod, 'merge');

    await page.getByLabel('Turns in a row that may fix failing checks').fill('0');
    await page.getByLabel('Checks that count').fill('');
    await page
      .getByLabel('Merge the pull request', { exact: true })
      .selectOption('green-and-approved');
    await page.getByLabel('When it conflicts with its base').selectOption('rebase');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').getByText('Saved.').waitFor();
    const saved = await svc.request('GET', `/v2/admin/projects/${id}`);
    assert.equal(saved.json.autofixAttempts, 0);
    assert.equal(saved.json.autofixChecks, null, 'no globs: every check');
    assert.equal(saved.json.autoMerge, 'green-and-approved');
    assert.equal(saved.json.mergeMethod, 'squash');
    assert.equal(saved.json.conflictStrategy, 'rebase');
    assert.deepEqual(await shown(page), {
      autofixAttempts: '0',
      autofixChecks: '',
      autoMerge: 'green-and-approved',
      mergeMethod: 'squash',
      conflictStrategy: 'rebase',
    });
    await context.close();
  });

  test("a job's page: what the forge last said of its pull request, near its link", async () => {
    const project = await svc.createProject({ name: 'with a pull request' });
    const made = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      body: { prompt: 'open a pull request' },
    });
    assert.equal(made.status, 201, made.text);
    const jobId = String(made.json.id);
    const context = await browser.newContext();
    const page = await context.newPage();
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    await signIn(page, svc.url, svc.adminKey);
    const url = `${svc.url}/projects/${project.id}/jobs/${jobId}`;
    await page.goto(url);
    await page.locator('#job-status').waitFor();
    assert.equal(await page.locator('#job-pr').count(), 0, 'nothing before Errand looked');

    // What the pull request watch writes when it looks (src/features/pr-watch/).
    const pr: PrRecord = {
      number: 7,
      url: 'https://github.com/acme/app/pull/7',
      state: 'open',
      mergedAt: null,
      headSha: 'a'.repeat(40),
      mergeable: false,
      approved: true,
      checks: [
        { name: 'lint', state: 'success', url: null },
        { name: HOSTILE, state: 'failure', url: 'https://ci.example.com/runs/9' },
        { name: 'e2e', state: 'failure', url: null },
        { name: 'build', state: 'pending', url: null },
      ],
      watch: { state: 'watching', reason: null, autofixes: 1 },
      observedAt: new Date().toISOString(),
    };
    await svc.service.ctx.db
      .updateTable('jobs')
      .set({ pr: JSON.stringify(pr), pr_link: pr.url })
      .where('id', '=', jobId)
      .execute();
    await page.goto(url);
    const facts = page.locator('#job-pr');
    await facts
      .getByText(
        'open, approved, conflicts with its base; checks: 1 passed, 2 failed, 1 pending; watch: watching (1 fix tried in a row)',
      )
      .waitFor();
    const link = facts.getByRole('link', { name: HOSTILE });
    assert.equal(await link.getAttribute('href'), 'https://ci.example.com/runs/9');
    assert.match((await facts.textContent()) ?? '', /Failed: .*, e2e/);
    assert.equal(await page.locator('img').count(), 0);
    assert.deepEqual(dialogs, []);
    await context.close();
  });
});
