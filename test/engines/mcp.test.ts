// MCP servers with each engine's real CLI in the real sandbox, against a fake of its model API
// over loopback: the project names a stdio server (a small Node script speaking MCP on its
// standard input, given a project secret in its environment) and a remote one (the SDK's
// McpServer over Streamable HTTP on 127.0.0.1, refusing any request without its bearer token, a
// project secret). The fake model sees both servers' tools, calls each, and reads their answers:
// the stdio server ran inside the sandbox (it sees /workspace, not the service's data), the
// remote one was reached through the service's bridge. The bearer token is nowhere in the
// sandbox (no process's environment or arguments, no file it can read, not the stdio server's
// environment), not in any event, and the engine's MCP configuration is gone after the turn. A
// server that cannot be opened is an event and a note in the prompt, and one the engine cannot
// start (its command does not exist) is left out by the engine; the turn completes. An
// engine not installed in ERRAND_ENGINES_DIR is skipped with the command that installs it.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import type { InstallableEngine } from '../../src/engines/catalog.ts';
import { secretForms } from '../../src/secrets/scrub.ts';
import {
  dynamic,
  type FakeLlm,
  type FakeToolCall,
  type RecordedRequest,
  reply,
  startFakeLlm,
  toolCalls,
} from '../support/fake-llm.ts';
import { type FakeRemoteMcp, startFakeRemoteMcp } from '../support/fake-mcp.ts';
import { makeTempDir, removeDir } from '../support/git.ts';
import { createJob, untilStatus } from '../support/jobs.ts';
import type { TestService } from '../support/service.ts';
import {
  ENGINE_MODELS,
  engineSkip,
  filesBelow,
  sandboxFiles,
  sandboxProcesses,
  startEngineProject,
} from './inside.ts';

const REMOTE_TOKEN = `mcp_${randomBytes(16).toString('hex')}`;
const STDIO_TOKEN = `stdio_${randomBytes(16).toString('hex')}`;
/** A value only the stdio server's environment has (not a secret): finds its process. */
const PROBE_MARKER = 'errand-mcp-probe-5e1d9c';

interface EngineCase {
  engine: InstallableEngine;
  /** The engine's name for a server's tool, as the model is offered it. */
  tool: (server: string, tool: string) => string;
  /** The model's call of a server's tool. */
  call: (server: string, tool: string, input: unknown) => FakeToolCall;
  /**
   * The engine offers MCP tools only once the model searched for them (Codex: its client-run
   * tool search, whose answer names each server's tools as a namespace).
   */
  toolSearch?: boolean;
  /** Where the engine's MCP configuration is written in its HOME. */
  configFile: string;
  /** The engine takes ask and plan turns (Codex is refused them). */
  readOnly: boolean;
}

const CASES: EngineCase[] = [
  {
    engine: 'claude-code',
    tool: (server, tool) => `mcp__${server}__${tool}`,
    call: (server, tool, input) => ({ name: `mcp__${server}__${tool}`, input }),
    configFile: '.errand/mcp.json',
    readOnly: true,
  },
  {
    engine: 'codex',
    tool: (server, tool) => `mcp__${server}__${tool}`,
    call: (server, tool, input) => ({ namespace: `mcp__${server}`, name: tool, input }),
    toolSearch: true,
    configFile: '.codex/config.toml',
    readOnly: false,
  },
  {
    engine: 'opencode',
    tool: (server, tool) => `${server}_${tool}`,
    call: (server, tool, input) => ({ name: `${server}_${tool}`, input }),
    configFile: '.errand/opencode-mcp.json',
    readOnly: true,
  },
];

/**
 * A stdio MCP server in plain Node (newline-delimited JSON-RPC on stdin and stdout), run by the
 * engine as `node -e <this>`: its one tool `inspect` reports where it runs (its environment,
 * whether it sees the checkout at /workspace and the path given as its first argument: the
 * service's engine state, of which the sandbox sees only the engine's HOME, at /tmp/home).
 */
