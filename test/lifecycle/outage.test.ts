// A PostgreSQL outage as an operator meets one. The service reaches the database through a
// TCP proxy the test takes down and brings back: every route answers 503 with Retry-After
// while the database refuses or hangs, nothing hangs, a statement that runs too long is cut
// (but a migration is not), and `serve`, `serve --no-worker` and `worker` processes keep
// running and answer again within 5 s of the database's return.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, afterEach, before, describe, test } from 'node:test';
import pg from 'pg';
import { openDatabase } from '../../src/db/database.ts';
import { migrate } from '../../src/db/migrate.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { type FakeLlm, reply, startFakeLlm } from '../support/fake-llm.ts';
import { makeOrigin, makeTempDir, type Origin, removeDir } from '../support/git.ts';
import { exited, killStrays, runErrand, startServe } from '../support/process.ts';
import { assertError, createRouteFixture, type RouteFixture } from '../support/route-cases.ts';
import { http, startTestService, type TestService, waitFor } from '../support/service.ts';
import { type ProxyTarget, startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

const LLM_KEY = 'sk-test-outage-5c0f1e2d';
/** What the issue asks for: answering again within 5 s of the database's return. */
const RECOVERY_MS = 5_000;

/** The test server's address: its TCP port, or the Unix socket of the embedded test server. */
function target(url: string): ProxyTarget {
  const u = new URL(url);
  const port = Number(u.port || 5432);
  const socketDir = u.searchParams.get('host');
  if (socketDir?.startsWith('/')) return { path: `${socketDir}/.s.PGSQL.${port}` };
  return { host: u.hostname, port };
}

/** Through the proxy: the same database, reached at the proxy's port. */
function proxied(database: TestDatabase, proxy: TcpProxy): TestDatabase {
  return { ...database, databaseUrl: proxy.url(database.databaseUrl ?? '') };
}

/** Polls until `ok` holds; resolves with how long that took. */
async function timeUntil(what: string, ok: () => Promise<boolean>, limitMs = 30_000) {
  const start = Date.now();
  await waitFor(what, async () => ((await ok().catch(() => false)) ? true : undefined), limitMs);
  return Date.now() - start;
}

describe('PostgreSQL outage: the API', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let svc: TestService;
  let fx: RouteFixture;
  let routes: [method: string, path: string, body?: unknown][];

  before(async () => {
    database = await createTestDatabase();
    proxy = await startTcpProxy(target(database.databaseUrl ?? ''));
    svc = await startTestService({
      database: proxied(database, proxy),
      worker: false,
      env: { ERRAND_DB_CONNECT_TIMEOUT_SECONDS: '1', ERRAND_DB_STATEMENT_TIMEOUT_SECONDS: '2' },
    });
    fx = await createRouteFixture(svc);
    const job = `/v2/agent/${fx.project.id}/job/${fx.jobId}`;
    routes = [
      ['GET', '/readyz'],
      ['GET', '/v2/admin/projects'],
      ['POST', '/v2/admin/projects', { name: 'during the outage', repository: database.dataDir }],
      ['GET', `/v2/admin/projects/${fx.project.id}`],
      ['PATCH', `/v2/admin/projects/${fx.project.id}`, { name: 'renamed during the outage' }],
      ['GET', '/v2/admin/keys'],
      ['POST', '/v2/admin/keys', { projectId: fx.project.id }],
      ['POST', `/v2/admin/keys/${fx.spareKeyId}/revoke`],
      ['POST', `/v2/agent/${fx.project.id}/job`, { prompt: 'during the outage' }],
      ['GET', job],
      ['GET', `/v2/agent/${fx.project.id}/jobs`],
      ['POST', `${job}/message`, { prompt: 'during the outage' }],
      ['GET', `${job}/events`],
      ['POST', `${job}/archive`],
      ['GET', `/review/${fx.jobId}`],
    ];
  });
  afterEach(async () => {
    await proxy.up();
  });
  after(async () => {
    await svc?.stop();
    await proxy?.close();
    await database?.drop();
  });

  const everyRouteUnavailable = async () => {
    for (const [method, path, body] of routes) {
      const started = Date.now();
      const res = await svc.request(method, path, body === undefined ? {} : { body });
      assertError(res, 503, 'unavailable');
      assert.equal(res.headers.get('retry-after'), '5', `${method} ${path}: Retry-After`);
      // The connect timeout is 1 s here; anything near the test's own limit is a hang.
      assert.ok(Date.now() - started < 10_000, `${method} ${path} took ${Date.now() - started} ms`);
    }
  };

  const recovers = async () => {
    await proxy.up();
    const ms = await timeUntil('the API to answer again', async () => {
      const res = await svc.request('GET', '/v2/admin/projects');
      return res.status === 200;
    });
    assert.ok(ms < RECOVERY_MS, `answered again ${ms} ms after the database's return`);
    const job = await svc.request('GET', `/v2/agent/${fx.project.id}/job/${fx.jobId}`);
    assert.equal(job.status, 200, job.text);
    assert.equal((await svc.request('GET', '/readyz', { key: null })).status, 200);
  };

  test('a database that refuses connections: every route is a 503 with Retry-After, then recovers', async () => {
    const before = await svc.request('GET', '/v2/admin/projects');
    await proxy.down('refuse');
    await everyRouteUnavailable();
    await recovers();
    const afterwards = await svc.request('GET', '/v2/admin/projects');
    assert.deepEqual(
      afterwards.json.projects?.map((p) => p.name),
      before.json.projects?.map((p) => p.name),
      'a refused request wrote something',
    );
  });

  test('a database that accepts and never answers: 503s in bounded time, under load, then recovers', async () => {
    await proxy.down('hang');
    await everyRouteUnavailable();
    // More requests at once than the pool has connections: none may hold a slot for good.
    const burst = await Promise.all(
      Array.from({ length: 40 }, () =>
        http(svc.url, 'GET', '/v2/admin/projects', {
          key: svc.adminKey,
        }),
      ),
    );
    for (const res of burst) assertError(res, 503, 'unavailable');
    await recovers();
  });

  test('a statement that runs too long is cut at the statement timeout and is a 503', async () => {
    // Another session holds the jobs table: the create's INSERT waits on the lock.
    const blocker = new pg.Client({ connectionString: database.databaseUrl });
    await blocker.connect();
    try {
      const count = async () =>
        Number((await blocker.query<{ n: string }>('SELECT count(*) AS n FROM turns')).rows[0]?.n);
      const turnsBefore = await count();
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE');
      const started = Date.now();
      const res = await svc.request('POST', `/v2/agent/${fx.project.id}/job`, {
        body: { prompt: 'waits on a lock' },
      });
      assertError(res, 503, 'unavailable');
      assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
      await blocker.query('ROLLBACK');
      assert.equal(await count(), turnsBefore, 'the cut request wrote a turn');
    } finally {
      await blocker.end();
    }
  });

  test('migrations are not bound by the statement timeout', async () => {
    // A migration waits for the advisory lock another process holds for longer than the
    // statement timeout of this handle: it must wait, not fail.
    const fresh = await createTestDatabase();
    const holder = new pg.Client({ connectionString: fresh.databaseUrl });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock(7281001)');
      const handle = await openDatabase({
        dataDir: fresh.dataDir,
        databaseUrl: fresh.databaseUrl,
        timeouts: { connectMs: 2_000, statementMs: 200 },
      });
      try {
        const running = migrate(handle);
        // The fact, not a pause: the migration's session has waited on the lock for three
        // statement timeouts and waits still. A migration bound by the timeout fails first.
        const waitedPastTimeout = waitFor('the migration to wait on the lock', async () => {
          const { rows } = await holder.query(
            `SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
              WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objid = 7281001
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND clock_timestamp() - a.query_start > interval '600 milliseconds'`,
          );
          return rows.length > 0 ? true : undefined;
        });
        await Promise.race([
          waitedPastTimeout,
          running.then(() => assert.fail('the migration ran while the lock was held')),
        ]);
        await holder.query('SELECT pg_advisory_unlock(7281001)');
        const applied = await running;
        assert.ok(applied.length > 0, 'no migration was applied');
      } finally {
        await handle.close();
      }
    } finally {
      await holder.end();
      await fresh.drop();
    }
  });
});

