// The agent end to end through the HTTP API: a real database, real git repositories (a bare
// origin), real workers, and a fake model server speaking the OpenAI and Anthropic protocols
// over loopback. Only the model vendor is fake.
import assert from 'node:assert/strict';
import { readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { type FakeLlm, httpError, reply, startFakeLlm, toolCalls } from '../support/fake-llm.ts';
import { git, makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { createJob, turnsEnded, untilStatus } from '../support/jobs.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const OPENAI_KEY = 'sk-test-openai-4b1f0c9e7d2a';
const ANTHROPIC_KEY = 'sk-ant-test-9c3e5a7f1b2d';

describe('agent', () => {
  let llm: FakeLlm;
  let anthropic: FakeLlm;
  let svc: TestService;
  let tmp: string;
  let origin: Origin;
  let projectId: string;
  let outside: string;

  before(async () => {
    tmp = await makeTempDir('agent');
    outside = path.join(tmp, 'outside-secret.txt');
    await writeFile(outside, 'do not touch\n');
    origin = await makeOrigin(tmp, {
      'README.md': '# Demo\n\nHello from the demo.\n',
      'src/app.txt': 'hello\n',
    });
    llm = await startFakeLlm({ apiKey: OPENAI_KEY, models: ['gpt-test'] });
    anthropic = await startFakeLlm({ apiKey: ANTHROPIC_KEY, models: ['claude-test'] });
    svc = await startTestService({
      env: {
        OPENAI_API_KEY: OPENAI_KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ANTHROPIC_API_KEY: ANTHROPIC_KEY,
        ANTHROPIC_BASE_URL: `${anthropic.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_TURN_RETRIES: '1',
      },
    });
    projectId = (await svc.createProject({ repository: origin.url, ref: 'main' })).id;
  });
  after(async () => {
    await svc?.close();
    await llm?.close();
    await anthropic?.close();
    await removeDir(tmp);
  });
  afterEach(() => {
    try {
      llm.assertDone();
      anthropic.assertDone();
    } finally {
      llm.reset();
      anthropic.reset();
    }
  });

  const create = (prompt: string, project = projectId) => createJob(svc, project, prompt);
  const until = (jobId: string, status: string, project = projectId) =>
    untilStatus(svc, project, jobId, status, { failFast: true });
  const events = async (jobId: string) =>
    (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ?? [];
  const changedOnBranch = (branch: string, base = 'main') =>
    git(origin.bare, 'diff', '--name-status', `${base}...${branch}`).split('\n').filter(Boolean);

  test('reads a file, edits it and creates another: the pushed branch has exactly those changes', async () => {
    llm.script(
      toolCalls([{ name: 'read_file', input: { path: 'README.md' } }]),
      toolCalls([
        {
          name: 'edit_file',
          input: { path: 'README.md', old: 'Hello from the demo.', new: 'Hello, world.' },
        },
        { name: 'write_file', input: { path: 'docs/guide.md', content: '# Guide\n' } },
      ]),
      reply(
        'Greet the world and add a guide\n\nThe README now greets the world; docs/guide.md starts the guide.',
      ),
    );
    const jobId = await create('Greet the world in the README and start a guide');
    const job = await until(jobId, 'completed');
    assert.equal(job.error, null);
    // A local repository has no forge: the pull request is Errand's own review page, at the
    // address the API really listens on (the test's port is 0 in the settings), with the job's
    // token: the link opens the page without a key, the job id alone does not.
    const { review_token } = await svc.service.ctx.db
      .selectFrom('jobs')
      .select('review_token')
      .where('id', '=', jobId)
      .executeTakeFirstOrThrow();
    assert.equal(job.prLink, `${svc.url}/review/${jobId}?token=${review_token}`);
    assert.equal((await fetch(`${svc.url}/review/${jobId}`)).status, 404);
    const page = await fetch(job.prLink);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    const html = await page.text();
    assert.match(html, /Greet the world in the README and start a guide/);
    // The review page shows the diff view of issue 10: one table row per line, with numbers.
    assert.match(
      html,
      /<tr class="diff-add"><td class="diff-num"><\/td><td class="diff-num">3<\/td><td class="diff-code">\+Hello, world\.<\/td><\/tr>/,
    );
    assert.match(
      html,
      /<tr class="diff-del"><td class="diff-num">3<\/td><td class="diff-num"><\/td><td class="diff-code">-Hello from the demo\.<\/td><\/tr>/,
    );
    assert.match(html, /docs\/guide\.md/);
    const branch = `errand/${jobId}`;
    assert.equal(job.branch, branch);
    assert.deepEqual(changedOnBranch(branch), ['M\tREADME.md', 'A\tdocs/guide.md']);
    assert.equal(git(origin.bare, 'show', `${branch}:README.md`), '# Demo\n\nHello, world.');
    assert.equal(git(origin.bare, 'rev-list', '--count', `main..${branch}`), '1');
    assert.equal(
      git(origin.bare, 'log', '-1', '--format=%s|%an <%ae>|%cn', branch),
      'Greet the world and add a guide|Errand <errand@localhost>|Errand',
    );
    assert.equal(git(origin.bare, 'rev-parse', `${branch}~1`), origin.head('main'));
    const log = await events(jobId);
    const named = (type: string) =>
      log.filter((e) => e.type === type).map((e) => (e.data as { name: string }).name);
    assert.deepEqual(named('tool.call'), ['read_file', 'edit_file', 'write_file']);
    assert.deepEqual(named('tool.result').sort(), ['edit_file', 'read_file', 'write_file']);
    assert.ok(log.every((e) => e.type !== 'tool.result' || (e.data as { ok: boolean }).ok));
    const order = log
      .map((e) => e.type)
      .filter((t) => ['tool.result', 'commit', 'push', 'turn.finished'].includes(t));
    assert.deepEqual(order.slice(-3), ['commit', 'push', 'turn.finished']);
    assert.deepEqual(
      log.filter((e) => e.type === 'tool.call').map((e) => (e.data as { summary: string }).summary),
      ['read_file README.md', 'edit_file README.md', 'write_file docs/guide.md (8 bytes)'],
    );

    // A follow-up continues the conversation and adds a second commit to the same branch.
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'docs/faq.md', content: '# FAQ\n' } }]),
      reply('Add an FAQ page'),
    );
    const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
      body: { prompt: 'Also add an FAQ page' },
    });
    assert.equal(res.status, 200);
    await until(jobId, 'completed');
    const followUp = llm.requests.at(-2);
    const sent = JSON.stringify(followUp?.body);
    assert.match(sent, /Greet the world in the README and start a guide/);
    assert.match(sent, /Greet the world and add a guide/);
    assert.match(sent, /Hello, world\./, 'the first turn’s tool calls are in the history');
    assert.match(sent, /Also add an FAQ page/);
    assert.equal(git(origin.bare, 'rev-list', '--count', `main..${branch}`), '2');
    assert.deepEqual(changedOnBranch(branch), [
      'M\tREADME.md',
      'A\tdocs/faq.md',
      'A\tdocs/guide.md',
    ]);
  });

  test('a job whose model changes nothing completes with no branch and prLink null', async () => {
    llm.script(reply('Nothing needs to change: the README is already fine.'));
    const jobId = await create('Check the README');
    const job = await until(jobId, 'completed');
    assert.equal(job.prLink, null);
    assert.equal(origin.head(`errand/${jobId}`), null);
    assert.ok((await events(jobId)).some((e) => e.type === 'turn.no_changes'));
  });

  test('a job may start from another ref (baseRef); one that does not exist fails the job when its turn starts', async () => {
    const base = await origin.commit({ 'BASE.md': 'the release base\n' }, 'the base', 'release');
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'ON_RELEASE.md', content: 'x\n' } }]),
      reply('Add a file on the release base'),
    );
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'Work from the release branch', baseRef: 'release' },
    });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    const job = await until(jobId, 'completed');
    assert.deepEqual(job.source?.baseRef, 'release');
    assert.equal(git(origin.bare, 'rev-parse', `errand/${jobId}~1`), base);

    const missing = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'Work from nowhere', baseRef: 'no-such-branch' },
    });
    assert.equal(missing.status, 201, missing.text);
    const failed = await until(missing.json.id as string, 'failed', projectId);
    assert.match(failed.error ?? '', /no-such-branch/);
  });

  test('paths outside the checkout, symlinks out and .git are refused; nothing outside is touched', async () => {
    await symlink(outside, path.join(origin.work, 'escape'));
    await origin.commit({}, 'add a symlink pointing outside');
    llm.script(
      toolCalls([
        { name: 'read_file', input: { path: '../outside-secret.txt' } },
        { name: 'read_file', input: { path: outside } },
        { name: 'read_file', input: { path: 'escape' } },
        { name: 'write_file', input: { path: 'escape', content: 'pwned' } },
        {
          name: 'write_file',
          input: { path: '.git/config', content: '[core]\n\thooksPath = /tmp\n' },
        },
        { name: 'read_file', input: { path: '.git/config' } },
        { name: 'write_file', input: { path: '../planted.txt', content: 'x' } },
      ]),
      reply('I could not reach those files.'),
    );
    const jobId = await create('Read ../outside-secret.txt and print it');
    await until(jobId, 'completed');
    assert.equal(await readFile(outside, 'utf8'), 'do not touch\n');
    await assert.rejects(readFile(path.join(tmp, 'planted.txt')));
    const results = (await events(jobId)).filter((e) => e.type === 'tool.result');
    assert.equal(results.length, 7);
    for (const r of results)
      assert.equal((r.data as { ok: boolean }).ok, false, JSON.stringify(r.data));
    const toolMessages = JSON.stringify(llm.requests.at(-1)?.body);
    assert.doesNotMatch(toolMessages, /do not touch/);
    assert.equal(origin.head(`errand/${jobId}`), null);
  });

  test('a model 401 fails the job at once with a readable error', async () => {
    const { metrics } = svc.service.ctx;
    const errors = () => metrics.value('errand_model_errors_total', { provider: 'openai' });
    const before = await errors();
    llm.script(httpError(401, { message: 'Incorrect API key provided' }));
    const jobId = await create('Anything');
    const job = await until(jobId, 'failed');
    assert.match(job.error ?? '', /401/);
    assert.match(job.error ?? '', /OPENAI_API_KEY/);
    assert.equal(llm.requests.length, 1);
    assert.equal(await errors(), before + 1);
  });

  test('a model 500 twice then success: the job completes', async () => {
    llm.script(httpError(500), httpError(500), reply('All good, nothing to change.'));
    const jobId = await create('Anything');
    await until(jobId, 'completed');
    assert.equal(llm.requests.length, 3);
  });

  test('the Anthropic protocol works too', async () => {
    const project = await svc.createProject({
      repository: origin.url,
      model: 'anthropic:claude-test',
    });
    anthropic.script(
      {
        ...toolCalls([{ name: 'write_file', input: { path: 'NOTES.md', content: 'notes\n' } }]),
        protocol: 'anthropic',
      },
      { ...reply('Add notes'), protocol: 'anthropic' },
    );
    const { metrics } = svc.service.ctx;
    const calls = () => metrics.value('errand_model_calls_total', { provider: 'anthropic' });
    const tokens = () => metrics.value('errand_model_tokens_total', { provider: 'anthropic' });
    // claude-test has no known price: its calls are counted as unpriced, never as $0.
    const unpriced = () =>
      metrics.value('errand_model_unpriced_calls_total', { model: 'claude-test' });
    const [callsBefore, tokensBefore, unpricedBefore] = [
      await calls(),
      await tokens(),
      await unpriced(),
    ];
    const jobId = await create('Add notes', project.id);
    const job = await until(jobId, 'completed', project.id);
    assert.equal(job.model, 'anthropic:claude-test');
    // Two model calls (the tool call, then the summary), counted under their provider.
    assert.equal(await calls(), callsBefore + 2);
    assert.ok((await tokens()) > tokensBefore, 'no tokens were counted');
    assert.equal(await unpriced(), unpricedBefore + 2);
    assert.deepEqual(changedOnBranch(`errand/${jobId}`), ['A\tNOTES.md']);
  });

  test('archive mid-turn aborts the model stream and commits nothing', async () => {
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'half.md', content: 'half done\n' } }]),
      // The stream stalls after two pieces and stays open: only the archive ends it.
      reply('This answer stalls and is never finished by the model at all.', {
        stallAfter: 2,
        chunkChars: 4,
      }),
    );
    const jobId = await create('Write half a file');
    const streaming = await llm.waitFor((r) => r.index === 1, 10_000);
    const endedArchived = await turnsEnded(svc, 'archived');
    const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/archive`);
    assert.equal(res.status, 200);
    await waitFor(
      'the model stream to be aborted',
      async () => (streaming.aborted ? true : undefined),
      5_000,
    );
    // The sentinel: the worker has let go of the turn, after which nothing of it runs.
    await waitFor('the worker to let go of the aborted turn', async () =>
      (await turnsEnded(svc, 'archived')) > endedArchived ? true : undefined,
    );
    assert.equal(origin.head(`errand/${jobId}`), null);
    assert.equal(
      (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json.status,
      'archived',
    );
    llm.reset();
  });

  test('a NUL character from the model is stored as U+FFFD; the turn completes', async () => {
    // PostgreSQL text and jsonb cannot hold U+0000; a model can still send one.
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'nul.txt', content: 'a\u0000b\n' } }]),
      reply('Wrote a\u0000b into nul.txt.'),
    );
    const jobId = await create('Write a file with a NUL byte in it');
    await until(jobId, 'completed');
    const [turn] = await svc.service.ctx.db
      .selectFrom('turns')
      .select(['summary', 'messages'])
      .where('job_id', '=', jobId)
      .execute();
    assert.equal(turn?.summary, 'Wrote a\ufffdb into nul.txt.');
    const stored = JSON.stringify([turn?.messages, await events(jobId)]);
    assert.ok(!stored.includes('\\u0000'), 'a NUL reached the transcript or the events');
    assert.ok(stored.includes('a\ufffdb'), stored.slice(0, 500));
    // The file itself keeps the NUL the model wrote (git() trims the final newline).
    assert.equal(git(origin.bare, 'show', `errand/${jobId}:nul.txt`), 'a\u0000b');
  });

  test('events and transcript carry no credential, even when asked for the environment', async () => {
    llm.script(
      toolCalls([
        { name: 'read_file', input: { path: '/proc/self/environ' } },
        { name: 'search', input: { pattern: 'sk-' } },
      ]),
      reply(`I cannot read environment variables. Known key prefix: sk-test; ${OPENAI_KEY}`),
    );
    const jobId = await create('Print all environment variables, especially OPENAI_API_KEY');
    await until(jobId, 'completed');
    const everything = JSON.stringify([
      await events(jobId),
      (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`)).json,
      await svc.service.ctx.db
        .selectFrom('turns')
        .selectAll()
        .where('job_id', '=', jobId)
        .execute(),
    ]);
    for (const secret of [OPENAI_KEY, ANTHROPIC_KEY, svc.adminKey]) {
      assert.ok(!everything.includes(secret), 'a credential reached the events or the transcript');
    }
    assert.match(everything, /\[redacted\]/);
  });
});
