// A statement marked `/* prepared:<name> */` runs in a transaction as a named prepared
// statement of its connection, one per distinct text; an unmarked one stays unnamed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { type DatabaseHandle, openDatabase } from './database.ts';
import { preparedMarker, preparedName } from './prepared.ts';

describe('prepared statements', () => {
  let database: TestDatabase;
  let handle: DatabaseHandle;

  before(async () => {
    database = await createTestDatabase();
    handle = await openDatabase({
      dataDir: database.dataDir,
      databaseUrl: database.databaseUrl,
      poolSize: 1,
    });
  });

  after(async () => {
    await handle?.close();
    await database?.drop();
  });

  test('a marked statement is prepared on its connection, once per text; others are not', async () => {
    const marker = sql.raw(preparedMarker('prepared_test'));
    const statements = await handle.db.transaction().execute(async (trx) => {
      for (const value of [1, 2, 3]) {
        const { rows } = await sql<{ value: number }>`${marker}
          SELECT ${value}::integer AS value`.execute(trx);
        assert.deepEqual(rows, [{ value }]);
      }
      // The same marker before another text: a statement of its own.
      await sql`${marker}
        SELECT 'other' AS value`.execute(trx);
      await sql`SELECT 'unmarked' AS value`.execute(trx);
      return (
        await sql<{ name: string; statement: string }>`
          SELECT name, statement FROM pg_prepared_statements ORDER BY statement`.execute(trx)
      ).rows;
    });
    assert.equal(statements.length, 2, JSON.stringify(statements));
    for (const { name, statement } of statements) {
      assert.match(name, /^errand_prepared_test_[0-9a-f]{16}$/);
      assert.equal(preparedName(statement), name);
    }
    assert.notEqual(statements[0]?.name, statements[1]?.name);
  });

  test('a name is only [a-z0-9_], and an unmarked text has none', () => {
    assert.throws(() => preparedMarker('Bad-Name'), RangeError);
    assert.equal(preparedName('SELECT 1'), undefined);
    assert.equal(preparedName('/* prepared:Bad-Name */ SELECT 1'), undefined);
  });
});
