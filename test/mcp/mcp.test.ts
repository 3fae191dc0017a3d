// `errand mcp` as an MCP client runs it: a real `node src/main.ts mcp` process spoken to over
// stdio by the SDK's own client, against a running Errand whose turns the scripted runner
// finishes. The API key reaches the child only through its environment.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import type { Job } from '../../src/client/index.ts';
import type { TurnInput } from '../../src/jobs/runner.ts';
import type { ProjectRecord } from '../../src/records/project.ts';
import { captureOutput } from '../support/process.ts';
import { randomJobId, SCRIPTED_ENV, scriptedRunner, turnStarted } from '../support/route-cases.ts';
import { RecordingRunner } from '../support/runners.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;
/** As docs/clients.md's client configuration starts it: the bundled Node on the package's bin. */
const BUNDLED_NODE = new URL('../../node_modules/.bin/node', import.meta.url).pathname;
const BIN = new URL('../../bin/errand.js', import.meta.url).pathname;
const TOOL_NAMES = [
  'archive_job',
  'create_job',
  'get_job',
  'list_jobs',
  'send_message',
  'wait_for_job',
];

interface Session {
  client: Client;
  stderr: () => string;
  pid: number | null;
}

interface Answer {
  isError: boolean;
  /** Every text content, joined. */
  text: string;
  summary: string;
  /** The JSON after the summary line (absent on errors). */
  value: unknown;
}

/** What a `pr …` turn used: on the default model (Claude Sonnet 4.5), $0.021 at list prices. */
const PR_USAGE = {
  inputTokens: 12_000,
  outputTokens: 800,
  cacheReadTokens: 10_000,
  cacheWriteTokens: 0,
};