const STDIO_SERVER = `'use strict';
const fs = require('node:fs');
const readline = require('node:readline');
const hostPath = process.argv[1];
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\\n');
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.id === undefined) return;
  if (m.method === 'initialize') {
    send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'probe', version: '1.0.0' } } });
  } else if (m.method === 'tools/list') {
    send({ id: m.id, result: { tools: [{ name: 'inspect', description: 'Reports where this server runs.', inputSchema: { type: 'object', properties: {} } }] } });
  } else if (m.method === 'tools/call') {
    const report = { workspace: fs.existsSync('/workspace/README.md'), host: fs.existsSync(hostPath), hostPath, stdioToken: process.env.STDIO_TOKEN, env: process.env };
    send({ id: m.id, result: { content: [{ type: 'text', text: 'probe report ' + JSON.stringify(report) }] } });
  } else if (m.method === 'ping') {
    send({ id: m.id, result: {} });
  } else {
    send({ id: m.id, error: { code: -32601, message: 'no such method' } });
  }
});
`;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The names of the tools a request offers (Anthropic, Responses, chat completions), and those
 * a Responses tool search found (`<namespace>__<tool>`).
 */
function toolsOffered(body: unknown): string[] {
  const declared = isObject(body) && Array.isArray(body.tools) ? body.tools.filter(isObject) : [];
  const searched =
    isObject(body) && Array.isArray(body.input)
      ? body.input
          .filter(isObject)
          .flatMap((item) =>
            item.type === 'tool_search_output' && Array.isArray(item.tools)
              ? item.tools.filter(isObject)
              : [],
          )
      : [];
  return [...declared, ...searched].flatMap((tool) => {
    if (tool.type === 'namespace' && Array.isArray(tool.tools))
      return tool.tools.filter(isObject).map((t) => `${String(tool.name)}__${String(t.name)}`);
    const name = isObject(tool.function) ? tool.function.name : tool.name;
    return typeof name === 'string' ? [name] : [];
  });
}

/** The text around the first `needle` in `text`, or '' when it is not there. */
function excerpt(text: string, needle: string): string {
  const at = text.indexOf(needle);
  return at < 0 ? '' : text.slice(at, at + 3000);
}

/** The forms of the bearer token in `text` (empty: none). */
function tokenLeaks(text: string): string[] {
  return secretForms(REMOTE_TOKEN).filter((f) => text.includes(f));
}

/**
 * Looks inside the running sandbox from the host: every process's environment and arguments
 * (the engine's, the stdio server's) and every file in its HOME, /tmp and checkout. The token is
 * in none of them; the stdio server's process is among them (its secret in its environment) and
 * the engine's MCP configuration among the files, which proves these were the right ones.
 */
async function assertTokenNowhereInside(checkout: string, configFile: string): Promise<void> {
  const pids = await sandboxProcesses(checkout);
  assert.ok(pids.length > 1, 'no sandboxed process found');
  let serverSeen = false;
  for (const pid of pids) {
    for (const what of ['environ', 'cmdline']) {
      const text = await readFile(`/proc/${pid}/${what}`, 'utf8').catch(() => '');
      assert.deepEqual(tokenLeaks(text), [], `the token is in the ${what} of process ${pid}`);
      if (what === 'environ' && text.includes(PROBE_MARKER)) serverSeen = true;
    }
  }
  assert.ok(serverSeen, "no sandboxed process has the stdio server's environment: it did not run");
  let configSeen = false;
  for await (const file of sandboxFiles(pids)) {
    assert.deepEqual(
      tokenLeaks(file.content.toString('latin1')),
      [],
      `the token is in ${file.path}`,
    );
    if (file.path.endsWith(`/tmp/home/${configFile}`)) configSeen = true;
  }
  assert.ok(configSeen, `the engine's MCP configuration (${configFile}) is not in its HOME`);
}

