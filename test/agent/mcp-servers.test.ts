// MCP servers in Errand's own agent's turns: a real service and database, real git, real
// bubblewrap, the scripted fake model over loopback, a stdio server (a small Node script on the
// MCP SDK, in the repository) started in the job's sandbox, and a remote one (the SDK over
// Streamable HTTP on 127.0.0.1) that requires a bearer token named from a project secret. The
// model calls a tool of each; the stdio server reports what it sees (no host paths, its env
// without the token); the token reaches the remote server only: not the sandbox, not the
// model, not an event, not the transcript. Servers that fail are events and a note; the turn
// completes. An ask turn gets only the tools that say they are read-only, and no stdio server.
import assert from 'node:assert/strict';
import { cp } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { checkSandbox } from '../../src/sandbox/sandbox.ts';
import {
  type FakeLlm,
  type RecordedRequest,
  reply,
  startFakeLlm,
  toolCalls,
  toolResults,
} from '../support/fake-llm.ts';
import { type FakeRemoteMcp, startFakeRemoteMcp } from '../support/fake-mcp.ts';
import { makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { untilStatus } from '../support/jobs.ts';
import { startTestService, type TestService } from '../support/service.ts';

const OPENAI_KEY = 'sk-test-openai-mcp-5e2a71';
const TRACKER_TOKEN = 'trk_mcp_remote_token_8d3f0c2b9a';
const LICENSE_KEY = 'lic-mcp-stdio-7c1e44a0b2';

const sandbox = await checkSandbox();
const skip = sandbox.available ? false : `bubblewrap does not work here: ${sandbox.reason}`;
if (skip) process.stdout.write(`# MCP server tests skipped: ${skip}\n`);

/** The stdio server: its one tool reports what the process sees. */
const SERVER = `import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
const hostPath = process.argv[2];
const server = new McpServer({ name: 'files', version: '1.0.0' });
server.registerTool('whoami', { description: 'What this process sees.', inputSchema: {}, annotations: { readOnlyHint: true } }, async () => ({
  content: [{ type: 'text', text: JSON.stringify({
    cwd: process.cwd(), hostname: hostname(), seesHostPath: existsSync(hostPath),
    seesReadme: existsSync('/workspace/README.md'), env: process.env,
  }) }],
}));
await server.connect(new StdioServerTransport());
`;

/** What the SDK needs to load in the sandbox, copied into the repository beside the server. */
const PACKAGES = [
  '@modelcontextprotocol/sdk',
  'zod',
  'zod-to-json-schema',
  'ajv',
  'ajv-formats',
  'fast-deep-equal',
  'json-schema-traverse',
  'fast-uri',
];

type Event = { type: string; data: Record<string, unknown> };

function toolNames(request: RecordedRequest | undefined): string[] {
  const body = request?.body as { tools?: Array<{ function?: { name?: string } }> };
  return (body?.tools ?? []).map((t) => t.function?.name ?? '').sort();
}

describe("MCP servers in Errand's agent", { skip }, () => {
  let llm: FakeLlm;
  let remote: FakeRemoteMcp;
  let svc: TestService;
  let tmp: string;
  let origin: Origin;

  before(async () => {
    tmp = await makeTempDir('mcp-servers');
    origin = await makeOrigin(tmp, { 'README.md': '# Demo\n', 'mcp/server.mjs': SERVER });
    const modules = path.resolve(import.meta.dirname, '../../node_modules');
    for (const name of PACKAGES)
      await cp(path.join(modules, name), path.join(origin.work, 'mcp/node_modules', name), {
        recursive: true,
        dereference: true,
      });
    await origin.commit({}, 'the SDK for the server');
    llm = await startFakeLlm({ apiKey: OPENAI_KEY, models: ['gpt-test'] });
    remote = await startFakeRemoteMcp(TRACKER_TOKEN);
    svc = await startTestService({
      env: {
        OPENAI_API_KEY: OPENAI_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_TURN_RETRIES: '0',
        ERRAND_SECRET_KEY: 'mcp-e2e-secret-key',
        ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true',
      },
    });
  });
  after(async () => {
    await svc?.close();
    await remote?.close();
    await llm?.close();
    await removeDir(tmp);
  });
  afterEach(() => {
    try {
      llm.assertDone();
    } finally {
      llm.reset();
    }
  });

  const createJob = async (projectId: string, prompt: string, fields = {}): Promise<string> => {
    const res = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt, ...fields },
    });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  };
  const events = async (projectId: string, jobId: string): Promise<Event[]> =>
    ((await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ??
      []) as unknown as Event[];
  /** Everything a job left that anyone reads: its record, events and stored transcript. */
  const traces = async (projectId: string, jobId: string): Promise<string> => {
    const job = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
    const turns = await svc.service.ctx.db
      .selectFrom('turns')
      .select(['messages', 'summary', 'error'])
      .where('job_id', '=', jobId)
      .execute();
    return [job.text, JSON.stringify(await events(projectId, jobId)), JSON.stringify(turns)].join(
      '\n',
    );
  };
  const project = async (): Promise<string> => {
    const { id } = await svc.createProject({ repository: origin.url, ref: 'main' });
    for (const [name, value, exposure] of [
      ['TRACKER_TOKEN', TRACKER_TOKEN, 'setup'],
      ['LICENSE_KEY', LICENSE_KEY, 'commands'],
    ] as const) {
      const res = await svc.request('PUT', `/v2/admin/projects/${id}/secrets/${name}`, {
        body: { value, exposure },
      });
      assert.equal(res.status, 201, res.text);
    }
    const res = await svc.request('PATCH', `/v2/admin/projects/${id}`, {
      body: {
        mcpServers: {
          files: {
            command: process.execPath,
            args: ['mcp/server.mjs', tmp],
            env: { FROM_SETTING: 'visible', LICENSE: '${secret:LICENSE_KEY}' },
          },
          tracker: {
            url: remote.url,
            headers: { Authorization: 'Bearer ${secret:TRACKER_TOKEN}' },
          },
          broken: {
            command: process.execPath,
            args: ['-e', 'console.error("boom: no config"); process.exit(3)'],
          },
        },
      },
    });
    assert.equal(res.status, 200, res.text);
    return id;
  };

  test('a stdio tool runs in the sandbox, a remote one through the service; the token stays out', async () => {
    const projectId = await project();
    llm.script(
      toolCalls([
        { name: 'files__whoami', input: {} },
        { name: 'tracker__echo', input: { text: 'hi' } },
      ]),
      reply('Both tools answered.'),
    );
    const jobId = await createJob(projectId, 'Ask the servers', {
      mcpServers: { gone: { url: 'http://127.0.0.1:9/mcp' } },
    });
    const job = await untilStatus(svc, projectId, jobId, 'completed', { timeoutMs: 90_000 });
    assert.equal(job.error, null);

    // The model was offered every tool of the two servers that work, namespaced.
    assert.deepEqual(
      toolNames(llm.requests[0]).filter((n) => n.includes('__')),
      ['files__whoami', 'tracker__big', 'tracker__echo', 'tracker__shout'],
    );
    // The servers that failed: an event each, and a note to the model.
    const log = await events(projectId, jobId);
    const unavailable = log.filter((e) => e.type === 'mcp.unavailable').map((e) => e.data);
    assert.deepEqual(unavailable.map((d) => d.server).sort(), ['broken', 'gone']);
    const broken = unavailable.find((d) => d.server === 'broken');
    assert.match(String(broken?.reason), /exited with code 3 before it answered: boom: no config/);
    const firstPrompt = JSON.stringify(llm.requests[0]?.body);
    assert.match(firstPrompt, /MCP servers of the job are unavailable.*broken/);

    // The stdio server ran in the sandbox: the checkout at /workspace, no host path, and its
    // env with its own values (the secret scrubbed on its way to the model), never the token.
    const [whoami = '', echo = ''] = toolResults(llm.requests[1]);
    const seen = JSON.parse(whoami) as {
      cwd: string;
      seesHostPath: boolean;
      seesReadme: boolean;
      env: Record<string, string>;
    };
    assert.equal(seen.cwd, '/workspace');
    assert.equal(seen.seesReadme, true);
    assert.equal(seen.seesHostPath, false, 'the sandbox sees a host path');
    assert.equal(seen.env.FROM_SETTING, 'visible');
    assert.equal(seen.env.LICENSE, '[secret LICENSE_KEY]');
    assert.ok(!whoami.includes(TRACKER_TOKEN), 'the token is in the sandbox');
    assert.match(echo, /echo: hi/);
    assert.deepEqual(remote.calls, ['echo']);
    assert.ok(remote.requests.some((h) => h.authorization === `Bearer ${TRACKER_TOKEN}`));

    const all = await traces(projectId, jobId);
    for (const secret of [TRACKER_TOKEN, LICENSE_KEY])
      assert.ok(!all.includes(secret), `a secret is in the job's record, events or transcript`);
    for (const request of llm.requests)
      assert.ok(!JSON.stringify(request.body).includes(TRACKER_TOKEN), 'the model got the token');
  });

  test('an ask turn gets only the read-only tools, and no stdio server', async () => {
    const projectId = await project();
    llm.script(toolCalls([{ name: 'tracker__echo', input: { text: 'q' } }]), reply('An answer.'));
    const jobId = await createJob(projectId, 'What is there?', { mode: 'ask' });
    await untilStatus(svc, projectId, jobId, 'completed', { timeoutMs: 90_000 });
    assert.deepEqual(
      toolNames(llm.requests[0]).filter((n) => n.includes('__')),
      ['tracker__echo'],
    );
    const unavailable = (await events(projectId, jobId)).filter(
      (e) => e.type === 'mcp.unavailable',
    );
    assert.deepEqual(unavailable.map((e) => e.data.server).sort(), ['broken', 'files']);
    assert.match(String(unavailable[0]?.data.reason), /only in code turns/);
  });
});