/** The scripted runner, and `pr …` prompts that end their turn with a pull request. */
function runner(): RecordingRunner {
  const scripted = scriptedRunner();
  return new RecordingRunner(async (input: TurnInput) => {
    if (input.turn.prompt.startsWith('pr ')) {
      return {
        summary: 'opened a pull request',
        prLink: `https://forge.example/acme/app/pull/${input.turn.seq}`,
        prNumber: input.turn.seq,
        usage: PR_USAGE,
      };
    }
    return scripted.run(input);
  });
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('errand mcp', () => {
  let svc: TestService;
  let project: ProjectRecord;
  let projectKey: string;
  let otherProject: ProjectRecord;
  const sessions: Session[] = [];
  const turns = runner();

  before(async () => {
    svc = await startTestService({ runner: turns, env: SCRIPTED_ENV });
    project = await svc.createProject({ name: 'mcp project' });
    otherProject = await svc.createProject({ name: 'another project' });
    projectKey = (await svc.createProjectKey(project.id)).key;
  });
  after(async () => {
    for (const s of sessions) await s.client.close();
    await svc?.close();
  });

  async function connect(
    env: Record<string, string> = {},
    command: [string, ...string[]] = [process.execPath, MAIN],
  ): Promise<Session> {
    const transport = new StdioClientTransport({
      command: command[0],
      args: [...command.slice(1), 'mcp'],
      env: {
        ERRAND_URL: svc.url,
        ERRAND_API_KEY: projectKey,
        ERRAND_PROJECT: project.id,
        ...env,
      },
      stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const client = new Client({ name: 'errand-mcp-test', version: '1.0.0' });
    await client.connect(transport);
    const session = { client, stderr: () => stderr, pid: transport.pid };
    sessions.push(session);
    return session;
  }

  let shared: Session | undefined;
  const session = async () => {
    shared ??= await connect();
    return shared;
  };

  async function call(
    name: string,
    args: Record<string, unknown>,
    s?: Session,
    onprogress?: (progress: Progress) => void,
  ): Promise<Answer> {
    const { client } = s ?? (await session());
    const res = await client.callTool(
      { name, arguments: args },
      undefined,
      onprogress ? { onprogress } : {},
    );
    const texts = (res.content as Array<{ type: string; text?: string }>).map((c) => {
      assert.equal(c.type, 'text');
      return c.text ?? '';
    });
    const isError = res.isError === true;
    if (!isError) assert.equal(texts.length, 2, 'a summary line, then the JSON');
    return {
      isError,
      text: texts.join('\n'),
      summary: texts[0] ?? '',
      value: isError ? undefined : JSON.parse(texts[1] ?? ''),
    };
  }

  const ok = async (name: string, args: Record<string, unknown>, s?: Session) => {
    const answer = await call(name, args, s);
    assert.equal(answer.isError, false, answer.text);
    return answer;
  };
  const job = (answer: Answer) => answer.value as Job;

  test('lists the six tools, each with a schema and a description written for a model', async () => {
    const { tools } = await (await session()).client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), TOOL_NAMES);
    const byName = new Map(tools.map((t) => [t.name, t]));
    const property = (tool: string, name: string) =>
      (byName.get(tool)?.inputSchema.properties?.[name] ?? {}) as Record<string, unknown>;
    for (const tool of tools) {
      assert.ok((tool.description ?? '').length > 200, `${tool.name} explains itself`);
      assert.equal(tool.inputSchema.type, 'object');
      // With ERRAND_PROJECT set, no tool needs a projectId, and every one accepts one.
      assert.ok(tool.inputSchema.properties?.projectId, `${tool.name} takes projectId`);
      assert.ok(!(tool.inputSchema.required ?? []).includes('projectId'), tool.name);
    }
    const create = byName.get('create_job');
    assert.deepEqual(create?.inputSchema.required, ['prompt']);
    assert.deepEqual(Object.keys(create?.inputSchema.properties ?? {}).sort(), [
      'attachments',
      'attempts',
      'baseRef',
      'checkCommand',
      'mcpServers',
      'mode',
      'model',
      'outputSchema',
      'projectId',
      'prompt',
    ]);
    // Best-of-N (docs/eval.md): a count of 1 to 4 and optional agents; a check command.
    const attempts = property('create_job', 'attempts') as {
      type?: string;
      properties?: Record<string, { minimum?: number; maximum?: number }>;
    };
    assert.equal(attempts.type, 'object');
    assert.deepEqual(
      [attempts.properties?.count?.minimum, attempts.properties?.count?.maximum],
      [1, 4],
    );
    assert.ok(attempts.properties?.agents, 'attempts takes agents');
    assert.equal(property('create_job', 'checkCommand').type, 'string');
    assert.match(create?.description ?? '', /best-of-N/);
    // A job's own MCP servers (docs/mcp-servers.md): an object of servers by name.
    assert.equal(property('create_job', 'mcpServers').type, 'object');
    // Modes (docs/modes.md): create_job and send_message take the same three.
    for (const tool of ['create_job', 'send_message'])
      assert.deepEqual(property(tool, 'mode').enum, ['code', 'ask', 'plan'], tool);
    // Structured output (docs/structured-output.md): both take a JSON Schema object.
    for (const tool of ['create_job', 'send_message']) {
      assert.equal(property(tool, 'outputSchema').type, 'object', tool);
      assert.match(String(property(tool, 'outputSchema').description), /JSON Schema/, tool);
    }
    // Images (docs/images.md): both take up to five.
    for (const tool of ['create_job', 'send_message'])
      assert.equal(property(tool, 'attachments').maxItems, 5, tool);
    assert.match(create?.description ?? '', /awaitingApproval/);
    assert.match(create?.description ?? '', /asynchronous/);
    assert.match(create?.description ?? '', /prLink/);
    assert.match(create?.description ?? '', /wait_for_job/);
    const wait = byName.get('wait_for_job');
    assert.deepEqual(wait?.inputSchema.required, ['jobId']);
    const timeout = property('wait_for_job', 'timeoutSeconds');
    assert.deepEqual(
      [timeout.type, timeout.minimum, timeout.maximum, timeout.default],
      ['integer', 1, 600, 45],
    );
    assert.match(String(timeout.description), /seconds/);
    for (const status of ['active', 'completed', 'failed', 'archived']) {
      assert.match(wait?.description ?? '', new RegExp(`"${status}"`));
    }
    assert.match(wait?.description ?? '', /still active/);
    assert.deepEqual(property('list_jobs', 'status').enum, [
      'active',
      'completed',
      'failed',
      'archived',
    ]);
    assert.equal(byName.get('archive_job')?.annotations?.destructiveHint, true);
    assert.equal(byName.get('get_job')?.annotations?.readOnlyHint, true);
  });

  test('create_job, wait_for_job, send_message, get_job, list_jobs and archive_job', async () => {
    const created = await ok('create_job', { prompt: 'pr add a changelog' });
    const id = job(created).id;
    assert.match(id, /^job_/);
    assert.equal(job(created).status, 'active');
    assert.equal(job(created).projectId, project.id, 'the default project');
    assert.match(created.summary, new RegExp(`Created job ${id}`));
    assert.match(created.summary, /wait_for_job/);

    const waited = await ok('wait_for_job', { jobId: id });
    assert.equal(job(waited).status, 'completed');
    assert.equal(job(waited).prLink, 'https://forge.example/acme/app/pull/1');
    assert.equal(job(waited).turns, 1);
    assert.match(waited.summary, /completed; its pull request is https:\/\/forge\.example/);
    // What it used, priced: 2,000 uncached input tokens at $3/M, 10,000 cached at $0.30/M,
    // 800 output at $15/M.
    assert.deepEqual(job(waited).usage, { ...PR_USAGE, costUsd: 0.021 });
    assert.match(
      waited.summary,
      /It has used 12000 input tokens \(10000 from the cache\) and 800 output tokens, about \$0\.0210 at list prices\./,
    );

    const schema = { type: 'object', required: ['done'] };
    const sent = await ok('send_message', {
      jobId: id,
      prompt: 'complete the follow-up',
      outputSchema: schema,
    });
    assert.equal(job(sent).id, id);
    assert.equal(job(sent).status, 'active');
    assert.equal(job(sent).turns, 2);
    const again = await ok('wait_for_job', { jobId: id, timeoutSeconds: 60 });
    assert.equal(job(again).status, 'completed');
    assert.equal(job(again).turns, 2);

    const turns = await svc.service.ctx.db
      .selectFrom('turns')
      .select('output_schema')
      .where('job_id', '=', id)
      .orderBy('seq')
      .execute();
    assert.deepEqual(
      turns.map((t) => t.output_schema),
      [null, schema],
      'send_message gave its turn the schema',
    );

    const got = await ok('get_job', { jobId: id });
    assert.deepEqual(job(got), job(again), 'the same record as the API');
    const direct = await svc.request('GET', `/v2/agent/${project.id}/job/${id}`);
    assert.deepEqual(job(got), direct.json);
    assert.match(got.summary, /completed; its pull request is/);

    // A second job, so that a limit of one leaves an older one out.
    const second = job(await ok('create_job', { prompt: 'complete the second task' }));
    await ok('wait_for_job', { jobId: second.id });
    const listed = await ok('list_jobs', { status: 'completed' });
    const ids = (listed.value as Job[]).map((j) => j.id);
    assert.deepEqual(ids.slice(0, 2), [second.id, id], 'newest first');
    assert.ok((listed.value as Job[]).every((j) => j.status === 'completed'));
    assert.match(listed.summary, new RegExp(`${id}  completed  2 turns`));
    const one = await ok('list_jobs', { limit: 1 });
    assert.deepEqual(
      (one.value as Job[]).map((j) => j.id),
      [second.id],
    );
    assert.match(one.summary, /older ones exist/);
    const none = await ok('list_jobs', { status: 'failed', projectId: project.id });
    assert.deepEqual(none.value, []);
    assert.match(none.summary, /No failed jobs/);

    const archived = await ok('archive_job', { jobId: id });
    assert.equal(job(archived).status, 'archived');
    assert.ok(job(archived).archivedAt);
    assert.match(archived.summary, new RegExp(`Archived job ${id}`));
    const refused = await call('send_message', { jobId: id, prompt: 'complete more' });
    assert.equal(refused.isError, true);
    assert.match(refused.text, /code conflict, HTTP 409, request \S+/);
    const afterArchive = await ok('wait_for_job', { jobId: id });
    assert.equal(job(afterArchive).status, 'archived');
    assert.match(afterArchive.summary, /archived/);
  });

  test('create_job gives its first turn the outputSchema, and a refused one is an error the model reads', async () => {
    const schema = { type: 'object', required: ['done'] };
    const created = job(
      await ok('create_job', { prompt: 'complete with a schema', outputSchema: schema }),
    );
    const first = await svc.service.ctx.db
      .selectFrom('turns')
      .select('output_schema')
      .where('job_id', '=', created.id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(first.output_schema, schema);
    await ok('wait_for_job', { jobId: created.id });
    const refused = await call('create_job', {
      prompt: 'complete it',
      outputSchema: { type: 'object', properties: { a: { $ref: 'https://example.com/a' } } },
    });
    assert.equal(refused.isError, true);
    assert.match(refused.text, /only references inside the schema/);
  });
  test('create_job gives its first turn the attempts and the job its check command; a refused count is an error the model reads', async () => {
    const created = job(
      await ok('create_job', {
        prompt: 'complete in two tries',
        attempts: { count: 2, agents: [{ engine: 'claude-code' }] },
        checkCommand: 'npm test',
      }),
    );
    const first = await svc.service.ctx.db
      .selectFrom('turns')
      .select('best_of')
      .where('job_id', '=', created.id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(first.best_of, { count: 2, agents: [{ engine: 'claude-code' }] });
    const row = await svc.service.ctx.db
      .selectFrom('jobs')
      .select('check_command')
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.check_command, 'npm test');
    await ok('wait_for_job', { jobId: created.id });
    const refused = await call('create_job', {
      prompt: 'complete it',
      attempts: { count: 2 },
      mode: 'ask',
    });
    assert.equal(refused.isError, true);
    assert.match(refused.text, /"attempts" needs mode "code".*code bad_request, HTTP 400/s);
  });

  test('wait_for_job reports progress over stdio while it waits, and none with its result', async () => {
    // A session of its own, whose protocol errors the test sees: the SDK's client reports a
    // notification that arrives with its request's result as one for an unknown token.
    const own = await connect();
    const errors: Error[] = [];
    own.client.onerror = (err) => errors.push(err);
    const held = job(await ok('create_job', { prompt: 'hold this one' }, own));
    // From the start of its turn the held job does not change until the test archives it.
    await turnStarted(turns, held.id);
    const progress: Progress[] = [];
    let archived: Promise<Answer> | undefined;
    const waited = await call('wait_for_job', { jobId: held.id, timeoutSeconds: 30 }, own, (p) => {
      progress.push(p);
      // The first read told of the active job; archived now, the next read ends the wait.
      archived ??= ok('archive_job', { jobId: held.id });
    });
    assert.equal(waited.isError, false, waited.text);
    assert.equal(job(waited).status, 'archived');
    assert.equal(
      job(await (archived ?? Promise.reject(new Error('no progress')))).status,
      'archived',
    );
    // One notification, of the wait going on; the archive is told by the result alone.
    assert.deepEqual(
      progress.map((p) => [p.total, p.message]),
      [[30, `job ${held.id} is active after 0 s`]],
    );
    assert.ok((progress[0]?.progress ?? 0) > 0 && (progress[0]?.progress ?? 1) < 1);
    // A wait on a job already settled answers at once, with no notification before it.
    const settled = await call('wait_for_job', { jobId: held.id }, own, (p) => progress.push(p));
    assert.equal(job(settled).status, 'archived');
    assert.equal(progress.length, 1);
    assert.deepEqual(errors, []);
  });

  test('a failed job comes back with its error', async () => {
    const failing = job(await ok('create_job', { prompt: 'break everything' }));
    const waited = await ok('wait_for_job', { jobId: failing.id });
    assert.equal(job(waited).status, 'failed');
    assert.equal(job(waited).error, 'the agent is not available');
    assert.match(waited.summary, /failed: the agent is not available/);
    assert.match(waited.summary, /send_message/);
  });

  test('create_job and send_message carry images to Errand, which keeps them with their turns', async () => {
    const png = Buffer.from(
      'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
      'base64',
    );
    const created = await ok('create_job', {
      prompt: 'what does this screenshot show?',
      attachments: [{ data: png.toString('base64') }],
    });
    const id = job(created).id;
    await ok('wait_for_job', { jobId: id });
    await ok('send_message', {
      jobId: id,
      prompt: 'and this one?',
      attachments: [{ data: `data:image/png;base64,${png.toString('base64')}` }],
    });
    const kept = await svc.service.ctx.db
      .selectFrom('attachments')
      .select(['seq', 'n', 'media_type', 'data'])
      .where('job_id', '=', id)
      .orderBy('seq')
      .execute();
    assert.deepEqual(
      kept.map((a) => [a.seq, a.n, a.media_type, a.data.equals(png)]),
      [
        [1, 1, 'image/png', true],
        [2, 1, 'image/png', true],
      ],
    );
    // Errand's refusal of what is not an image is the tool's error, naming the image.
    const refused = await call('create_job', {
      prompt: 'look',
      attachments: [{ data: Buffer.from('not an image').toString('base64') }],
    });
    assert.equal(refused.isError, true);
    assert.match(
      refused.text,
      /attachments\[0\]\.data.*is not a PNG, JPEG, WebP or GIF image.*code bad_request, HTTP 400/,
    );
  });

  test("Errand's refusals are tool errors carrying the message and code", async () => {
    const missing = await call('get_job', { jobId: randomJobId() });
    assert.equal(missing.isError, true);
    assert.match(
      missing.text,
      /^Errand: getJob: 404 .*not found.* \(code not_found, HTTP 404, request req_\S+\)$/,
    );
    // The project key is not valid for another project.
    const foreign = await call('list_jobs', { projectId: otherProject.id });
    assert.equal(foreign.isError, true);
    assert.match(foreign.text, /code forbidden, HTTP 403/);
    // Input the schema refuses never reaches Errand.
    const tooLong = await call('wait_for_job', { jobId: randomJobId(), timeoutSeconds: 601 });
    assert.equal(tooLong.isError, true);
    assert.match(tooLong.text, /timeoutSeconds/);
    const empty = await call('create_job', { prompt: '' });
    assert.equal(empty.isError, true);
    assert.match(empty.text, /prompt/);
    const stderr = (await session()).stderr();
    assert.match(stderr, new RegExp(`errand mcp: serving Errand at ${svc.url}`));
    assert.ok(!stderr.includes(projectKey), 'the key is never printed');
  });

  test('the API key is in the environment of the process, not in its arguments', async () => {
    const { pid } = await session();
    assert.ok(pid);
    if (!existsSync(`/proc/${pid}/cmdline`)) return;
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    assert.ok(argv.includes('mcp'), argv.join(' '));
    assert.ok(!argv.some((a) => a.includes(projectKey)));
    assert.ok(
      readFileSync(`/proc/${pid}/environ`, 'utf8').includes(`ERRAND_API_KEY=${projectKey}`),
    );
  });

  test('without ERRAND_PROJECT every tool requires projectId', async () => {
    const s = await connect({ ERRAND_PROJECT: '' });
    const { tools } = await s.client.listTools();
    for (const tool of tools) {
      assert.ok(tool.inputSchema.required?.includes('projectId'), `${tool.name} needs projectId`);
    }
    const unnamed = await call('list_jobs', {}, s);
    assert.equal(unnamed.isError, true);
    assert.match(unnamed.text, /projectId/);
    const created = job(
      await ok('create_job', { projectId: project.id, prompt: 'complete a named one' }, s),
    );
    assert.equal(created.projectId, project.id);
    const named = await ok('list_jobs', { projectId: project.id, limit: 1 }, s);
    assert.deepEqual(
      (named.value as Job[]).map((j) => j.id),
      [created.id],
    );
  });

  test("docs/clients.md's configuration starts it: the bundled Node on bin/errand.js", async () => {
    const s = await connect({}, [BUNDLED_NODE, BIN]);
    const created = job(await ok('create_job', { prompt: 'pr from the bin' }, s));
    const waited = await ok('wait_for_job', { jobId: created.id }, s);
    assert.equal(job(waited).status, 'completed');
    assert.match(job(waited).prLink ?? '', /^https:\/\/forge\.example\//);
  });

  test('an Errand that cannot be reached is a tool error, not a crash', async () => {
    const s = await connect({ ERRAND_URL: `http://127.0.0.1:${await closedPort()}` });
    const answer = await call('get_job', { jobId: randomJobId() }, s);
    assert.equal(answer.isError, true);
    assert.match(answer.text, /^Errand: getJob: cannot reach .* \(code network_error\)$/);
    // The server is still there.
    assert.equal((await s.client.listTools()).tools.length, 6);
  });

  /** `errand mcp` as a bare process: `input` is written to its stdin, which is then closed. */
  function run(
    env: Record<string, string>,
    input: (write: (line: string) => void) => Promise<void>,
  ) {
    const child = spawn(process.execPath, [MAIN, 'mcp'], {
      env: { PATH: process.env.PATH ?? '', ERRAND_URL: svc.url, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const { done, stdout } = captureOutput(child);
    const lines = () =>
      stdout()
        .split('\n')
        .filter((l) => l !== '');
    const fed = input((line) => child.stdin.write(`${line}\n`)).then(() => child.stdin.end());
    return { done, fed, lines };
  }

  test('a missing ERRAND_API_KEY or a bad ERRAND_URL fails at start with exit code 2', async () => {
    const noKey = await run({}, async () => {}).done;
    assert.equal(noKey.code, 2);
    assert.equal(noKey.stdout, '');
    assert.match(noKey.stderr, /^errand mcp: ERRAND_API_KEY is not set/);
    const badUrl = await run(
      { ERRAND_API_KEY: projectKey, ERRAND_URL: 'ftp://errand.example' },
      async () => {},
    ).done;
    assert.equal(badUrl.code, 2);
    assert.equal(badUrl.stdout, '');
    assert.match(badUrl.stderr, /ERRAND_URL is not an http\(s\) URL: ftp:\/\/errand\.example/);
    assert.ok(!badUrl.stderr.includes(projectKey));
  });

  test('stdout carries only protocol messages, and closing stdin ends a wait in progress', async () => {
    const held = job(await ok('create_job', { prompt: 'hold for the close' }));
    let waitSent = 0;
    const proc = run({ ERRAND_API_KEY: projectKey, ERRAND_PROJECT: project.id }, async (write) => {
      const rpc = (id: number, method: string, params: unknown) =>
        write(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
      const answered = (id: number) =>
        new Promise<void>((resolve) => {
          const check = setInterval(() => {
            if (proc.lines().some((l) => (JSON.parse(l) as { id?: number }).id === id)) {
              clearInterval(check);
              resolve();
            }
          }, 20);
        });
      rpc(1, 'initialize', {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'raw', version: '1' },
      });
      await answered(1);
      write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      rpc(2, 'tools/list', {});
      rpc(3, 'tools/call', { name: 'get_job', arguments: { jobId: randomJobId() } });
      await answered(3);
      // The job's record as Errand has answered it (get_job above asked for another job).
      const polls = () =>
        svc.service.ctx.metrics.value('errand_http_requests_total', {
          method: 'GET',
          route: '/v2/agent/:projectId/job/:id',
          status: '200',
        });
      const pollsBefore = await polls();
      rpc(4, 'tools/call', {
        name: 'wait_for_job',
        arguments: { jobId: held.id, timeoutSeconds: 600 },
      });
      // The wait is in progress once Errand has answered its first poll: only then does the
      // client go away.
      await waitFor('the wait to poll the job', async () =>
        (await polls()) > pollsBefore ? true : undefined,
      );
      waitSent = Date.now();
    });
    await proc.fed;
    const ended = await proc.done;
    const took = Date.now() - waitSent;
    assert.equal(ended.code, 0, ended.stderr);
    assert.ok(took < 5000, `the process ended ${took} ms after its stdin closed`);
    const messages = proc.lines().map((l) => JSON.parse(l) as { jsonrpc: string; id?: number });
    assert.ok(messages.every((m) => m.jsonrpc === '2.0'));
    assert.deepEqual(
      messages.map((m) => m.id),
      [1, 2, 3],
    );
    assert.match(ended.stderr, /errand mcp: serving Errand/);
    assert.ok(!ended.stderr.includes(projectKey));
    await ok('archive_job', { jobId: held.id });
  });
});
