// The job page's structured output in a real browser (docs/structured-output.md): a turn given an
// outputSchema shows its value as JSON, escaped like every other text of the page; a turn
// without one shows none. The service has no worker: the turns are settled through the
// lifecycle.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { finishTurn, startTurn } from '../../src/jobs/lifecycle.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { browserSkipReason, launchBrowser, signIn } from './browser.ts';

describe('dashboard: structured output', { skip: browserSkipReason }, () => {
  let svc: TestService;
  let browser: Browser;
  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'dashboard-output-test-secret-key' },
    });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
  });

  test("a turn's output is shown as JSON, as text; a turn without a schema shows none", async () => {
    const project = await svc.createProject({ name: 'output' });
    const made = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      body: { prompt: 'Judge it', mode: 'ask', outputSchema: { type: 'object' } },
    });
    assert.equal(made.status, 201, made.text);
    const jobId = made.json.id as string;
    const { ctx } = svc.service;
    const value = { verdict: '<img src=x onerror="document.title=1">', n: 2 };
    await startTurn(ctx, jobId, 1, 1);
    assert.ok(await finishTurn(ctx, jobId, 1, { summary: 'Judged.', output: { value } }));
    const sent = await svc.request('POST', `/v2/agent/${project.id}/job/${jobId}/message`, {
      body: { prompt: 'And why?', mode: 'ask' },
    });
    assert.equal(sent.status, 200, sent.text);
    await startTurn(ctx, jobId, 2, 1);
    assert.ok(await finishTurn(ctx, jobId, 2, { summary: 'Because.' }));

    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, svc.url, svc.adminKey);
    await page.goto(`${svc.url}/projects/${project.id}/jobs/${jobId}`);
    const first = page.getByRole('region', { name: 'Turn 1' });
    await first.getByText('Judged.').waitFor();
    const shown = await first.locator('.turn-output pre').textContent();
    assert.deepEqual(JSON.parse(shown ?? ''), value);
    assert.equal(await first.locator('img').count(), 0, 'the value was rendered as HTML');
    const second = page.getByRole('region', { name: 'Turn 2' });
    await second.getByText('Because.').waitFor();
    assert.equal(await second.locator('.turn-output').count(), 0);
    await context.close();
  });
});
