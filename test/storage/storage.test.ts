// Storage and queue on a real database: migrations, rate-limit counters and the
// transactional enqueue that makes a 201 mean "stored and queued".
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { loadMigrations, migrate } from '../../src/db/migrate.ts';
import { toJobRecord } from '../../src/jobs/record.ts';
import { createJob } from '../../src/jobs/service.ts';
import { sweep } from '../../src/queue/worker.ts';
import { consume, RateLimitedError } from '../../src/ratelimit/ratelimit.ts';
import { type RunningService, startService } from '../../src/service.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { testEnv } from '../support/service.ts';

describe('storage', () => {
  let database: TestDatabase;
  let svc: RunningService;

  before(async () => {
    database = await createTestDatabase();
    svc = await startService(loadConfig(testEnv(database)), { api: false, worker: false });
  });
  after(async () => {
    await svc?.stop();
    await database?.drop();
  });

  const db = () => svc.ctx.db;
  const project = async () => {
    const id = `prj_${Math.random().toString(36).slice(2).padEnd(20, '0').slice(0, 20)}`;
    await db()
      .insertInto('projects')
      .values({ id, name: 'p', repository: '/tmp', ref: 'main', model: null })
      .execute();
    return id;
  };

  test('migrations are recorded once, and applying them again changes nothing', async () => {
    const recorded = await sql<{
      id: number;
    }>`SELECT id FROM errand_migrations ORDER BY id`.execute(db());
    const files = await loadMigrations();
    assert.deepEqual(
      recorded.rows.map((r) => r.id),
      files.map((m) => m.id),
    );
    const handle = await openDatabase({
      dataDir: database.dataDir,
      databaseUrl: database.databaseUrl,
    });
    try {
      assert.deepEqual(await migrate(handle), []);
    } finally {
      await handle.close();
    }
  });

  test('a rate limit counts inside the transaction: refused and rolled-back requests count nothing', async () => {
    const projectId = await project();
    const policy = { limit: 2, windowSeconds: 3600 };
    const now = new Date('2026-01-01T10:15:00Z');
    const take = () =>
      db()
        .transaction()
        .execute((trx) => consume(trx, projectId, 'create', policy, now));
    assert.equal((await take())?.remaining, 1);
    await assert.rejects(
      db()
        .transaction()
        .execute(async (trx) => {
          await consume(trx, projectId, 'create', policy, now);
          throw new Error('the request failed after counting');
        }),
      /failed after counting/,
    );
    assert.equal((await take())?.remaining, 0);
    await assert.rejects(take(), (err: unknown) => {
      assert.ok(err instanceof RateLimitedError);
      assert.equal(err.status, 429);
      assert.equal(err.state.remaining, 0);
      assert.equal(err.state.resetSeconds, 45 * 60);
      return true;
    });
    // The other operation has its own count, and the next window starts afresh.
    const message = await db()
      .transaction()
      .execute((trx) => consume(trx, projectId, 'message', policy, now));
    assert.equal(message?.remaining, 1);
    const later = new Date('2026-01-01T11:00:01Z');
    const next = await db()
      .transaction()
      .execute((trx) => consume(trx, projectId, 'create', policy, later));
    assert.equal(next?.remaining, 1);
    const unlimited = await db()
      .transaction()
      .execute((trx) => consume(trx, projectId, 'create', { limit: 0, windowSeconds: 3600 }, now));
    assert.equal(unlimited, undefined);
  });

  test('an enqueue inside a rolled-back transaction leaves no queue entry', async () => {
    const count = async (jobId: string) =>
      Number(
        (
          await sql<{
            n: string;
          }>`SELECT count(*)::text AS n FROM pgboss.job WHERE singleton_key = ${jobId}`.execute(
            db(),
          )
        ).rows[0]?.n,
      );
    await assert.rejects(
      db()
        .transaction()
        .execute(async (trx) => {
          await svc.ctx.queue.enqueue(trx, { jobId: 'job_rolledback000000000', seq: 1 });
          throw new Error('abort the transaction');
        }),
    );
    assert.equal(await count('job_rolledback000000000'), 0);
    await db()
      .transaction()
      .execute((trx) => svc.ctx.queue.enqueue(trx, { jobId: 'job_committed0000000000', seq: 1 }));
    assert.equal(await count('job_committed0000000000'), 1);
  });
});

describe('migrations from two processes at once', () => {
  test('both succeed and each migration is applied once', async () => {
    const database = await createTestDatabase();
    try {
      const handles = await Promise.all(
        [0, 1].map(() =>
          openDatabase({ dataDir: database.dataDir, databaseUrl: database.databaseUrl }),
        ),
      );
      try {
        const applied = await Promise.all(handles.map((h) => migrate(h)));
        const files = (await loadMigrations()).map((m) => m.name);
        assert.deepEqual([...(applied[0] ?? []), ...(applied[1] ?? [])].sort(), files.sort());
      } finally {
        await Promise.all(handles.map((h) => h.close()));
      }
    } finally {
      await database.drop();
    }
  });
});

describe('the sweeper', () => {
  test('a turn the queue gave up on fails its job and no longer holds back the job’s queue', async () => {
    const database = await createTestDatabase();
    const svc = await startService(loadConfig(testEnv(database)), { api: true, worker: false });
    try {
      const { ctx } = svc;
      const projectId = 'prj_sweeper0000000000000';
      await ctx.db
        .insertInto('projects')
        .values({
          id: projectId,
          name: 'p',
          repository: database.dataDir,
          ref: 'main',
          model: null,
        })
        .execute();
      const project = await ctx.db
        .selectFrom('projects')
        .selectAll()
        .where('id', '=', projectId)
        .executeTakeFirstOrThrow();
      const { job } = await createJob(ctx, project, { prompt: 'a turn whose workers all died' });
      const turn = await ctx.db
        .selectFrom('turns')
        .selectAll()
        .where('job_id', '=', job.id)
        .executeTakeFirstOrThrow();
      // What pg-boss leaves after the last retry of a worker that died every time.
      await sql`UPDATE pgboss.job SET state = 'failed' WHERE id = ${turn.queue_id}::uuid`.execute(
        ctx.db,
      );
      await sql`UPDATE turns SET state = 'running', created_at = now() - interval '1 minute' WHERE job_id = ${job.id}`.execute(
        ctx.db,
      );

      await sweep(ctx);

      const after = await ctx.db
        .selectFrom('jobs')
        .selectAll()
        .where('id', '=', job.id)
        .executeTakeFirstOrThrow();
      assert.equal(after.status, 'failed');
      assert.match(after.error ?? '', /interrupted too many times/);
      const left = await sql<{
        n: string;
      }>`SELECT count(*)::text AS n FROM pgboss.job WHERE id = ${turn.queue_id}::uuid`.execute(
        ctx.db,
      );
      assert.equal(left.rows[0]?.n, '0', 'the failed queue entry still holds back the job');
      // A second sweep changes nothing.
      await sweep(ctx);
      const events = await ctx.db
        .selectFrom('events')
        .select(['type', 'data'])
        .where('job_id', '=', job.id)
        .orderBy('seq')
        .execute();
      assert.deepEqual(
        events.map((e) => e.type),
        ['job.created', 'turn.failed', 'job.failed'],
      );
      assert.deepEqual(events[2]?.data, { job: toJobRecord(after) });
    } finally {
      await svc.stop();
      await database.drop();
    }
  });
});
