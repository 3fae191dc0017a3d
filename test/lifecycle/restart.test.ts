// `errand serve` as a real process on the embedded database: nothing accepted is lost across
// a stop (SIGTERM or SIGKILL right after a 201), and a second process on the same data
// directory is refused without harming the first.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createTestDatabase } from '../support/databases.ts';
import { exited, runErrand, startServe } from '../support/process.ts';
import { http, waitFor } from '../support/service.ts';

describe('serve on PGlite', () => {
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    test(`a job accepted right before ${signal} runs after the restart`, async () => {
      const db = await createTestDatabase('pglite');
      try {
        const first = await startServe(db.dataDir, ['--no-worker']);
        const key = first.adminKey;
        const project = await http(first.url, 'POST', '/v2/admin/projects', {
          key,
          body: { name: 'restart', repository: db.dataDir },
        });
        assert.equal(project.status, 201);
        const created = await http(first.url, 'POST', `/v2/agent/${project.json.id}/job`, {
          key,
          body: { prompt: 'survive the restart' },
        });
        assert.equal(created.status, 201);
        await first.stop(signal);

        const second = await startServe(db.dataDir);
        try {
          const jobPath = `/v2/agent/${project.json.id}/job/${created.json.id}`;
          // No agent is configured, so the turn fails at once: that it fails proves it ran.
          const job = await waitFor('the turn to run', async () => {
            const res = await http(second.url, 'GET', jobPath, { key });
            return res.json.status === 'failed' ? res.json : undefined;
          });
          assert.match(job.error ?? '', /agent is not available/);
          const events = await http(second.url, 'GET', `${jobPath}/events`, { key });
          assert.deepEqual(
            events.json.events?.map((e) => e.type),
            ['turn.started', 'turn.failed'],
          );
        } finally {
          await second.stop();
        }
      } finally {
        await db.drop();
      }
    });
  }

  test('a second serve on the same data directory refuses to start and leaves the data intact', async () => {
    const db = await createTestDatabase('pglite');
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
