// Each engine's real CLI end to end: installed from npm in ERRAND_ENGINES_DIR, run by a real
// service in the real sandbox against a fake of its model API over loopback (Anthropic Messages
// for Claude Code, OpenAI Responses for Codex, chat completions for OpenCode) that scripts a
// file edit and a command. The change is committed and a pull request opened on a fake GitHub;
// a follow-up resumes the engine's session; archiving, the turn's wall time, its model calls
// (ERRAND_MAX_STEPS, counted by the proxy) and a spent job or monthly budget each stop it with
// everything it started; the key reaches the fake only through Errand's model proxy and is nowhere inside
// the sandbox. An engine not installed in ERRAND_ENGINES_DIR is skipped with the command that
// installs it.
import assert from 'node:assert/strict';
import { readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { type InstallableEngine, installedEngine } from '../../src/engines/catalog.ts';
import { descendants } from '../../src/sandbox/processes.ts';
import { checkSandbox } from '../../src/sandbox/sandbox.ts';
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
    catalog: { 'openai:gpt-5.5': { inputUsdPerMTok: 5, outputUsdPerMTok: 30 } },
  },
  {
    engine: 'opencode',
    model: 'openai:gpt-4.1',
    vendorModel: 'gpt-4.1',
    env: (url, key) => ({ OPENAI_API_KEY: key, OPENAI_BASE_URL: `${url}/v1` }),
    edit: (content) => ({ name: 'write', input: { filePath: '/workspace/NOTES.md', content } }),
    run: (command) => ({ name: 'bash', input: { command, description: 'run it' } }),
  },
];

const sandbox = await checkSandbox();

/** The sandbox (bwrap) running in `checkout`, and every process below it. */
async function sandboxProcesses(checkout: string): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const argv = (await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (path.basename(argv[0] ?? '') === 'bwrap' && argv.includes(checkout)) {
      pids.push(Number(name), ...(await descendants(Number(name))));
    }
  }
  return pids;
}

/** Files below `dir` (as a sandboxed process sees its file system), and their contents. */
async function* filesBelow(dir: string): AsyncGenerator<{ path: string; content: Buffer }> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* filesBelow(full);
    else if (entry.isFile()) {
      const content = await readFile(full).catch(() => null);
      if (content) yield { path: full, content };
    }
  }
}

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
  // /proc. The engine starts and ends processes of its own meanwhile: one that has ended shows
  // nothing, so the next is tried, until one shows the checkout's files.
  const hostMounts = await readlink('/proc/self/ns/mnt');
  let files = 0;
  for (const pid of [...pids].reverse()) {
    const mounts = await readlink(`/proc/${pid}/ns/mnt`).catch(() => hostMounts);
    if (mounts === hostMounts) continue;
    for (const area of ['tmp', 'workspace']) {
      for await (const file of filesBelow(`/proc/${pid}/root/${area}`)) {
        files++;
        assert.ok(!file.content.includes(key), `the key is in ${file.path}`);
        if (file.content.includes(PLACEHOLDER)) placeholderSeen = true;
      }
    }
    if (files > 0) break;
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
      const session = JSON.parse(await readFile(path.join(state, 'errand-session.json'), 'utf8'));
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
  });
}
