// The first admin key from ERRAND_ADMIN_KEY: stored at the API's start on a fresh database, never
// printed, logged or written to the data directory; checked, not stored, once keys exist; a key
// without Errand's shape refused at start. Real PostgreSQL, a real service and its log.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, describe, test } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { runCli } from '../../test/support/process.ts';
import { http, startTestService, type TestService } from '../../test/support/service.ts';
import { ConfigError, loadConfig } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { migrate } from '../db/migrate.ts';
import { createLogger } from '../log.ts';
import { startService } from '../service.ts';
import { adminKeyPath, ensureAdminKey } from './bootstrap.ts';
import { isWellFormedKey, mintKey } from './format.ts';

/** A logger whose lines are kept, to show what reached the log and what did not. */
function recordingLog() {
  let text = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return { log: createLogger('info', sink), text: () => text };
}

const databases: TestDatabase[] = [];
const services: TestService[] = [];
after(async () => {
  for (const svc of services) await svc.stop();
  for (const db of databases) await db.drop();
});

async function freshDatabase(): Promise<TestDatabase> {
  const db = await createTestDatabase();
  databases.push(db);
  return db;
}

/** The API started on `database` with ERRAND_ADMIN_KEY=`key`; minting a key fails the test. */
async function startWithKey(database: TestDatabase, key: string, log = recordingLog()) {
  const svc = await startTestService({
    database,
    worker: false,
    adminKey: key,
    log: log.log,
    env: { ERRAND_ADMIN_KEY: key },
  });
  services.push(svc);
  return svc;
}

async function keyNames(svc: TestService): Promise<string[]> {
  const res = await svc.request('GET', '/v2/admin/keys');
  assert.equal(res.status, 200, res.text);
  return (res.json.keys as unknown as Array<{ name: string; admin: boolean }>).map(
    (k) => `${k.name}${k.admin ? ' (admin)' : ''}`,
  );
}

