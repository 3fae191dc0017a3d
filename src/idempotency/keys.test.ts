// Idempotency keys: the header's two forms and what is refused, the fingerprint's canonical
// JSON, and on a real database the claim (replay, reuse, other project, expiry), a claim that
// rolls back, the purge the workers' upkeep runs, and the 409 while another transaction holds the
// key.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { testEnv } from '../../test/support/service.ts';
import { loadConfig } from '../config.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../errors.ts';
import { type RunningService, runUpkeep, startService } from '../service.ts';
import {
  canonicalJson,
  claimKey,
  fingerprint,
  type IdempotentRequest,
  keyProblem,
  parseKey,
  purgeExpiredKeys,
  saveResponse,
} from './keys.ts';

describe('the Idempotency-Key header', () => {
  test('a bare value and an sf-string name the same key', () => {
    assert.equal(parseKey('abc-123_X.~'), 'abc-123_X.~');
    assert.equal(parseKey('"abc-123_X.~"'), 'abc-123_X.~');
    assert.equal(
      parseKey('8e03978e-40d5-43e8-bc93-6894a57f9324'),
      parseKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"'),
    );
    // Inside quotes: spaces, and \" and \\ escaped, as RFC 8941 says.
    assert.equal(parseKey('"a key with spaces"'), 'a key with spaces');
    assert.equal(parseKey('"say \\"hi\\" \\\\ bye"'), 'say "hi" \\ bye');
    assert.equal(parseKey('x'), 'x');
    assert.equal(parseKey('k'.repeat(255)), 'k'.repeat(255));
    assert.equal(parseKey(`"${'q'.repeat(255)}"`), 'q'.repeat(255));
  });

  test('anything else is a 400 naming the header', () => {
    const refused: [string, RegExp][] = [
      ['', /must not be empty/],
      ['""', /must not be empty/],
      ['k'.repeat(256), /256 characters; the maximum is 255/],
      [`"${'q'.repeat(256)}"`, /256 characters; the maximum is 255/],
      ['a b', /one value/],
      // Two header lines, as the server sees them: joined by ", ".
      ['a, b', /one value/],
      ['"a", "b"', /one value/],
      ['"unterminated', /one value/],
      ['"a"b', /one value/],
      ['"bad \\escape"', /one value/],
      ['"trailing backslash\\"', /one value/],
      ['caf\u00e9', /one value/],
      ['"caf\u00e9"', /one value/],
      ['tab\there', /one value/],
      ['"tab\there"', /one value/],
      ['nul\u0000', /one value/],
    ];
    for (const [value, message] of refused) {
      const problem = keyProblem(value);
      assert.ok(problem, `${JSON.stringify(value)} was accepted`);
      assert.match(problem, message, JSON.stringify(value));
      assert.match(problem, /^"Idempotency-Key" /);
      assert.throws(
        () => parseKey(value),
        (err: unknown) =>
          err instanceof AppError && err.code === 'bad_request' && err.message === problem,
      );
    }
  });
});

describe('the fingerprint', () => {
  test('canonical JSON: keys sorted at every level, no whitespace, arrays in order', () => {
    assert.equal(
      canonicalJson(JSON.parse('{ "b": [3, {"z": 1, "a": null}], "a": "x\\u00e9\\n" }')),
      '{"a":"xé\\n","b":[3,{"a":null,"z":1}]}',
    );
    assert.equal(canonicalJson({ a: undefined, b: 1 }), '{"b":1}');
    assert.equal(canonicalJson('plain'), '"plain"');
  });

  test('equal JSON bodies match whatever their spacing and key order; anything else differs', () => {
    const path = '/v2/agent/prj_x/job';
    const base = fingerprint(
      'POST',
      path,
      JSON.parse('{"prompt":"fix it","model":"openai:gpt-5"}'),
    );
    assert.match(base, /^[0-9a-f]{64}$/);
    assert.equal(
      fingerprint(
        'POST',
        path,
        JSON.parse('{\n  "model" : "openai:gpt-5",\n\t"prompt": "fix it"\n}'),
      ),
      base,
    );
    for (const other of [
      fingerprint('POST', path, { prompt: 'fix it ', model: 'openai:gpt-5' }),
      fingerprint('POST', path, { prompt: 'fix it' }),
      fingerprint('POST', `${path}/job_y/message`, { prompt: 'fix it', model: 'openai:gpt-5' }),
      fingerprint('PUT', path, { prompt: 'fix it', model: 'openai:gpt-5' }),
    ])
      assert.notEqual(other, base);
  });
});

