// The agent's guarantees around failures: budgets fail a turn without committing, a model
// that cannot be resolved is refused at create time, a turn retried after its push does not
// commit twice, and a follow-up on a worker without the job's clone continues the branch.
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { type FakeLlm, reply, startFakeLlm, toolCalls } from '../support/fake-llm.ts';
import { git, makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { createJob, untilStatus } from '../support/jobs.ts';
import { redeliverTurn, startTestService, type TestService } from '../support/service.ts';

const KEY = 'sk-test-recovery-5e8a1f3c';

describe('agent failures and recovery', () => {
  let llm: FakeLlm;
  let svc: TestService;
  let tmp: string;
  let origin: Origin;
  let projectId: string;

  before(async () => {
    tmp = await makeTempDir('recovery');
    origin = await makeOrigin(tmp);
    llm = await startFakeLlm({ apiKey: KEY, models: ['gpt-test'] });
    svc = await startTestService({
      env: {
        OPENAI_API_KEY: KEY,
        OPENAI_BASE_URL: `${llm.url}/v1`,
        ERRAND_MODEL: 'openai:gpt-test',
        ERRAND_MAX_STEPS: '2',
        // No Anthropic key: projects on anthropic: models must be refused.
        ANTHROPIC_API_KEY: '',
      },
    });
    projectId = (await svc.createProject({ repository: origin.url })).id;
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

  const create = (prompt: string) => createJob(svc, projectId, prompt);
  const until = (jobId: string, status: string) => untilStatus(svc, projectId, jobId, status);

  test('a model that cannot be resolved is refused at create time, saying what to set', async () => {
    const project = await svc.createProject({
      repository: origin.url,
      model: 'anthropic:claude-x',
    });
    const res = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      body: { prompt: 'hi' },
    });
    assert.equal(res.status, 400);
    assert.equal(res.json.code, 'model_unavailable');
    assert.match(res.json.error ?? '', /ANTHROPIC_API_KEY/);
    const unknown = await svc.createProject({ repository: origin.url, model: 'frobnicator:big' });
    const res2 = await svc.request('POST', `/v2/agent/${unknown.id}/job`, {
      body: { prompt: 'hi' },
    });
    assert.equal(res2.status, 400);
    assert.match(res2.json.error ?? '', /unknown provider 'frobnicator'/);
    const list = await svc.request('GET', `/v2/agent/${project.id}/jobs`);
    assert.deepEqual(list.json.jobs, []);
  });

  test('running out of steps fails the turn with a readable error and commits nothing', async () => {
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'a.md', content: 'a\n' } }]),
      toolCalls([{ name: 'write_file', input: { path: 'b.md', content: 'b\n' } }]),
    );
    const jobId = await create('Write many files');
    const job = await until(jobId, 'failed');
    assert.match(job.error ?? '', /2 steps/);
    assert.match(job.error ?? '', /ERRAND_MAX_STEPS/);
    assert.equal(origin.head(`errand/${jobId}`), null);
  });

  test('a turn retried after its push finds the pushed commit and commits nothing twice', async () => {
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'once.md', content: 'once\n' } }]),
      reply('Write once.md'),
    );
    const jobId = await create('Write once.md');
    await until(jobId, 'completed');
    const branch = `errand/${jobId}`;
    const pushed = origin.head(branch);
    assert.ok(pushed);

    // What a second delivery of the same turn sees after a crash between push and record,
    // on another machine (no local clone).
    const { output, events: emitted } = await redeliverTurn(svc, jobId, 1);
    assert.equal(output.commitSha, pushed);
    assert.equal(output.summary, 'Write once.md');
    assert.ok(emitted.includes('turn.resumed'));
    assert.equal(origin.head(branch), pushed);
    assert.equal(git(origin.bare, 'rev-list', '--count', `main..${branch}`), '1');
  });

  test('a turn with an outputSchema retried after its push asks its value again from its outcome (docs/structured-output.md)', async () => {
    const schema = {
      type: 'object',
      properties: { files: { type: 'array', items: { type: 'string' } } },
      required: ['files'],
      additionalProperties: false,
    };
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'out.md', content: 'out\n' } }]),
      reply('Write out.md'),
      reply('{"files": ["out.md"]}'),
    );
    const created = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      body: { prompt: 'Write out.md', outputSchema: schema },
    });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id as string;
    const job = await until(jobId, 'completed');
    assert.deepEqual(job.output, { files: ['out.md'] });
    llm.reset();

    llm.script(reply('{"files": ["out.md", "again"]}'));
    const { output, events: emitted } = await redeliverTurn(svc, jobId, 1);
    assert.ok(emitted.includes('turn.resumed'));
    assert.deepEqual(output.output, { value: { files: ['out.md', 'again'] } });
    assert.ok(output.usage && output.usage.outputTokens > 0, 'its model call is counted');
    // Asked from the prompt and the landed summary: the lost attempt's tool calls are gone.
    const body = llm.requests[0]?.body as { messages?: { role: string; content: unknown }[] };
    assert.deepEqual(
      body.messages?.slice(1, 3).map((m) => [m.role, m.content]),
      [
        ['user', 'Write out.md'],
        ['assistant', 'Write out.md'],
      ],
    );
    assert.equal(git(origin.bare, 'rev-list', '--count', `main..errand/${jobId}`), '1');
  });

  test('a follow-up on a worker without the job’s clone continues from the pushed branch', async () => {
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'one.md', content: '1\n' } }]),
      reply('One'),
    );
    const jobId = await create('Write one.md');
    await until(jobId, 'completed');
    await rm(path.join(svc.database.dataDir, 'workspaces', 'jobs', jobId), {
      recursive: true,
      force: true,
    });
    llm.script(
      toolCalls([{ name: 'write_file', input: { path: 'two.md', content: '2\n' } }]),
      reply('Two'),
    );
    const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
      body: { prompt: 'Write two.md' },
    });
    assert.equal(res.status, 200);
    await until(jobId, 'completed');
    const branch = `errand/${jobId}`;
    assert.equal(git(origin.bare, 'rev-list', '--count', `main..${branch}`), '2');
    assert.deepEqual(git(origin.bare, 'diff', '--name-only', `main...${branch}`).split('\n'), [
      'one.md',
      'two.md',
    ]);
  });
});