describe('ERRAND_ADMIN_KEY', () => {
  test('errand key generate prints a new key of the shape it takes, asks no API, writes nothing', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'errand-key-generate-'));
    try {
      // Port 9 (discard): nothing answers there, and nothing is asked.
      const where = { url: 'http://127.0.0.1:9', database: { dataDir: dir } };
      const [a, b] = await Promise.all([
        runCli(where, ['key', 'generate']),
        runCli(where, ['key', 'generate', '--json']),
      ]);
      assert.equal(a.code, 0, a.stderr);
      assert.equal(b.code, 0, b.stderr);
      const key = a.stdout.trim();
      const other = (JSON.parse(b.stdout) as { key: string }).key;
      assert.ok(isWellFormedKey(key), key);
      assert.ok(isWellFormedKey(other), other);
      assert.notEqual(key, other);
      assert.deepEqual(await readdir(dir), []);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('on a fresh database it becomes the admin key: nothing printed, logged or written', async () => {
    const database = await freshDatabase();
    const key = mintKey();
    const recorded = recordingLog();
    let printed: string | undefined;
    const service = await startService(
      loadConfig({
        DATABASE_URL: database.databaseUrl ?? '',
        ERRAND_DATA_DIR: database.dataDir,
        ERRAND_PORT: '0',
        ERRAND_DB_POOL_SIZE: '4',
        ERRAND_ADMIN_KEY: key,
      }),
      {
        api: true,
        worker: false,
        log: recorded.log,
        onAdminKey: (minted) => {
          printed = minted;
        },
      },
    );
    try {
      assert.equal(printed, undefined, 'a key was handed out to be printed');
      const res = await http(service.url ?? '', 'GET', '/v2/admin/keys', { key });
      assert.equal(res.status, 200, res.text);
      const keys = res.json.keys as unknown as Array<{
        name: string;
        admin: boolean;
        start: string;
      }>;
      assert.deepEqual(
        keys.map((k) => [k.name, k.admin, k.start]),
        [['bootstrap admin key (ERRAND_ADMIN_KEY)', true, key.slice(0, 11)]],
      );
      assert.ok(!(await readdir(database.dataDir)).includes('admin.key'), adminKeyPath('.'));
      assert.match(recorded.text(), /"msg":"bootstrap admin key stored from ERRAND_ADMIN_KEY"/);
      assert.ok(!recorded.text().includes(key.slice(7)), 'the key reached the log');
    } finally {
      await service.stop();
    }
  });

  test('at a restart the same key is found, not stored again, and no warning is logged', async () => {
    const database = await freshDatabase();
    const key = mintKey();
    const first = await startWithKey(database, key);
    await first.stop();
    const recorded = recordingLog();
    const second = await startWithKey(database, key, recorded);
    assert.deepEqual(await keyNames(second), ['bootstrap admin key (ERRAND_ADMIN_KEY) (admin)']);
    assert.ok(!recorded.text().includes('"level":40'), recorded.text());
  });

  test('keys made before it was set stay; the key is not stored, and a warning without it says so', async () => {
    const database = await freshDatabase();
    // The first start minted a key, as without the setting.
    const minted = await startTestService({ database, worker: false });
    services.push(minted);
    await minted.stop();
    const late = mintKey();
    const recorded = recordingLog();
    const svc = await startTestService({
      database,
      worker: false,
      adminKey: minted.adminKey,
      log: recorded.log,
      env: { ERRAND_ADMIN_KEY: late },
    });
    services.push(svc);
    assert.deepEqual(await keyNames(svc), ['bootstrap admin key (admin)']);
    assert.equal((await http(svc.url, 'GET', '/v2/admin/keys', { key: late })).status, 401);
    const warning = recorded
      .text()
      .split('\n')
      .find((l) => l.includes('ERRAND_ADMIN_KEY is not one of the stored keys'));
    assert.ok(warning, recorded.text());
    assert.equal(JSON.parse(warning).level, 40);
    assert.ok(!recorded.text().includes(late.slice(7)), 'the key reached the log');
  });

  test('a revoked key or a project key given as ERRAND_ADMIN_KEY is named in a warning', async () => {
    const database = await freshDatabase();
    const key = mintKey();
    const svc = await startWithKey(database, key);
    const project = await svc.createProject();
    const projectKey = await svc.createProjectKey(project.id);
    await svc.stop();
    const recorded = recordingLog();
    const second = await startTestService({
      database,
      worker: false,
      adminKey: key,
      log: recorded.log,
      env: { ERRAND_ADMIN_KEY: projectKey.key },
    });
    services.push(second);
    assert.match(recorded.text(), /"msg":"ERRAND_ADMIN_KEY is a project's key, not an admin key"/);
    const res = await second.request('POST', `/v2/admin/keys/${projectKey.id}/revoke`);
    assert.equal(res.status, 200, res.text);
    await second.stop();
    const third = recordingLog();
    services.push(
      await startTestService({
        database,
        worker: false,
        adminKey: key,
        log: third.log,
        env: { ERRAND_ADMIN_KEY: projectKey.key },
      }),
    );
    assert.match(third.text(), /"msg":"ERRAND_ADMIN_KEY is a revoked key: it opens nothing"/);
    assert.ok(!third.text().includes(projectKey.key.slice(7)), 'the key reached the log');
  });

  test('a value without the shape or checksum of an Errand key stops the start, unquoted', async () => {
    const database = await freshDatabase();
    const good = mintKey();
    const last = good.endsWith('A') ? 'B' : 'A';
    for (const bad of [
      'change-me-to-32-random-characters',
      `${good.slice(0, -1)}${last}`,
      `errand_pat_${good.slice(7)}`,
    ]) {
      await assert.rejects(
        startTestService({ database, worker: false, env: { ERRAND_ADMIN_KEY: bad } }),
        (err: unknown) =>
          err instanceof ConfigError &&
          err.message.startsWith('invalid setting ERRAND_ADMIN_KEY: not an Errand API key') &&
          err.message.includes('errand key generate') &&
          !err.message.includes(bad),
        bad,
      );
    }
    // Nothing was stored: the next start with no setting mints the first key.
    const svc = await startTestService({ database, worker: false });
    services.push(svc);
    assert.deepEqual(await keyNames(svc), ['bootstrap admin key (admin)']);
  });

  test('two processes starting at once on an empty database store it once', async () => {
    const database = await freshDatabase();
    const key = mintKey();
    const handles = await Promise.all(
      [1, 2].map(() =>
        openDatabase({ dataDir: database.dataDir, databaseUrl: database.databaseUrl }),
      ),
    );
    try {
      await migrate(handles[0] ?? assert.fail('no database'));
      const log = recordingLog();
      const config = { dataDir: database.dataDir, adminKey: key };
      const made = await Promise.all(handles.map((h) => ensureAdminKey(h.db, config, log.log)));
      assert.deepEqual(made, [undefined, undefined]);
      const rows = await handles[0]?.db.selectFrom('api_keys').select(['name']).execute();
      assert.deepEqual(rows, [{ name: 'bootstrap admin key (ERRAND_ADMIN_KEY)' }]);
      assert.equal(log.text().match(/stored from ERRAND_ADMIN_KEY/g)?.length, 1, log.text());
    } finally {
      await Promise.all(handles.map((h) => h.close()));
    }
  });
});
