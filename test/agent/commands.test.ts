// The agent's run_command tool end to end: a real service and database, real git, real
// bubblewrap, and the scripted fake model over loopback. The model runs the repository's
// commands; their output reaches its next request and what they write is committed. Also the
// project's command settings (API, CLI, dashboard), the setup command, archiving a job while a
// command runs, and a service whose PATH has no bwrap (the tool is not offered).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { DEFAULT_LIMITS } from '../../src/projects/limits.ts';
import type { ProjectRecord } from '../../src/records/project.ts';
import { checkSandbox } from '../../src/sandbox/sandbox.ts';
import { CONNECT } from '../sandbox/support.ts';
import { sessionCookie } from '../support/dashboard.ts';
import {
  type FakeLlm,
  type RecordedRequest,
  reply,
  startFakeLlm,
  toolCalls,
  toolResults,
} from '../support/fake-llm.ts';
import {
  git,
  makeOrigin,
  makeTempDir,
  type Origin,
  processesContaining,
  removeDir,
} from '../support/git.ts';
import { createJob, untilStatus } from '../support/jobs.ts';
import { killStrays, runCli, type ServeProcess, startServe } from '../support/process.ts';
import {
  type ApiBody,
  type HttpResult,
  http,
  startTestService,
  type TestService,
  waitFor,
} from '../support/service.ts';

const OPENAI_KEY = 'sk-test-openai-7e1d3c5b9a2f';

const sandbox = await checkSandbox();
const skip = sandbox.available ? false : `bubblewrap does not work here: ${sandbox.reason}`;
if (skip) process.stdout.write(`# commands tests skipped: ${skip}\n`);
const skipNetwork =
  skip ||
  (sandbox.available && !sandbox.network.available
    ? `setup network unavailable: ${sandbox.network.reason}`
    : false);

type Event = { type: string; data: Record<string, unknown> };

/** The tool names the model was offered in a recorded request. */
function offeredTools(request: RecordedRequest | undefined): string[] {
  const body = request?.body as { tools?: Array<{ function?: { name?: string } }> } | undefined;
  return (body?.tools ?? []).map((t) => t.function?.name ?? '?');
}

/** The system prompt of a recorded OpenAI request. */
function systemPrompt(request: RecordedRequest | undefined): string {
  const body = request?.body as { messages?: Array<{ role: string; content: unknown }> };
  const system = body?.messages?.find((m) => m.role === 'system' || m.role === 'developer');
  return typeof system?.content === 'string' ? system.content : JSON.stringify(system?.content);
}

/** The user messages of a recorded OpenAI request, in order. */
function userMessages(request: RecordedRequest | undefined): unknown[] {
  const body = request?.body as { messages?: Array<{ role: string; content: unknown }> };
  return (body?.messages ?? []).filter((m) => m.role === 'user').map((m) => m.content);
}

