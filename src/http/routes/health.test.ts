// GET /healthz (liveness) and GET /readyz (readiness): no authentication, for load balancers.
// Also what the API answers for paths and methods it does not have: a JSON 404, never an HTML
// page or a 5xx. A database that is down is tested in test/lifecycle/outage.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { assertError } from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';

describe('GET /healthz', () => {
  let svc: TestService;

  before(async () => {
    svc = await startTestService({ worker: false });
  });
  after(async () => {
    await svc?.close();
  });

  describe('happy path', () => {
    test('200 {"ok": true} without a key', async () => {
      const res = await svc.request('GET', '/healthz', { key: null });
      assert.equal(res.status, 200);
      assert.deepEqual(JSON.parse(res.text), { ok: true });
      assert.match(res.headers.get('x-request-id') ?? '', /^req_[0-9A-Za-z]{16}$/);
    });

    test('/readyz: 200 {"ok": true} when the database answers and is migrated', async () => {
      const res = await svc.request('GET', '/readyz', { key: null });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(JSON.parse(res.text), { ok: true });
    });
  });

  describe('errors', () => {
    test('/readyz: 503 naming the migration the database lacks, 200 once it is back', async () => {
      const { db } = svc.service.ctx;
      const last = await sql<{ id: number; name: string }>`
          SELECT id, name FROM errand_migrations ORDER BY id DESC LIMIT 1`.execute(db);
      const row = last.rows[0];
      assert.ok(row);
      await sql`DELETE FROM errand_migrations WHERE id = ${row.id}`.execute(db);
      try {
        const res = await svc.request('GET', '/readyz', { key: null });
        assertError(res, 503, 'unavailable');
        assert.equal(res.headers.get('retry-after'), '5');
        assert.match(res.json.error ?? '', new RegExp(`lacks migrations ${row.name}`));
        assert.match(res.json.error ?? '', /errand migrate/);
        // Liveness does not depend on the database.
        assert.equal((await svc.request('GET', '/healthz', { key: null })).status, 200);
      } finally {
        await sql`INSERT INTO errand_migrations (id, name) VALUES (${row.id}, ${row.name})`.execute(
          db,
        );
      }
      assert.equal((await svc.request('GET', '/readyz', { key: null })).status, 200);
    });

    test('a JSON 404 for unknown paths and methods', async () => {
      const project = await svc.createProject();
      for (const [method, path] of [
        // Issue 10 changed GET /: it is the dashboard's sign-in page now (test/dashboard/).
        ['GET', '/nothing-here'],
        ['GET', '/v1/agent/x/job'],
        ['GET', '/v2/agent'],
        ['GET', `/v2/agent/${project.id}/job`],
        ['DELETE', `/v2/agent/${project.id}/job/job_AAAAAAAAAAAAAAAAAAAA`],
        ['PUT', '/v2/admin/projects'],
        ['POST', '/healthz'],
        // No ERRAND_METRICS_TOKEN: the API's port serves no metrics.
        ['GET', '/metrics'],
      ] as const) {
        const res = await svc.request(method, path);
        assertError(res, 404, 'not_found');
      }
    });
  });

  describe('security', () => {
    test('a bad key does not matter to /healthz and reveals nothing', async () => {
      const res = await svc.request('GET', '/healthz', { key: 'errand_nope' });
      assert.equal(res.status, 200);
      assert.deepEqual(JSON.parse(res.text), { ok: true });
    });
  });
});
