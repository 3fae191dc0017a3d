// Creating jobs on the real database: concurrent creates share one transaction, and one that
// fails there is tried again alone, so that every answer is its own.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { useLifecycle } from '../../test/support/lifecycle.ts';
import type { ProjectRow } from '../db/schema.ts';
import type { RunningService } from '../service.ts';
import { createJobBatched } from './create.ts';
import { toJobRecord } from './record.ts';
import { BudgetExhaustedError, monthOf } from './spend.ts';

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
      mode: 'code' as const,
      monthlyBudgetUsd: null,
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

  test('a create answers, and its event carries, the job exactly as it is stored', async () => {
    // The record is made from the row the create writes, without reading it back: it must be
    // the stored job's, field for field, whatever the create said.
    const { ctx } = svc;
    const job = {
      id: 'job_asstored0000000000001',
      projectId: project.id,
      repository: project.repository,
      ref: 'release',
      model: 'anthropic:claude-sonnet-4-5',
      prompt: 'as stored',
      mode: 'ask' as const,
      monthlyBudgetUsd: null,
      origin: {
        forge: 'github' as const,
        number: 7,
        url: 'https://example.test/i/7',
        title: 'Seven',
      },
      trigger: {
        forge: 'github' as const,
        delivery: 'delivery-1',
        kind: 'comment',
        url: 'https://example.test/i/7#c1',
        author: 'octo',
        replyTo: { issue: 7 },
      },
      by: {
        actor: { kind: 'user' as const, id: 'usr_asstored00000000001', name: 'Ada' },
        address: '127.0.0.1',
        requestId: 'req_asstored',
      },
    };
    const { job: answered } = await createJobBatched(ctx, job);
    const stored = await recordOf(job.id);
    assert.deepEqual(toJobRecord(answered), stored);
    assert.deepEqual(
      (await eventsOf(job.id)).map((e) => [e.type, e.data]),
      [['job.created', { job: stored }]],
    );
    await takeHeard();
  });

  test("a create refused for its project's spent month fails alone; another project's creates in its transaction are made", async () => {
    const { ctx } = svc;
    const { db } = ctx;
    const spentProject = await db
      .insertInto('projects')
      .values({
        id: 'prj_spentmonth0000000000',
        name: 'spent',
        repository: project.repository,
        ref: 'main',
        model: null,
        monthly_budget_usd: 5,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    // Its month (UTC) is spent: $5.25 of $5.
    await db
      .insertInto('project_spend')
      .values({
        project_id: spentProject.id,
        month: monthOf(new Date()).start.toISOString().slice(0, 10),
        input_tokens: 1_000_000,
        output_tokens: 150_000,
        cost_usd: 5.25,
      })
      .execute();
    const newJob = (i: number, p: ProjectRow) => ({
      id: `job_budgeted${String(i).padStart(12, '0')}`,
      projectId: p.id,
      repository: p.repository,
      ref: 'main',
      model: 'anthropic:claude-sonnet-4-5',
      prompt: `budgeted ${i}`,
      mode: 'code' as const,
      monthlyBudgetUsd: p.monthly_budget_usd,
    });
    const jobs = [newJob(0, project), newJob(1, spentProject), newJob(2, project)];
    const results = await Promise.allSettled(jobs.map((job) => createJobBatched(ctx, job)));
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    const refusal = results[1]?.status === 'rejected' ? results[1].reason : undefined;
    assert.ok(refusal instanceof BudgetExhaustedError);
    assert.equal(refusal.code, 'budget_exhausted');
    assert.equal(refusal.status, 429);
    assert.match(refusal.message, /\$5\.25 of its monthly budget of \$5\.00 \(monthlyBudgetUsd\)/);
    // Nothing of the refused create was written: no job, turn, event or queue entry.
    const written = await db
      .selectFrom('jobs')
      .select('id')
      .where(
        'id',
        'in',
        jobs.map((j) => j.id),
      )
      .orderBy('id')
      .execute();
    assert.deepEqual(
      written.map((j) => j.id),
      [jobs[0]?.id, jobs[2]?.id],
    );
    const refusedId = jobs[1]?.id ?? '';
    assert.equal((await eventsOf(refusedId)).length, 0);
    const turns = await db
      .selectFrom('turns')
      .select('job_id')
      .where('job_id', '=', refusedId)
      .execute();
    assert.equal(turns.length, 0);
    const heard = await takeHeard();
    assert.ok(heard.every((h) => h.transition.jobId !== refusedId));
  });
});
