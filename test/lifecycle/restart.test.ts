// `errand serve` as a real process in the embedded mode (its own PostgreSQL): nothing accepted
// is lost across a stop (SIGTERM or SIGKILL right after a 201), and a second process on the
// same data directory is refused without harming the first.
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { createEmbeddedDataDir } from '../support/databases.ts';
import { type FakeLlm, reply, startFakeLlm } from '../support/fake-llm.ts';
import { makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { exited, killStrays, runErrand, startServe } from '../support/process.ts';
import { http, waitFor } from '../support/service.ts';

const KEY = 'sk-test-restart-7d1c2b9a';

describe('serve on embedded PostgreSQL', () => {
  let llm: FakeLlm;
  let tmp: string;
  let origin: Origin;
  let env: Record<string, string>;
  before(async () => {
    tmp = await makeTempDir('restart');
    origin = await makeOrigin(tmp);
    llm = await startFakeLlm({ apiKey: KEY, models: ['gpt-test'] });
    env = {
      OPENAI_API_KEY: KEY,
      OPENAI_BASE_URL: `${llm.url}/v1`,
      ERRAND_MODEL: 'openai:gpt-test',
    };
  });
  afterEach(() => killStrays());
  after(async () => {
    killStrays();
    await llm?.close();
    await removeDir(tmp);
  });

  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    test(`a job accepted right before ${signal} runs after the restart`, async () => {
      const db = await createEmbeddedDataDir();
      try {
        const first = await startServe(db.dataDir, ['--no-worker'], env);
        const key = first.adminKey;
        const project = await http(first.url, 'POST', '/v2/admin/projects', {
          key,
          body: { name: 'restart', repository: origin.url },
        });
        assert.equal(project.status, 201);
        const created = await http(first.url, 'POST', `/v2/agent/${project.json.id}/job`, {
          key,
          body: { prompt: 'survive the restart' },
        });
        assert.equal(created.status, 201);
        await first.stop(signal);

        assert.equal(llm.requests.length, 0, 'the turn ran before the restart');
        llm.script(reply('Nothing needs to change.'));
        const second = await startServe(db.dataDir, [], env);
        try {
          const jobPath = `/v2/agent/${project.json.id}/job/${created.json.id}`;
          const job = await waitFor('the turn to run', async () => {
            const res = await http(second.url, 'GET', jobPath, { key });
            return res.json.status === 'completed' ? res.json : undefined;
          });
          assert.equal(job.error, null);
          assert.match(JSON.stringify(llm.requests[0]?.body), /survive the restart/);
          llm.assertDone();
          const events = await http(second.url, 'GET', `${jobPath}/events`, { key });
          assert.deepEqual(
            events.json.events?.map((e) => e.type).filter((t) => t.startsWith('turn.')),
            ['turn.started', 'turn.no_changes', 'turn.finished'],
          );
        } finally {
          await second.stop();
        }
      } finally {
        llm.reset();
        await db.drop();
      }
    });
  }

  test('a second serve on the same data directory refuses to start and leaves the data intact', async () => {
    const db = await createEmbeddedDataDir();
    try {
      const first = await startServe(db.dataDir);
      const key = first.adminKey;
      const project = await http(first.url, 'POST', '/v2/admin/projects', {
        key,
        body: { name: 'locked', repository: db.dataDir },
      });
      assert.equal(project.status, 201);

      const second = runErrand(['serve', '--port', '0', '--data-dir', db.dataDir], {});
      let stderr = '';
      second.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      assert.equal(await exited(second), 1);
      assert.match(stderr, /in use by another Errand process/);
      assert.doesNotMatch(stderr, /\n\s+at /, 'the refusal printed a stack trace');

      const list = await http(first.url, 'GET', '/v2/admin/projects', { key });
      assert.deepEqual(
        list.json.projects?.map((p) => p.id),
        [project.json.id],
      );
      assert.equal(await first.stop(), 0);

      const again = await startServe(db.dataDir);
      try {
        const after = await http(again.url, 'GET', '/v2/admin/projects', { key });
        assert.deepEqual(
          after.json.projects?.map((p) => p.id),
          [project.json.id],
        );
      } finally {
        await again.stop();
      }
    } finally {
      await db.drop();
    }
  });
});
