// The test of Idempotency-Key: parallel duplicates of a create, and of a follow-up,
// split over two real `errand serve --no-worker` processes on one PostgreSQL database, make
// exactly one job (one turn); every answer is the first response or a 409 in flight, and a
// later retry on either process gets the first response again.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { killStrays, type ServeProcess, startServe } from '../../test/support/process.ts';
import { assertError } from '../../test/support/route-cases.ts';
import { type HttpResult, http } from '../../test/support/service.ts';

const DUPLICATES = 20;
const ROUNDS = 5;

describe('Idempotency-Key across two API processes on one database', () => {
  let database: TestDatabase;
  let a: ServeProcess;
  let b: ServeProcess;
  let client: pg.Client;

  before(async () => {
    database = await createTestDatabase();
    const env = {
      DATABASE_URL: database.databaseUrl ?? '',
      ERRAND_ALLOW_LOCAL_REPOS: 'true',
      // The default model must resolve for jobs to be accepted; no turn runs here.
      ANTHROPIC_API_KEY: 'sk-ant-test-0000000000000000',
    };
    // One after the other: the first mints the admin key, which both then read.
    a = await startServe(database.dataDir, ['--no-worker'], env);
    b = await startServe(database.dataDir, ['--no-worker'], env);
    client = new pg.Client({ connectionString: database.databaseUrl });
    await client.connect();
  });
  after(async () => {
    await client?.end();
    await Promise.all([a?.stop(), b?.stop()]);
    killStrays();
    await database?.drop();
  });

  const count = async (query: string, value: string) => {
    const { rows } = await client.query<{ n: number }>(query, [value]);
    return rows[0]?.n;
  };

  const createProject = async (name: string) => {
    const res = await http(a.url, 'POST', '/v2/admin/projects', {
      key: a.adminKey,
      body: { name, repository: database.dataDir },
    });
    assert.equal(res.status, 201, res.text);
    return res.json.id ?? '';
  };

  /** Sends the same keyed request DUPLICATES times at once, alternating the processes. */
  const burst = (path: string, key: string, prompt: string) =>
    Promise.all(
      Array.from({ length: DUPLICATES }, (_, i) =>
        http((i % 2 === 0 ? a : b).url, 'POST', path, {
          key: a.adminKey,
          body: { prompt },
          headers: { 'idempotency-key': key },
        }),
      ),
    );

  /** Every answer is the first response (one of them first-hand) or a 409 in flight. */
  const oneOutcome = (results: HttpResult[], status: number): HttpResult => {
    const answered = results.filter((r) => r.status === status);
    const fresh = answered.filter((r) => r.headers.get('idempotent-replayed') === null);
    assert.equal(fresh.length, 1, `${fresh.length} requests ran: ${answered.map((r) => r.text)}`);
    const first = fresh[0] as HttpResult;
    for (const res of results) {
      if (res.status === status) assert.equal(res.text, first.text);
      else assertError(res, 409, 'idempotency_key_in_flight');
    }
    return first;
  };

  /** A retry on each process, after the burst: the first response again. */
  const replayedOnBoth = async (path: string, key: string, prompt: string, first: HttpResult) => {
    for (const server of [a, b]) {
      const retry = await http(server.url, 'POST', path, {
        key: a.adminKey,
        body: { prompt },
        headers: { 'idempotency-key': key },
      });
      assert.equal(retry.status, first.status, retry.text);
      assert.equal(retry.text, first.text);
      assert.equal(retry.headers.get('idempotent-replayed'), 'true');
    }
  };

  test(`${DUPLICATES} parallel creates with one key, ${ROUNDS} times: exactly one job each`, async (t) => {
    let inFlight = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const projectId = await createProject(`burst ${round}`);
      const path = `/v2/agent/${projectId}/job`;
      const key = `create-burst-${round}`;
      const results = await burst(path, key, 'create me once');
      const first = oneOutcome(results, 201);
      inFlight += results.filter((r) => r.status === 409).length;
      assert.equal(
        await count('SELECT count(*)::int AS n FROM jobs WHERE project_id = $1', projectId),
        1,
      );
      assert.equal(
        await count(
          'SELECT count(*)::int AS n FROM turns t JOIN jobs j ON j.id = t.job_id WHERE j.project_id = $1',
          projectId,
        ),
        1,
      );
      assert.equal(
        await count(
          'SELECT count(*)::int AS n FROM idempotency_keys WHERE project_id = $1',
          projectId,
        ),
        1,
      );
      await replayedOnBoth(path, key, 'create me once', first);
    }
    t.diagnostic(`${inFlight} of ${DUPLICATES * ROUNDS} duplicates were answered 409 in flight`);
  });

  test(`${DUPLICATES} parallel follow-ups with one key: exactly one turn`, async () => {
    const projectId = await createProject('follow-up burst');
    const created = await http(b.url, 'POST', `/v2/agent/${projectId}/job`, {
      key: a.adminKey,
      body: { prompt: 'first turn' },
    });
    assert.equal(created.status, 201, created.text);
    const jobId = created.json.id ?? '';
    const path = `/v2/agent/${projectId}/job/${jobId}/message`;
    const results = await burst(path, 'message-burst', 'the follow-up');
    const first = oneOutcome(results, 200);
    assert.equal(first.json.turns, 2);
    assert.equal(await count('SELECT count(*)::int AS n FROM turns WHERE job_id = $1', jobId), 2);
    await replayedOnBoth(path, 'message-burst', 'the follow-up', first);
  });
});