const PROJECT = 'prj_idempotency000000000';
const OTHER_PROJECT = 'prj_idempotency000000001';

function keyed(key: string, body: unknown, projectId = PROJECT): IdempotentRequest {
  return { projectId, key, fingerprint: fingerprint('POST', '/v2/agent/x/job', body) };
}

async function rowsOf(db: Db): Promise<string[]> {
  const rows = await db
    .selectFrom('idempotency_keys')
    .select(['project_id', 'key', 'status', 'body'])
    .orderBy('project_id')
    .orderBy('key')
    .execute();
  return rows.map((r) => `${r.project_id} ${r.key} ${r.status} ${r.body}`);
}

/** A migrated database with the two projects the keys belong to, and no API or worker. */
async function startStore(): Promise<{ database: TestDatabase; svc: RunningService; db: Db }> {
  const database = await createTestDatabase();
  const svc = await startService(loadConfig(testEnv(database)), { api: false, worker: false });
  const db = svc.ctx.db;
  for (const id of [PROJECT, OTHER_PROJECT])
    await db
      .insertInto('projects')
      .values({ id, name: id, repository: database.dataDir, ref: 'main', model: null })
      .execute();
  return { database, svc, db };
}

/** Claims in a transaction of its own and saves `body` when the claim says to run. */
async function claimAndSave(db: Db, request: IdempotentRequest, body: string) {
  return db.transaction().execute(async (trx) => {
    const stored = await claimKey(trx, request);
    if (stored) return { replayed: stored };
    await saveResponse(trx, request, { status: 201, body });
    return { ran: body };
  });
}

