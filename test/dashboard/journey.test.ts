// The dashboard's journey end to end: a real service with real workers, a real git origin and
// the scripted fake model. Sign in with the admin key, create a project, read its projectId
// and create a key, run a job with that key over HTTP and watch it in the browser (the log
// fills in without a reload), then follow up, archive and sign out.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { createLogger } from '../../src/log.ts';
import { dynamic, type FakeLlm, reply, startFakeLlm, toolCalls } from '../support/fake-llm.ts';
import { makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { untilStatus } from '../support/jobs.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { browserSkipReason, launchBrowser, signIn } from './browser.ts';

const OPENAI_KEY = 'sk-test-openai-dashboard-7e21';

/** A promise and the function that settles it: the test decides when the model answers. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open = () => {};
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}

describe('dashboard journey', { skip: browserSkipReason }, () => {
  let llm: FakeLlm;
  let svc: TestService;
  let browser: Browser;
  let tmp: string;
  let origin: Origin;
  // Everything the service logs at the most detailed level, to look for keys in.
  let logged = '';
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      logged += String(chunk);
      done();
    },
  });
  before(async () => {
    tmp = await makeTempDir('dashboard-journey');
    origin = await makeOrigin(tmp, { 'README.md': '# Demo\n\nHello from the demo.\n' });
    llm = await startFakeLlm({ apiKey: OPENAI_KEY, models: ['gpt-test'] });
    svc = await startTestService({
      log: createLogger('trace', logSink),
      env: {
        OPENAI_API_KEY: OPENAI_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_TURN_RETRIES: '1',
      },
    });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await svc?.close();
    await llm?.close();
    await removeDir(tmp);
  });

  test('admin key → project → projectId and a key → a job over HTTP watched live → follow-up → archive → sign out', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, svc.url, svc.adminKey);

    await page.getByLabel('Name', { exact: true }).fill('journey');
    await page.getByLabel('Repository').fill(origin.url);
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.waitForURL(`${svc.url}/projects`);
    await page
      .getByRole('row', { name: /journey/ })
      .getByRole('link', { name: 'API keys' })
      .click();
    const projectId = (await page.locator('#project-id-value').textContent())?.trim() ?? '';
    await page.getByLabel('Name').fill('journey key');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.locator('#new-key').textContent())?.trim() ?? '';

    const edit = gate();
    const finish = gate();
    llm.script(
      toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]),
      dynamic(async () => {
        await edit.wait;
        return toolCalls([
          {
            name: 'edit_file',
            input: { path: 'README.md', old: 'Hello from the demo.', new: 'Hello, world.' },
          },
        ]);
      }),
      dynamic(async () => {
        await finish.wait;
        return reply('Greet the world\n\nThe README **now** greets the world.');
      }),
    );
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      key,
      body: { prompt: 'Greet the world in the README' },
    });
    assert.equal(created.status, 201);
    const jobId = created.json.id as string;

    await page.goto(`${svc.url}/projects/${projectId}/jobs`);
    await page.getByRole('link', { name: 'Greet the world in the README' }).click();
    await page.waitForURL(`${svc.url}/projects/${projectId}/jobs/${jobId}`);
    let navigations = 0;
    page.on('framenavigated', () => navigations++);
    const lines = page.locator('#events li');
    const before = await lines.count();
    edit.open();
    // The line after the ones the page was loaded with.
    await lines.nth(before).waitFor({ timeout: 5000 });
    await page
      .locator('#events')
      .getByText(/README\.md/)
      .first()
      .waitFor({ timeout: 5000 });
    assert.equal(navigations, 0, 'the log filled in without a reload');

    finish.open();
    await page.locator('#job-status').getByText('completed').waitFor({ timeout: 20_000 });
    const job = await untilStatus(svc, projectId, jobId, 'completed', { failFast: true });
    await page.getByRole('link', { name: String(job.prLink) }).waitFor();
    // The completion reaches the live log too, as a line, not as the record it carries.
    await page
      .locator('#events')
      .getByText(`completed: ${job.prLink}`, { exact: true })
      .waitFor({ timeout: 5000 });
    await page.locator('.summary strong').getByText('now').waitFor();
    await page.locator('main').getByText('+Hello, world.').first().waitFor();

    llm.script(reply('Nothing else to change\n\nThe README already greets the world.'));
    await page.getByLabel('Prompt').fill('Anything else?');
    await page.getByRole('button', { name: 'Send follow-up' }).click();
    await page.getByRole('region', { name: 'Turn 2' }).getByText('Anything else?').waitFor();
    await untilStatus(svc, projectId, jobId, 'completed', { failFast: true });
    // The page follows the job's stream and reloads itself once the turn has settled it.
    await page
      .getByRole('region', { name: 'Turn 2' })
      .getByText('Nothing else to change')
      .waitFor({ timeout: 10_000 });

    await page.getByRole('link', { name: 'Archive this job…' }).click();
    await page.getByRole('button', { name: 'Archive' }).click();
    await page.locator('#job-status').getByText('archived').waitFor();

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${svc.url}/`);
    await page.goBack();
    await page.getByLabel('API key').waitFor();
    const shown = await page.content();
    assert.ok(!shown.includes(jobId) && !shown.includes(projectId), 'back shows no data');
    llm.assertDone();
    await context.close();
    assert.ok(logged.length > 0, 'the service logged');
    assert.ok(!logged.includes(svc.adminKey) && !logged.includes(key), 'no key in a log');
  });
});
