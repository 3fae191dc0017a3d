// A project's MCP servers on the dashboard's settings page, in a real browser against a real
// service: listed read-only (commands, URLs, the names of env variables and headers, never their
// values), and kept when the settings form is saved.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { startTestService, type TestService } from '../support/service.ts';
import { browserSkipReason, launchBrowser, signIn } from './browser.ts';

const TOKEN = 'tok-dashboard-mcp-31f9';

describe("dashboard: a project's MCP servers", { skip: browserSkipReason }, () => {
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

  test('listed without values, and kept when the settings are saved', async () => {
    const servers = {
      docs: { command: 'node', args: ['docs.js'], env: { DOCS_TOKEN: TOKEN } },
      tracker: { url: 'https://93.184.216.34/mcp', headers: { Authorization: `Bearer ${TOKEN}` } },
    };
    const created = await svc.request('POST', '/v2/admin/projects', {
      body: { name: 'with servers', repository: svc.database.dataDir, mcpServers: servers },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, svc.url, svc.adminKey);
    await page.goto(`${svc.url}/projects/${id}/settings`);
    const section = page.getByRole('region', { name: 'MCP servers' });
    await section.getByText('stdio, node docs.js; env DOCS_TOKEN').waitFor();
    await section.getByText('remote, https://93.184.216.34/mcp; headers Authorization').waitFor();
    assert.ok(!(await page.content()).includes(TOKEN), 'a value is on the page');

    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Saved.').waitFor();
    const row = await svc.service.ctx.db
      .selectFrom('projects')
      .select('mcp_servers')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(row.mcp_servers, servers);
    await context.close();
  });
});