for (const c of CASES) {
  const skip = await engineSkip(c.engine, 'MCP');
  const { vendorModel } = ENGINE_MODELS[c.engine];

  describe(`engine ${c.engine} with MCP servers`, { skip }, () => {
    const key = `sk-${c.engine}-mcp-0a1b2c3d4e5f`;
    let tmp: string;
    let llm: FakeLlm;
    let remote: FakeRemoteMcp;
    let svc: TestService;
    let projectId: string;

    before(async () => {
      tmp = await makeTempDir(`engine-mcp-${c.engine}`);
      llm = await startFakeLlm({ apiKey: key, models: [vendorModel] });
      remote = await startFakeRemoteMcp(REMOTE_TOKEN);
      ({ svc, projectId } = await startEngineProject(c.engine, {
        tmp,
        llmUrl: llm.url,
        key,
        env: {
          ERRAND_SECRET_KEY: 'test-secret-key-for-engine-mcp',
          // The remote server listens on loopback.
          ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true',
        },
      }));
      // The remote's token of exposure "setup": never in the sandbox, so only the service's
      // bridge can use it. A stdio server runs beside the engine's commands: it may name only a
      // secret they have too (exposure "commands").
      for (const [name, value, exposure] of [
        ['REMOTE_TOKEN', REMOTE_TOKEN, 'setup'],
        ['STDIO_TOKEN', STDIO_TOKEN, 'commands'],
      ] as const) {
        const res = await svc.request('PUT', `/v2/admin/projects/${projectId}/secrets/${name}`, {
          body: { value, exposure },
        });
        assert.equal(res.status, 201, res.text);
      }
      // The project's setting, as an admin saves it.
      await svc.service.ctx.db
        .updateTable('projects')
        .set({
          mcp_servers: JSON.stringify({
            probe: {
              command: process.execPath,
              args: [
                '-e',
                STDIO_SERVER,
                path.join(svc.service.ctx.config.dataDir, 'workspaces', 'engine-state'),
              ],
              env: { STDIO_TOKEN: '${secret:STDIO_TOKEN}', PROBE_MARKER },
            },
            docs: { url: remote.url, headers: { Authorization: 'Bearer ${secret:REMOTE_TOKEN}' } },
            wiki: { url: remote.url, headers: { Authorization: 'Bearer ${secret:WIKI_TOKEN}' } },
            // A stdio server the engine cannot start: its business, not the turn's.
            broken: { command: '/nonexistent/errand-mcp-server' },
          }),
        })
        .where('id', '=', projectId)
        .execute();
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

    test("the model calls a stdio server's tool in the sandbox and a remote one's through the bridge; the remote's token never enters the sandbox", async () => {
      let jobId = '';
      const checkoutOf = (id: string) =>
        path.join(svc.service.ctx.config.dataDir, 'workspaces', 'jobs', id);
      const homeOf = (id: string) =>
        path.join(svc.service.ctx.config.dataDir, 'workspaces', 'engine-state', id, 'home');
      const probe = c.tool('probe', 'inspect');
      const docs = c.tool('docs', 'echo');
      let offered: string[] = [];
      const callBoth = (request: RecordedRequest) => {
        offered = toolsOffered(request.body);
        // Without them, an answer that ends the turn: the assertions below say what was offered.
        if (!offered.includes(probe) || !offered.includes(docs)) return reply('no MCP tools');
        return toolCalls([
          c.call('probe', 'inspect', {}),
          c.call('docs', 'echo', { text: 'hello from the model' }),
        ]);
      };
      llm.script(
        ...(c.toolSearch
          ? [toolCalls([{ name: 'tool_search', input: { query: 'inspect echo shout', limit: 8 } }])]
          : []),
        dynamic(callBoth),
        dynamic(async () => {
          // The engine waits for this answer: its sandbox and its servers are running now.
          await assertTokenNowhereInside(checkoutOf(jobId), c.configFile);
          return reply('Both servers answered.');
        }),
      );
      /** The request that carried the tools' answers, and the one that called them. */
      const answered = c.toolSearch ? 2 : 1;
      jobId = await createJob(svc, projectId, 'Ask both MCP servers');
      const job = await untilStatus(svc, projectId, jobId, 'completed', {
        failFast: true,
        timeoutMs: 180_000,
      });
      const names = offered.join(', ');
      assert.ok(offered.includes(probe), `${probe} is not offered: ${names}`);
      assert.ok(offered.includes(docs), `${docs} is not offered: ${names}`);
      assert.ok(
        offered.includes(c.tool('docs', 'shout')),
        `a code turn offers every tool: ${names}`,
      );
      assert.ok(!offered.some((name) => name.includes('wiki')), `the unavailable server: ${names}`);
      assert.ok(!offered.some((name) => name.includes('broken')), `the broken server: ${names}`);
      assert.equal(job.summary, 'Both servers answered.');

      // Both answers reached the model; the stdio server's secret only scrubbed.
      const second = JSON.stringify((llm.requests[answered] as RecordedRequest).body);
      const report = excerpt(second, 'probe report');
      assert.ok(second.includes('echo: hello from the model'), "the remote tool's answer");
      assert.ok(report, "the stdio tool's answer");
      assert.match(report, /stdioToken[\\":]*\[secret STDIO_TOKEN\]/, 'its secret, scrubbed');
      assert.match(report, /workspace[\\":]*true/, 'the stdio server sees the checkout');
      assert.match(report, /host[\\":]*false/, "the stdio server does not see the service's data");
      assert.ok(!second.includes(STDIO_TOKEN));
      // The remote server was called with its token, by the service.
      assert.deepEqual(remote.calls, ['echo']);
      assert.ok(remote.requests.every((h) => h.authorization === `Bearer ${REMOTE_TOKEN}`));

      // The server whose secret is missing: an event and a note in the prompt.
      const events = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`);
      const log = (events.json.events ?? []) as { type: string; data: Record<string, unknown> }[];
      const unavailable = log.filter((e) => e.type === 'mcp.unavailable');
      assert.deepEqual(
        unavailable.map((e) => e.data),
        [{ server: 'wiki', reason: 'it names secret WIKI_TOKEN, which the project does not have' }],
      );
      assert.match(
        JSON.stringify((llm.requests[0] as RecordedRequest).body),
        /MCP servers are unavailable this turn[^"]*wiki: it names secret WIKI_TOKEN/,
      );
      const calls = log.filter((e) => e.type === 'tool.call').map((e) => String(e.data.name));
      assert.ok(
        calls.some((n) => n.includes('inspect')),
        `tool calls: ${calls.join(', ')}`,
      );
      assert.ok(
        calls.some((n) => n.includes('echo')),
        `tool calls: ${calls.join(', ')}`,
      );

      // The token: in no event, no model request, the job record or the engine's state.
      assert.deepEqual(tokenLeaks(events.text + JSON.stringify(job)), []);
      for (const r of llm.requests) assert.deepEqual(tokenLeaks(JSON.stringify(r.body)), []);
      // (The stdio server's answer, its secret in it, is in the engine's session like any tool
      // output: the sandbox had that value, the model never did.)
      for await (const file of filesBelow(path.dirname(homeOf(jobId)))) {
        assert.deepEqual(tokenLeaks(file.content.toString('latin1')), [], file.path);
      }
      // The configuration, which held the stdio server's secret, is gone after the turn.
      await assert.rejects(stat(path.join(homeOf(jobId), c.configFile)), { code: 'ENOENT' });
    });

    test('an ask turn offers only the remote tools marked readOnlyHint, and no stdio server', {
      skip: c.readOnly ? false : `${c.engine} takes no ask or plan turn`,
    }, async () => {
      let offered: string[] = [];
      const echo = c.tool('docs', 'echo');
      llm.script(
        dynamic((request) => {
          offered = toolsOffered(request.body);
          if (!offered.includes(echo)) return reply('no MCP tools');
          return toolCalls([c.call('docs', 'echo', { text: 'read only' })]);
        }),
        reply('The remote answered.'),
      );
      const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
        body: { prompt: 'What does the docs server say?', mode: 'ask' },
      });
      assert.equal(created.status, 201, created.text);
      const jobId = created.json.id as string;
      const job = await untilStatus(svc, projectId, jobId, 'completed', {
        failFast: true,
        timeoutMs: 180_000,
      });
      assert.equal(job.summary, 'The remote answered.');
      const names = offered.join(', ');
      assert.ok(offered.includes(echo), `${echo} is not offered: ${names}`);
      assert.ok(!offered.includes(c.tool('docs', 'shout')), `shout is not read-only: ${names}`);
      assert.ok(!offered.some((name) => name.includes('probe')), `no stdio server: ${names}`);
      assert.match(JSON.stringify(llm.requests[1]?.body), /echo: read only/);
      const events = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`);
      const log = (events.json.events ?? []) as { type: string; data: Record<string, unknown> }[];
      assert.deepEqual(
        log
          .filter((e) => e.type === 'mcp.unavailable')
          .map((e) => e.data.server)
          .sort(),
        ['broken', 'probe', 'wiki'],
      );
      assert.deepEqual(tokenLeaks(events.text + JSON.stringify(job)), []);
    });
  });
}
