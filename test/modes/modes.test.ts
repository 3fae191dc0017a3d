// Ask and plan modes end to end through the HTTP API (docs/modes.md): a real git server over
// loopback HTTP that demands the token, the stateful fake of GitHub's REST API, the fake model,
// and the real service. An ask job answers and leaves the repository alone; a plan job waits
// for its approval, and the approval carries the plan out on the same branch.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { isRecord } from '../../src/json.ts';
import { type FakeGitHub, startFakeGitHub } from '../support/fake-github.ts';
import { type FakeLlm, reply, startFakeLlm, toolCalls } from '../support/fake-llm.ts';
import {
  type GitHttpServer,
  git,
  makeServedRepo,
  makeTempDir,
  removeDir,
  startGitHttpServer,
} from '../support/git.ts';
import { untilStatus } from '../support/jobs.ts';
import { startTestService, type TestService } from '../support/service.ts';

const MODEL_KEY = 'sk-test-modes-5d1e0c7a';
const TOKEN = 'ghp_modestoken0123456789abcdef';
const basic = `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`;

/** The names of the tools a recorded OpenAI chat request offered the model. */
function offeredTools(body: unknown): string[] {
  const tools = (body as { tools?: { function?: { name?: string } }[] }).tools ?? [];
  return tools.map((t) => t.function?.name ?? '');
}

/** The mode a `turn.started` event's data says. */
function modeOf(data: unknown): unknown {
  return isRecord(data) ? data.mode : undefined;
}

/** The text of every message of a recorded OpenAI chat request. */
function messagesText(body: unknown): string {
  return JSON.stringify((body as { messages?: unknown[] }).messages ?? []);
}

