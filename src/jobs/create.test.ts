// Creating jobs on the real database: concurrent creates share one transaction, and one that
// fails there is tried again alone, so that every answer is its own.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { useLifecycle } from '../../test/support/lifecycle.ts';
import type { ProjectRow } from '../db/schema.ts';
import type { RunningService } from '../service.ts';
import { createJobBatched } from './create.ts';

describe('creating jobs', () => {
  const lifecycle = useLifecycle();
  const { takeHeard, eventsOf, turnOf, recordOf } = lifecycle;
  let svc: RunningService;
  let project: ProjectRow;
  before(() => {
    ({ svc, project } = lifecycle);
  });

  test('concurrent creates share one transaction; one that fails there is tried alone and fails alone', async () => {
    const { ctx } = svc;
    const newJob = (i: number, projectId = project.id) => ({
      id: `job_atonce${String(i).padStart(15, '0')}`,
      projectId,
      repository: project.repository,
      ref: 'main',
      model: 'anthropic:claude-sonnet-4-5',
      prompt: `together ${i}`,
    });
    /** The transaction that wrote each job (its row version's xmin). */
    const writers = async (ids: string[]) =>
      (
        await sql<{ id: string; writer: string }>`
            SELECT id, xmin::text AS writer FROM jobs WHERE id = ANY (${ids}) ORDER BY id`.execute(
          ctx.db,
        )
      ).rows;
    // Asked in one turn of the event loop: one transaction.
    const together = [0, 1, 2, 3, 4, 5].map((i) => newJob(i));
    const created = await Promise.all(together.map((job) => createJobBatched(ctx, job)));
    assert.deepEqual(
      created.map((c) => c?.job.id),
      together.map((j) => j.id),
    );
    const shared = await writers(together.map((j) => j.id));
    assert.equal(shared.length, 6);
    assert.equal(
      new Set(shared.map((w) => w.writer)).size,
      1,
      'the creates were not one transaction',
    );
    const announced = await takeHeard();
    assert.deepEqual(
      announced.map((h) => [h.transition.type, h.transition.jobId, h.statusSeen]),
      together.flatMap((j) => [
        ['job.created', j.id, 'active'],
        ['turn.accepted', j.id, 'active'],
      ]),
    );
    for (const job of together) {
      const turn = await turnOf(job.id, 1);
      assert.equal(turn.prompt, job.prompt);
      assert.ok(turn.queue_id);
      assert.deepEqual(
        (await eventsOf(job.id)).map((e) => [e.type, e.data]),
        [['job.created', { job: await recordOf(job.id) }]],
      );
    }

    // A create for a project that does not exist fails the shared transaction: the others are
    // created each alone, and only it fails, with the database's own error.
    const mixed = [6, 7, 8].map((i) => newJob(i));
    const orphan = newJob(9, 'prj_nosuchproject0000000');
    const results = await Promise.allSettled(
      [...mixed, orphan].map((job) => createJobBatched(ctx, job)),
    );
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'fulfilled', 'fulfilled', 'rejected'],
    );
    const failure = results[3];
    assert.equal(
      failure?.status === 'rejected' && (failure.reason as { code?: string }).code,
      '23503',
    );
    const alone = await writers([...mixed, orphan].map((j) => j.id));
    assert.deepEqual(
      alone.map((w) => w.id),
      mixed.map((j) => j.id),
    );
    assert.equal(new Set(alone.map((w) => w.writer)).size, 3);
    // Each alone, in the order their statements ended.
    assert.deepEqual(
      (await takeHeard()).map((h) => `${h.transition.jobId} ${h.transition.type}`).sort(),
      mixed.flatMap((j) => [`${j.id} job.created`, `${j.id} turn.accepted`]).sort(),
    );
  });
});
