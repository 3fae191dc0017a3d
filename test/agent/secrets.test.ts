// A project's secrets in real turns: a real service and database, real git, real bubblewrap and
// the scripted fake model over loopback. The setup command gets every secret, the agent's
// commands only those of exposure "commands", and the model none: each value (and its common
// encodings) is scrubbed from what the model receives, the events, the transcript, the job's
// error and the log, and is on no process's command line. A commit that holds a value is not
// pushed, and the turn fails naming the secret.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, afterEach, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadTurnInputs } from '../../src/jobs/lifecycle.ts';
import { TurnFailedError } from '../../src/jobs/runner.ts';
import { createLogger } from '../../src/log.ts';
import { checkSandbox } from '../../src/sandbox/sandbox.ts';
import { seal } from '../../src/secrets/box.ts';
import { secretForms } from '../../src/secrets/scrub.ts';
import { startFakeGitHub } from '../support/fake-github.ts';
import { type FakeLlm, reply, startFakeLlm, toolCalls, toolResults } from '../support/fake-llm.ts';
import {
  git,
  makeOrigin,
  makeServedRepo,
  makeTempDir,
  type Origin,
  processesContaining,
  removeDir,
  startGitHttpServer,
} from '../support/git.ts';
import { createJob, untilStatus } from '../support/jobs.ts';
import { startTestService, type TestService } from '../support/service.ts';

const OPENAI_KEY = 'sk-test-openai-secrets-41c9e2';
/** For the setup only. */
const NPM_TOKEN = `npm_${randomBytes(18).toString('hex')}`;
/** For the agent's commands too. */
const LICENSE_KEY = `lic-${randomBytes(12).toString('base64url')}-"quoted" $x`;
const FORGE_TOKEN = 'ghp_secretstesttoken0123456789abcdef';
const sha = (text: string) => createHash('sha256').update(text).digest('hex');

const sandbox = await checkSandbox();
const skip = sandbox.available ? false : `bubblewrap does not work here: ${sandbox.reason}`;
if (skip) process.stdout.write(`# secrets tests skipped: ${skip}\n`);

type Event = { type: string; data: Record<string, unknown> };

/**
 * A process that holds a command until the test has looked: perl with `marker` among its
 * arguments, ending with status 0 when the test sends it SIGTERM (hold.release).
 */
const hold = (marker: string) => `perl -e '$SIG{TERM} = sub { exit 0 }; sleep 600' ${marker}`;

/** The host pids of the holds with `marker` (perl's, not the shell's that started it). */
async function holding(marker: string): Promise<number[]> {
  const pids: number[] = [];
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (argv[0] === 'perl' && argv.includes(marker)) pids.push(Number(pid));
  }
  return pids;
}

/** The forms of either value found in `text` (empty: none). */
function leaks(text: string): string[] {
  return [...secretForms(NPM_TOKEN), ...secretForms(LICENSE_KEY)].filter((f) => text.includes(f));
}

