// The job page's modes in a real browser (docs/modes.md): the job's mode and a plan waiting,
// each turn's mode, the Approve button that sends `approve`, and the mode picker of the
// follow-up form. The service has no worker: the plan's turn is settled through the lifecycle.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { finishTurn, startTurn } from '../../src/jobs/lifecycle.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { browserSkipReason, launchBrowser, signIn } from './browser.ts';

describe('dashboard: modes', { skip: browserSkipReason }, () => {
  let svc: TestService;
  let browser: Browser;
  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'dashboard-modes-test-secret-key' },
    });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
  });

  test('a plan waits with an Approve button; approving queues a code turn; a follow-up in ask mode', async () => {
    const project = await svc.createProject({ name: 'modes' });
    const made = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      body: { prompt: 'Plan the split', mode: 'plan' },
    });
    assert.equal(made.status, 201, made.text);
    const jobId = made.json.id as string;
    const { ctx } = svc.service;
    await startTurn(ctx, jobId, 1, 1);
    assert.ok(await finishTurn(ctx, jobId, 1, { summary: 'Plan: 1. split config.ts.' }));

    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, svc.url, svc.adminKey);
    await page.goto(`${svc.url}/projects/${project.id}/jobs/${jobId}`);
    await page.locator('#job-mode').getByText('plan').waitFor();
    await page.locator('#job-awaiting').getByText('awaiting approval').waitFor();
    const first = page.getByRole('region', { name: 'Turn 1' });
    await first.getByText('Plan: 1. split config.ts.').waitFor();
    await first.locator('.badge', { hasText: 'plan' }).waitFor();

    await page.getByRole('button', { name: 'Approve the plan' }).click();
    await page.getByRole('region', { name: 'Turn 2' }).getByText('approve').waitFor();
    await page.locator('#job-mode').getByText('code').waitFor();
    assert.equal(await page.locator('#job-awaiting').count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Approve the plan' }).count(), 0);
    const approved = await svc.request('GET', `/v2/agent/${project.id}/job/${jobId}`);
    assert.equal(approved.json.awaitingApproval, false);
    assert.equal(approved.json.mode, 'code');

    await page.getByLabel('Prompt').fill('Why split it?');
    await page.getByLabel('Mode').selectOption('ask');
    await page.getByRole('button', { name: 'Send follow-up' }).click();
    const third = page.getByRole('region', { name: 'Turn 3' });
    await third.getByText('Why split it?').waitFor();
    await third.locator('.badge', { hasText: 'ask' }).waitFor();
    const asked = await svc.request('GET', `/v2/agent/${project.id}/job/${jobId}`);
    assert.equal(asked.json.mode, 'ask');
    await context.close();
  });
});