describe('idempotency keys', () => {
  let database: TestDatabase;
  let svc: RunningService;
  let db: Db;

  before(async () => {
    ({ database, svc, db } = await startStore());
  });
  after(async () => {
    await svc?.stop();
    await database?.drop();
  });

  test('the first claim runs; the same request again gets the stored response', async () => {
    const first = await claimAndSave(db, keyed('k-replay', { prompt: 'a' }), '{"id":"first"}');
    assert.deepEqual(first, { ran: '{"id":"first"}' });
    const again = await claimAndSave(db, keyed('k-replay', { prompt: 'a' }), '{"id":"second"}');
    assert.deepEqual(again, { replayed: { status: 201, body: '{"id":"first"}' } });
    assert.deepEqual(await rowsOf(db), [`${PROJECT} k-replay 201 {"id":"first"}`]);
  });

  test('the same key with another request is a 422; the stored response stays', async () => {
    await claimAndSave(db, keyed('k-reuse', { prompt: 'a' }), '{"id":"a"}');
    const before = await rowsOf(db);
    await assert.rejects(claimAndSave(db, keyed('k-reuse', { prompt: 'b' }), '{"id":"b"}'), {
      code: 'idempotency_key_reused',
      status: 422,
    });
    assert.deepEqual(await rowsOf(db), before);
  });

  test("another project's key of the same name is a key of its own", async () => {
    await claimAndSave(db, keyed('k-shared', { prompt: 'a' }), '{"id":"in A"}');
    const other = await claimAndSave(
      db,
      keyed('k-shared', { prompt: 'a' }, OTHER_PROJECT),
      '{"id":"in B"}',
    );
    assert.deepEqual(other, { ran: '{"id":"in B"}' });
  });

  test('a transaction that fails after its claim stores nothing; the key runs again', async () => {
    const request = keyed('k-rollback', { prompt: 'a' });
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        assert.equal(await claimKey(trx, request), undefined);
        await saveResponse(trx, request, { status: 201, body: '{"id":"rolled back"}' });
        throw new AppError('conflict', 'the change was refused after the key was saved');
      }),
      { code: 'conflict' },
    );
    assert.equal((await rowsOf(db)).filter((r) => r.includes('k-rollback')).length, 0);
    assert.deepEqual(await claimAndSave(db, request, '{"id":"ran"}'), { ran: '{"id":"ran"}' });
  });

  test('after 24 hours a key is forgotten: the request runs again and its row is replaced', async () => {
    const request = keyed('k-expiry', { prompt: 'a' });
    await claimAndSave(db, request, '{"id":"old"}');
    // Just inside the lifetime: still replayed.
    await sql`UPDATE idempotency_keys SET created_at = now() - interval '23 hours 59 minutes' WHERE key = 'k-expiry'`.execute(
      db,
    );
    assert.deepEqual(await claimAndSave(db, request, '{"id":"new"}'), {
      replayed: { status: 201, body: '{"id":"old"}' },
    });
    await sql`UPDATE idempotency_keys SET created_at = now() - interval '24 hours 1 minute' WHERE key = 'k-expiry'`.execute(
      db,
    );
    // Expired, even with another body: a new request, not a reuse.
    const other = keyed('k-expiry', { prompt: 'b' });
    assert.deepEqual(await claimAndSave(db, other, '{"id":"new"}'), { ran: '{"id":"new"}' });
    const row = await db
      .selectFrom('idempotency_keys')
      .select([
        'body',
        'fingerprint',
        sql<boolean>`created_at > now() - interval '1 minute'`.as('fresh'),
      ])
      .where('key', '=', 'k-expiry')
      .executeTakeFirstOrThrow();
    assert.deepEqual(row, { body: '{"id":"new"}', fingerprint: other.fingerprint, fresh: true });
  });

  test("expired keys are purged, by the workers' upkeep too; live ones stay", async () => {
    for (const key of ['k-purge-1', 'k-purge-2', 'k-purge-3', 'k-live'])
      await claimAndSave(db, keyed(key, { key }), '{}');
    await sql`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key IN ('k-purge-1', 'k-purge-2')`.execute(
      db,
    );
    assert.equal(await purgeExpiredKeys(db), 2);
    assert.equal(await purgeExpiredKeys(db), 0);
    await sql`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = 'k-purge-3'`.execute(
      db,
    );
    await runUpkeep(svc.ctx);
    const keys = (await rowsOf(db)).map((r) => r.split(' ')[1]);
    assert.ok(keys.includes('k-live'));
    for (const gone of ['k-purge-1', 'k-purge-2', 'k-purge-3'])
      assert.ok(!keys.includes(gone), `${gone} was not purged`);
  });
});

describe('a key held by another transaction', () => {
  let database: TestDatabase;
  let svc: RunningService;
  let db: Db;

  before(async () => {
    ({ database, svc, db } = await startStore());
  });
  after(async () => {
    await svc?.stop();
    await database?.drop();
  });

  test('is a 409 at once for the same key, not for another; then its response is replayed', async () => {
    const request = keyed('k-held', { prompt: 'a' });
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let claimed = () => {};
    const isClaimed = new Promise<void>((resolve) => {
      claimed = resolve;
    });
    const first = db.transaction().execute(async (trx) => {
      assert.equal(await claimKey(trx, request), undefined);
      claimed();
      await held;
      await saveResponse(trx, request, { status: 201, body: '{"id":"first"}' });
    });
    await isClaimed;
    const started = Date.now();
    // The same key with the same or another body: in flight, whichever.
    for (const body of [{ prompt: 'a' }, { prompt: 'b' }])
      await assert.rejects(claimAndSave(db, keyed('k-held', body), '{}'), {
        code: 'idempotency_key_in_flight',
        status: 409,
      });
    assert.ok(Date.now() - started < 2_000, 'the duplicate waited for the first request');
    // The same key in another project, and another key, are not held.
    assert.deepEqual(await claimAndSave(db, keyed('k-other', { prompt: 'a' }), '{}'), {
      ran: '{}',
    });
    assert.deepEqual(
      await claimAndSave(db, keyed('k-held', { prompt: 'a' }, OTHER_PROJECT), '{}'),
      { ran: '{}' },
    );
    release();
    await first;
    assert.deepEqual(await claimAndSave(db, request, '{"id":"second"}'), {
      replayed: { status: 201, body: '{"id":"first"}' },
    });
  });
});
