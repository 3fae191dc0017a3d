// The admin key routes: POST /v2/admin/keys, GET /v2/admin/keys and
// POST /v2/admin/keys/{id}/revoke. A key is shown once and never listed; a revoked key stops
// working at once. Validation of the create body, and the common auth cases.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  assertError,
  authCases,
  countRows,
  createRouteFixture,
  isoNear,
  jsonBodyCases,
  KEY_ID,
  type RouteFixture,
  type RouteSpec,
  randomProjectId,
  unchanged,
} from '../../../test/support/route-cases.ts';
import { startTestService, type TestService, waitFor } from '../../../test/support/service.ts';
import { hashKey, isWellFormedKey } from '../../keys/format.ts';

const createSpec: RouteSpec = {
  method: 'POST',
  scope: 'admin',
  path: () => '/v2/admin/keys',
  body: (fx) => ({ projectId: fx.project.id, name: 'from the common cases' }),
};
const listSpec: RouteSpec = { method: 'GET', scope: 'admin', path: () => '/v2/admin/keys' };
const revokeSpec: RouteSpec = {
  method: 'POST',
  scope: 'admin',
  path: ({ keyId }) => `/v2/admin/keys/${keyId}/revoke`,
};

const KEY_FIELDS = [
  'admin',
  'createdAt',
  'id',
  'lastUsedAt',
  'name',
  'projectId',
  'revokedAt',
  'start',
];

