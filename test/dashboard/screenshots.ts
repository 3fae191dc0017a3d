// `npm run screenshots`: the dashboard's pages at 1280 and 390 px wide, light and dark, taken
// with the browser the tests use, against a throwaway service; written to docs/screenshots/
// for the README.
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { SESSION_COOKIE, startUserSession } from '../../src/dashboard/sessions.ts';
import { recordProgress, recordReviewDiff } from '../../src/jobs/lifecycle.ts';
import { insertEvents } from '../../src/jobs/transaction.ts';
import { upsertUser } from '../../src/users/service.ts';
import { createToken, revokeToken } from '../../src/users/tokens.ts';
import { startTestService } from '../support/service.ts';
import { storeDelivery } from '../support/stored-deliveries.ts';
import { createUser } from '../support/users.ts';
import { browserSkipReason, launchBrowser } from './browser.ts';

if (browserSkipReason) {
  process.stderr.write(`${browserSkipReason}\n`);
  process.exit(1);
}

const out = path.resolve(import.meta.dirname, '../../docs/screenshots');
await mkdir(out, { recursive: true });
// No worker: the webhook's delivery log below is written as it is, nothing is sent. Embedded:
// this script runs outside `npm test`, so there is no test server to make a database on.
const svc = await startTestService({
  embedded: true,
  worker: false,
  env: {
    ERRAND_SECRET_KEY: 'screenshots-secret-key-0000',
    ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true',
    // Only so that the eval run's OpenAI agents are accepted; nothing calls a model here.
    OPENAI_API_KEY: 'sk-screenshots-unused',
  },
});
const browser = await launchBrowser();
try {
  const project = await svc.createProject({
    name: 'website',
    model: 'anthropic:claude-sonnet-4-5',
  });
  const billing = await svc.createProject({ name: 'billing service' });
  await svc.request('POST', '/v2/admin/keys', { body: { projectId: project.id, name: 'backend' } });
  let jobId = '';
  // A 2×2 PNG, as a screenshot would come with the prompt (docs/images.md).
  const screenshot = Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGOQszkBRAwQCgAdHgSJ5Ed7/AAAAABJRU5ErkJggg==',
    'base64',
  ).toString('base64');
  for (const [prompt, attachments] of [
    ['Fix the typo in README.md', undefined],
    [
      'Add a dark mode toggle to the settings page and remember the choice per user',
      [{ data: screenshot }],
    ],
  ] as const) {
    const made = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      body: { prompt, ...(attachments ? { attachments } : {}) },
    });
    jobId = String(made.json.id);
  }
  // The team's tools (docs/mcp-servers.md): the settings page lists them, values hidden.
  await svc.request('PATCH', `/v2/admin/projects/${project.id}`, {
    body: {
      mcpServers: {
        docs: {
          command: 'node',
          args: ['tools/docs-mcp.js'],
          env: { DOCS_TOKEN: '${secret:LICENSE_KEY}' },
        },
        tracker: {
          url: 'http://127.0.0.1:8931/mcp',
          headers: { Authorization: 'Bearer ${secret:NPM_TOKEN}' },
        },
      },
    },
  });
  const { ctx } = svc.service;
  // Best-of-N (docs/eval.md): the job's page lists its attempts, the winner marked.
  await ctx.db
    .updateTable('jobs')
    .set({
      attempts: JSON.stringify([
        {
          n: 1,
          engine: 'claude-code',
          model: 'anthropic:claude-sonnet-4-5',
          branch: `errand/${jobId}-1`,
          outcome: 'passed',
          check: { exitCode: 0, outputTail: ' Tests  12 passed (12)', durationMs: 4120 },
          costUsd: 0.41,
          diff: { files: 2, lines: 37 },
          commitSha: '9f2c4e1a0b7d35c6a8e1f0d2b3c4a5e6f7a8b9c1',
          error: null,
          winner: true,
        },
        {
          n: 2,
          engine: 'codex',
          model: 'openai:gpt-5',
          branch: `errand/${jobId}-2`,
          outcome: 'failed',
          check: {
            exitCode: 1,
            outputTail:
              ' FAIL  test/settings.test.tsx > remembers the choice per user\n Tests  1 failed | 11 passed (12)',
            durationMs: 3980,
          },
          costUsd: 0.22,
          diff: { files: 1, lines: 6 },
          commitSha: '41be2a9e0b7d35c6a8e1f0d2b3c4a5e6f7a8b9c2',
          error: null,
          winner: false,
        },
      ]),
    })
    .where('id', '=', jobId)
    .execute();
  const head = '4f1c2a9e0b7d35c6a8e1f0d2b3c4a5e6f7a8b9c0';
  // A transition's event, written as the lifecycle writes it.
  await insertEvents(ctx.db, [{ jobId, turn: 1, type: 'turn.started', data: { attempt: 1 } }]);
  await recordProgress(ctx, jobId, 1, 'workspace.ready', { base: head, head, continued: false });
  await recordProgress(ctx, jobId, 1, 'tool.call', {
    id: 'call_1',
    name: 'read_file',
    summary: 'read_file(src/settings.tsx)',
  });
  await recordProgress(ctx, jobId, 1, 'tool.result', {
    id: 'call_1',
    name: 'read_file',
    ok: true,
    summary: '48 lines',
  });
  await recordProgress(ctx, jobId, 1, 'model.step', {
    step: 1,
    usage: {
      inputTokens: 5120,
      outputTokens: 212,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      costUsd: null,
    },
  });
  await recordProgress(ctx, jobId, 1, 'tool.call', {
    id: 'call_2',
    name: 'edit_file',
    summary: 'edit_file(src/settings.tsx)',
  });
  await recordProgress(ctx, jobId, 1, 'command.started', { command: 'npm test', cwd: '.' });
  await recordProgress(ctx, jobId, 1, 'command.finished', {
    command: 'npm test',
    exitCode: 0,
    durationMs: 4210,
    timedOut: false,
    outputTail:
      '> settings@1.0.0 test\n> node --test\n\n✔ remembers the dark mode per user (12 ms)\n✔ renders the settings form (8 ms)\nℹ tests 2\nℹ pass 2',
  });
  await recordReviewDiff(
    ctx,
    jobId,
    [
      'diff --git a/src/settings.tsx b/src/settings.tsx',
      '--- a/src/settings.tsx',
      '+++ b/src/settings.tsx',
      '@@ -1,3 +1,4 @@',
      ' export function Settings() {',
      '-  return <Form />;',
      '+  const [dark, setDark] = useStoredState("dark", false);',
      '+  return <Form dark={dark} onDark={setDark} />;',
      ' }',
      '',
    ].join('\n'),
    false,
  );
  const webhook = await svc.request('POST', `/v2/admin/projects/${project.id}/webhooks`, {
    body: {
      url: 'https://ci.example.com/errand',
      events: ['job.completed', 'job.failed', 'pull_request.opened'],
      description: 'CI',
    },
  });
  const webhookId = String(webhook.json.id);
  const at = Date.now() - 3_600_000;
  await storeDelivery(svc, {
    webhookId,
    jobId,
    type: 'pull_request.opened',
    state: 'delivered',
    attempts: [{ status: 200, latencyMs: 84 }],
    createdAt: new Date(at),
  });
  await storeDelivery(svc, {
    webhookId,
    jobId,
    type: 'job.completed',
    state: 'delivered',
    attempts: [
      { status: 503, latencyMs: 120 },
      { status: null, error: 'timed out after 10 s', latencyMs: 10_000 },
      { status: 200, latencyMs: 91 },
    ],
    createdAt: new Date(at + 60_000),
  });
  for (const [name, exposure] of [
    ['NPM_TOKEN', 'setup'],
    ['LICENSE_KEY', 'commands'],
  ] as const) {
    await svc.request('PUT', `/v2/admin/projects/${project.id}/secrets/${name}`, {
      body: { value: `screenshot-value-of-${name}`, exposure },
    });
  }
  // The environment the workers keep: as a worker writes its rows once a snapshot is kept.
  await svc.request('PATCH', `/v2/admin/projects/${project.id}`, {
    body: {
      setupCommand: 'npm ci',
      maintenanceCommand: 'npm run build',
      network: { setup: 'allowlist', allow: ['@npm'] },
    },
  });
  const hour = 3_600_000;
  for (const [key, worker, sizeBytes, files, buildMs, usedHoursAgo] of [
    [
      '9c1e5a7f03b2d4e6a8c0b1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2',
      'build-1:4be1c2d3',
      412_316_860,
      38_412,
      71_350,
      0.2,
    ],
    [
      '9c1e5a7f03b2d4e6a8c0b1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2',
      'build-2:77a0f9e1',
      412_318_020,
      38_412,
      68_940,
      1.5,
    ],
    [
      '3f0d8b2a6c4e1f7a9b5d3c1e0f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a',
      'build-1:4be1c2d3',
      398_770_112,
      37_905,
      74_020,
      30,
    ],
  ] as const) {
    await ctx.db
      .insertInto('environments')
      .values({
        project_id: project.id,
        key,
        worker,
        size_bytes: sizeBytes,
        files,
        build_ms: buildMs,
        base_commit: head,
        created_at: new Date(Date.now() - (usedHoursAgo + 2) * hour),
        last_used_at: new Date(Date.now() - usedHoursAgo * hour),
      })
      .execute();
  }
  // People, as the identity provider's sign-in leaves them, and their roles on the project.
  const ada = await createUser(ctx.db, {
    admin: true,
    email: 'ada@example.com',
    name: 'Ada Lovelace',
    groups: ['platform'],
  });
  const bob = await createUser(ctx.db, {
    email: 'bob@example.com',
    name: 'Bob Kahn',
    roles: { [project.id]: 'member' },
  });
  const cy = await createUser(ctx.db, {
    email: 'cy@example.com',
    name: 'Cy Young',
    roles: { [project.id]: 'viewer' },
  });
  await svc.request('PUT', `/v2/admin/projects/${project.id}/roles/group/platform`, {
    body: { role: 'maintainer' },
  });
  await svc.request('POST', `/v2/admin/users/${cy}/deactivate`);
  await ctx.db
    .updateTable('users')
    .set({ last_seen_at: new Date(Date.now() - 3 * hour) })
    .where('id', 'in', [ada, bob])
    .execute();
  // A user signed in through the identity provider, with roles and tokens of their own.
  const person = await upsertUser(
    ctx.db,
    {
      issuer: 'https://idp.example.com',
      subject: 'grace',
      email: 'grace@example.com',
      name: 'Grace Hopper',
      emailVerified: true,
      groups: [],
    },
    false,
  );
  await ctx.db
    .insertInto('project_roles')
    .values([
      { project_id: project.id, grantee_kind: 'user', grantee: person.id, role: 'maintainer' },
      { project_id: billing.id, grantee_kind: 'user', grantee: person.id, role: 'member' },
    ])
    .execute();
  await createToken(ctx.db, person.id, {
    name: 'dashboard exporter',
    expiresInDays: 365,
    projectIds: [project.id],
    readOnly: true,
  });
  const old = await createToken(ctx.db, person.id, {
    name: 'old laptop',
    expiresInDays: 30,
    projectIds: null,
    readOnly: false,
  });
  await revokeToken(ctx.db, person.id, old.row.id);
  // An eval run (docs/eval.md's walk-through) of the three engines on four tasks from the
  // project's history, three times each, its results settled here as the runner would have: the
  // Evals page's tables and chart.
  const evalRun = await svc.request('POST', '/v2/admin/evals', {
    body: {
      name: 'three engines on the website, November',
      tasks: ['3f2a9c1d0b7e', '9d81e0c4aa12', '51c07be2d9f3', 'a4e6f0197c2b'].map((id) => ({
        id,
        project: project.id,
        ref: `errand-eval/${id}`,
        prompt: `Task ${id}`,
        check: 'npx vitest run {files}',
      })),
      agents: [
        { engine: 'claude-code', model: 'anthropic:claude-sonnet-4-5' },
        { engine: 'codex', model: 'openai:gpt-5' },
        { engine: 'opencode', model: 'openai:gpt-4.1' },
      ],
      repeat: 3,
    },
  });
  const evalRunId = String(evalRun.json.id);
  const settled = await ctx.db
    .selectFrom('eval_results')
    .select(['n', 'agent'])
    .where('run_id', '=', evalRunId)
    .execute();
  for (const { n, agent } of settled) {
    const skill = agent.startsWith('opencode') ? 0.5 : agent.startsWith('claude-code') ? 0.8 : 0.7;
    const passed = (n * 37) % 100 < skill * 100;
    const cost = (agent.startsWith('opencode') ? 0.03 : 0.09) * (1 + (n % 3) / 2);
    await ctx.db
      .updateTable('eval_results')
      .set({
        state: passed ? 'passed' : 'failed',
        check_exit: passed ? 0 : 1,
        tail: passed
          ? null
          : ' FAIL  test/dates.test.ts > formats dates in the reader’s zone\n Tests  1 failed | 11 passed (12)',
        cost_usd: cost,
        duration_ms: 90_000 + n * 7_000,
        steps: 12 + (n % 9),
        input_tokens: 40_000 + n * 1000,
        output_tokens: 3_000 + n * 100,
        started_at: new Date(),
        finished_at: new Date(),
      })
      .where('run_id', '=', evalRunId)
      .where('n', '=', n)
      .execute();
  }
  await ctx.db
    .updateTable('eval_runs')
    .set({ state: 'finished', finished_at: new Date() })
    .where('id', '=', evalRunId)
    .execute();
  for (const [width, height] of [
    [1280, 800],
    [390, 844],
  ] as const) {
    for (const scheme of ['light', 'dark'] as const) {
      const context = await browser.newContext({
        viewport: { width, height },
        colorScheme: scheme,
      });
      const page = await context.newPage();
      const shot = (name: string) =>
        page.screenshot({ path: path.join(out, `${name}-${width}-${scheme}.png`), fullPage: true });
      await page.goto(`${svc.url}/`);
      await shot('sign-in');
      await page.getByLabel('API key').fill(svc.adminKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${svc.url}/projects`);
      await shot('projects');
      await page.goto(`${svc.url}/projects/${project.id}/jobs`);
      await shot('jobs');
      await page.goto(`${svc.url}/projects/${project.id}/jobs/${jobId}`);
      await shot('job');
      await page.goto(`${svc.url}/projects/${project.id}/keys`);
      await page.getByLabel('Name').fill(`ci ${width} ${scheme}`);
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.locator('#new-key').waitFor();
      await shot('api-keys');
      // A secret set through the form: the settings page lands on its section.
      await page.goto(`${svc.url}/projects/${project.id}/settings`);
      await page.getByLabel('Secret name').fill('SENTRY_AUTH_TOKEN');
      await page.getByLabel('Secret value').fill('screenshot-sentry-token');
      await page.getByRole('button', { name: 'Set secret' }).click();
      await page.getByRole('status').getByText('Secret SENTRY_AUTH_TOKEN set.').waitFor();
      await shot('project-settings');
      await page
        .locator('section[aria-labelledby="secrets"]')
        .screenshot({ path: path.join(out, `project-secrets-${width}-${scheme}.png`) });
      await page
        .locator('section[aria-labelledby="environments"]')
        .screenshot({ path: path.join(out, `project-environments-${width}-${scheme}.png`) });
      await page.goto(`${svc.url}/projects/${project.id}/webhooks`);
      await shot('webhooks');
      await page.goto(`${svc.url}/projects/${project.id}/webhooks/${webhookId}`);
      await shot('webhook-deliveries');
      await page.goto(`${svc.url}/users`);
      await shot('users');
      await page.goto(`${svc.url}/projects/${project.id}/roles`);
      await shot('roles');
      // Every change above is a row of the audit log.
      await page.goto(`${svc.url}/audit`);
      await shot('audit');
      await page.goto(`${svc.url}/evals`);
      await shot('evals');
      await page.goto(`${svc.url}/evals/${evalRunId}`);
      await shot('eval-run');
      await context.close();
      // The Tokens page is a user's: a session of the user above, a token just made.
      const userContext = await browser.newContext({
        viewport: { width, height },
        colorScheme: scheme,
      });
      await userContext.addCookies([
        { name: SESSION_COOKIE, value: await startUserSession(ctx.db, person.id), url: svc.url },
      ]);
      const userPage = await userContext.newPage();
      await userPage.goto(`${svc.url}/tokens`);
      await userPage.getByLabel('Name').fill(`ci ${width} ${scheme}`);
      await userPage.getByRole('button', { name: 'Create token' }).click();
      await userPage.locator('#new-token').waitFor();
      await userPage.screenshot({
        path: path.join(out, `tokens-${width}-${scheme}.png`),
        fullPage: true,
      });
      await userContext.close();
    }
  }
  process.stdout.write(`screenshots written to ${out}\n`);
} finally {
  await browser.close();
  await svc.close();
}
