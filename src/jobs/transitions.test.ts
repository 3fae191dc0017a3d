// The job core's hooks on a real database: a hook runs in the transaction that records the
// events it sees (a failing one undoes the transition), sees a running turn's progress only of
// the types it wants, is left out of a create whose statement finds it has no work, and stops
// when removed. The webhook outbox is such a hook (test/webhooks/).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { testEnv } from '../../test/support/service.ts';
import { loadConfig } from '../config.ts';
import type { ProjectRow } from '../db/schema.ts';
import { type RunningService, startService } from '../service.ts';
import { recordProgress, startTurn } from './lifecycle.ts';
import { createJob } from './service.ts';
import type { RecordedEvent } from './transitions.ts';

describe('transition hooks', () => {
  let database: TestDatabase;
  let svc: RunningService;
  let project: ProjectRow;

  before(async () => {
    database = await createTestDatabase();
    svc = await startService(loadConfig(testEnv(database)), { api: false, worker: false });
    project = await svc.ctx.db
      .insertInto('projects')
      .values({
        id: 'prj_hooks000000000000000',
        name: 'p',
        repository: database.dataDir,
        ref: 'main',
        model: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  });
  after(async () => {
    await svc?.stop();
    await database?.drop();
  });

  test('a hook runs in the transaction of the events it sees, and its failure undoes them', async () => {
    const { ctx } = svc;
    const seen: { types: string[]; jobsInTransaction: number }[] = [];
    const remove = ctx.transitions.hook({
      wants: () => false,
      run: async (trx, events) => {
        // The transaction's own writes are visible to it, not yet to anyone else.
        const jobIds = [...new Set(events.map((e) => e.jobId))];
        const rows = await trx.selectFrom('jobs').select('id').where('id', 'in', jobIds).execute();
        seen.push({ types: events.map((e) => e.type), jobsInTransaction: rows.length });
      },
    });
    try {
      const { job } = await createJob(ctx, project, { prompt: 'seen by the hook' });
      assert.deepEqual(seen, [{ types: ['job.created'], jobsInTransaction: 1 }]);
      assert.ok(await startTurn(ctx, job.id, 1, 1));
      assert.deepEqual(seen.at(-1)?.types, ['turn.started']);
    } finally {
      remove();
    }

    const refused = new Error('the hook refuses');
    const removeFailing = ctx.transitions.hook({
      wants: () => false,
      run: async () => {
        throw refused;
      },
    });
    const before = await ctx.db.selectFrom('jobs').select('id').execute();
    try {
      await assert.rejects(createJob(ctx, project, { prompt: 'undone' }), (err) => err === refused);
    } finally {
      removeFailing();
    }
    assert.equal((await ctx.db.selectFrom('jobs').select('id').execute()).length, before.length);
    // Removed: the next transition is not refused.
    await createJob(ctx, project, { prompt: 'after the hook is gone' });
  });

  test("a create's statement answers the hooks' conditions: a hook whose condition is false does not run", async () => {
    const { ctx } = svc;
    const ran: string[] = [];
    const asked: string[][] = [];
    const hook = (name: string, answer: boolean) =>
      ctx.transitions.hook({
        wants: () => false,
        concerns: (projectIds) => {
          asked.push([name, ...projectIds]);
          return answer ? sql<boolean>`true` : sql<boolean>`false`;
        },
        run: async () => {
          ran.push(name);
        },
      });
    const removers = [
      hook('has work', true),
      hook('has none', false),
      ctx.transitions.hook({
        wants: () => false,
        run: async () => {
          ran.push('no condition');
        },
      }),
    ];
    try {
      await createJob(ctx, project, { prompt: 'screened' });
      assert.deepEqual(asked, [
        ['has work', project.id],
        ['has none', project.id],
      ]);
      assert.deepEqual(ran, ['has work', 'no condition']);
      // Elsewhere than a create, every hook runs: a condition is only asked by the statement
      // that writes the events.
      ran.length = 0;
      const { job } = await createJob(ctx, project, { prompt: 'then started' });
      ran.length = 0;
      assert.ok(await startTurn(ctx, job.id, 1, 1));
      assert.deepEqual(ran, ['has work', 'has none', 'no condition']);
    } finally {
      for (const remove of removers) remove();
    }
  });

  test("a running turn's progress reaches a hook only in the types it wants", async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'progress' });
    const seen: RecordedEvent[] = [];
    const remove = ctx.transitions.hook({
      wants: (type) => type === 'review.updated',
      run: async (_trx, events) => {
        seen.push(...events);
      },
    });
    try {
      await recordProgress(ctx, job.id, 1, 'command.started', { command: 'step 1', cwd: '.' });
      await recordProgress(ctx, job.id, 1, 'review.updated', { url: 'https://errand.test/r/2' });
      assert.deepEqual(
        seen.map((e) => [e.jobId, e.turn, e.type, e.data]),
        [[job.id, 1, 'review.updated', { url: 'https://errand.test/r/2' }]],
      );
      const stored = await ctx.db
        .selectFrom('events')
        .select(['seq', 'type'])
        .where('job_id', '=', job.id)
        .where('type', '=', 'review.updated')
        .executeTakeFirstOrThrow();
      assert.equal(Number(seen[0]?.seq), Number(stored.seq));
      // A job that is gone: nothing is written, and the hook is not called.
      await recordProgress(ctx, 'job_gone0000000000000000', 1, 'review.updated', {
        url: 'https://errand.test/r/3',
      });
      assert.equal(seen.length, 1);
    } finally {
      remove();
    }
  });
});
