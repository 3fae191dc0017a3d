// Pull requests end to end through the HTTP API: for GitHub, GitLab and Gitea a stateful fake
// of the forge's REST API, a real git server over loopback HTTP (git http-backend) that
// demands the token for every fetch and push, a fake model, and the real service.
import assert from 'node:assert/strict';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, afterEach, before, describe, test } from 'node:test';
import { createLogger } from '../../src/log.ts';
import { startFakeGitea } from '../support/fake-gitea.ts';
import { startFakeGitHub } from '../support/fake-github.ts';
import { startFakeGitLab } from '../support/fake-gitlab.ts';
import { type FakeLlm, reply, startFakeLlm, toolCalls } from '../support/fake-llm.ts';
import {
  filesContaining,
  type GitHttpServer,
  git,
  makeServedRepo,
  makeTempDir,
  removeDir,
  startGitHttpServer,
} from '../support/git.ts';
import { untilStatus } from '../support/jobs.ts';
import { assertRevealsNoJob } from '../support/review-links.ts';
import { redeliverTurn, startTestService, type TestService } from '../support/service.ts';

const MODEL_KEY = 'sk-test-forges-2c7e9b1d';
const basic = (user: string, token: string) =>
  `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;

interface ForgeFake {
  apiUrl: string;
  /** Pull requests as [number, url, title, body, draft]. */
  pulls(): Array<{ number: number; url: string; title: string; body: string; draft: boolean }>;
  assertNoUnexpected(): void;
  close(): Promise<void>;
}

interface Case {
  forge: 'github' | 'gitlab' | 'gitea';
  /** How the forge is named in messages, and what docs/forges.md says its token needs. */
  name: string;
  permission: RegExp;
  token: string;
  gitUser: string;
  /** How the project is given its token. */
  credentials: 'env' | 'stored';
  start(token: string, draftsRefused: boolean): Promise<ForgeFake>;
}

const cases: Case[] = [
  {
    forge: 'github',
    name: 'GitHub',
    permission: /Contents: Read and write/,
    token: 'ghp_testtoken0123456789abcdef',
    gitUser: 'x-access-token',
    credentials: 'stored',
    async start(token, draftsRefused) {
      const fake = await startFakeGitHub({ repos: ['acme/app'], token, draftsRefused });
      return {
        apiUrl: fake.apiUrl,
        pulls: () =>
          fake.pullRequests('acme/app').map((p) => ({
            number: p.number,
            url: p.htmlUrl,
            title: p.title,
            body: p.body ?? '',
            draft: p.draft,
          })),
        assertNoUnexpected: () => fake.assertNoUnexpected(),
        close: () => fake.close(),
      };
    },
  },
  {
    forge: 'gitlab',
    name: 'GitLab',
    permission: /api scope and at least the Developer role/,
    token: 'glpat-testtoken0123456789',
    gitUser: 'oauth2',
    credentials: 'env',
    async start(token) {
      const fake = await startFakeGitLab({ token, projects: ['acme/app'] });
      return {
        apiUrl: fake.apiUrl,
        pulls: () =>
          fake.mergeRequests('acme/app').map((m) => ({
            number: m.iid,
            url: `${fake.url}/acme/app/-/merge_requests/${m.iid}`,
            title: m.title,
            body: m.description,
            draft: m.title.startsWith('Draft:'),
          })),
        assertNoUnexpected: () => fake.assertNoUnexpected(),
        close: () => fake.close(),
      };
    },
  },
  {
    forge: 'gitea',
    name: 'Gitea',
    permission: /write:repository scope/,
    token: 'gitea0123456789abcdeftoken',
    gitUser: 'errand',
    credentials: 'env',
    async start(token) {
      const fake = await startFakeGitea({ token, repos: ['acme/app'] });
      return {
        apiUrl: fake.apiUrl,
        pulls: () =>
          fake.pulls().map((p) => ({
            number: p.number,
            url: `${fake.url}/acme/app/pulls/${p.number}`,
            title: p.title,
            body: p.body,
            draft: p.title.startsWith('WIP:'),
          })),
        assertNoUnexpected: () => fake.assertNoUnexpected(),
        close: () => fake.close(),
      };
    },
  },
];

for (const c of cases) {
  describe(`pull requests on ${c.forge}`, () => {
    let tmp: string;
    let gitServer: GitHttpServer;
    let forge: ForgeFake;
    let llm: FakeLlm;
    let svc: TestService;
    let projectId: string;
    let bare: string;
    let logged = '';
    const logSink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logged += chunk.toString();
        done();
      },
    });

    before(async () => {
      tmp = await makeTempDir(`forge-${c.forge}`);
      const root = path.join(tmp, 'served');
      bare = await makeServedRepo(root, tmp);
      gitServer = await startGitHttpServer({
        projectRoot: root,
        authorization: basic(c.gitUser, c.token),
      });
      forge = await c.start(c.token, c.forge === 'github');
      llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-test'] });
      svc = await startTestService({
        log: createLogger('debug', logSink),
        env: {
          OPENAI_API_KEY: MODEL_KEY,
          OPENAI_BASE_URL: `${llm.url}/v1`,
          ERRAND_MODEL: 'openai:gpt-test',
          ERRAND_SECRET_KEY: 'test-secret-key-for-errand-forges',
          ERRAND_FORGE_TOKEN_TEST: c.token,
        },
      });
      projectId = await createProject(gitServer);
    });

    /** A project of this forge whose repository is `acme/app` on `server`. */
    const createProject = async (server: GitHttpServer): Promise<string> => {
      const project = await svc.request('POST', '/v2/admin/projects', {
        body: {
          name: c.forge,
          repository: `${server.url}/acme/app.git`,
          forge: c.forge,
          forgeUrl: forge.apiUrl,
          ...(c.credentials === 'env'
            ? { forgeTokenEnv: 'ERRAND_FORGE_TOKEN_TEST' }
            : { forgeToken: c.token }),
        },
      });
      assert.equal(project.status, 201, project.text);
      assert.equal(
        project.json.forge?.credentials,
        c.credentials === 'env' ? 'token-env' : 'stored-token',
      );
      assert.ok(!project.text.includes(c.token), 'the project record shows the token');
      return project.json.id as string;
    };
    after(async () => {
      await svc?.close();
      await llm?.close();
      await forge?.close();
      await gitServer?.close();
      await removeDir(tmp);
    });
    afterEach(() => {
      try {
        llm.assertDone();
        forge.assertNoUnexpected();
      } finally {
        llm.reset();
      }
    });

    const until = (jobId: string, status: string, project = projectId) =>
      untilStatus(svc, project, jobId, status, { failFast: true });

    /** Every form of the token git sends: the token, the Basic credential and its decoding. */
    const tokenForms = () => {
      const header = basic(c.gitUser, c.token);
      return [c.token, header, header.slice('Basic '.length), `${c.gitUser}:${c.token}`];
    };
    const assertNoTokenIn = (text: string, where: string) => {
      for (const form of tokenForms()) {
        assert.ok(!text.includes(form), `${where} holds a form of the token (${form}): ${text}`);
      }
    };

    /** A job on `project` that fails; its error, checked to name the forge and what the token needs. */
    const failedJob = async (
      project: string,
      prompt: string,
    ): Promise<{ jobId: string; error: string }> => {
      const created = await svc.request('POST', `/v2/agent/${project}/job`, { body: { prompt } });
      assert.equal(created.status, 201, created.text);
      const jobId = created.json.id as string;
      const job = await until(jobId, 'failed', project);
      const error = job.error ?? '';
      assert.match(error, new RegExp(`^${c.name} refused git access with the project's token: `));
      assert.match(error, c.permission);
      assert.match(error, /expired or been revoked/);
      assertNoTokenIn(error, "the job's error");
      const events =
        (await svc.request('GET', `/v2/agent/${project}/job/${jobId}/events`)).json.events ?? [];
      assert.ok(events.some((e) => e.type === 'turn.failed'));
      assertNoTokenIn(JSON.stringify(events), "the job's events");
      return { jobId, error };
    };

    test('a job that edits files gets one pull request; a follow-up updates the same one', async () => {
      llm.script(
        toolCalls([
          { name: 'write_file', input: { path: 'CONTRIBUTING.md', content: '# Contributing\n' } },
        ]),
        reply('Add a contributing guide\n\nExplains how to send changes.'),
      );
      const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
        body: { prompt: 'Add a CONTRIBUTING.md' },
      });
      const jobId = created.json.id as string;
      const job = await until(jobId, 'completed');
      const [pr] = forge.pulls();
      assert.equal(forge.pulls().length, 1);
      assert.equal(job.prLink, pr?.url);
      assert.match(pr?.title ?? '', /Add a contributing guide/);
      assert.match(pr?.body ?? '', /Add a CONTRIBUTING\.md/);
      assert.match(pr?.body ?? '', new RegExp(`/review/${jobId}`));
      // Its readers follow that link to nothing: the page needs a dashboard session.
      assert.equal(await assertRevealsNoJob(svc, pr?.body ?? ''), 1);
      const events =
        (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ?? [];
      const opened = events.find((e) => e.type === 'pull_request.opened');
      assert.ok(opened, 'no pull_request.opened event');
      if (c.forge === 'github') {
        // This fake refuses drafts, as GitHub does on some plans: a normal pull request instead.
        assert.equal(pr?.draft, false);
        assert.match(JSON.stringify(opened.data), /draft/i);
      } else {
        assert.equal(pr?.draft, true);
      }
      // The forge's API calls are counted; GitHub's refusal of the draft (a 422) is a failed one.
      const { metrics } = svc.service.ctx;
      assert.ok((await metrics.value('errand_forge_calls_total', { forge: c.forge })) >= 2);
      assert.equal(
        await metrics.value('errand_forge_errors_total', { forge: c.forge }),
        c.forge === 'github' ? 1 : 0,
      );
      // Every git request carried the token (the server refuses any other).
      assert.ok(gitServer.requests.length > 0);
      assert.ok(gitServer.requests.every((r) => r.authorization === basic(c.gitUser, c.token)));

      llm.script(
        toolCalls([
          { name: 'write_file', input: { path: 'CODE_OF_CONDUCT.md', content: '# Be kind\n' } },
        ]),
        reply('Add a code of conduct'),
      );
      const msg = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
        body: { prompt: 'Add a code of conduct too' },
      });
      assert.equal(msg.status, 200);
      const again = await until(jobId, 'completed');
      assert.equal(forge.pulls().length, 1, 'a second pull request was opened');
      assert.equal(again.prLink, pr?.url);
      const body = forge.pulls()[0]?.body ?? '';
      assert.match(body, /Add a CONTRIBUTING\.md/);
      assert.match(body, /Add a code of conduct too/);
      assert.equal(git(bare, 'rev-list', '--count', `main..errand/${jobId}`), '2');

      // A retry of the last turn after a crash between push and recording the pull request
      // (here: run again, on a machine without the clone) finds the one pull request.
      const { output } = await redeliverTurn(svc, jobId, 2);
      assert.equal(output.prLink, pr?.url);
      assert.equal(forge.pulls().length, 1);
      assert.equal(git(bare, 'rev-list', '--count', `main..errand/${jobId}`), '2');

      // The token is nowhere on disk (git configs, the database files), nor in any answer.
      assert.deepEqual(await filesContaining(svc.database.dataDir, c.token), []);
      const answers = JSON.stringify([
        events,
        (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json,
        (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json,
        (await svc.request('GET', '/v2/admin/projects')).json,
        await svc.service.ctx.db
          .selectFrom('turns')
          .selectAll()
          .where('job_id', '=', jobId)
          .execute(),
      ]);
      assert.ok(!answers.includes(c.token), 'the token reached an API answer, event or transcript');
      assert.ok(logged.includes('turn ended'), 'the debug log was not captured');
      assert.ok(!logged.includes(c.token), 'the token reached the log');
      assert.ok(
        !logged.includes(basic(c.gitUser, c.token).slice(6)),
        'the git header reached the log',
      );
    });

    test('a token the git server refuses fails the job, naming the forge, the repository and what the token needs', async () => {
      // The forge's git server no longer takes the project's token (revoked, or expired).
      const refusing = await startGitHttpServer({
        projectRoot: path.join(tmp, 'served'),
        authorization: basic(c.gitUser, `${c.token}-the-new-one`),
      });
      try {
        const { error } = await failedJob(await createProject(refusing), 'Anything');
        assert.match(error, new RegExp(`fetch from ${refusing.url}/acme/app\\.git failed`));
        assert.ok(refusing.requests.length > 0, 'git never asked the server');
        assert.ok(
          refusing.requests.some((r) => r.authorization === basic(c.gitUser, c.token)),
          'git did not send the project token',
        );
      } finally {
        await refusing.close();
      }
    });

    test('a token that may fetch but not push fails the job, naming the forge and what the token needs', async () => {
      let pushRefused = 0;
      const readOnly = await startGitHttpServer({
        projectRoot: path.join(tmp, 'served'),
        authorization: basic(c.gitUser, c.token),
        intercept(req, res) {
          if (!(req.url ?? '').includes('git-receive-pack')) return false;
          pushRefused += 1;
          res.writeHead(403);
          res.end('write access to the repository is not granted\n');
          return true;
        },
      });
      try {
        llm.script(
          toolCalls([{ name: 'write_file', input: { path: 'PUSHED.md', content: 'no\n' } }]),
          reply('Add a file'),
        );
        const { jobId, error } = await failedJob(await createProject(readOnly), 'Add a file');
        assert.match(
          error,
          new RegExp(`push of errand/job_\\w+ to ${readOnly.url}/acme/app\\.git failed`),
        );
        assert.ok(pushRefused > 0, 'git never tried to push');
        assert.equal(
          git(bare, 'for-each-ref', '--format=%(refname)', `refs/heads/errand/${jobId}`),
          '',
          'the refused push landed',
        );
      } finally {
        await readOnly.close();
      }
    });

    test("every form of git's credential is scrubbed from what a turn stores and sends", async () => {
      // The model cannot see the token; this is the second line of defence, should it ever.
      const forms = tokenForms();
      llm.script(
        toolCalls([{ name: 'write_file', input: { path: 'SCRUB.md', content: 'scrubbed\n' } }]),
        reply(`Add SCRUB.md\n\nForms: ${forms.map((f) => `<${f}>`).join(' ')}`),
      );
      const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
        body: { prompt: 'Add SCRUB.md' },
      });
      const jobId = created.json.id as string;
      await until(jobId, 'completed');
      const turns = await svc.service.ctx.db
        .selectFrom('turns')
        .selectAll()
        .where('job_id', '=', jobId)
        .execute();
      assert.match(turns[0]?.summary ?? '', /Forms: <\[redacted\]>/);
      const stored = JSON.stringify([
        turns,
        (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json,
        (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json,
        forge.pulls(),
        git(bare, 'log', '--format=%B', `errand/${jobId}`),
      ]);
      assertNoTokenIn(stored, 'a stored turn, event, pull request or commit');
    });
  });
}