describe('PostgreSQL outage: serve, serve --no-worker and worker processes', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let llm: FakeLlm;
  let tmp: string;
  let origin: Origin;
  let env: Record<string, string>;

  before(async () => {
    database = await createTestDatabase();
    proxy = await startTcpProxy(target(database.databaseUrl ?? ''));
    tmp = await makeTempDir('outage');
    origin = await makeOrigin(tmp);
    llm = await startFakeLlm({ apiKey: LLM_KEY, models: ['gpt-test'] });
    env = {
      DATABASE_URL: proxy.url(database.databaseUrl ?? ''),
      ERRAND_ALLOW_LOCAL_REPOS: 'true',
      ERRAND_DB_CONNECT_TIMEOUT_SECONDS: '1',
      ERRAND_PUBLIC_URL: 'http://errand.test',
      OPENAI_API_KEY: LLM_KEY,
      OPENAI_BASE_URL: `${llm.url}/v1`,
      ERRAND_MODEL: 'openai:gpt-test',
    };
  });
  afterEach(async () => {
    await proxy.up();
  });
  after(async () => {
    killStrays();
    await llm?.close();
    await proxy?.close();
    await database?.drop();
    await removeDir(tmp);
  });

  const alive = (child: ChildProcess, name: string) =>
    assert.ok(
      child.exitCode === null && child.signalCode === null,
      `${name} exited during the outage (${child.exitCode ?? child.signalCode})`,
    );

  /** What a queue's failed poll says when the database refuses, and when it never answers. */
  const met = { refuse: /ECONNREFUSED/, hang: /timeout/i } as const;

  /**
   * Takes the database away (refusing, then hanging), then back; returns when it is back. Each
   * way lasts until every process has met it: the API answered 503, and each log given (of a
   * process with workers) told of a queue's poll that failed that way since it went away.
   */
  const outage = async (probe: () => Promise<{ status: number }>, logs: Array<() => string>) => {
    for (const mode of ['refuse', 'hang'] as const) {
      const from = logs.map((log) => log().length);
      await proxy.down(mode);
      assert.equal((await probe()).status, 503, `the API during the ${mode} outage`);
      const metIn = (text: string) =>
        text.split('\n').some((line) => line.includes('queue error') && met[mode].test(line));
      await waitFor(`each process to meet the ${mode} outage`, async () =>
        logs.every((log, i) => metIn(log().slice(from[i]))) ? true : undefined,
      );
    }
    await proxy.up();
  };

  test('each keeps running and answers within 5 s of the return; workers run new turns', async () => {
    const api = await startServe(database.dataDir, ['--no-worker'], env);
    const key = api.adminKey;
    const project = await http(api.url, 'POST', '/v2/admin/projects', {
      key,
      body: { name: 'outage', repository: origin.url },
    });
    assert.equal(project.status, 201, project.text);
    const answers = (url: string) => async () =>
      (await http(url, 'GET', '/v2/admin/projects', { key })).status === 200;
    /** A job created through the API must be run by the one worker that is up. */
    const turnRuns = async (prompt: string) => {
      llm.script(reply('Nothing needs to change.'));
      const created = await http(api.url, 'POST', `/v2/agent/${project.json.id}/job`, {
        key,
        body: { prompt },
      });
      assert.equal(created.status, 201, created.text);
      const path = `/v2/agent/${project.json.id}/job/${created.json.id}`;
      return timeUntil(`the turn of "${prompt}" to run`, async () => {
        const res = await http(api.url, 'GET', path, { key });
        if (res.json.status === 'failed') throw new Error(`the turn failed: ${res.json.error}`);
        return res.json.status === 'completed';
      });
    };

    // serve --no-worker and serve (with its workers), side by side.
    const serve = await startServe(database.dataDir, [], env);
    await outage(() => http(api.url, 'GET', '/v2/admin/projects', { key }), [serve.stderr]);
    const apiMs = await timeUntil('serve --no-worker to answer', answers(api.url));
    const serveMs = await timeUntil('serve to answer', answers(serve.url));
    assert.ok(apiMs < RECOVERY_MS, `serve --no-worker answered ${apiMs} ms after the return`);
    assert.ok(serveMs < RECOVERY_MS, `serve answered ${serveMs} ms after the return`);
    alive(api.child, 'serve --no-worker');
    alive(serve.child, 'serve');
    await turnRuns('run by serve after the outage');
    await serve.stop();

    // A worker process alone: the turn it runs after the outage is its own.
    const worker = runErrand(['worker'], { ...env, ERRAND_LOG_LEVEL: 'info' });
    let workerLog = '';
    worker.stderr?.on('data', (chunk: Buffer) => {
      workerLog += chunk.toString();
    });
    await waitFor('the worker to start', async () =>
      workerLog.includes('errand started') ? true : undefined,
    );
    await outage(() => http(api.url, 'GET', '/v2/admin/projects', { key }), [() => workerLog]);
    alive(worker, 'worker');
    const workerMs = await turnRuns('run by the worker after the outage');
    assert.ok(
      workerMs < RECOVERY_MS + 3_000,
      `the worker ran a new turn ${workerMs} ms after the return`,
    );
    alive(worker, 'worker');
    assert.doesNotMatch(workerLog, /uncaught|unhandled/i);
    const stopped = exited(worker);
    worker.kill('SIGTERM');
    assert.equal(await stopped, 0);
    await api.stop();
  });
});