describe('project secrets in turns', { skip }, () => {
  let llm: FakeLlm;
  let svc: TestService;
  let tmp: string;
  let origin: Origin;
  let logged = '';
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      logged += String(chunk);
      done();
    },
  });

  before(async () => {
    tmp = await makeTempDir('secrets');
    origin = await makeOrigin(tmp, { 'README.md': '# Demo\n', '.gitignore': 'setup-output/\n' });
    llm = await startFakeLlm({ apiKey: OPENAI_KEY, models: ['gpt-test'] });
    svc = await startTestService({
      log: createLogger('trace', logSink),
      env: {
        OPENAI_API_KEY: OPENAI_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_TURN_RETRIES: '0',
        ERRAND_SECRET_KEY: 'secrets-e2e-secret-key',
      },
    });
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

  const until = (projectId: string, jobId: string, status: string) =>
    untilStatus(svc, projectId, jobId, status, { timeoutMs: 90_000 });
  const events = async (projectId: string, jobId: string): Promise<Event[]> =>
    ((await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ??
      []) as unknown as Event[];
  /** A project with commands on, a setup command and the two secrets. */
  const project = async (setupCommand: string): Promise<string> => {
    const { id } = await svc.createProject({ repository: origin.url, ref: 'main' });
    const patched = await svc.request('PATCH', `/v2/admin/projects/${id}`, {
      body: { setupCommand },
    });
    assert.equal(patched.status, 200, patched.text);
    for (const [name, value, exposure] of [
      ['NPM_TOKEN', NPM_TOKEN, 'setup'],
      ['LICENSE_KEY', LICENSE_KEY, 'commands'],
    ] as const) {
      const res = await svc.request('PUT', `/v2/admin/projects/${id}/secrets/${name}`, {
        body: { value, exposure },
      });
      assert.equal(res.status, 201, res.text);
    }
    return id;
  };
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

  test('the setup gets every secret, the agent’s commands their own, the model none', async () => {
    const setupHold = `hold-setup-${randomBytes(4).toString('hex')}`;
    const commandHold = `hold-command-${randomBytes(4).toString('hex')}`;
    const projectId = await project(
      'mkdir -p setup-output && printf %s "$NPM_TOKEN" | sha256sum > setup-output/npm && ' +
        'printf %s "$LICENSE_KEY" | sha256sum > setup-output/license && ' +
        `echo "setup sees $NPM_TOKEN" && ${hold(setupHold)}`,
    );
    llm.script(
      toolCalls([
        {
          name: 'run_command',
          input: {
            command:
              'cat setup-output/npm setup-output/license; echo "npm=[$NPM_TOKEN]"; ' +
              'echo "license=$LICENSE_KEY"; printf %s "$LICENSE_KEY" | base64 -w0; echo; ' +
              hold(commandHold),
          },
        },
      ]),
      reply('Checked the setup\n\nNothing to change.'),
    );
    const jobId = await createJob(svc, projectId, `Check the setup; the token is ${NPM_TOKEN}`);
    // While the setup and the command run: no process on the host has a value in its argv.
    // Each holds until the process table has been read with it running, then is let go.
    const seen = new Set<string>();
    const sample = async () => {
      for (const hit of [
        ...(await processesContaining(NPM_TOKEN)),
        ...(await processesContaining(LICENSE_KEY)),
      ])
        seen.add(hit);
      return (await processesContaining('bwrap')).length > 0;
    };
    const heldInSandbox = new Set<string>();
    for (;;) {
      await sample();
      for (const marker of [setupHold, commandHold]) {
        const pids = await holding(marker);
        if (pids.length === 0) continue;
        if (await sample()) heldInSandbox.add(marker);
        for (const pid of pids) process.kill(pid, 'SIGTERM');
      }
      const job = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
      if (job.json.status !== 'active') break;
      await sleep(50);
    }
    assert.deepEqual([...seen], []);
    assert.deepEqual(
      [...heldInSandbox].sort(),
      [commandHold, setupHold].sort(),
      'the setup and the command were each seen running in the sandbox',
    );
    const job = await until(projectId, jobId, 'completed');
    assert.equal(job.error, null);

    // The setup had both (their hashes), and its output is scrubbed where it is shown.
    const log = await events(projectId, jobId);
    const setup = log.find((e) => e.type === 'setup.finished')?.data ?? {};
    assert.equal(setup.exitCode, 0);
    assert.equal(setup.outputTail, 'setup sees [secret NPM_TOKEN]\n');
    // The command: the setup's hashes, no setup-only secret, its own scrubbed in every form.
    const result = toolResults(llm.requests[1]).at(-1) ?? '';
    assert.ok(result.includes(`${sha(NPM_TOKEN)}  -\n${sha(LICENSE_KEY)}  -\n`), result);
    // Of the base64, only the last characters, which depend on the padding too, are left.
    assert.match(
      result,
      /\nnpm=\[\]\nlicense=\[secret LICENSE_KEY\]\n\[secret LICENSE_KEY\][A-Za-z0-9+/=]{0,3}\n$/,
    );
    // The model's requests: the prompt's pasted value and the setup's note scrubbed too.
    const user = JSON.stringify(llm.requests[0]?.body);
    assert.match(user, /Check the setup; the token is \[secret NPM_TOKEN\]/);
    assert.match(user, /setup sees \[secret NPM_TOKEN\]/);
    for (const request of llm.requests) {
      assert.deepEqual(leaks(JSON.stringify(request.body)), [], `request ${request.index}`);
    }
    // Nor in the events, the job, the transcript or the log.
    assert.deepEqual(leaks(await traces(projectId, jobId)), []);
    assert.match(logged, /turn ended/, 'the log was not captured');
    assert.deepEqual(leaks(logged), []);
    assert.equal(origin.head(`errand/${jobId}`), null, 'nothing to commit');
  });

  test('a commit holding a value is not pushed: the turn fails naming the secret', async () => {
    const projectId = await project('true');
    llm.script(
      toolCalls([
        {
          name: 'run_command',
          input: { command: 'echo "key: $LICENSE_KEY" > licence.txt && echo ok > other.txt' },
        },
      ]),
      reply('Add the licence file'),
    );
    const jobId = await createJob(svc, projectId, 'Write the licence down');
    const job = await until(projectId, jobId, 'failed');
    assert.equal(
      job.error,
      'the commit contains the value of secret LICENSE_KEY; it was not pushed',
    );
    const types = (await events(projectId, jobId)).map((e) => e.type);
    assert.ok(types.includes('commit'), types.join(','));
    assert.ok(!types.includes('push'), 'a push was recorded');
    assert.equal(origin.head(`errand/${jobId}`), null, 'the branch was pushed');
    assert.deepEqual(leaks(await traces(projectId, jobId)), []);
    assert.deepEqual(leaks(logged), []);
  });

  test('a setup that writes a setup-only secret into the checkout: refused too', async () => {
    const projectId = await project('printf "//registry/:_authToken=%s\\n" "$NPM_TOKEN" > .npmrc');
    llm.script(reply('Nothing to do'));
    const jobId = await createJob(svc, projectId, 'Nothing, really');
    const job = await until(projectId, jobId, 'failed');
    assert.equal(job.error, 'the commit contains the value of secret NPM_TOKEN; it was not pushed');
    assert.equal(origin.head(`errand/${jobId}`), null);
    // The agent saw the file's name in the changes, never its value.
    for (const request of llm.requests) assert.deepEqual(leaks(JSON.stringify(request.body)), []);
    assert.deepEqual(leaks(await traces(projectId, jobId)), []);
  });

  test('the pull request’s title and body hold no value, though the prompt and the reply did', async () => {
    const root = path.join(tmp, 'served');
    const bare = await makeServedRepo(root, tmp);
    const gitServer = await startGitHttpServer({
      projectRoot: root,
      authorization: `Basic ${Buffer.from(`x-access-token:${FORGE_TOKEN}`).toString('base64')}`,
    });
    const gh = await startFakeGitHub({ repos: ['acme/app'], token: FORGE_TOKEN });
    try {
      const created = await svc.request('POST', '/v2/admin/projects', {
        body: {
          name: 'on github',
          repository: `${gitServer.url}/acme/app.git`,
          forge: 'github',
          forgeUrl: gh.apiUrl,
          forgeToken: FORGE_TOKEN,
        },
      });
      assert.equal(created.status, 201, created.text);
      const projectId = created.json.id as string;
      const put = await svc.request('PUT', `/v2/admin/projects/${projectId}/secrets/NPM_TOKEN`, {
        body: { value: NPM_TOKEN },
      });
      assert.equal(put.status, 201, put.text);
      llm.script(
        toolCalls([{ name: 'write_file', input: { path: 'notes.md', content: 'Notes\n' } }]),
        // A reply that holds the value: the model may have put one together from pieces.
        reply(`Add notes about ${NPM_TOKEN}\n\nThe token ${NPM_TOKEN} is not written down.`),
      );
      const jobId = await createJob(svc, projectId, `Add notes; the token is ${NPM_TOKEN}`);
      const job = await until(projectId, jobId, 'completed');
      const pr = gh.pullRequests('acme/app')[0];
      assert.ok(pr, 'no pull request was opened');
      assert.equal(job.prLink, pr.htmlUrl);
      assert.equal(pr.title, 'Add notes about [secret NPM_TOKEN]');
      assert.match(pr.body ?? '', /the token is \[secret NPM_TOKEN\]/);
      assert.match(pr.body ?? '', /The token \[secret NPM_TOKEN\] is not written down/);
      assert.deepEqual(leaks(`${pr.title}\n${pr.body}`), []);
      assert.deepEqual(leaks(JSON.stringify(gh.requests)), []);
      // Nor the commit that was pushed.
      assert.deepEqual(leaks(git(bare, 'log', '--format=%B', `errand/${jobId}`)), []);
      assert.deepEqual(leaks(await traces(projectId, jobId)), []);
      gh.assertNoUnexpected();
    } finally {
      await gh.close();
      await gitServer.close();
    }
  });

  test('a secret sealed with another key fails the turn naming it, before anything runs', async () => {
    const { id: projectId } = await svc.createProject({ repository: origin.url, ref: 'main' });
    await svc.service.ctx.db
      .insertInto('project_secrets')
      .values({
        project_id: projectId,
        name: 'OLD_TOKEN',
        sealed_value: seal('the key of another Errand', NPM_TOKEN),
      })
      .execute();
    const jobId = await createJob(svc, projectId, 'Anything');
    const job = await until(projectId, jobId, 'failed');
    assert.equal(
      job.error,
      'secret OLD_TOKEN cannot be opened: ERRAND_SECRET_KEY on this worker is not the key it was stored with; set it again',
    );
    assert.equal(llm.requests.length, 0, 'the model was asked');
    const types = (await events(projectId, jobId)).map((e) => e.type);
    assert.ok(!types.includes('workspace.ready'), types.join(','));
    // A failure no retry mends: the turn is not retried when retries are allowed.
    const row = await svc.service.ctx.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', jobId)
      .executeTakeFirstOrThrow();
    await assert.rejects(loadTurnInputs(svc.service.ctx, row, 1), TurnFailedError);
  });
});
