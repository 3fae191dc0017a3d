// The limits on answers to people without write access, on a real database and a clock the
// test sets: one per thread for 30 days, five in any hour per project, held when many workers
// claim at once, and a claim given back when the forge did not take the answer.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../../test/support/databases.ts';
import { testEnv } from '../../../test/support/service.ts';
import { loadConfig } from '../../config.ts';
import { type RunningService, startService } from '../../service.ts';
import { claimRefusal, REFUSALS_PER_HOUR, releaseRefusal } from './refusals.ts';

const MINUTE = 60_000;
const DAY = 86_400_000;

describe('refusals', () => {
  let database: TestDatabase;
  let svc: RunningService;
  let project = 0;

  before(async () => {
    database = await createTestDatabase();
    svc = await startService(loadConfig(testEnv(database)), { api: false, worker: false });
  });
  after(async () => {
    await svc?.stop();
    await database?.drop();
  });

  /** A project of its own for each test. */
  const newProject = async () => {
    const id = `prj_refusals${String(++project).padStart(12, '0')}`;
    await svc.ctx.db
      .insertInto('projects')
      .values({ id, name: 'p', repository: '/tmp', ref: 'main' })
      .execute();
    return id;
  };
  const claim = (projectId: string, thread: number | string, at: Date) =>
    claimRefusal(svc.ctx.db, projectId, `github:issue:${thread}`, at);

  test('many workers claiming at once: five answers, not one more', async () => {
    // Several rounds, each a project of its own: a race that a round might miss, one will not.
    for (let round = 0; round < 8; round++) {
      const projectId = await newProject();
      const at = new Date();
      const claims = await Promise.all(
        Array.from({ length: 24 }, (_, i) => claim(projectId, i + 1, at)),
      );
      assert.equal(claims.filter((c) => c === 'claimed').length, REFUSALS_PER_HOUR);
      assert.equal(claims.filter((c) => c === 'limited').length, 24 - REFUSALS_PER_HOUR);
    }
  });

  test('five in any hour, not per clock hour; one per thread for 30 days', async () => {
    const projectId = await newProject();
    const t0 = new Date('2030-03-01T10:50:00Z');
    for (let thread = 1; thread <= 5; thread++)
      assert.equal(await claim(projectId, thread, t0), 'claimed');
    // The clock hour turns: still five in the last hour.
    assert.equal(await claim(projectId, 6, new Date(t0.getTime() + 59 * MINUTE)), 'limited');
    assert.equal(await claim(projectId, 6, new Date(t0.getTime() + 60 * MINUTE + 1)), 'claimed');
    // Thread 1 was answered: not again within 30 days, and again after them.
    assert.equal(await claim(projectId, 1, new Date(t0.getTime() + 29 * DAY)), 'told');
    assert.equal(await claim(projectId, 1, new Date(t0.getTime() + 31 * DAY)), 'claimed');
    assert.equal(await claim(projectId, 1, new Date(t0.getTime() + 31 * DAY + MINUTE)), 'told');
  });

  test('a claim given back may be taken again; other projects have their own five', async () => {
    const projectId = await newProject();
    const other = await newProject();
    const at = new Date('2030-04-01T08:00:00Z');
    assert.equal(await claim(projectId, 'x', at), 'claimed');
    await releaseRefusal(svc.ctx.db, projectId, 'github:issue:x');
    assert.equal(await claim(projectId, 'x', at), 'claimed');
    for (let thread = 1; thread < REFUSALS_PER_HOUR; thread++)
      assert.equal(await claim(projectId, thread, at), 'claimed');
    assert.equal(await claim(projectId, 99, at), 'limited');
    assert.equal(await claim(other, 99, at), 'claimed');
  });
});
