// Named prepared statements on PGlite: the same rows as PGlite's own query, statements that
// survive being deallocated, errors that leave nothing half-prepared, and never a read inside
// another caller's open transaction; and the count of exchanges that may have changed the
// database, which every way of sending a statement but a read-only prepared one adds to.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { PGlite, protocol } from '@electric-sql/pglite';
import { CountingPGlite, PglitePreparedStatements } from './pglite-prepared.ts';

describe('PglitePreparedStatements', () => {
  let pglite: PGlite;
  let statements: PglitePreparedStatements;

  before(async () => {
    pglite = await PGlite.create();
    await pglite.exec(`
      CREATE TABLE items (id text PRIMARY KEY, n int, at timestamptz, tags text[], data jsonb, flag boolean);
      INSERT INTO items VALUES
        ('a', 1, '2026-01-02T03:04:05.678Z', '{x,"y z"}', '{"k": [1, 2]}', true),
        ('b', NULL, NULL, NULL, NULL, NULL);`);
    statements = new PglitePreparedStatements(pglite);
  });
  after(async () => {
    await pglite.close();
  });

  const SELECT =
    'SELECT * FROM items WHERE id = ANY($1::text[]) AND ($2::int IS NULL OR n = $2) ORDER BY id';

  test('answers the rows and types PGlite.query answers, with arrays and nulls as parameters', async () => {
    for (const params of [
      [['a', 'b'], null],
      [['a'], 1],
      [['b'], 5],
      [[], null],
    ]) {
      const expected = (await pglite.query(SELECT, params)).rows;
      const rows = await statements.run('items_by_id', SELECT, params);
      assert.deepEqual(rows, expected);
    }
    const [a] = await statements.run<{ at: Date; tags: string[]; data: unknown }>(
      'items_by_id',
      SELECT,
      [['a'], null],
    );
    assert.ok(a?.at instanceof Date);
    assert.equal(a.at.toISOString(), '2026-01-02T03:04:05.678Z');
    assert.deepEqual(a.tags, ['x', 'y z']);
    assert.deepEqual(a.data, { k: [1, 2] });
  });

  test('is prepared once: the server holds the statement by its name', async () => {
    await statements.run('items_count', 'SELECT count(*)::int AS n FROM items', []);
    await statements.run('items_count', 'SELECT count(*)::int AS n FROM items', []);
    const { rows } = await pglite.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = 'items_count'",
    );
    assert.equal(rows[0]?.n, 1);
  });

  test('a statement without rows answers none and still runs', async () => {
    const rows = await statements.run('items_touch', 'UPDATE items SET n = n WHERE id = $1', ['a']);
    assert.deepEqual(rows, []);
  });

  test('prepares again after the server forgot the statement', async () => {
    await statements.run('items_again', 'SELECT id FROM items ORDER BY id', []);
    await pglite.exec('DEALLOCATE ALL');
    assert.deepEqual(await statements.run('items_again', 'SELECT id FROM items ORDER BY id', []), [
      { id: 'a' },
      { id: 'b' },
    ]);
  });

  test('an error is thrown with its SQLSTATE, and the instance stays usable', async () => {
    await assert.rejects(statements.run('broken', 'SELECT nope FROM items', []), {
      code: '42703',
    });
    await assert.rejects(statements.run('items_by_id', SELECT, [['a'], 'not a number']), {
      code: '22P02',
    });
    assert.equal((await statements.run('items_by_id', SELECT, [['a'], null])).length, 1);
    assert.equal((await pglite.query('SELECT 1 AS one')).rows.length, 1);
  });

  test('one name never runs two texts', async () => {
    await assert.rejects(
      statements.run('items_by_id', 'SELECT 1', []),
      /prepared with another text/,
    );
  });

  test('waits for an open transaction instead of reading its uncommitted rows', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let inserted: () => void = () => {};
    const insertDone = new Promise<void>((resolve) => {
      inserted = resolve;
    });
    const transaction = pglite.transaction(async (tx) => {
      await tx.query("INSERT INTO items (id) VALUES ('uncommitted')");
      inserted();
      await held;
      await tx.rollback();
    });
    await insertDone;
    const read = statements.run<{ id: string }>(
      'items_ids',
      'SELECT id FROM items ORDER BY id',
      [],
    );
    let settled = false;
    void read.then(() => {
      settled = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(settled, false, 'the read waited for the transaction');
    release();
    await transaction;
    assert.deepEqual(
      (await read).map((r) => r.id),
      ['a', 'b'],
    );
  });
});

describe('CountingPGlite', () => {
  let pglite: CountingPGlite;
  let statements: PglitePreparedStatements;

  before(async () => {
    pglite = new CountingPGlite();
    await pglite.waitReady;
    await pglite.exec(
      "CREATE TABLE items (id text PRIMARY KEY, n int); INSERT INTO items VALUES ('a', 1)",
    );
    statements = new PglitePreparedStatements(pglite);
  });
  after(async () => {
    await pglite.close();
  });

  const SELECT = 'SELECT n FROM items WHERE id = $1';

  /** How much the change count grew while `fn` ran. */
  const growth = async (fn: () => Promise<unknown>): Promise<number> => {
    const before = pglite.changes;
    await fn();
    return pglite.changes - before;
  };

  test('a prepared statement run as read-only is no change, once prepared', async () => {
    // Preparing is an exchange of its own, counted like any other.
    assert.ok(
      (await growth(() => statements.run('read_n', SELECT, ['a'], { readOnly: true }))) > 0,
    );
    assert.equal(
      await growth(() => statements.run('read_n', SELECT, ['a'], { readOnly: true })),
      0,
    );
    const [row] = await statements.run<{ n: number }>('read_n', SELECT, ['a'], { readOnly: true });
    assert.equal(row?.n, 1);
  });

  test('every other way to send a statement counts', async () => {
    const ways: [string, () => Promise<unknown>][] = [
      ['query', () => pglite.query("UPDATE items SET n = n + 1 WHERE id = 'a'")],
      ['query with parameters', () => pglite.query('SELECT n FROM items WHERE id = $1', ['a'])],
      ['exec', () => pglite.exec("UPDATE items SET n = n + 1 WHERE id = 'a'")],
      [
        'transaction',
        () => pglite.transaction((tx) => tx.query("UPDATE items SET n = n + 1 WHERE id = 'a'")),
      ],
      ['prepared, not read-only', () => statements.run('read_n', SELECT, ['a'])],
      ['raw protocol', () => pglite.execProtocolRaw(protocol.serialize.query('SELECT 1'))],
    ];
    for (const [way, fn] of ways) assert.ok((await growth(fn)) > 0, way);
  });

  test('a read-only run that fails is still no change, and the next write counts', async () => {
    const before = pglite.changes;
    await assert.rejects(statements.run('read_n', SELECT, ['a', 'extra'], { readOnly: true }));
    assert.equal(pglite.changes, before);
    assert.ok((await growth(() => pglite.query("DELETE FROM items WHERE id = 'none'"))) > 0);
  });
});