/** A TCP server on loopback that counts connections (a command with network could reach it). */
async function listenLoopback(): Promise<{
  server: Server;
  port: number;
  connections: () => number;
}> {
  let count = 0;
  const server = createServer((socket) => {
    count++;
    socket.end('hello from the host\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, connections: () => count };
}

describe('run_command', { skip }, () => {
  let llm: FakeLlm;
  let svc: TestService;
  let tmp: string;
  let origin: Origin;
  let projectId: string;

  before(async () => {
    tmp = await makeTempDir('commands');
    origin = await makeOrigin(tmp, {
      'README.md': '# Demo\n',
      'test.sh': '#!/bin/sh\necho "demo tests: 3 passed"\n',
      '.gitignore': 'setup-output/\n',
    });
    llm = await startFakeLlm({ apiKey: OPENAI_KEY, models: ['gpt-test'] });
    svc = await startTestService({
      env: {
        OPENAI_API_KEY: OPENAI_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_TURN_RETRIES: '0',
      },
    });
    projectId = (await svc.createProject({ repository: origin.url, ref: 'main' })).id;
  });
  after(async () => {
    await svc?.close();
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

  const create = (prompt: string, project = projectId) => createJob(svc, project, prompt);
  const until = (jobId: string, status: string, project = projectId) =>
    untilStatus(svc, project, jobId, status, { failFast: true, timeoutMs: 60_000 });
  const events = async (jobId: string, project = projectId): Promise<Event[]> =>
    ((await svc.request('GET', `/v2/agent/${project}/job/${jobId}/events`)).json.events ??
      []) as unknown as Event[];
  const patch = (id: string, body: Record<string, unknown>) =>
    svc.request('PATCH', `/v2/admin/projects/${id}`, { body });

  test('the model runs a command that writes a file and the test script; the output reaches its next request and the file is committed', async () => {
    llm.script(
      toolCalls([{ name: 'run_command', input: { command: 'echo hi > made-by-command.txt' } }]),
      toolCalls([{ name: 'run_command', input: { command: 'sh test.sh' } }]),
      toolCalls([
        {
          name: 'run_command',
          input: { command: `echo "the key is ${OPENAI_KEY}"; echo failing >&2; exit 3` },
        },
      ]),
      reply('Add a file made by a command\n\nChecks: sh test.sh passed (3 tests).'),
    );
    const jobId = await create('Make a file with a command and run the tests');
    const job = await until(jobId, 'completed');
    assert.equal(job.error, null);

    // The first request offers the tool and asks for the repository's checks.
    const first = llm.requests[0];
    assert.ok(offeredTools(first).includes('run_command'), offeredTools(first).join(','));
    assert.ok(offeredTools(first).includes('write_file'));
    assert.match(systemPrompt(first), /run the repository's checks/);
    assert.match(systemPrompt(first), /which checks you ran and their result/);

    // Each command's output and exit code is in the next request's last tool result.
    const afterWrite = toolResults(llm.requests[1]).at(-1) ?? '';
    assert.match(afterWrite, /^\$ echo hi > made-by-command\.txt\nExit code: 0 /);
    const afterTests = toolResults(llm.requests[2]).at(-1) ?? '';
    assert.match(afterTests, /Exit code: 0/);
    assert.match(afterTests, /demo tests: 3 passed/);
    const afterFailure = toolResults(llm.requests[3]).at(-1) ?? '';
    assert.match(afterFailure, /Exit code: 3/);
    // stdout and stderr together, and a secret the command printed is not shown to the model.
    assert.match(afterFailure, /the key is \[redacted\]\nfailing/);
    assert.ok(!afterFailure.includes(OPENAI_KEY));

    // The file the command wrote is in the pushed branch, and nothing else changed.
    const branch = `errand/${jobId}`;
    assert.equal(git(origin.bare, 'show', `${branch}:made-by-command.txt`), 'hi');
    assert.deepEqual(git(origin.bare, 'diff', '--name-status', `main...${branch}`).split('\n'), [
      'A\tmade-by-command.txt',
    ]);

    const log = await events(jobId);
    const started = log.filter((e) => e.type === 'command.started');
    const finished = log.filter((e) => e.type === 'command.finished');
    assert.deepEqual(
      started.map((e) => e.data),
      [
        { command: 'echo hi > made-by-command.txt', cwd: '.' },
        { command: 'sh test.sh', cwd: '.' },
        { command: 'echo "the key is [redacted]"; echo failing >&2; exit 3', cwd: '.' },
      ],
    );
    assert.deepEqual(
      finished.map((e) => [e.data.exitCode, e.data.timedOut, e.data.outputTail]),
      [
        [0, false, ''],
        [0, false, 'demo tests: 3 passed\n'],
        [3, false, 'the key is [redacted]\nfailing\n'],
      ],
    );
    for (const e of finished) {
      assert.equal(typeof e.data.durationMs, 'number');
      assert.equal(e.data.command, started[finished.indexOf(e)]?.data.command);
    }
    // A failed command is a failed tool call; the turn went on to its summary.
    const results = log.filter((e) => e.type === 'tool.result').map((e) => e.data.ok);
    assert.deepEqual(results, [true, true, false]);
    assert.ok(!JSON.stringify(log).includes(OPENAI_KEY), 'a secret reached the events');
    assert.equal(log.filter((e) => e.type === 'sandbox.unavailable').length, 0);
  });

  test("a command in a folder, a folder outside the checkout refused, a timeout over the limit lowered, the project's disk bound", async () => {
    const project = await svc.createProject({ repository: origin.url, ref: 'main' });
    assert.equal(
      (await patch(project.id, { commandTimeoutSeconds: 2, commandDiskMb: 16 })).status,
      200,
    );
    llm.script(
      toolCalls([{ name: 'run_command', input: { command: 'mkdir -p sub && cd sub && pwd' } }]),
      toolCalls([{ name: 'run_command', input: { command: 'pwd', cwd: 'sub' } }]),
      toolCalls([{ name: 'run_command', input: { command: 'pwd', cwd: '../..' } }]),
      toolCalls([{ name: 'run_command', input: { command: 'ls', cwd: '.git' } }]),
      toolCalls([{ name: 'run_command', input: { command: 'sleep 30', timeoutSeconds: 600 } }]),
      toolCalls([
        { name: 'run_command', input: { command: 'head -c 20971520 /dev/zero > big.bin' } },
      ]),
      toolCalls([{ name: 'run_command', input: { command: 'rm -f big.bin' } }]),
      reply('Nothing to change'),
    );
    const jobId = await create('Look around', project.id);
    await until(jobId, 'completed', project.id);
    const last = (i: number) => toolResults(llm.requests[i]).at(-1) ?? '';
    assert.match(last(1), /\/workspace\/sub/);
    assert.match(last(2), /^\$ pwd {3}\(in sub\)\nExit code: 0 [^\n]*\n\n\/workspace\/sub\n$/);
    // Refusals are error results (the OpenAI protocol wraps them as {"error": …}).
    assert.match(last(3), /"error":"Error: path '\.\.\/\.\.' is outside the repository"/);
    assert.match(last(4), /"error":"Error: path '\.git' is inside \.git\//);
    assert.match(last(5), /Timed out: stopped after its time limit of 2 s/);
    assert.match(last(5), /timeoutSeconds 600 is over the project's limit; 2 s was used/);
    assert.match(last(6), /over the limit of 16 MB/);
    const finished = (await events(jobId, project.id)).filter((e) => e.type === 'command.finished');
    // The refused calls ran nothing.
    assert.equal(finished.length, 5);
    const timedOut = finished[2];
    assert.equal(timedOut?.data.timedOut, true);
    assert.ok(Number(timedOut?.data.durationMs) < 10_000);
  });

  test('archiving the job while a command runs kills it: the turn ends and no process is left', async () => {
    const marker = 'sleep 987654';
    llm.script(toolCalls([{ name: 'run_command', input: { command: `${marker}` } }]));
    const jobId = await create('Wait for a very long time');
    await waitFor(
      'the command to run',
      async () => ((await processesContaining(marker)).length > 0 ? true : undefined),
      30_000,
    );
    const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/archive`);
    assert.equal(res.status, 200);
    await waitFor(
      'the turn to end',
      async () => {
        const turns = await svc.service.ctx.db
          .selectFrom('turns')
          .select('state')
          .where('job_id', '=', jobId)
          .execute();
        return turns.every((t) => t.state === 'cancelled') ? true : undefined;
      },
      10_000,
    );
    await waitFor(
      'no sleep process left',
      async () => ((await processesContaining(marker)).length === 0 ? true : undefined),
      5_000,
    );
    assert.equal(origin.head(`errand/${jobId}`), null);
    llm.reset();
  });

  test('the setup command runs in the sandbox before the agent, at each turn, without network unless allowed, never with the host loopback', {
    skip: skipNetwork,
  }, async () => {
    const host = await listenLoopback();
    try {
      // Tries the host's loopback, which it never reaches, and succeeds only with a network
      // (a default route); appends to an ignored file, which each turn's pristine checkout has
      // removed again.
      const route = `awk '$2 == "00000000" { print "default-route" }' /proc/net/route`;
      const setup = `mkdir -p setup-output && echo run >> setup-output/runs && wc -l < setup-output/runs && { bash -c 'exec 3<>/dev/tcp/127.0.0.1/${host.port} && head -1 <&3' 2>/dev/null || echo 'host loopback unreachable'; } && ${route} | grep .`;
      const project = await svc.createProject({ repository: origin.url, ref: 'main' });
      assert.equal((await patch(project.id, { setupCommand: setup })).status, 200);
      llm.script(
        toolCalls([{ name: 'run_command', input: { command: 'cat setup-output/runs' } }]),
        reply('Checked the setup'),
      );
      const jobId = await create('Check the setup', project.id);
      await until(jobId, 'completed', project.id);
      const log = await events(jobId, project.id);
      const types = log.map((e) => e.type);
      assert.ok(
        types.indexOf('setup.finished') > types.indexOf('workspace.ready') &&
          types.indexOf('setup.finished') < types.indexOf('tool.call'),
        types.join(','),
      );
      const first = log.find((e) => e.type === 'setup.finished')?.data ?? {};
      assert.notEqual(first.exitCode, 0, 'the setup had a network without setupNetwork');
      assert.equal(first.outputTail, '1\nhost loopback unreachable\n');
      assert.equal(host.connections(), 0);
      assert.equal(typeof first.durationMs, 'number');
      // The model is told how the setup went, in a note after the prompt (the system prompt
      // stays the same from turn to turn), and the agent sees what it made.
      const note = JSON.stringify(userMessages(llm.requests[0]).at(-1));
      assert.match(note, /setup command ran in the sandbox: it failed with exit code/);
      assert.match(note, /<setup-command>mkdir -p setup-output/);
      assert.doesNotMatch(systemPrompt(llm.requests[0]), /setup/);
      assert.match(toolResults(llm.requests[1]).at(-1) ?? '', /\n\nrun\n$/);
      assert.equal(origin.head(`errand/${jobId}`), null, 'ignored setup output is not committed');

      // A follow-up on the same clone: the setup runs again on a pristine tree (one line),
      // this time with network.
      assert.equal((await patch(project.id, { setupNetwork: true })).status, 200);
      llm.script(reply('Nothing more'));
      const res = await svc.request('POST', `/v2/agent/${project.id}/job/${jobId}/message`, {
        body: { prompt: 'Again' },
      });
      assert.equal(res.status, 200);
      await until(jobId, 'completed', project.id);
      const setups = (await events(jobId, project.id)).filter((e) => e.type === 'setup.finished');
      assert.equal(setups.length, 2);
      assert.equal(setups[1]?.data.exitCode, 0);
      assert.equal(setups[1]?.data.outputTail, '1\nhost loopback unreachable\ndefault-route\n');
      assert.equal(host.connections(), 0);
      // The follow-up's note says how this turn's setup went; the first turn's note stays.
      const notes = userMessages(llm.requests.at(-1)).map((m) => JSON.stringify(m));
      assert.match(notes.at(-1) ?? '', /it succeeded \(exit code 0\)/);
      assert.match(notes[0] ?? '', /it failed with exit code/);
    } finally {
      host.server.close();
    }
  });

  test("with an allowlist, the setup command and run_command reach Errand's egress proxy and nothing else; each refusal is a network.denied event in its place", async () => {
    const host = await listenLoopback();
    try {
      // Targets that send nothing off the machine: a name no pattern allows (never resolved),
      // and an allowed name that resolves to the host's loopback, where a server listens.
      const probe = (...targets: string[]) => `perl -e '${CONNECT}' ${targets.join(' ')}`;
      const setup = `${probe('evil.errand.test:443', `localhost:${host.port}`)}; env | grep -c '^HTTPS_PROXY='`;
      const project = await svc.createProject({ repository: origin.url, ref: 'main' });
      const network = {
        setup: 'allowlist',
        commands: 'allowlist',
        allow: ['@npm', `localhost:${host.port}`],
      };
      assert.equal((await patch(project.id, { setupCommand: setup, network })).status, 200);
      llm.script(
        toolCalls([{ name: 'run_command', input: { command: probe('other.errand.test:443') } }]),
        reply('Checked the network'),
      );
      const jobId = await create('Check the network', project.id);
      await until(jobId, 'completed', project.id);
      const log = await events(jobId, project.id);
      const kinds = ['setup.started', 'setup.finished', 'command.started', 'command.finished'];
      assert.deepEqual(
        log
          .filter((e) => e.type === 'network.denied' || kinds.includes(e.type))
          .map((e) =>
            e.type === 'network.denied' ? `${e.data.host}:${e.data.port} ${e.data.reason}` : e.type,
          ),
        [
          'setup.started',
          'evil.errand.test:443 not allowed',
          `localhost:${host.port} private address`,
          'setup.finished',
          'command.started',
          'other.errand.test:443 not allowed',
          'command.finished',
        ],
      );
      assert.equal(log.find((e) => e.type === 'setup.started')?.data.network, 'allowlist');
      assert.equal(
        log.find((e) => e.type === 'setup.finished')?.data.outputTail,
        `evil.errand.test:443 HTTP/1.1 403 Forbidden\nlocalhost:${host.port} HTTP/1.1 403 Forbidden\n1\n`,
      );
      assert.equal(host.connections(), 0);
      // The model is told what the network reaches, presets spelled out, and sees the refusal.
      const body = llm.requests[0]?.body as
        | { tools?: { function?: { description?: string } }[] }
        | undefined;
      const tools = body?.tools;
      const description = tools?.map((t) => t.function?.description ?? '').join('\n') ?? '';
      assert.match(
        description,
        new RegExp(
          `to these hosts only: registry\\.npmjs\\.org, localhost:${host.port} \\(a refused host answers 403\\)`,
        ),
      );
      assert.match(
        toolResults(llm.requests[1]).at(-1) ?? '',
        /other\.errand\.test:443 HTTP\/1\.1 403 Forbidden/,
      );
    } finally {
      host.server.close();
    }
  });

  test('a project with commands off offers no run_command, mentions none, and runs no setup', async () => {
    const project = await svc.createProject({ repository: origin.url, ref: 'main' });
    const off = await patch(project.id, { commandsEnabled: false, setupCommand: 'echo setup' });
    assert.equal(off.status, 200);
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'notes.md', content: '# Notes\n' } }]),
      reply('Add notes'),
    );
    const jobId = await create('Add notes', project.id);
    await until(jobId, 'completed', project.id);
    assert.ok(!offeredTools(llm.requests[0]).includes('run_command'));
    assert.ok(offeredTools(llm.requests[0]).includes('write_file'));
    assert.doesNotMatch(systemPrompt(llm.requests[0]), /run_command|checks/);
    const types = (await events(jobId, project.id)).map((e) => e.type);
    assert.ok(!types.some((t) => t.startsWith('setup.') || t.startsWith('sandbox.')));
  });

  test('project command settings: defaults, round trip, reset to default, and 400s naming the field', async () => {
    const created = await svc.request('POST', '/v2/admin/projects', {
      body: { name: 'settings', repository: origin.url },
    });
    assert.equal(created.status, 201);
    const id = String(created.json.id);
    const fields = (body: ApiBody | ProjectRecord | undefined) => ({
      commandsEnabled: body?.commandsEnabled,
      setupCommand: body?.setupCommand,
      setupNetwork: body?.setupNetwork,
      commandTimeoutSeconds: body?.commandTimeoutSeconds,
      commandCpuSeconds: body?.commandCpuSeconds,
      commandMemoryMb: body?.commandMemoryMb,
      commandProcesses: body?.commandProcesses,
      commandFileSizeMb: body?.commandFileSizeMb,
      commandDiskMb: body?.commandDiskMb,
    });
    const defaults = {
      commandsEnabled: true,
      setupCommand: null,
      setupNetwork: false,
      commandTimeoutSeconds: DEFAULT_LIMITS.timeoutSeconds,
      commandCpuSeconds: DEFAULT_LIMITS.cpuSeconds,
      commandMemoryMb: DEFAULT_LIMITS.memoryMb,
      commandProcesses: DEFAULT_LIMITS.processes,
      commandFileSizeMb: DEFAULT_LIMITS.fileSizeMb,
      commandDiskMb: DEFAULT_LIMITS.diskMb,
    };
    assert.deepEqual(fields(created.json), defaults);
    const set = {
      commandsEnabled: false,
      setupCommand: 'npm ci',
      setupNetwork: true,
      commandTimeoutSeconds: 60,
      commandCpuSeconds: 120,
      commandMemoryMb: 512,
      commandProcesses: 64,
      commandFileSizeMb: 10,
      commandDiskMb: 20000,
    };
    const updated = await patch(id, set);
    assert.equal(updated.status, 200, updated.text);
    assert.deepEqual(fields(updated.json), set);
    assert.deepEqual(fields((await svc.request('GET', `/v2/admin/projects/${id}`)).json), set);
    const listed = (await svc.request('GET', '/v2/admin/projects')).json.projects ?? [];
    assert.deepEqual(fields(listed.find((p) => p.id === id)), set);

    // null returns a limit to the default and removes the setup command; a blank one is none.
    const reset = await patch(id, { setupCommand: '   ', commandMemoryMb: null });
    assert.equal(reset.json.setupCommand, null);
    assert.equal(reset.json.commandMemoryMb, DEFAULT_LIMITS.memoryMb);
    assert.equal(reset.json.commandTimeoutSeconds, 60);

    const refusals: Array<[Record<string, unknown>, RegExp]> = [
      [{ commandsEnabled: 'yes' }, /"commandsEnabled" must be a boolean/],
      [{ setupNetwork: 1 }, /"setupNetwork" must be a boolean/],
      [{ setupCommand: 'x'.repeat(2001) }, /"setupCommand" must be a string of at most 2000/],
      [{ setupCommand: 5 }, /"setupCommand" must be a string/],
      [
        { commandTimeoutSeconds: 0 },
        /"commandTimeoutSeconds" must be a whole number from 1 to 3600/,
      ],
      [{ commandTimeoutSeconds: 3601 }, /"commandTimeoutSeconds" must be a whole number/],
      [{ commandTimeoutSeconds: 1.5 }, /"commandTimeoutSeconds" must be a whole number/],
      [{ commandTimeoutSeconds: '60' }, /"commandTimeoutSeconds" must be a whole number/],
      [{ commandCpuSeconds: -1 }, /"commandCpuSeconds" must be a whole number/],
      [{ commandMemoryMb: 10 }, /"commandMemoryMb" must be a whole number from 64 to 65536/],
      [{ commandProcesses: 100000 }, /"commandProcesses" must be a whole number from 16 to 4096/],
      [{ commandFileSizeMb: 0 }, /"commandFileSizeMb" must be a whole number from 1 to 65536/],
      [{ commandDiskMb: 8 }, /"commandDiskMb" must be a whole number from 16 to 1048576/],
    ];
    for (const [body, message] of refusals) {
      const res = await patch(id, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(String(res.json.error), message);
    }
    const refusedCreate = await svc.request('POST', '/v2/admin/projects', {
      body: { name: 'bad', repository: origin.url, commandProcesses: 1 },
    });
    assert.equal(refusedCreate.status, 400);
    // Nothing of the refused updates was written.
    assert.deepEqual(
      fields((await svc.request('GET', `/v2/admin/projects/${id}`)).json),
      fields(reset.json),
    );
  });

  test('project network settings: defaults, partial updates, the older setupNetwork, and 400s naming the field or pattern', async () => {
    const created = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name: 'network',
        repository: origin.url,
        network: { setup: 'allowlist', allow: ['@npm', ' npm.example.com:8443 '] },
      },
    });
    assert.equal(created.status, 201, created.text);
    const id = String(created.json.id);
    const network = async () => {
      const json = (await svc.request('GET', `/v2/admin/projects/${id}`)).json;
      return { network: json.network, setupNetwork: json.setupNetwork };
    };
    // What is not given is the default; patterns are kept as given, trimmed.
    assert.deepEqual(await network(), {
      network: { setup: 'allowlist', commands: 'none', allow: ['@npm', 'npm.example.com:8443'] },
      setupNetwork: false,
    });
    // A part given alone changes that part only.
    assert.equal((await patch(id, { network: { commands: 'allowlist' } })).status, 200);
    assert.deepEqual((await network()).network, {
      setup: 'allowlist',
      commands: 'allowlist',
      allow: ['@npm', 'npm.example.com:8443'],
    });
    // The older setting: true is an open setup network, and reads back as such.
    assert.equal((await patch(id, { setupNetwork: true })).status, 200);
    assert.deepEqual(await network(), {
      network: { setup: 'open', commands: 'allowlist', allow: ['@npm', 'npm.example.com:8443'] },
      setupNetwork: true,
    });
    assert.equal((await patch(id, { setupNetwork: false })).status, 200);
    assert.equal((await network()).network?.setup, 'none');
    const before = await network();

    const refusals: Array<[Record<string, unknown>, RegExp]> = [
      [{ network: 'open' }, /"network" must be an object of "setup", "commands" and "allow"/],
      [{ network: { setup: 'all' } }, /"network.setup" must be one of none, allowlist, open/],
      [{ network: { commands: 'open' } }, /"network.commands" must be one of none, allowlist/],
      [{ network: { allow: '@npm' } }, /"network.allow" must be a list of at most 100 patterns/],
      [{ network: { allow: [443] } }, /"network.allow" must be a list/],
      [
        { network: { allow: ['@npm', 'https://evil.example.com/x'] } },
        /invalid "network.allow\[1\]": pattern "https:\/\/evil.example.com\/x"/,
      ],
      [{ network: { allow: ['*.com'] } }, /pattern "\*.com" would allow a whole top-level domain/],
      [{ network: { allow: ['@nmp'] } }, /pattern "@nmp" is no preset; the presets are @npm/],
      [
        { network: { allow: ['10.0.0.5:8081'] } },
        /pattern "10.0.0.5:8081" names an address of 10.0.0.0\/8, which is never reached/,
      ],
      [{ network: { other: true } }, /unknown field "network.other"/],
      [
        { setupNetwork: true, network: { commands: 'none' } },
        /give "network" or the older "setupNetwork"/,
      ],
    ];
    for (const [body, message] of refusals) {
      const res = await patch(id, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(String(res.json.error), message, JSON.stringify(body));
    }
    assert.deepEqual(await network(), before, 'a refused update wrote something');
    const refusedCreate = await svc.request('POST', '/v2/admin/projects', {
      body: { name: 'bad', repository: origin.url, network: { allow: ['*'] } },
    });
    assert.equal(refusedCreate.status, 400);
    assert.match(String(refusedCreate.json.error), /pattern "\*" would allow every host/);
  });

  test('the CLI sets the command settings with flags', async () => {
    const cli = (args: string[]) => runCli(svc, args, { ERRAND_API_KEY: svc.adminKey });
    const made = await cli([
      'project',
      'create',
      '--name',
      'cli commands',
      '--repo',
      origin.url,
      '--commands',
      'false',
      '--setup-command',
      'make deps',
      '--setup-network',
      'true',
      '--command-timeout',
      '90',
      '--command-cpu',
      '45',
      '--command-memory',
      '1024',
      '--command-processes',
      '32',
      '--command-file-size',
      '5',
      '--command-disk',
      '8192',
      '--json',
    ]);
    assert.equal(made.code, 0, made.stderr);
    const project = JSON.parse(made.stdout) as ApiBody;
    assert.equal(project.commandsEnabled, false);
    assert.equal(project.setupCommand, 'make deps');
    assert.equal(project.setupNetwork, true);
    assert.deepEqual(
      [
        project.commandTimeoutSeconds,
        project.commandCpuSeconds,
        project.commandMemoryMb,
        project.commandProcesses,
        project.commandFileSizeMb,
        project.commandDiskMb,
      ],
      [90, 45, 1024, 32, 5, 8192],
    );
    const id = String(project.id);
    const updated = await cli([
      'project',
      'update',
      id,
      '--commands',
      'true',
      '--setup-command',
      '',
      '--command-timeout',
      'default',
    ]);
    assert.equal(updated.code, 0, updated.stderr);
    assert.match(
      updated.stdout,
      /updated project prj_\w+ .*commands on; network: setup open, commands none\)/,
    );
    const now = (await svc.request('GET', `/v2/admin/projects/${id}`)).json;
    assert.equal(now.commandsEnabled, true);
    assert.equal(now.setupCommand, null);
    assert.equal(now.commandTimeoutSeconds, DEFAULT_LIMITS.timeoutSeconds);
    assert.equal(now.commandCpuSeconds, 45);

    const bad = await cli(['project', 'update', id, '--setup-network', 'maybe']);
    assert.equal(bad.code === 0, false);
    assert.match(bad.stderr, /--setup-network must be one of none, allowlist, open, true, false/);

    // The network policy: each flag one part, the others kept.
    const net = await cli([
      'project',
      'update',
      id,
      '--setup-network',
      'allowlist',
      '--allow',
      '@npm, npm.example.com:8443',
      '--json',
    ]);
    assert.equal(net.code, 0, net.stderr);
    assert.deepEqual((JSON.parse(net.stdout) as ApiBody).network, {
      setup: 'allowlist',
      commands: 'none',
      allow: ['@npm', 'npm.example.com:8443'],
    });
    const commandsNet = await cli(['project', 'update', id, '--commands-network', 'allowlist']);
    assert.equal(commandsNet.code, 0, commandsNet.stderr);
    assert.match(
      commandsNet.stdout,
      /network: setup allowlist, commands allowlist \(@npm, npm\.example\.com:8443\)/,
    );
    const emptied = await cli(['project', 'update', id, '--allow', '', '--json']);
    assert.deepEqual((JSON.parse(emptied.stdout) as ApiBody).network, {
      setup: 'allowlist',
      commands: 'allowlist',
      allow: [],
    });
    const badPattern = await cli(['project', 'update', id, '--allow', 'a*.example.org']);
    assert.equal(badPattern.code === 0, false);
    assert.match(
      badPattern.stderr,
      /pattern "a\*\.example\.org" may hold \* only as its whole first label/,
    );
    const badMode = await cli(['project', 'update', id, '--commands-network', 'open']);
    assert.equal(badMode.code === 0, false);
    assert.match(badMode.stderr, /--commands-network must be one of none, allowlist/);
    const range = await cli(['project', 'update', id, '--command-memory', '1']);
    assert.equal(range.code === 0, false);
    assert.match(range.stderr, /"commandMemoryMb" must be a whole number from 64 to 65536/);
  });

  test('the dashboard settings form shows and saves the command settings', async () => {
    const project = await svc.createProject({ name: 'form', repository: origin.url });
    const cookie = await sessionCookie(svc, svc.adminKey);
    const settings = `/projects/${project.id}/settings`;
    const page = await http(svc.url, 'GET', settings, {
      headers: { accept: 'text/html', cookie },
    });
    assert.equal(page.status, 200);
    assert.match(page.text, /<input type="checkbox" name="commandsEnabled" value="1" checked/);
    assert.match(
      page.text,
      new RegExp(
        `name="commandTimeoutSeconds" inputmode="numeric" value="${DEFAULT_LIMITS.timeoutSeconds}"`,
      ),
    );
    assert.match(
      page.text,
      new RegExp(`name="commandDiskMb" inputmode="numeric" value="${DEFAULT_LIMITS.diskMb}"`),
    );
    // A fresh new-project form has commands on, as the API's default.
    const projects = await http(svc.url, 'GET', '/projects', {
      headers: { accept: 'text/html', cookie },
    });
    assert.match(projects.text, /name="commandsEnabled" value="1" checked/);

    const post = (fields: Record<string, string>) =>
      http(svc.url, 'POST', settings, {
        headers: {
          accept: 'text/html',
          cookie,
          origin: svc.url,
          'content-type': 'application/x-www-form-urlencoded',
        },
        rawBody: new URLSearchParams({
          name: 'form',
          repository: origin.url,
          ...fields,
        }).toString(),
      });
    // The box unticked turns commands off; the limits shown and sent back unchanged stay
    // defaults (not pinned), a changed one is stored, an emptied one is the default.
    const saved = await post({
      setupCommand: 'make setup',
      networkSetup: 'allowlist',
      networkCommands: 'allowlist',
      networkAllow: '@npm\r\nnpm.example.com:8443\r\n',
      commandTimeoutSeconds: String(DEFAULT_LIMITS.timeoutSeconds),
      commandCpuSeconds: '30',
      commandMemoryMb: '',
      commandDiskMb: '10240',
    });
    // Redirected (fetch follows) to the settings page, saved.
    assert.equal(saved.status, 200);
    assert.match(saved.text, /Saved\./);
    const stored = await svc.service.ctx.db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', project.id)
      .executeTakeFirstOrThrow();
    assert.equal(stored.commands_enabled, false);
    assert.equal(stored.setup_command, 'make setup');
    assert.equal(stored.network_setup, 'allowlist');
    assert.equal(stored.network_commands, 'allowlist');
    assert.deepEqual(stored.network_allow, ['@npm', 'npm.example.com:8443']);
    // Shown again as saved.
    const again = await http(svc.url, 'GET', settings, {
      headers: { accept: 'text/html', cookie },
    });
    assert.match(again.text, /<option value="allowlist" selected>Only the hosts of the allowlist/);
    assert.match(again.text, />@npm\nnpm\.example\.com:8443<\/textarea>/);
    assert.equal(stored.command_timeout_seconds, null);
    assert.equal(stored.command_cpu_seconds, 30);
    assert.equal(stored.command_memory_mb, null);
    assert.equal(stored.command_disk_mb, 10240);

    const badPattern = await post({
      networkSetup: 'allowlist',
      networkAllow: '@npm\nbad pattern!',
    });
    assert.equal(badPattern.status, 400);
    assert.match(badPattern.text, /pattern &quot;pattern!&quot; is not a host name/);
    const refused = await post({ commandsEnabled: '1', commandProcesses: 'many' });
    assert.equal(refused.status, 400);
    assert.match(
      refused.text,
      /&quot;commandProcesses&quot; must be a whole number from 16 to 4096/,
    );
    assert.equal(
      (await svc.request('GET', `/v2/admin/projects/${project.id}`)).json.commandsEnabled,
      false,
    );
  });
});

/**
 * Runs `use` against `errand serve` whose PATH holds git and `programs` (name to the system's
 * path) and nothing else, with a data directory of its own and the fake model; `request` calls
 * its API with the admin key. The process is stopped and its data directory removed after.
 */
async function onlyOnPath(
  tmp: string,
  llm: FakeLlm,
  programs: Record<string, string>,
  use: (
    serve: ServeProcess,
    request: (method: string, route: string, body?: unknown) => Promise<HttpResult>,
  ) => Promise<void>,
): Promise<void> {
  const bin = await mkdtemp(path.join(tmp, 'bin-'));
  const gitPath = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
  await symlink(gitPath, path.join(bin, 'git'));
  for (const [name, target] of Object.entries(programs))
    await symlink(target, path.join(bin, name));
  const dataDir = await mkdtemp(path.join(tmpdir(), 'errand-only-on-path-'));
  const serve = await startServe(dataDir, [], {
    PATH: bin,
    OPENAI_API_KEY: OPENAI_KEY,
    OPENAI_BASE_URL: `${llm.url}/v1`,
    ERRAND_MODEL: 'openai:gpt-test',
    ERRAND_TURN_RETRIES: '0',
    ERRAND_LOG_LEVEL: 'info',
  });
  try {
    await use(serve, (method, route, body) =>
      http(serve.url, method, route, {
        key: serve.adminKey,
        ...(body === undefined ? {} : { body }),
      }),
    );
  } finally {
    await serve.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

describe('a service whose PATH has no bwrap', { skip }, () => {
  let llm: FakeLlm;
  let tmp: string;
  let origin: Origin;

  before(async () => {
    tmp = await makeTempDir('no-bwrap');
    origin = await makeOrigin(tmp, { 'README.md': '# Demo\n' });
    llm = await startFakeLlm({ apiKey: OPENAI_KEY, models: ['gpt-test'] });
  });
  after(async () => {
    killStrays();
    await llm?.close();
    await removeDir(tmp);
  });

  test("offers no run_command, says why in the turn's events, and the job completes with the file tools", async () => {
    // git, and nothing else of the system's programs: bwrap lives beside git in /usr/bin.
    await onlyOnPath(tmp, llm, {}, async (serve, request) => {
      const project = await request('POST', '/v2/admin/projects', {
        name: 'no bwrap',
        repository: origin.url,
      });
      assert.equal(project.status, 201, project.text);
      assert.equal(project.json.commandsEnabled, true);
      llm.script(
        toolCalls([{ name: 'write_file', input: { path: 'notes.md', content: '# Notes\n' } }]),
        reply('Add notes'),
      );
      const projectId = String(project.json.id);
      const created = await request('POST', `/v2/agent/${projectId}/job`, { prompt: 'Add notes' });
      assert.equal(created.status, 201, created.text);
      const jobId = String(created.json.id);
      await waitFor(
        'the job to complete',
        async () => {
          const job = await request('GET', `/v2/agent/${projectId}/job/${jobId}`);
          if (job.json.status === 'failed') throw new Error(String(job.json.error));
          return job.json.status === 'completed' ? true : undefined;
        },
        60_000,
      );
      llm.assertDone();
      assert.ok(!offeredTools(llm.requests[0]).includes('run_command'));
      assert.ok(offeredTools(llm.requests[0]).includes('write_file'));
      assert.doesNotMatch(systemPrompt(llm.requests[0]), /run_command/);
      const log = ((await request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json
        .events ?? []) as unknown as Event[];
      const unavailable = log.filter((e) => e.type === 'sandbox.unavailable');
      assert.equal(unavailable.length, 1);
      assert.match(String(unavailable[0]?.data.reason), /bwrap not found on PATH/);
      assert.match(String(unavailable[0]?.data.howToFix), /bubblewrap/);
      assert.equal(git(origin.bare, 'show', `errand/${jobId}:notes.md`), '# Notes');
      // And the process said so once at start.
      const lines = serve
        .stderr()
        .split('\n')
        .filter((l) => l.includes('sandbox unavailable'));
      assert.equal(lines.length, 1, serve.stderr());
      assert.match(lines[0] ?? '', /bwrap not found on PATH/);
    });
  });
});

describe('a service whose PATH has bwrap but no pasta', { skip }, () => {
  let llm: FakeLlm;
  let tmp: string;
  let origin: Origin;

  before(async () => {
    tmp = await makeTempDir('no-pasta');
    origin = await makeOrigin(tmp, { 'README.md': '# Demo\n' });
    llm = await startFakeLlm({ apiKey: OPENAI_KEY, models: ['gpt-test'] });
  });
  after(async () => {
    killStrays();
    await llm?.close();
    await removeDir(tmp);
  });

  test('says so at start, and a setup command that needs the network fails its turn saying why', async () => {
    assert.ok(sandbox.available);
    await onlyOnPath(tmp, llm, { bwrap: sandbox.bwrap }, async (serve, request) => {
      const project = await request('POST', '/v2/admin/projects', {
        name: 'no pasta',
        repository: origin.url,
        setupCommand: 'echo setup > setup-ran',
        setupNetwork: true,
      });
      assert.equal(project.status, 201, project.text);
      const projectId = String(project.json.id);
      const created = await request('POST', `/v2/agent/${projectId}/job`, { prompt: 'Add notes' });
      assert.equal(created.status, 201, created.text);
      const jobId = String(created.json.id);
      const error = await waitFor(
        'the job to fail',
        async () => {
          const job = await request('GET', `/v2/agent/${projectId}/job/${jobId}`);
          if (job.json.status === 'completed') throw new Error('the job completed');
          return job.json.status === 'failed' ? String(job.json.error) : undefined;
        },
        60_000,
      );
      assert.match(
        error,
        /the setup command needs the network, which this worker cannot give it: pasta not found on PATH \(install the passt package/,
      );
      // The turn stopped before the model was asked anything.
      assert.deepEqual(llm.requests, []);
      const lines = serve
        .stderr()
        .split('\n')
        .filter((l) => l.includes('setup network unavailable'));
      assert.equal(lines.length, 1, serve.stderr());
      assert.match(lines[0] ?? '', /pasta not found on PATH/);
    });
  });
});
