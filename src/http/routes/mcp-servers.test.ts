// The `mcpServers` setting through the API: a project's (admin API create and update; null
// clears it) shown without env or header values, and a job's on create, which may not name a
// project secret; remote URLs follow the webhook address rules. A refusal is a 400 naming the
// server and changes nothing. Only IP literals are used: no name is looked up.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, unchanged } from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import type { ProjectRecord } from '../../records/project.ts';

const TOKEN = 'tok-4c1f0e9a7b';

const SERVERS = {
  docs: {
    command: 'node',
    args: ['docs-server.js', '--verbose'],
    env: { DOCS_TOKEN: TOKEN, REGION: 'eu' },
  },
  tracker: {
    url: 'https://93.184.216.34/mcp',
    headers: { Authorization: 'Bearer ${secret:TRACKER_TOKEN}', 'X-Team': TOKEN },
  },
};

describe('mcpServers through the API', () => {
  let svc: TestService;
  let projectId: string;

  before(async () => {
    svc = await startTestService({ worker: false });
    projectId = (await svc.createProject({ name: 'mcp' })).id;
  });
  after(async () => {
    await svc?.close();
  });

  const patch = (fields: Record<string, unknown>) =>
    svc.request('PATCH', `/v2/admin/projects/${projectId}`, { body: fields });
  const createJob = (fields: Record<string, unknown>) =>
    svc.request('POST', `/v2/agent/${projectId}/job`, { body: { prompt: 'hi', ...fields } });

  test("a project's servers: stored as given, shown without values, kept, cleared by null", async () => {
    const created = await svc.request('POST', '/v2/admin/projects', {
      body: { name: 'with servers', repository: svc.database.dataDir, mcpServers: SERVERS },
    });
    assert.equal(created.status, 201, created.text);
    const shown = {
      docs: {
        command: 'node',
        args: ['docs-server.js', '--verbose'],
        envNames: ['DOCS_TOKEN', 'REGION'],
      },
      tracker: { url: 'https://93.184.216.34/mcp', headerNames: ['Authorization', 'X-Team'] },
    };
    assert.deepEqual((created.json as ProjectRecord).mcpServers, shown);
    assert.ok(!created.text.includes(TOKEN), 'a value is in the record');
    const id = (created.json as ProjectRecord).id;
    const row = await svc.service.ctx.db
      .selectFrom('projects')
      .select('mcp_servers')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(row.mcp_servers, SERVERS);

    const renamed = await svc.request('PATCH', `/v2/admin/projects/${id}`, {
      body: { name: 'renamed' },
    });
    assert.deepEqual((renamed.json as ProjectRecord).mcpServers, shown);
    const cleared = await svc.request('PATCH', `/v2/admin/projects/${id}`, {
      body: { mcpServers: null },
    });
    assert.equal(cleared.status, 200, cleared.text);
    assert.equal((cleared.json as ProjectRecord).mcpServers, null);
    const audit = await svc.service.ctx.db.selectFrom('audit_log').select('details').execute();
    assert.ok(!JSON.stringify(audit).includes(TOKEN), 'a value is in the audit log');
  });

  test('a project setting refused: bad shape, private or plain-http URL; nothing changes', async () => {
    const cases: [unknown, RegExp][] = [
      [{ a__b: { command: 'x' } }, /server name/],
      [{ a: { command: 'x', url: 'https://93.184.216.34/' } }, /stdio.*remote/],
      [[], /must be an object of servers by name/],
      [{ a: { url: 'https://127.0.0.1:8443/mcp' } }, /MCP server "a": .*127\.0\.0\.1 is loopback/],
      [{ a: { url: 'https://10.0.0.7/mcp' } }, /MCP server "a": .*10\.0\.0\.7 is private/],
      [{ a: { url: 'https://[::ffff:169.254.169.254]/mcp' } }, /cloud metadata/],
      [{ a: { url: 'http://93.184.216.34/mcp' } }, /MCP server "a": its URL must use https:\/\//],
    ];
    for (const [mcpServers, pattern] of cases) {
      const res = await unchanged(svc, () => patch({ mcpServers }));
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', pattern, JSON.stringify(mcpServers));
    }
  });

  test("a job's own servers: stored with the job; a project secret, a private URL refused", async () => {
    const jobServers = { notes: { command: 'notes-mcp', env: { NOTES_KEY: TOKEN } } };
    const res = await createJob({ mcpServers: jobServers });
    assert.equal(res.status, 201, res.text);
    const row = await svc.service.ctx.db
      .selectFrom('jobs')
      .select('mcp_servers')
      .where('id', '=', res.json.id as string)
      .executeTakeFirstOrThrow();
    assert.deepEqual(row.mcp_servers, jobServers);
    assert.ok(!res.text.includes(TOKEN), 'the job record shows a value');

    const cases: [unknown, RegExp][] = [
      [
        {
          a: { url: 'https://93.184.216.34/mcp', headers: { A: 'Bearer ${secret:TRACKER_TOKEN}' } },
        },
        /server "a" names \$\{secret:TRACKER_TOKEN\}: a job's own servers may not use project secrets/,
      ],
      [{ a: { command: 'x', args: ['${secret:X}'] } }, /may not use project secrets/],
      [{ a: { url: 'https://192.168.1.1/mcp' } }, /MCP server "a": .*private/],
      [{ 'bad name!': { command: 'x' } }, /server name/],
    ];
    for (const [mcpServers, pattern] of cases) {
      const refused = await unchanged(svc, () => createJob({ mcpServers }));
      assert.equal(refused.status, 400, refused.text);
      assert.match(refused.json.error ?? '', pattern, JSON.stringify(mcpServers));
    }
  });
});

describe('mcpServers with ERRAND_WEBHOOK_ALLOW_PRIVATE=true', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService({ worker: false, env: { ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true' } });
  });
  after(async () => {
    await svc?.close();
  });

  test('a loopback http URL is accepted, for a project and for a job', async () => {
    const servers = { local: { url: 'http://127.0.0.1:9/mcp' } };
    const created = await svc.request('POST', '/v2/admin/projects', {
      body: { name: 'local', repository: svc.database.dataDir, mcpServers: servers },
    });
    assert.equal(created.status, 201, created.text);
    const project = created.json as ProjectRecord;
    assert.deepEqual(project.mcpServers, {
      local: { url: 'http://127.0.0.1:9/mcp', headerNames: [] },
    });
    const res = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      body: { prompt: 'hi', mcpServers: servers },
    });
    assert.equal(res.status, 201, res.text);
  });
});
