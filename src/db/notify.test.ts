// The trigger of migration 0005: every event written to a job's log is announced on the
// channel errand_events with the job's id, once its transaction commits, and never for a
// transaction rolled back. The live stream of every API process relies on it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { waitFor } from '../../test/support/service.ts';
import { type DatabaseHandle, openDatabase } from './database.ts';
import { migrate } from './migrate.ts';

const CHANNEL = 'errand_events';

/** Listens on the channel on a connection of its own. */
async function listen(
  handle: DatabaseHandle,
  heard: string[],
): Promise<{ notifyMarker(marker: string): Promise<void>; stop(): Promise<void> }> {
  const client = new pg.Client(handle.connection);
  await client.connect();
  client.on('notification', (message) => {
    if (message.channel === CHANNEL) heard.push(message.payload ?? '');
  });
  await client.query(`LISTEN ${CHANNEL}`);
  return {
    async notifyMarker(marker) {
      await client.query('SELECT pg_notify($1, $2)', [CHANNEL, marker]);
    },
    stop: () => client.end(),
  };
}

describe('event notifications', () => {
  let database: TestDatabase;
  let handle: DatabaseHandle;
  let heard: string[];
  let listener: Awaited<ReturnType<typeof listen>>;

  before(async () => {
    database = await createTestDatabase();
    handle = await openDatabase({
      dataDir: database.dataDir,
      databaseUrl: database.databaseUrl,
    });
    await migrate(handle);
    await handle.db
      .insertInto('projects')
      .values({
        id: 'prj_notify00000000000000',
        name: 'notify',
        repository: database.dataDir,
        ref: 'main',
        model: null,
      })
      .execute();
    await handle.db
      .insertInto('jobs')
      .values(
        ['job_notifyCommitted000000', 'job_notifyRolledBack00000', 'job_notifyAfter0000000000'].map(
          (id) => ({
            id,
            project_id: 'prj_notify00000000000000',
            status: 'active' as const,
            repository: database.dataDir,
            ref: 'main',
            branch: `errand/${id}`,
            model: 'fake',
            pr_link: null,
            pr_number: null,
            error: null,
            turn_count: 1,
            archived_at: null,
          }),
        ),
      )
      .execute();
    heard = [];
    listener = await listen(handle, heard);
  });
  after(async () => {
    await listener?.stop();
    await handle?.close();
    await database?.drop();
  });

  /** Resolves once `marker` has been heard: whatever was announced before it has arrived. */
  async function drain(marker: string): Promise<void> {
    await listener.notifyMarker(marker);
    await waitFor(`the marker ${marker}`, async () => (heard.includes(marker) ? true : undefined));
  }

  const insertEvent = (db: DatabaseHandle['db'], jobId: string, type: string) =>
    db
      .insertInto('events')
      .values({ job_id: jobId, turn: 1, type, data: JSON.stringify({}) })
      .execute();

  test('a committed event is announced with its job id, once the transaction commits', async () => {
    const jobId = 'job_notifyCommitted000000';
    await handle.db.transaction().execute(async (trx) => {
      await insertEvent(trx, jobId, 'agent.step');
      // Still uncommitted: no reader could see the event yet, so nobody may hear of it.
      // Another session's notification proves the listener is hearing.
      await drain('during the transaction');
      assert.ok(!heard.includes(jobId), 'an uncommitted event was announced');
    });
    await waitFor('the committed event', async () => (heard.includes(jobId) ? true : undefined));
    await drain('after the commit');
    assert.deepEqual(
      heard.filter((payload) => payload === jobId),
      [jobId],
    );
    const row = await handle.db
      .selectFrom('events')
      .select('type')
      .where('job_id', '=', jobId)
      .executeTakeFirstOrThrow();
    assert.equal(row.type, 'agent.step', 'the event heard of is readable');
  });

  test('a rolled-back event is never announced', async () => {
    const jobId = 'job_notifyRolledBack00000';
    const failure = new Error('rolled back after the insert');
    await assert.rejects(
      handle.db.transaction().execute(async (trx) => {
        await insertEvent(trx, jobId, 'agent.step');
        throw failure;
      }),
      (err) => err === failure,
    );
    // An event committed afterwards, and a marker after it: everything announced before
    // has arrived by the time they are heard.
    const later = 'job_notifyAfter0000000000';
    await insertEvent(handle.db, later, 'agent.step');
    await waitFor('the later event', async () => (heard.includes(later) ? true : undefined));
    await drain('after the rollback');
    assert.ok(!heard.includes(jobId), 'a rolled-back event was announced');
    const rows = await handle.db
      .selectFrom('events')
      .select('seq')
      .where('job_id', '=', jobId)
      .execute();
    assert.deepEqual(rows, []);
  });
});
