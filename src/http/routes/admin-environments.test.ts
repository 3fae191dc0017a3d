// The admin environment routes under /v2/admin/projects/{id}/environments: list, delete all,
// delete one key, rebuild. The rows are written here as a worker writes them (the runtime that
// builds and restores snapshots is tested in src/environments/); each refusal is checked to
// change nothing, the build queue included.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  assertError,
  authCases,
  createRouteFixture,
  type RouteFixture,
  type RouteSpec,
  randomProjectId,
  takeEnvironmentBuildRequests,
  unchanged,
} from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import type { EnvironmentRecord } from '../../records/environment.ts';

describe('admin environment routes', () => {
  let svc: TestService;
  let fx: RouteFixture;
  const fixture = () => fx;

  const path = (projectId: string, rest = '') =>
    `/v2/admin/projects/${projectId}/environments${rest}`;
  const list = async (projectId: string): Promise<EnvironmentRecord[]> => {
    const res = await svc.request('GET', path(projectId));
    assert.equal(res.status, 200, res.text);
    return (JSON.parse(res.text) as { environments: EnvironmentRecord[] }).environments;
  };
  /** A row as a worker writes it once a snapshot is kept. */
  const keep = (
    projectId: string,
    key: string,
    worker: string,
    lastUsed: string,
    sizeBytes: string | number = 1234,
  ) =>
    svc.service.ctx.db
      .insertInto('environments')
      .values({
        project_id: projectId,
        key,
        worker,
        size_bytes: sizeBytes,
        files: 30_000,
        build_ms: 61_500,
        base_commit: 'a'.repeat(40),
        created_at: new Date('2026-11-01T10:00:00.000Z'),
        last_used_at: new Date(lastUsed),
      })
      .execute();
  const withSetup = async (name: string) => {
    const res = await svc.request('POST', '/v2/admin/projects', {
      body: { name, repository: svc.database.dataDir, setupCommand: 'npm ci' },
    });
    assert.equal(res.status, 201, res.text);
    return res.json.id ?? '';
  };

  before(async () => {
    svc = await startTestService({ worker: false });
    fx = await createRouteFixture(svc);
    await keep(fx.project.id, 'fixture-key', 'worker-a', '2026-11-02T00:00:00.000Z');
  });
  after(async () => {
    await svc?.close();
  });

  const specs: Record<string, RouteSpec> = {
    list: { method: 'GET', scope: 'admin', path: ({ projectId }) => path(projectId) },
    deleteAll: { method: 'DELETE', scope: 'admin', path: ({ projectId }) => path(projectId) },
    deleteKey: {
      method: 'DELETE',
      scope: 'admin',
      path: ({ projectId }) => path(projectId, '/fixture-key'),
    },
    rebuild: {
      method: 'POST',
      scope: 'admin',
      path: ({ projectId }) => path(projectId, '/rebuild'),
    },
  };

  describe('happy path', () => {
    test('GET: every worker’s snapshots, the one used last first, sizes as numbers', async () => {
      const project = await withSetup('listed');
      await keep(project, 'k1', 'worker-a', '2026-11-03T00:00:00.000Z');
      await keep(project, 'k1', 'worker-b', '2026-11-05T00:00:00.000Z');
      // Past 2^32, as a real node_modules of a few GB is: still a number, to the byte.
      await keep(project, 'k2', 'worker-a', '2026-11-04T00:00:00.000Z', '6442450945');
      const environments = await list(project);
      assert.deepEqual(
        environments.map((e) => `${e.key}@${e.worker}`),
        ['k1@worker-b', 'k2@worker-a', 'k1@worker-a'],
      );
      assert.deepEqual(environments[1], {
        key: 'k2',
        worker: 'worker-a',
        sizeBytes: 6_442_450_945,
        files: 30_000,
        buildMs: 61_500,
        baseCommit: 'a'.repeat(40),
        createdAt: '2026-11-01T10:00:00.000Z',
        lastUsedAt: '2026-11-04T00:00:00.000Z',
      });
      // Another project's are not listed; a project without any has an empty list.
      assert.deepEqual(
        (await list(fx.project.id)).map((e) => e.key),
        ['fixture-key'],
      );
      assert.deepEqual(await list(fx.otherProject.id), []);
    });

    test('DELETE …/{key}: that key on every worker, the others kept; again is 404', async () => {
      const project = await withSetup('one key');
      await keep(project, 'old', 'worker-a', '2026-11-03T00:00:00.000Z');
      await keep(project, 'old', 'worker-b', '2026-11-03T00:00:00.000Z');
      await keep(project, 'new', 'worker-a', '2026-11-04T00:00:00.000Z');
      const res = await svc.request('DELETE', path(project, '/old'));
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(JSON.parse(res.text), { deleted: 2 });
      assert.deepEqual(
        (await list(project)).map((e) => `${e.key}@${e.worker}`),
        ['new@worker-a'],
      );
      const again = await unchanged(svc, () => svc.request('DELETE', path(project, '/old')));
      assertError(again, 404, 'not_found');
      assert.match(again.json.error ?? '', /has no environment old/);
    });

    test('DELETE: every snapshot of the project, no other project’s; none left is 200 and 0', async () => {
      const project = await withSetup('all keys');
      await keep(project, 'a', 'worker-a', '2026-11-03T00:00:00.000Z');
      await keep(project, 'b', 'worker-b', '2026-11-03T00:00:00.000Z');
      const res = await svc.request('DELETE', path(project));
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(JSON.parse(res.text), { deleted: 2 });
      assert.deepEqual(await list(project), []);
      assert.deepEqual(
        (await list(fx.project.id)).map((e) => e.key),
        ['fixture-key'],
      );
      const none = await svc.request('DELETE', path(project));
      assert.equal(none.status, 200, none.text);
      assert.deepEqual(JSON.parse(none.text), { deleted: 0 });
    });

    test('POST …/rebuild: 202, and a build of the project is queued with reason rebuild', async () => {
      const project = await withSetup('rebuilt');
      // The create asked for the first build; the rebuild for another.
      assert.deepEqual(await takeEnvironmentBuildRequests(svc, project), ['created']);
      const res = await svc.request('POST', path(project, '/rebuild'));
      assert.equal(res.status, 202, res.text);
      assert.deepEqual(JSON.parse(res.text), { queued: true });
      assert.deepEqual(await takeEnvironmentBuildRequests(svc, project), ['rebuild']);
    });
  });

  describe('errors', () => {
    test('404 on every route for an unknown or malformed project id', async () => {
      for (const projectId of [randomProjectId(), 'not-a-project', `${fx.project.id}x`]) {
        for (const [method, rest] of [
          ['GET', ''],
          ['DELETE', ''],
          ['DELETE', '/fixture-key'],
          ['POST', '/rebuild'],
        ] as const) {
          const res = await unchanged(svc, () => svc.request(method, path(projectId, rest)));
          assertError(res, 404, 'not_found');
          assert.match(res.json.error ?? '', /project .* not found/);
        }
      }
    });

    test('DELETE …/{key}: 404 for a key the project does not have, or another project’s', async () => {
      await keep(fx.otherProject.id, 'only-there', 'worker-a', '2026-11-03T00:00:00.000Z');
      for (const key of ['no-such-key', 'only-there']) {
        const res = await unchanged(svc, () =>
          svc.request('DELETE', path(fx.project.id, `/${key}`)),
        );
        assertError(res, 404, 'not_found');
        assert.match(res.json.error ?? '', new RegExp(`has no environment ${key}`));
      }
    });

    test('POST …/rebuild: 400 for a project without a setup command, nothing queued', async () => {
      const res = await unchanged(svc, () => svc.request('POST', path(fx.project.id, '/rebuild')));
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', /has no setup command/);
    });
  });

  describe('security', () => {
    for (const [name, spec] of Object.entries(specs)) {
      describe(name, () => authCases(spec, fixture));
    }

    test('the fixture’s snapshot survived every refused request', async () => {
      assert.deepEqual(
        (await list(fx.project.id)).map((e) => e.key),
        ['fixture-key'],
      );
    });
  });
});
