// Migration 0022 on projects made before the network policy: one whose setup command had
// setupNetwork keeps an open setup network, the others have none; commands have none and the
// allowlist is empty; the old column is gone, and a project made afterwards gets the defaults.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { type DatabaseHandle, openDatabase } from '../db/database.ts';
import { loadMigrations, migrate } from '../db/migrate.ts';

describe('migration 0022 on projects made before it', () => {
  let database: TestDatabase;
  let handle: DatabaseHandle;

  before(async () => {
    database = await createTestDatabase();
    handle = await openDatabase({ dataDir: database.dataDir, databaseUrl: database.databaseUrl });
  });
  after(async () => {
    await handle?.close();
    await database?.drop();
  });

  test('setup_network true becomes setup "open", false "none"; commands none, no patterns', async () => {
    // The database as the Errand before 0022 left it.
    const earlier = (await loadMigrations()).filter((m) => m.id < 22);
    await handle.transaction(async (run) => {
      await run.exec(
        'CREATE TABLE errand_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
      );
      for (const m of earlier) {
        await run.exec(m.sql);
        await run.query('INSERT INTO errand_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
      }
    });
    const { db } = handle;
    for (const [id, network] of [
      ['prj_00000000000000000001', true],
      ['prj_00000000000000000002', false],
    ] as const) {
      await sql`
        INSERT INTO projects (id, name, repository, ref, setup_command, setup_network)
        VALUES (${id}, 'p', '/srv/app', 'main', 'npm ci', ${network})`.execute(db);
    }
    assert.equal((await migrate(handle))[0], '0022_network');
    const rows = await db
      .selectFrom('projects')
      .select(['id', 'network_setup', 'network_commands', 'network_allow'])
      .orderBy('id')
      .execute();
    assert.deepEqual(rows, [
      {
        id: 'prj_00000000000000000001',
        network_setup: 'open',
        network_commands: 'none',
        network_allow: [],
      },
      {
        id: 'prj_00000000000000000002',
        network_setup: 'none',
        network_commands: 'none',
        network_allow: [],
      },
    ]);
    const columns = await sql<{ column_name: string }>`
      SELECT column_name FROM information_schema.columns
      WHERE table_name = 'projects' AND column_name = 'setup_network'`.execute(db);
    assert.deepEqual(columns.rows, []);
    // The database refuses a mode the code does not know.
    await assert.rejects(
      sql`UPDATE projects SET network_commands = 'open'`.execute(db),
      /network_commands_check/,
    );
    // A later project gets the defaults, and an allowlist round-trips as a list.
    await db
      .insertInto('projects')
      .values({
        id: 'prj_00000000000000000003',
        name: 'later',
        repository: '/srv/app',
        ref: 'main',
        model: null,
        network_allow: ['@npm', 'npm.example.com:8443'],
      })
      .execute();
    const later = await db
      .selectFrom('projects')
      .select(['network_setup', 'network_commands', 'network_allow'])
      .where('id', '=', 'prj_00000000000000000003')
      .executeTakeFirstOrThrow();
    assert.deepEqual(later, {
      network_setup: 'none',
      network_commands: 'none',
      network_allow: ['@npm', 'npm.example.com:8443'],
    });
  });
});
