// Job clones are deleted on the worker machine: at once when its job is archived (by this
// process or another; a running turn's clone when the turn stops), and by the janitor once a
// job has been idle; a follow-up then makes the clone again from the pushed branch and
// continues it. Real service, database, git and agent; only the model vendor is a fake on
// loopback.
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { workspaceUsage } from '../../src/workspace/retention.ts';
import { dynamic, type FakeLlm, reply, startFakeLlm, toolCalls } from '../support/fake-llm.ts';
import { git, makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { createJob, untilStatus } from '../support/jobs.ts';
import { startTestService, type TestService, waitFor } from '../support/service.ts';

const KEY = 'sk-test-retention-7d2c9a41';
const IDLE_SECONDS = 2;

const exists = async (p: string) => (await stat(p).catch(() => null)) !== null;

/** A model call that answers only when the test lets it (or never, if the turn is aborted). */
function held() {
  let release = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  return {
    release,
    item: dynamic(async () => {
      await gate;
      return reply('Nothing to change.');
    }),
  };
}

for (const mode of ['archive', 'idle'] as const) {
  describe(`job clones (${mode})`, () => {
    let llm: FakeLlm;
    let svc: TestService;
    let tmp: string;
    let origin: Origin;
    let projectId: string;

    before(async () => {
      tmp = await makeTempDir('retention');
      origin = await makeOrigin(tmp);
      llm = await startFakeLlm({ apiKey: KEY, models: ['gpt-test'] });
      svc = await startTestService({
        env: {
          OPENAI_API_KEY: KEY,
          OPENAI_BASE_URL: `${llm.url}/v1`,
          ERRAND_MODEL: 'openai:gpt-test',
          ...(mode === 'archive'
            ? // No periodic pass during the test: only the worker's own deletion can act.
              { ERRAND_WORKSPACE_JANITOR_SECONDS: '3600' }
            : {
                ERRAND_WORKSPACE_JANITOR_SECONDS: '0.2',
                ERRAND_WORKSPACE_IDLE_HOURS: String(IDLE_SECONDS / 3600),
              }),
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

    const clone = (jobId: string) => path.join(svc.database.dataDir, 'workspaces', 'jobs', jobId);
    const create = (prompt: string) => createJob(svc, projectId, prompt);
    const until = (jobId: string, status: string) => untilStatus(svc, projectId, jobId, status);
    const events = async (jobId: string) =>
      (await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json.events ?? [];
    const gone = (jobId: string) =>
      waitFor(`the clone of ${jobId} to be deleted`, async () =>
        (await exists(clone(jobId))) ? undefined : true,
      );

    if (mode === 'archive') {
      test('archiving a job whose turn is running deletes its clone when the turn stops', async () => {
        const model = held();
        llm.script(model.item);
        const jobId = await create('Look at the README');
        await llm.waitFor(() => true);
        assert.ok(await exists(clone(jobId)), 'the turn works in its clone');
        const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/archive`);
        assert.equal(res.status, 200, res.text);
        await gone(jobId);
        model.release();
      });

      test('archiving a job with no turn running deletes its clone at once', async () => {
        llm.script(reply('Nothing to change.'));
        const jobId = await create('Read the README');
        await until(jobId, 'completed');
        assert.ok(await exists(clone(jobId)), 'the finished turn left its clone');
        const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/archive`);
        assert.equal(res.status, 200, res.text);
        await gone(jobId);
      });

      test("another process's archive deletes the clone on the worker that holds it", async () => {
        llm.script(reply('Nothing to change.'));
        const jobId = await create('Read the README again');
        await until(jobId, 'completed');
        assert.ok(await exists(clone(jobId)), 'the finished turn left its clone');
        // An API process of its own (another data directory, no worker) on the same database.
        const api = await startTestService({
          database: svc.database,
          adminKey: svc.adminKey,
          worker: false,
          env: { ...svc.env, ERRAND_DATA_DIR: path.join(tmp, 'api') },
        });
        try {
          const res = await api.request('POST', `/v2/agent/${projectId}/job/${jobId}/archive`);
          assert.equal(res.status, 200, res.text);
          await gone(jobId);
        } finally {
          await api.stop();
        }
      });
    }

    if (mode === 'idle') {
      test('an idle job loses its clone; a follow-up makes it again and continues the branch', async () => {
        llm.script(
          toolCalls([{ name: 'write_file', input: { path: 'one.md', content: '1\n' } }]),
          reply('Write one.md'),
        );
        const jobId = await create('Write one.md');
        await until(jobId, 'completed');
        const branch = `errand/${jobId}`;
        const first = origin.head(branch);
        assert.ok(first);
        await gone(jobId);

        llm.script(
          toolCalls([{ name: 'write_file', input: { path: 'two.md', content: '2\n' } }]),
          reply('Write two.md'),
        );
        const res = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
          body: { prompt: 'Also write two.md' },
        });
        assert.equal(res.status, 200, res.text);
        await until(jobId, 'completed');
        assert.equal(git(origin.bare, 'rev-parse', `${branch}~1`), first);
        assert.deepEqual(git(origin.bare, 'diff', '--name-only', `main...${branch}`).split('\n'), [
          'one.md',
          'two.md',
        ]);
        const ready = (await events(jobId)).filter((e) => e.type === 'workspace.ready');
        assert.deepEqual(
          ready.map((e) => (e.data as { continued: boolean }).continued),
          [false, true],
        );
        assert.match(JSON.stringify(llm.requests.at(-2)?.body), /Write one\.md/);
      });

      test('a clone in use by a running turn is not deleted, however long the turn takes', async () => {
        const model = held();
        llm.script(model.item);
        const jobId = await create('Think for a while');
        await llm.waitFor(() => true);
        // Longer than the idle time, and at least one janitor pass after that.
        const since = Date.now();
        await waitFor('a janitor pass after the idle time', async () => {
          const at = workspaceUsage().measuredAt;
          return at && at.getTime() > since + IDLE_SECONDS * 1000 + 500 ? true : undefined;
        });
        assert.ok(await exists(clone(jobId)), 'deleted under a running turn');
        assert.ok(workspaceUsage().jobsCount >= 1);
        model.release();
        const job = await until(jobId, 'completed');
        assert.equal(job.error, null);
      });
    }
  });
}
