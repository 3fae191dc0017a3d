// The rate limits' counters on a real database: the periodic upkeep (service.ts) deletes the
// counters of windows that ended a whole window ago, and keeps the current and the last one.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { testEnv } from '../../test/support/service.ts';
import { loadConfig } from '../config.ts';
import { type RunningService, runUpkeep, startService } from '../service.ts';
import { consume } from './ratelimit.ts';

describe('rate-limit counters', () => {
  let database: TestDatabase;
  let svc: RunningService;
  const WINDOW = 60;

  before(async () => {
    database = await createTestDatabase();
    svc = await startService(
      loadConfig(testEnv(database, { ERRAND_RATE_LIMIT_WINDOW_SECONDS: String(WINDOW) })),
      { api: false, worker: false },
    );
    await svc.ctx.db
      .insertInto('projects')
      .values({ id: 'prj_limits00000000000000', name: 'p', repository: '/tmp', ref: 'main' })
      .execute();
  });
  after(async () => {
    await svc?.stop();
    await database?.drop();
  });

  test('the upkeep deletes the counters of long-ended windows only', async () => {
    const { db } = svc.ctx;
    const policy = { limit: 100, windowSeconds: WINDOW };
    const ago = (windows: number) => new Date(Date.now() - windows * WINDOW * 1000);
    for (const windows of [0, 1, 3, 10]) {
      await db
        .transaction()
        .execute((trx) => consume(trx, 'prj_limits00000000000000', 'create', policy, ago(windows)));
    }
    const counters = async () =>
      (await db.selectFrom('rate_limits').select('window_start').orderBy('window_start').execute())
        .length;
    assert.equal(await counters(), 4);
    await runUpkeep(svc.ctx);
    // The current window and the one before it stay: a window 3 or 10 back is long over.
    assert.equal(await counters(), 2);
  });
});