describe('admin key routes', () => {
  let svc: TestService;
  let fx: RouteFixture;
  const fixture = () => fx;
  /** Every key secret seen in this file, to check that no listing ever shows one. */
  const secrets: string[] = [];

  before(async () => {
    svc = await startTestService({ worker: false });
    fx = await createRouteFixture(svc);
    secrets.push(svc.adminKey, fx.projectKey, fx.otherProjectKey);
  });
  after(async () => {
    await svc?.close();
  });

  const mint = async (body: Record<string, unknown>) => {
    const res = await svc.request('POST', '/v2/admin/keys', { body });
    assert.equal(res.status, 201, res.text);
    const key = res.json.key ?? '';
    secrets.push(key);
    return { res, key, id: res.json.id ?? '' };
  };
  const revoke = (id: string, key?: string) =>
    svc.request('POST', `/v2/admin/keys/${id}/revoke`, key ? { key } : {});
  const listJobs = (projectId: string, key: string) =>
    svc.request('GET', `/v2/agent/${projectId}/jobs`, { key });

  describe('happy path', () => {
    test('POST a project key: 201, shown once, valid for its project only', async () => {
      const { res, key } = await mint({ projectId: fx.project.id, name: 'ci' });
      assert.deepEqual(Object.keys(res.json).sort(), [...KEY_FIELDS, 'key'].sort());
      assert.match(res.json.id ?? '', KEY_ID);
      assert.match(key, /^errand_[0-9A-Za-z]{38}$/);
      assert.ok(isWellFormedKey(key));
      assert.equal(res.json.start, key.slice(0, 11));
      assert.equal(res.json.projectId, fx.project.id);
      assert.equal(res.json.admin, false);
      assert.equal(res.json.name, 'ci');
      isoNear(res.json.createdAt);
      assert.equal(res.json.lastUsedAt, null);
      assert.equal(res.json.revokedAt, null);

      // Only the hash is stored.
      const row = await svc.service.ctx.db
        .selectFrom('api_keys')
        .selectAll()
        .where('id', '=', res.json.id ?? '')
        .executeTakeFirstOrThrow();
      assert.equal(row.hash, hashKey(key));
      assert.ok(!Object.values(row).some((v) => typeof v === 'string' && v.includes(key)));

      assert.equal((await listJobs(fx.project.id, key)).status, 200);
      assertError(await listJobs(fx.otherProject.id, key), 403, 'forbidden');
      assertError(await svc.request('GET', '/v2/admin/keys', { key }), 403, 'forbidden');
    });

    test('POST an admin key: valid on admin routes and every project', async () => {
      const { res, key } = await mint({ admin: true, name: 'ops' });
      assert.equal(res.json.admin, true);
      assert.equal(res.json.projectId, null);
      assert.equal((await svc.request('GET', '/v2/admin/keys', { key })).status, 200);
      assert.equal((await listJobs(fx.project.id, key)).status, 200);
      assert.equal((await listJobs(fx.otherProject.id, key)).status, 200);
    });

    test('the name is optional, up to 200 characters; every key is new', async () => {
      const unnamed = await mint({ admin: true });
      assert.equal(unnamed.res.json.name, null);
      const longest = await mint({ projectId: fx.project.id, name: 'n'.repeat(200) });
      assert.equal(longest.res.json.name, 'n'.repeat(200));
      const again = await mint({ admin: true });
      assert.notEqual(again.key, unnamed.key);
      assert.notEqual(again.id, unnamed.id);
    });

    test('GET lists every key, oldest first, never a key or its hash', async () => {
      const a = await mint({ projectId: fx.otherProject.id, name: 'listed a' });
      const b = await mint({ admin: true, name: 'listed b' });
      const res = await svc.request('GET', '/v2/admin/keys');
      assert.equal(res.status, 200);
      assert.deepEqual(Object.keys(res.json), ['keys']);
      const keys = res.json.keys ?? [];
      assert.equal(keys.length, await countRows(svc, 'api_keys'));
      for (const record of keys) assert.deepEqual(Object.keys(record).sort(), KEY_FIELDS);
      const ids = keys.map((k) => k.id);
      assert.ok(ids.indexOf(a.id) < ids.indexOf(b.id));
      const { key: _shownOnce, ...recordA } = a.res.json;
      assert.deepEqual(
        keys.find((k) => k.id === a.id),
        recordA,
      );
      for (const secret of secrets) {
        assert.ok(!res.text.includes(secret), 'a key secret is listed');
        assert.ok(!res.text.includes(hashKey(secret)), 'a key hash is listed');
        assert.ok(!res.text.includes(secret.slice(7)), 'a key body is listed');
      }
    });

    test('lastUsedAt is recorded when a key is used', async () => {
      const { key, id } = await mint({ projectId: fx.project.id, name: 'used' });
      assert.equal((await listJobs(fx.project.id, key)).status, 200);
      const used = await waitFor('lastUsedAt to be set', async () => {
        const res = await svc.request('GET', '/v2/admin/keys');
        return res.json.keys?.find((k) => k.id === id && k.lastUsedAt !== null);
      });
      isoNear(used.lastUsedAt);
    });

    test('revoke: 200, the key fails from the next request, other keys keep working', async () => {
      const { key, id } = await mint({ projectId: fx.project.id, name: 'to revoke' });
      assert.equal((await listJobs(fx.project.id, key)).status, 200);
      const res = await revoke(id);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(Object.keys(res.json).sort(), KEY_FIELDS);
      assert.equal(res.json.id, id);
      isoNear(res.json.revokedAt);
      const refused = await listJobs(fx.project.id, key);
      assertError(refused, 401, 'unauthorized');
      assert.match(refused.json.error ?? '', /revoked/);
      assert.equal((await listJobs(fx.project.id, fx.projectKey)).status, 200);
      // Idempotent: the first revocation time stays.
      const again = await revoke(id);
      assert.equal(again.status, 200);
      assert.equal(again.json.revokedAt, res.json.revokedAt);
      const listed = await svc.request('GET', '/v2/admin/keys');
      assert.equal(listed.json.keys?.find((k) => k.id === id)?.revokedAt, res.json.revokedAt);
    });

    test('a revoked admin key loses the admin routes at once', async () => {
      const { key, id } = await mint({ admin: true, name: 'admin to revoke' });
      assert.equal((await svc.request('GET', '/v2/admin/projects', { key })).status, 200);
      assert.equal((await revoke(id)).status, 200);
      assertError(await svc.request('GET', '/v2/admin/projects', { key }), 401, 'unauthorized');
      // It cannot undo its own revocation or mint a new key.
      const mintAttempt = await unchanged(svc, () =>
        svc.request('POST', '/v2/admin/keys', { key, body: { admin: true } }),
      );
      assertError(mintAttempt, 401, 'unauthorized');
    });
  });

  describe('errors', () => {
    jsonBodyCases(createSpec, fixture);

    test('400 unless exactly one of projectId or admin: true is given', async () => {
      for (const body of [
        {},
        { name: 'nothing else' },
        { admin: false },
        { admin: true, projectId: 'x' },
        { admin: 'yes' },
        { admin: 1 },
        { admin: null },
        { projectId: 42 },
        { projectId: null },
        { projectId: ['prj'] },
      ]) {
        const res = await unchanged(svc, () => svc.request('POST', '/v2/admin/keys', { body }));
        assertError(res, 400, 'bad_request');
      }
      const both = await unchanged(svc, () =>
        svc.request('POST', '/v2/admin/keys', {
          body: { admin: true, projectId: fx.project.id },
        }),
      );
      assertError(both, 400, 'bad_request');
    });

    test('400 for a project that does not exist', async () => {
      for (const projectId of [randomProjectId(), 'not-a-project', '', fx.jobId]) {
        const res = await unchanged(svc, () =>
          svc.request('POST', '/v2/admin/keys', { body: { projectId } }),
        );
        assertError(res, 400, 'bad_request');
      }
    });

    test('400 for a name that is too long or not a string', async () => {
      for (const name of ['n'.repeat(201), 42, ['a'], { a: 1 }]) {
        const res = await unchanged(svc, () =>
          svc.request('POST', '/v2/admin/keys', { body: { admin: true, name } }),
        );
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', /name/);
      }
    });

    test('revoke: 404 for an unknown or malformed key id', async () => {
      for (const id of [
        `key_${'A'.repeat(20)}`,
        'not-a-key',
        `${fx.spareKeyId}x`,
        fx.project.id,
        fx.jobId,
      ]) {
        const res = await unchanged(svc, () => revoke(id));
        assertError(res, 404, 'not_found');
      }
    });
  });

  describe('security', () => {
    describe('POST /v2/admin/keys', () => authCases(createSpec, fixture));
    describe('GET /v2/admin/keys', () => authCases(listSpec, fixture));
    describe('POST /v2/admin/keys/{id}/revoke', () => authCases(revokeSpec, fixture));

    test('the spare key survived every refused revoke', async () => {
      const res = await svc.request('GET', '/v2/admin/keys');
      assert.equal(res.json.keys?.find((k) => k.id === fx.spareKeyId)?.revokedAt, null);
    });
  });
});