describe('modes', () => {
  let tmp: string;
  let bare: string;
  let gitServer: GitHttpServer;
  let github: FakeGitHub;
  let llm: FakeLlm;
  let svc: TestService;
  let projectId: string;

  before(async () => {
    tmp = await makeTempDir('modes');
    const root = path.join(tmp, 'served');
    bare = await makeServedRepo(root, tmp);
    gitServer = await startGitHttpServer({ projectRoot: root, authorization: basic });
    github = await startFakeGitHub({ repos: ['acme/app'], token: TOKEN });
    llm = await startFakeLlm({ apiKey: MODEL_KEY, models: ['gpt-test'] });
    svc = await startTestService({
      env: {
        OPENAI_API_KEY: MODEL_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_SECRET_KEY: 'test-secret-key-for-errand-modes',
      },
    });
    const project = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name: 'modes',
        repository: `${gitServer.url}/acme/app.git`,
        forge: 'github',
        forgeUrl: github.apiUrl,
        forgeToken: TOKEN,
      },
    });
    assert.equal(project.status, 201, project.text);
    projectId = project.json.id as string;
  });
  after(async () => {
    await svc?.close();
    await llm?.close();
    await github?.close();
    await gitServer?.close();
    await removeDir(tmp);
  });
  afterEach(() => {
    try {
      llm.assertDone();
      github.assertNoUnexpected();
    } finally {
      llm.reset();
    }
  });

  const until = (jobId: string, status: string) =>
    untilStatus(svc, projectId, jobId, status, { failFast: true });
  const events = async (jobId: string) =>
    (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ?? [];
  const branches = () => git(bare, 'for-each-ref', '--format=%(refname)', 'refs/heads/');

  test('an ask job answers with read-only tools, leaves the branch untouched and opens no pull request', async () => {
    const before = branches();
    llm.script(
      toolCalls([{ name: 'list_files', input: {} }]),
      reply('The service starts in src/main.ts; nothing else is needed.'),
    );
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'How does the service start?', mode: 'ask' },
    });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.mode, 'ask');
    assert.equal(created.json.awaitingApproval, false);
    const jobId = created.json.id as string;
    const job = await until(jobId, 'completed');
    assert.equal(job.summary, 'The service starts in src/main.ts; nothing else is needed.');
    assert.equal(job.mode, 'ask');
    assert.equal(job.awaitingApproval, false);
    assert.equal(job.prLink, null);

    const [first] = llm.requests;
    const tools = offeredTools(first?.body);
    assert.deepEqual(tools.sort(), ['list_files', 'read_file', 'search']);
    assert.match(messagesText(first?.body), /\[Ask mode\]/);

    assert.equal(branches(), before, 'the ask job changed the repository');
    assert.equal(github.pullRequests('acme/app').length, 0);
    const log = await events(jobId);
    const started = log.find((e) => e.type === 'turn.started');
    assert.equal(modeOf(started?.data), 'ask');
    const finished = log.find((e) => e.type === 'turn.finished');
    assert.match(JSON.stringify(finished?.data), /src\/main\.ts/);
    for (const type of ['commit', 'push', 'pull_request.opened', 'files.changed'])
      assert.ok(!log.some((e) => e.type === type), `an ask turn recorded ${type}`);
  });

  test('a plan job waits for approval; "approve" carries the plan out on the same branch', async () => {
    const plan = 'Plan:\n1. Add PLAN.md with the steps.\n2. Nothing else.';
    llm.script(reply(plan));
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'Add a PLAN.md', mode: 'plan' },
    });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    const planned = await until(jobId, 'completed');
    assert.equal(planned.summary, plan);
    assert.equal(planned.mode, 'plan');
    assert.equal(planned.awaitingApproval, true);
    assert.equal(planned.prLink, null);
    assert.ok(!offeredTools(llm.requests[0]?.body).includes('write_file'));
    assert.match(messagesText(llm.requests[0]?.body), /\[Plan mode\]/);
    assert.ok(!branches().includes(`errand/${jobId}`), 'the plan turn pushed its branch');
    assert.equal(github.pullRequests('acme/app').length, 0);
    llm.assertDone();
    llm.reset();

    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'PLAN.md', content: '# Plan\n' } }]),
      reply('Add PLAN.md\n\nAs planned.'),
    );
    const approved = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
      body: { prompt: ' Approve ' },
    });
    assert.equal(approved.status, 200, approved.text);
    assert.equal(approved.json.mode, 'code');
    assert.equal(approved.json.awaitingApproval, false);
    const done = await until(jobId, 'completed');
    assert.equal(done.awaitingApproval, false);
    assert.equal(done.mode, 'code');
    assert.equal(done.summary, 'Add PLAN.md\n\nAs planned.');
    assert.equal(done.turns, 2);

    // The approval turn had the plan in its context, the writing tools and the approval's words.
    const [approval] = llm.requests;
    const context = messagesText(approval?.body);
    assert.ok(context.includes('Add PLAN.md with the steps.'), 'the plan is not in the context');
    assert.match(context, /approved your plan/);
    assert.ok(offeredTools(approval?.body).includes('write_file'));

    const pulls = github.pullRequests('acme/app');
    assert.equal(pulls.length, 1);
    assert.equal(done.prLink, pulls[0]?.htmlUrl);
    assert.equal(
      git(bare, 'show', `refs/heads/errand/${jobId}:PLAN.md`),
      '# Plan',
      'the plan was not carried out on the job branch',
    );
    const started = (await events(jobId)).filter((e) => e.type === 'turn.started');
    assert.deepEqual(
      started.map((e) => modeOf(e.data)),
      ['plan', 'code'],
    );
  });

  test('a follow-up in ask mode after code work answers without touching the pull request', async () => {
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'NOTES.md', content: 'notes\n' } }]),
      reply('Add NOTES.md'),
    );
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'Add NOTES.md' },
    });
    const jobId = created.json.id as string;
    assert.equal(created.json.mode, 'code');
    const first = await until(jobId, 'completed');
    const head = git(bare, 'rev-parse', `refs/heads/errand/${jobId}`);
    const pulls = github.pullRequests('acme/app').length;
    llm.assertDone();
    llm.reset();

    llm.script(reply('NOTES.md holds one line: notes.'));
    const asked = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
      body: { prompt: 'What does NOTES.md say?', mode: 'ask' },
    });
    assert.equal(asked.status, 200, asked.text);
    const answered = await until(jobId, 'completed');
    assert.equal(answered.summary, 'NOTES.md holds one line: notes.');
    assert.equal(answered.mode, 'ask');
    assert.equal(answered.prLink, first.prLink);
    assert.equal(git(bare, 'rev-parse', `refs/heads/errand/${jobId}`), head);
    assert.equal(github.pullRequests('acme/app').length, pulls);
  });

  test('a mode the API does not know is refused with a 400, and nothing is written', async () => {
    const listed = async () =>
      (await svc.request('GET', `/v2/agent/${projectId}/job?limit=100`)).json.jobs?.length;
    const count = await listed();
    const refused = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'Do it', mode: 'yolo' },
    });
    assert.equal(refused.status, 400, refused.text);
    assert.match(refused.json.error ?? '', /"mode" must be one of code, ask, plan/);
    assert.equal(await listed(), count);
  });
});
