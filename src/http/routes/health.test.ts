// GET /healthz: no authentication, for load balancers. Also what the API answers for paths and
// methods it does not have: a JSON 404, never an HTML page or a 5xx.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { backends } from '../../../test/support/databases.ts';
import { assertError, notePostgresSkip } from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';

for (const backend of backends) {
  describe(`GET /healthz on ${backend}`, () => {
    let svc: TestService;

    before(async () => {
      svc = await startTestService({ backend, worker: false });
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
    });

    describe('errors', () => {
      test('a JSON 404 for unknown paths and methods', async () => {
        const project = await svc.createProject();
        for (const [method, path] of [
          ['GET', '/'],
          ['GET', '/v1/agent/x/job'],
          ['GET', '/v2/agent'],
          ['GET', `/v2/agent/${project.id}/job`],
          ['DELETE', `/v2/agent/${project.id}/job/job_AAAAAAAAAAAAAAAAAAAA`],
          ['PUT', '/v2/admin/projects'],
          ['POST', '/healthz'],
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
}

notePostgresSkip();
