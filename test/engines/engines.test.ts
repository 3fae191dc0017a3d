// Each engine's real CLI end to end: installed from npm in ERRAND_ENGINES_DIR, run by a real
// service in the real sandbox against a fake of its model API over loopback (Anthropic Messages
// for Claude Code, OpenAI Responses for Codex, chat completions for OpenCode) that scripts a
// file edit and a command. The change is committed and a pull request opened on a fake GitHub;
// a follow-up resumes the engine's session; archiving, the turn's wall time, its model calls
// (ERRAND_MAX_STEPS, counted by the proxy) and a spent job or monthly budget each stop it with
// everything it started; the key reaches the fake only through Errand's model proxy and is
// nowhere inside the sandbox. The model receives the prompt byte for byte; every permission is
// granted and a refused call is a tool error; what the engine plants in its HOME (links to host
// files, hard links, FIFOs) is never followed or waited on. An engine not installed in
// ERRAND_ENGINES_DIR is skipped with the command that installs it.
import assert from 'node:assert/strict';
import {
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { type InstallableEngine, installedEngine } from '../../src/engines/catalog.ts';
import { CLAUDE_CODE_REMOVED_TOOLS } from '../../src/engines/claude-code.ts';
import { checkSandbox } from '../../src/sandbox/sandbox.ts';
import { CONNECT } from '../sandbox/support.ts';
import { type FakeGitHub, startFakeGitHub } from '../support/fake-github.ts';
import {
  dynamic,
  type FakeLlm,
  type FakeToolCall,
  type RecordedRequest,
  reply,
  startFakeLlm,
  toolCalls,
} from '../support/fake-llm.ts';
import {
  filesContaining,
  type GitHttpServer,
  git,
  makeServedRepo,
  makeTempDir,
  processesContaining,
  removeDir,
  startGitHttpServer,
} from '../support/git.ts';
import { createJob, untilStatus } from '../support/jobs.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';
import { sandboxFiles, sandboxProcesses } from './inside.ts';

const ENGINES_DIR = process.env.ERRAND_ENGINES_DIR ?? '/var/cache/errand-ci/engines';
const FORGE_TOKEN = 'ghp_enginetesttoken0123456789ab';
const PLACEHOLDER = 'errand-proxy';

interface EngineCase {
  engine: InstallableEngine;
  /** Errand's `provider:model`, and the model id the fake knows. */
  model: string;
  vendorModel: string;
  /** The service's settings for the provider, pointing at the fake. */
  env: (llmUrl: string, key: string) => Record<string, string>;
  /** The engine's own tool call that writes `content` to NOTES.md. */
  edit: (content: string) => FakeToolCall;
  /** The engine's own tool call that runs `command` in the checkout. */
  run: (command: string) => FakeToolCall;
  /** The engine's own tool call that writes `content` to `file`, an absolute path. */
  write: (file: string, content: string) => FakeToolCall;
  /** The engine's own tool call that reads `file`, an absolute path. */
  read: (file: string) => FakeToolCall;
  /** A call the engine refuses without asking anyone, and what the model is told of it. */
  refused: { call: FakeToolCall; told: RegExp };
  /** The prompt's text in the user's message of a request, as the model receives it. */
  promptIn: (body: unknown) => string | undefined;
  /** Tools Errand has the engine withhold from the model. */
  withheld: readonly string[];
  /** Prices for a model the package does not know (ERRAND_MODEL_CATALOG), so a budget binds it. */
  catalog?: Record<string, { inputUsdPerMTok: number; outputUsdPerMTok: number }>;
}

const CASES: EngineCase[] = [
  {
    engine: 'claude-code',
    model: 'anthropic:claude-sonnet-4-5',
    vendorModel: 'claude-sonnet-4-5',
    env: (url, key) => ({ ANTHROPIC_API_KEY: key, ANTHROPIC_BASE_URL: `${url}/v1` }),
    edit: (content) => ({
      name: 'Write',
      input: { file_path: '/workspace/NOTES.md', content },
    }),
    run: (command) => ({ name: 'Bash', input: { command, description: 'run it' } }),
    write: (file, content) => ({ name: 'Write', input: { file_path: file, content } }),
    read: (file) => ({ name: 'Read', input: { file_path: file } }),
    // A tool taken away: never offered to the model.
    refused: {
      call: { name: 'WebFetch', input: { url: 'http://127.0.0.1:9/', prompt: 'read it' } },
      told: /No such tool available: WebFetch/,
    },
    // Claude Code adds its reminders as text blocks before the prompt's.
    promptIn: (body) => {
      const [first] = messagesOf(body);
      const blocks = Array.isArray(first?.content) ? first.content.filter(isObject) : [];
      const text = blocks.filter((b) => b.type === 'text').at(-1)?.text;
      return typeof text === 'string' ? text : undefined;
    },
    withheld: CLAUDE_CODE_REMOVED_TOOLS,
  },
  {
    engine: 'codex',
    model: 'openai:gpt-5.5',
    vendorModel: 'gpt-5.5',
    env: (url, key) => ({ OPENAI_API_KEY: key, OPENAI_BASE_URL: `${url}/v1` }),
    edit: (content) => ({
      name: 'apply_patch',
      input: `*** Begin Patch\n*** Add File: NOTES.md\n${content
        .trimEnd()
        .split('\n')
        .map((line) => `+${line}`)
        .join('\n')}\n*** End Patch\n`,
    }),
    // Codex hands a command still running back to the model after yield_time_ms.
    run: (command) => ({ name: 'exec_command', input: { cmd: command, yield_time_ms: 30_000 } }),
    write: (file, content) => ({
      name: 'apply_patch',
      input: `*** Begin Patch\n*** Add File: ${file}\n${content
        .trimEnd()
        .split('\n')
        .map((line) => `+${line}`)
        .join('\n')}\n*** End Patch\n`,
    }),
    read: (file) => ({
      name: 'exec_command',
      input: { cmd: `cat ${file}`, yield_time_ms: 30_000 },
    }),
    // A forced rm, which Codex never runs without asking, and so never under its approval
    // policy "never" (a rule of its own, not a setting).
    refused: {
      call: { name: 'exec_command', input: { cmd: 'rm -f /tmp/errand-outside.txt' } },
      told: /rm -f style commands are not permitted/,
    },
    // Codex sends its environment as a user message of its own before the prompt's.
    promptIn: (body) => {
      const input = isObject(body) && Array.isArray(body.input) ? body.input.filter(isObject) : [];
      const user = input.filter((item) => item.type === 'message' && item.role === 'user').at(-1);
      const [part] = Array.isArray(user?.content) ? user.content.filter(isObject) : [];
      return typeof part?.text === 'string' ? part.text : undefined;
    },
    withheld: [],
    catalog: { 'openai:gpt-5.5': { inputUsdPerMTok: 5, outputUsdPerMTok: 30 } },
  },
  {
    engine: 'opencode',
    model: 'openai:gpt-4.1',
    vendorModel: 'gpt-4.1',
    env: (url, key) => ({ OPENAI_API_KEY: key, OPENAI_BASE_URL: `${url}/v1` }),
    edit: (content) => ({ name: 'write', input: { filePath: '/workspace/NOTES.md', content } }),
    run: (command) => ({ name: 'bash', input: { command, description: 'run it' } }),
    write: (file, content) => ({ name: 'write', input: { filePath: file, content } }),
    read: (file) => ({ name: 'read', input: { filePath: file } }),
    // Denied: it would ask the user a question, and nobody answers a headless run.
    refused: {
      call: {
        name: 'question',
        input: { questions: [{ question: 'Go on?', header: 'Go', options: [{ label: 'yes' }] }] },
      },
      told: /unavailable tool 'question'/,
    },
    promptIn: (body) => {
      const user = messagesOf(body)
        .filter((m) => m.role === 'user')
        .at(-1);
      if (typeof user?.content === 'string') return user.content;
      const parts = Array.isArray(user?.content) ? user.content.filter(isObject) : [];
      const text = parts.find((p) => p.type === 'text')?.text;
      return typeof text === 'string' ? text : undefined;
    },
    // Denied: they would ask the user, and OpenCode offers no tool it denies.
    withheld: ['question', 'plan_enter', 'plan_exit'],
  },
];

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The names of the tools a request offers (Anthropic, Responses, chat completions). */
function toolsOffered(body: unknown): string[] {
  const tools = isObject(body) && Array.isArray(body.tools) ? body.tools.filter(isObject) : [];
  return tools.map((tool) => {
    const name = isObject(tool.function) ? tool.function.name : tool.name;
    return typeof name === 'string' ? name : '';
  });
}

/** A chat request's messages (Anthropic Messages, OpenAI chat completions). */
function messagesOf(body: unknown): Record<string, unknown>[] {
  return isObject(body) && Array.isArray(body.messages) ? body.messages.filter(isObject) : [];
}

/** Spaces, double quotes, backslashes, a newline and more than ASCII: nothing to reword. */
const AWKWARD_PROMPT =
  'Fix "the parser" in C:\\src\\parse.c, where \\"escaped\\" quotes break;\nthen say \'done\' — naïve café, 日本語 ✓';

const sandbox = await checkSandbox();

/**
 * Looks inside the running sandbox from the host: every process's environment and arguments,
 * and every file it can write (its HOME, /tmp and the checkout). The key is in none of them;
 * the placeholder is in the engine's environment or configuration, which proves these were the
 * right processes and files.
 */
async function assertKeyNowhereInside(checkout: string, key: string): Promise<void> {
  const pids = await sandboxProcesses(checkout);
  assert.ok(pids.length > 1, 'no sandboxed process found');
  let placeholderSeen = false;
  for (const pid of pids) {
    for (const what of ['environ', 'cmdline']) {
      const text = await readFile(`/proc/${pid}/${what}`, 'utf8').catch(() => '');
      assert.ok(!text.includes(key), `the key is in the ${what} of sandboxed process ${pid}`);
      if (text.includes(PLACEHOLDER)) placeholderSeen = true;
    }
  }
  // The sandbox's files through the root of a process in its mount namespace, in the host's
  // /proc.
  let files = 0;
  for await (const file of sandboxFiles(pids)) {
    files++;
    assert.ok(!file.content.includes(key), `the key is in ${file.path}`);
    if (file.content.includes(PLACEHOLDER)) placeholderSeen = true;
  }
  assert.ok(files > 0, "no file of the sandbox's was read");
  // The engine's key variable or configuration holds the placeholder: these were its processes.
  assert.ok(placeholderSeen, 'the placeholder key is in no environment and no file');
}

for (const c of CASES) {
  const installed = await installedEngine({ enginesDir: ENGINES_DIR }, c.engine);
  const skip = !sandbox.available
    ? `bubblewrap does not work here: ${sandbox.reason}`
    : !installed
      ? `${c.engine} is not installed in ${ENGINES_DIR}: run \`errand engine install ${c.engine}\` with ERRAND_ENGINES_DIR=${ENGINES_DIR}`
      : false;
  if (skip) process.stdout.write(`# ${c.engine} engine tests skipped: ${skip}\n`);

  describe(`engine ${c.engine}`, { skip }, () => {
    const key = `sk-${c.engine}-key-9f8e7d6c5b4a3210`;
    let tmp: string;
    let gitServer: GitHttpServer;
    let gh: FakeGitHub;
    let llm: FakeLlm;
    let svc: TestService;
    let projectId: string;
    let bare: string;
    let catalogFile: string | undefined;

    /** A service of its own with `env` added to the usual, and a project of this engine on it. */
    const serviceWith = async (
      env: Record<string, string>,
      name: string,
      project: Record<string, unknown> = {},
    ): Promise<{ service: TestService; projectId: string }> => {
      const service = await startTestService({
        env: {
          ...c.env(llm.url, key),
          ERRAND_MODEL: c.model,
          ERRAND_ENGINES_DIR: ENGINES_DIR,
          ERRAND_TURN_RETRIES: '0',
          ERRAND_SECRET_KEY: 'test-secret-key-for-errand-engines',
          ERRAND_FORGE_TOKEN_TEST: FORGE_TOKEN,
          ...(catalogFile ? { ERRAND_MODEL_CATALOG: catalogFile } : {}),
          ...env,
        },
      });
      try {
        const created = await service.request('POST', '/v2/admin/projects', {
          body: {
            name,
            repository: `${gitServer.url}/acme/app.git`,
            forge: 'github',
            forgeUrl: gh.apiUrl,
            forgeTokenEnv: 'ERRAND_FORGE_TOKEN_TEST',
            model: c.model,
            engine: c.engine,
            ...project,
          },
        });
        assert.equal(created.status, 201, created.text);
        return { service, projectId: created.json.id as string };
      } catch (err) {
        await service.close();
        throw err;
      }
    };

    before(async () => {
      tmp = await makeTempDir(`engine-${c.engine}`);
      if (c.catalog) {
        catalogFile = path.join(tmp, 'catalog.json');
        await writeFile(catalogFile, JSON.stringify(c.catalog));
      }
      const root = path.join(tmp, 'served');
      bare = await makeServedRepo(root, tmp);
      gitServer = await startGitHttpServer({
        projectRoot: root,
        authorization: `Basic ${Buffer.from(`x-access-token:${FORGE_TOKEN}`).toString('base64')}`,
      });
      gh = await startFakeGitHub({ repos: ['acme/app'], token: FORGE_TOKEN });
      llm = await startFakeLlm({ apiKey: key, models: [c.vendorModel] });
      // Half the default bound: enough for Claude Code and Codex; OpenCode's turns raise it to
      // the 2048 MB it cannot start without.
      ({ service: svc, projectId } = await serviceWith({}, c.engine, { commandMemoryMb: 1024 }));
    });
    after(async () => {
      await svc?.close();
      await llm?.close();
      await gh?.close();
      await gitServer?.close();
      await removeDir(tmp);
    });
    afterEach(() => {
      try {
        llm.assertDone();
        gh.assertNoUnexpected();
      } finally {
        llm.reset();
      }
    });

    const until = (jobId: string, status: string) =>
      untilStatus(svc, projectId, jobId, status, { failFast: true, timeoutMs: 120_000 });
    const events = async (jobId: string) =>
      ((await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ??
        []) as { type: string; turn: number | null; data: Record<string, unknown> }[];
    const checkoutOf = (jobId: string) =>
      path.join(svc.service.ctx.config.dataDir, 'workspaces', 'jobs', jobId);
    /** The job's engine state: Errand's session record, and the engine's HOME in `home/`. */
    const stateOf = (jobId: string) =>
      path.join(svc.service.ctx.config.dataDir, 'workspaces', 'engine-state', jobId);
    /** Sends a follow-up and waits until the job has completed that many turns. */
    const followUp = async (jobId: string, prompt: string, turns: number) => {
      const sent = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
        body: { prompt },
      });
      assert.equal(sent.status, 200, sent.text);
      await waitFor(
        `turn ${turns}`,
        async () => {
          const job = (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json;
          if (job.status === 'failed') throw new Error(`job failed: ${job.error}`);
          return job.status === 'completed' && job.turns === turns ? true : undefined;
        },
        120_000,
      );
    };
    const startedOf = async (jobId: string, turn: number) =>
      (await events(jobId)).find((e) => e.type === 'engine.started' && e.turn === turn);

    test('edits a file and runs a command; Errand commits, pushes and opens the pull request; a follow-up resumes the session; without its state one starts afresh with the job history', async () => {
      let jobId = '';
      // Each answer names its usage; Errand's proxy reads it from there, whatever the engine says.
      const usage = (n: number) => ({
        usage: { input: 1000 * n, output: 10 * n, cacheRead: 500 * n },
      });
      llm.script(
        toolCalls([c.edit('# Notes\n\nwritten by the engine\n')], usage(1)),
        dynamic(async () => {
          // The engine waits for this answer: its sandbox is running now.
          await assertKeyNowhereInside(checkoutOf(jobId), key);
          // The command also knocks at the host's loopback: Errand's API and the test's
          // PostgreSQL. The forwarder on the sandbox's own loopback shows the knock works.
          const knock = (port: number, name: string) =>
            `(bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}' 2>/dev/null && echo ${name}-reached || echo ${name}-refused)`;
          const apiPort = Number(new URL(svc.url).port);
          return toolCalls(
            [
              c.run(
                `cat NOTES.md && echo command-ran-here && ${knock(apiPort, 'api')} && ${knock(5432, 'postgres')} && ${knock(8787, 'forwarder')}`,
              ),
            ],
            usage(2),
          );
        }),
        reply('Add the notes file\n\nNOTES.md says who wrote it.', usage(3)),
      );
      jobId = await createJob(svc, projectId, 'Write NOTES.md and show it');
      const job = await until(jobId, 'completed');

      const pr = gh.pullRequests('acme/app')[0];
      assert.ok(pr, 'no pull request was opened');
      assert.equal(job.prLink, pr.htmlUrl);
      const branch = job.branch ?? '';
      assert.equal(pr.title, 'Add the notes file');
      assert.equal(git(bare, 'show', `${branch}:NOTES.md`), '# Notes\n\nwritten by the engine');
      assert.match(git(bare, 'log', '-1', '--format=%s', branch), /^Add the notes file$/);

      // The command ran inside the sandbox and its output reached the model.
      const third = llm.requests[2] as RecordedRequest;
      assert.match(
        JSON.stringify(third.body),
        /command-ran-here/,
        `the command's output is not in the next request (${llm.unexpected.join('; ')})`,
      );
      // Inside, the host's loopback is out of reach; the sandbox's own is there.
      const output = JSON.stringify(third.body);
      for (const seen of ['api-refused', 'postgres-refused', 'forwarder-reached']) {
        assert.match(output, new RegExp(seen), `the command did not print ${seen}`);
      }
      // Every request carried the key, which only the proxy adds: the engine had a placeholder.
      for (const r of llm.requests) {
        assert.ok(
          !JSON.stringify(r.headers).includes(PLACEHOLDER),
          'a placeholder reached the fake',
        );
      }

      const log = await events(jobId);
      const types = log.map((e) => e.type);
      const started = log.find((e) => e.type === 'engine.started');
      assert.equal(started?.data.engine, c.engine);
      assert.equal(started?.data.resumed, undefined);
      const calls = log.filter((e) => e.type === 'tool.call');
      assert.ok(calls.length >= 2, `tool calls: ${JSON.stringify(calls)}`);
      assert.ok(calls.some((e) => /command-ran-here/.test(String(e.data.summary))));
      assert.ok(types.includes('tool.result'));
      // A step per model call, with the tokens its answer named: the job's usage is their sum.
      const steps = log.filter((e) => e.type === 'model.step');
      assert.deepEqual(
        steps.map((e) => e.data.step),
        [1, 2, 3],
      );
      assert.deepEqual(
        {
          inputTokens: job.usage?.inputTokens,
          outputTokens: job.usage?.outputTokens,
          cacheReadTokens: job.usage?.cacheReadTokens,
        },
        { inputTokens: 6000, outputTokens: 60, cacheReadTokens: 3000 },
      );
      for (const t of ['commit', 'push', 'pull_request.opened']) assert.ok(types.includes(t), t);
      assert.ok(!JSON.stringify(log).includes(key), 'the key is in the events');
      // Nor in what the engine left in its state directory (sessions, logs, configuration).
      const state = path.join(svc.service.ctx.config.dataDir, 'workspaces', 'engine-state', jobId);
      const session = JSON.parse(await readFile(path.join(state, 'session.json'), 'utf8'));
      assert.equal(session.engine, c.engine);
      assert.deepEqual(await filesContaining(state, key), []);

      // A follow-up: the engine resumes its session, so the model sees the first turn.
      llm.script(
        dynamic((r) => {
          const body = JSON.stringify(r.body);
          return body.includes('Write NOTES.md and show it') && body.includes('command-ran-here')
            ? toolCalls([c.edit('# Notes\n\nwritten by the engine, twice\n')])
            : undefined;
        }),
        reply('Say it twice'),
      );
      const followUp = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
        body: { prompt: 'Say it twice' },
      });
      assert.equal(followUp.status, 200, followUp.text);
      await waitFor(
        'the follow-up',
        async () => {
          const current = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
          return current.json.status === 'completed' && current.json.turns === 2 ? true : undefined;
        },
        120_000,
      );
      const resumed = (await events(jobId)).find(
        (e) => e.type === 'engine.started' && e.turn === 2,
      );
      assert.equal(resumed?.data.resumed, session.session, JSON.stringify(resumed));
      assert.equal(gh.pullRequests('acme/app').length, 1);
      assert.match(git(bare, 'show', `${branch}:NOTES.md`), /twice/);

      // Its state gone (as on another worker): a new session, told the job's history.
      await rm(state, { recursive: true });
      llm.script(
        dynamic((r) => {
          const body = JSON.stringify(r.body);
          return body.includes('This continues earlier work') &&
            body.includes('Write NOTES.md and show it') &&
            body.includes('Add the notes file') &&
            body.includes('Say it thrice') &&
            !body.includes('command-ran-here')
            ? reply('Nothing more to do')
            : undefined;
        }),
      );
      const thrice = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
        body: { prompt: 'Say it thrice' },
      });
      assert.equal(thrice.status, 200, thrice.text);
      await waitFor(
        'the third turn',
        async () => {
          const current = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
          return current.json.status === 'completed' && current.json.turns === 3 ? true : undefined;
        },
        120_000,
      );
      const fresh = (await events(jobId)).find((e) => e.type === 'engine.started' && e.turn === 3);
      assert.ok(fresh, 'the third turn did not start the engine');
      assert.equal(fresh.data.resumed, undefined);
    });

    test('the model receives the prompt byte for byte; every permission is granted, outside the checkout too; a refused call is a tool error, not a failed job', async () => {
      // Each result is checked by what only running the call could produce (upper case, an
      // arithmetic result), never by what the model's own calls, also in the history, say.
      llm.script(
        // A path outside the checkout (OpenCode's external_directory).
        toolCalls([c.write('/tmp/errand-outside.txt', 'written outside the checkout\n')]),
        toolCalls([
          c.run(
            `printf 'TOKEN=%s\\n' $((6 * 7 * 100)) > /workspace/settings.env && tr a-z A-Z < /tmp/errand-outside.txt && echo in-home > "$HOME/errand-home.txt" && tr a-z A-Z < "$HOME/errand-home.txt"`,
          ),
        ]),
        // A *.env file (OpenCode asks before reading one by default).
        toolCalls([c.read('/workspace/settings.env')]),
        toolCalls([c.refused.call]),
        reply('Done'),
      );
      const jobId = await createJob(svc, projectId, AWKWARD_PROMPT);
      await until(jobId, 'completed');

      assert.equal(c.promptIn(llm.requests[0]?.body), AWKWARD_PROMPT);
      const offered = toolsOffered(llm.requests[0]?.body);
      assert.ok(offered.length > 1, `tools offered: ${offered.join(', ')}`);
      assert.deepEqual(
        offered.filter((name) => c.withheld.includes(name)),
        [],
        'a withheld tool is offered',
      );
      const sent = (i: number) => JSON.stringify(llm.requests[i]?.body ?? null);
      assert.match(sent(2), /WRITTEN OUTSIDE THE CHECKOUT/, 'the file outside was not written');
      assert.match(sent(2), /IN-HOME/, 'the command did not write in HOME');
      assert.match(sent(3), /TOKEN=4200/, 'the .env file was not read');
      assert.match(sent(4), c.refused.told, 'the model was not told of the refused call');
      assert.equal(llm.requests.length, 5);
      // HOME is the state's home/, where the command's file stays for the next turn.
      assert.equal(
        await readFile(path.join(stateOf(jobId), 'home', 'errand-home.txt'), 'utf8'),
        'in-home\n',
      );
    });

    test("with commands on an allowlist: the engine still reaches its model through Errand's model proxy, its commands reach the egress proxy, and a refusal is a network.denied event", async () => {
      const patched = await svc.request('PATCH', `/v2/admin/projects/${projectId}`, {
        body: { network: { commands: 'allowlist', allow: ['@npm'] } },
      });
      assert.equal(patched.status, 200, patched.text);
      try {
        // A name no pattern allows: refused by the proxy before anything is resolved or sent.
        llm.script(
          toolCalls([
            c.run(
              `perl -e '${CONNECT}' evil.errand.test:443 && echo "proxy=$HTTPS_PROXY no=$NO_PROXY"`,
            ),
          ]),
          reply('Checked the network'),
        );
        const jobId = await createJob(svc, projectId, 'Check the network');
        // Every model call of the engine went to the model proxy on 127.0.0.1 (NO_PROXY), or
        // the job could not have completed: the egress proxy refuses loopback.
        await until(jobId, 'completed');
        const output = JSON.stringify(llm.requests[1]?.body);
        assert.match(output, /evil\.errand\.test:443 HTTP\/1\.1 403 Forbidden/);
        assert.match(output, /proxy=http:\/\/127\.0\.0\.1:3128 no=localhost,127\.0\.0\.1,::1/);
        const denied = (await events(jobId)).filter((e) => e.type === 'network.denied');
        assert.deepEqual(
          denied.map((e) => e.data),
          [{ host: 'evil.errand.test', port: 443, reason: 'not allowed' }],
        );
      } finally {
        const restored = await svc.request('PATCH', `/v2/admin/projects/${projectId}`, {
          body: { network: { commands: 'none', allow: [] } },
        });
        assert.equal(restored.status, 200, restored.text);
      }
    });

    test('what the engine plants in its HOME is never followed, written through or waited on: links to host files, a second name, a FIFO; nor what a state directory of the old layout holds', async () => {
      // Host files the sandbox cannot see, at paths it can name.
      const host = path.join(tmp, `host-${c.engine}`);
      await mkdir(host, { recursive: true });
      const secret = path.join(host, 'secret.key');
      const config = path.join(host, 'config');
      const files = new Map([
        [secret, 'every stored token hangs on this\n'],
        [config, 'the host configuration\n'],
      ]);
      for (const [file, content] of files) await writeFile(file, content);
      const hostUnchanged = async () => {
        for (const [file, content] of files) {
          assert.equal(await readFile(file, 'utf8'), content, `${file} was changed`);
        }
      };

      // Links at every path Errand once wrote in HOME: its session record, before and after
      // a run, and the engines' configuration files, before a run.
      llm.script(
        toolCalls([
          c.run(
            [
              `ln -s ${secret} "$HOME/errand-session.json"`,
              `ln -s ${secret} "$HOME/session.json"`,
              'mkdir -p "$HOME/.codex" "$HOME/.config/opencode"',
              `ln -s ${config} "$HOME/.codex/config.toml"`,
              `ln -s ${config} "$HOME/.config/opencode/opencode.json"`,
              'echo planted',
            ].join(' && '),
          ),
        ]),
        reply('Planted links'),
      );
      const jobId = await createJob(svc, projectId, 'Plant links in HOME');
      await until(jobId, 'completed');
      await hostUnchanged();
      const record = path.join(stateOf(jobId), 'session.json');
      const { session } = JSON.parse(await readFile(record, 'utf8'));
      assert.equal(typeof session, 'string');
      const home = path.join(stateOf(jobId), 'home');
      // What the engine planted is there, as it left it.
      assert.equal(await readlink(path.join(home, 'errand-session.json')), secret);
      assert.equal(await readlink(path.join(home, '.codex', 'config.toml')), config);

      // A second name of a file of the engine's own where the record was.
      llm.script(
        toolCalls([
          c.run(
            'rm "$HOME/errand-session.json" && echo its-own-notes > "$HOME/notes.txt" && ln "$HOME/notes.txt" "$HOME/errand-session.json" && echo linked',
          ),
        ]),
        reply('Linked'),
      );
      await followUp(jobId, 'Plant a hard link', 2);
      assert.equal(await readFile(path.join(home, 'notes.txt'), 'utf8'), 'its-own-notes\n');
      assert.equal((await lstat(path.join(home, 'errand-session.json'))).nlink, 2);
      assert.equal((await startedOf(jobId, 2))?.data.resumed, session);

      // A FIFO there, which nobody ever opens for writing: a worker that opened it would wait
      // for ever, and this turn would never end.
      llm.script(
        toolCalls([
          c.run(
            'rm "$HOME/errand-session.json" && mkfifo "$HOME/errand-session.json" && echo fifo',
          ),
        ]),
        reply('Made a FIFO'),
      );
      await followUp(jobId, 'Plant a FIFO', 3);
      assert.equal((await startedOf(jobId, 3))?.data.resumed, session);
      assert.ok((await lstat(path.join(home, 'errand-session.json'))).isFIFO());
      assert.ok((await lstat(record)).isFile());
      await hostUnchanged();

      // A state directory of the layout before this one, all of it the engine's HOME, may hold
      // what a sandbox left where Errand now keeps its own: a link to a host directory in
      // place of home/, a directory in place of the record. Both go, neither is followed.
      const hostDir = path.join(host, 'dir');
      await mkdir(hostDir);
      await rm(home, { recursive: true });
      await symlink(hostDir, home);
      await rm(record);
      await mkdir(record);
      await writeFile(path.join(record, 'planted'), 'x');
      llm.script(
        toolCalls([c.run('echo in-a-home-of-its-own > "$HOME/fresh.txt" && echo written')]),
        reply('Started afresh'),
      );
      await followUp(jobId, 'Start afresh', 4);
      assert.deepEqual(await readdir(hostDir), [], 'HOME was the host directory');
      assert.ok((await lstat(home)).isDirectory());
      assert.equal(await readFile(path.join(home, 'fresh.txt'), 'utf8'), 'in-a-home-of-its-own\n');
      assert.equal((await startedOf(jobId, 4))?.data.resumed, undefined);
      assert.ok((await lstat(record)).isFile());
    });

    test('archiving the job kills the engine and everything it started within seconds', async () => {
      // A command that waits for ever (Claude Code refuses a plain `sleep` in the foreground).
      // The fifo's name is one word of the waiting process's arguments: its marker.
      const marker = `errand-wait-${CASES.indexOf(c)}`;
      llm.script(toolCalls([c.run(`mkfifo ${marker} && cat ${marker}`)]));
      const jobId = await createJob(svc, projectId, 'Wait a long time');
      await waitFor(
        'the command to run',
        async () => {
          const job = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
          if (llm.unexpected.length > 0) throw new Error(llm.unexpected.join('; '));
          if (job.json.status !== 'active') {
            throw new Error(
              `the job ended ${job.json.status}: ${JSON.stringify(await events(jobId))}`,
            );
          }
          return (await processesContaining(marker)).length > 0 ? true : undefined;
        },
        60_000,
      ).catch(async (err: unknown) => {
        throw new Error(
          `${String(err)}; requests: ${llm.requests.length}; events: ${JSON.stringify(await events(jobId))}`,
        );
      });
      const archived = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/archive`);
      assert.equal(archived.status, 200, archived.text);
      // The engine, what it started, and the shell that started it: all gone within seconds.
      await waitFor(
        'every sandboxed process to end',
        async () =>
          (await sandboxProcesses(checkoutOf(jobId))).length === 0 &&
          (await processesContaining(marker)).length === 0 &&
          (await processesContaining(installed?.dir ?? '/nonexistent')).length === 0
            ? true
            : undefined,
        10_000,
      );
    });

    test("the turn's wall time stops the engine and everything it started", {
      skip: c.engine !== 'claude-code' && 'the same sandbox timeout for every engine',
    }, async () => {
      const { service: quick, projectId: quickProject } = await serviceWith(
        { ERRAND_TURN_TIMEOUT_SECONDS: '10' },
        `${c.engine}-quick`,
      );
      try {
        const marker = `errand-timeout-${CASES.indexOf(c)}`;
        llm.script(toolCalls([c.run(`mkfifo ${marker} && cat ${marker}`)]));
        const jobId = await createJob(quick, quickProject, 'Wait too long');
        const job = await untilStatus(quick, quickProject, jobId, 'failed', {
          timeoutMs: 60_000,
        });
        assert.match(job.error ?? '', /ran out of its 10 s time budget.*was stopped/);
        assert.equal(job.prLink, null);
        const checkout = path.join(quick.service.ctx.config.dataDir, 'workspaces', 'jobs', jobId);
        await waitFor('every sandboxed process to end', async () =>
          (await sandboxProcesses(checkout)).length === 0 &&
          (await processesContaining(marker)).length === 0
            ? true
            : undefined,
        );
      } finally {
        await quick.close();
      }
    });

    test('ERRAND_MAX_STEPS bounds its model calls: the next one never reaches the vendor, and the engine is stopped', async () => {
      const { service: capped, projectId: cappedProject } = await serviceWith(
        { ERRAND_MAX_STEPS: '2' },
        `${c.engine}-capped`,
      );
      try {
        // Two model calls, each asking for a command; the third call is the proxy's to refuse,
        // and the fake fails the test (assertDone) if it ever sees it.
        llm.script(toolCalls([c.run('echo first-call')]), toolCalls([c.run('echo second-call')]));
        const jobId = await createJob(capped, cappedProject, 'Never finish');
        const job = await untilStatus(capped, cappedProject, jobId, 'failed', {
          timeoutMs: 120_000,
        });
        assert.match(job.error ?? '', /used its 2 model calls without finishing.*was stopped/);
        assert.equal(job.prLink, null);
        assert.equal(llm.requests.length, 2);
        const checkout = path.join(capped.service.ctx.config.dataDir, 'workspaces', 'jobs', jobId);
        await waitFor('every sandboxed process to end', async () =>
          (await sandboxProcesses(checkout)).length === 0 ? true : undefined,
        );
      } finally {
        await capped.close();
      }
    });

    test('a job budget stops the engine once its model calls have spent it, before anything is committed', async () => {
      const patched = await svc.request('PATCH', `/v2/admin/projects/${projectId}`, {
        body: { jobBudgetUsd: 0.001 },
      });
      assert.equal(patched.status, 200, patched.text);
      try {
        // The first call's cost passes the budget, which the proxy reads as its answer ends; the
        // engine may send its next request before it is stopped: that one is left unanswered.
        llm.script(toolCalls([c.edit('# Notes\n\nexpensive\n')]));
        llm.scriptAll(() => new Promise(() => {}));
        const jobId = await createJob(svc, projectId, 'Spend a lot');
        const job = await untilStatus(svc, projectId, jobId, 'failed', { timeoutMs: 120_000 });
        assert.match(job.error ?? '', /reached its budget of \$0\.00.*was stopped/);
        assert.equal(job.prLink, null);
        assert.ok((job.usage?.costUsd ?? 0) >= 0.001, JSON.stringify(job.usage));
        assert.equal(git(bare, 'branch', '--list', job.branch ?? ''), '', 'the branch was pushed');
        await waitFor('every sandboxed process to end', async () =>
          (await sandboxProcesses(checkoutOf(jobId))).length === 0 ? true : undefined,
        );
      } finally {
        await svc.request('PATCH', `/v2/admin/projects/${projectId}`, {
          body: { jobBudgetUsd: null },
        });
      }
    });

    test("the project's monthly budget stops the engine as the job's does", {
      skip: c.engine !== 'claude-code' && 'the same model proxy and meter for every engine',
    }, async () => {
      // A project of its own, on a service of its own: nothing spent this month yet.
      const { service: monthly, projectId: monthlyProject } = await serviceWith(
        {},
        `${c.engine}-monthly`,
        { monthlyBudgetUsd: 0.001 },
      );
      try {
        llm.script(toolCalls([c.edit('# Notes\n\nexpensive\n')]));
        llm.scriptAll(() => new Promise(() => {}));
        const jobId = await createJob(monthly, monthlyProject, 'Spend the month');
        const job = await untilStatus(monthly, monthlyProject, jobId, 'failed', {
          timeoutMs: 120_000,
        });
        assert.match(
          job.error ?? '',
          /the project reached its monthly budget of \$0\.0010 \(it has spent \$\d+\.\d+ this month\); raise the project's monthlyBudgetUsd or wait for the next month; claude-code was stopped/,
        );
        assert.equal(job.prLink, null);
        const checkout = path.join(monthly.service.ctx.config.dataDir, 'workspaces', 'jobs', jobId);
        await waitFor('every sandboxed process to end', async () =>
          (await sandboxProcesses(checkout)).length === 0 ? true : undefined,
        );
      } finally {
        await monthly.close();
      }
    });

    test('modes: an ask turn is offered no writing tool and changes nothing; a plan waits for approve, which carries it out (docs/modes.md)', async () => {
      const create = (mode: string) =>
        svc.request('POST', `/v2/agent/${projectId}/job`, {
          body: { prompt: 'What is in this repository?', mode },
        });
      if (c.engine === 'codex') {
        for (const mode of ['ask', 'plan']) {
          const refused = await create(mode);
          assert.equal(refused.status, 400, refused.text);
          assert.match(refused.json.error ?? '', /not available with the codex engine/);
        }
        return;
      }
      const branches = () => git(bare, 'for-each-ref', '--format=%(refname)', 'refs/heads/');
      const before = branches();
      llm.script(reply('An empty repository with one commit.'));
      const asked = await create('ask');
      assert.equal(asked.status, 201, asked.text);
      const askId = asked.json.id as string;
      const answered = await until(askId, 'completed');
      assert.equal(answered.summary, 'An empty repository with one commit.');
      assert.equal(answered.prLink, null);
      const offered = toolsOffered(llm.requests[0]?.body).map((t) => t.toLowerCase());
      for (const tool of ['write', 'edit', 'bash'])
        assert.ok(!offered.includes(tool), `an ask turn offered ${tool}: ${offered.join(', ')}`);
      assert.ok(offered.includes('read'), `no read tool: ${offered.join(', ')}`);
      assert.equal(branches(), before);
      llm.assertDone();
      llm.reset();

      llm.script(reply('Plan: write NOTES.md.'));
      const planned = await create('plan');
      const planId = planned.json.id as string;
      const plan = await until(planId, 'completed');
      assert.equal(plan.awaitingApproval, true);
      assert.equal(plan.summary, 'Plan: write NOTES.md.');
      llm.assertDone();
      llm.reset();
      llm.script(toolCalls([c.edit('# Notes\n\nas planned\n')]), reply('Write NOTES.md'));
      await followUp(planId, 'approve', 2);
      const done = (await svc.request('GET', `/v2/agent/${projectId}/job/${planId}`)).json;
      assert.equal(done.awaitingApproval, false);
      assert.equal(git(bare, 'show', `errand/${planId}:NOTES.md`), '# Notes\n\nas planned');
      assert.ok(gh.pullRequests('acme/app').some((p) => p.htmlUrl === done.prLink));
    });

    test('structured output (docs/structured-output.md): Claude Code through --json-schema, Codex through --output-schema, OpenCode through its final message, told its errors once in the same session', async () => {
      const schema = {
        type: 'object',
        properties: { verdict: { type: 'string', enum: ['yes', 'no'] } },
        required: ['verdict'],
        additionalProperties: false,
      };
      const value = { verdict: 'no' };
      if (c.engine === 'claude-code') {
        // Claude Code's StructuredOutput tool, offered with the schema, ends the turn.
        llm.script(toolCalls([{ name: 'StructuredOutput', input: value }]));
      } else if (c.engine === 'codex') {
        llm.script(reply(JSON.stringify(value)));
      } else {
        llm.script(reply('It is fine, I think.'), reply(JSON.stringify(value)));
      }
      const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
        body: { prompt: 'Is anything broken?', outputSchema: schema },
      });
      assert.equal(created.status, 201, created.text);
      const jobId = created.json.id as string;
      const job = await until(jobId, 'completed');
      assert.deepEqual(job.output, value);
      const finished = (await events(jobId)).find((e) => e.type === 'turn.finished');
      assert.deepEqual(finished?.data.output, value);
      const [first] = llm.requests;
      if (c.engine === 'claude-code') {
        const tool = (
          isObject(first?.body) && Array.isArray(first.body.tools)
            ? first.body.tools.filter(isObject)
            : []
        ).find((t) => t.name === 'StructuredOutput');
        assert.ok(tool, `no StructuredOutput tool: ${toolsOffered(first?.body).join(', ')}`);
        assert.deepEqual(
          isObject(tool.input_schema) ? tool.input_schema.properties : undefined,
          schema.properties,
        );
      } else if (c.engine === 'codex') {
        const format =
          isObject(first?.body) && isObject(first.body.text) ? first.body.text.format : undefined;
        assert.ok(isObject(format), 'codex asked for no text.format');
        assert.equal(format.type, 'json_schema');
        assert.equal(format.strict, true);
        assert.deepEqual(format.schema, schema);
      } else {
        // Asked in the prompt; the retry, in the same session, is told what was wrong.
        assert.match(c.promptIn(first?.body) ?? '', /final message must be only a JSON value/);
        const retry = c.promptIn(llm.requests[1]?.body) ?? '';
        assert.match(retry, /the answer is not JSON/);
        assert.ok(
          messagesOf(llm.requests[1]?.body).some((m) =>
            JSON.stringify(m).includes('It is fine, I think.'),
          ),
          'the retry is not in the same session',
        );
        const started = (await events(jobId)).filter((e) => e.type === 'engine.started');
        assert.equal(started.length, 2);
        assert.ok(started[1]?.data.resumed, 'the retry did not resume the session');
      }
    });
  });
}
