// GET /v2/admin/projects/{id}/forge-issues/{number} against the real service and the fake GitHub
// on loopback: an issue's text and a pull request's, the issue the forge has not (404), a
// project without a forge (400), the forge failing (502, without the token); who may ask.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type FakeGitHub, startFakeGitHub } from '../../../test/support/fake-github.ts';
import {
  assertError,
  authCases,
  createRouteFixture,
  type RouteFixture,
  type RouteSpec,
  randomProjectId,
} from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import { createUser } from '../../../test/support/users.ts';
import { createToken } from '../../users/tokens.ts';

const TOKEN = 'ghp_forgeissues0123456789abcdefghij';

const spec: RouteSpec = {
  method: 'GET',
  scope: 'admin',
  path: ({ projectId }) => `/v2/admin/projects/${projectId}/forge-issues/1`,
};

describe('GET /v2/admin/projects/{id}/forge-issues/{number}', () => {
  let svc: TestService;
  let gh: FakeGitHub;
  let fx: RouteFixture;
  let projectId: string;
  const fixture = () => fx;
  const read = (number: string | number, key?: string, project = projectId) =>
    svc.request('GET', `/v2/admin/projects/${project}/forge-issues/${number}`, {
      ...(key === undefined ? {} : { key }),
    });

  before(async () => {
    gh = await startFakeGitHub({ repos: ['acme/app'], token: TOKEN });
    // Stored forge credentials are encrypted with it.
    svc = await startTestService({
      env: { ERRAND_SECRET_KEY: 'test-secret-key-for-forge-issues' },
    });
    fx = await createRouteFixture(svc);
    const created = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name: 'on github',
        repository: `${gh.url}/acme/app.git`,
        forge: 'github',
        forgeUrl: gh.apiUrl,
        forgeToken: TOKEN,
      },
    });
    assert.equal(created.status, 201, created.text);
    projectId = created.json.id as string;
  });
  after(async () => {
    gh?.assertNoUnexpected();
    await svc?.close();
    await gh?.close();
  });

  describe('happy path', () => {
    test("an issue's title, body, state and page, as the forge tells them now", async () => {
      const opened = gh.openIssue('acme/app', {
        title: 'Totals are off by one',
        body: 'The invoice total skips the last line.\n\nSeen on #3.',
        author: 'customer',
      });
      const res = await read(opened.number);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json, {
        forge: 'github',
        number: opened.number,
        title: 'Totals are off by one',
        body: 'The invoice total skips the last line.\n\nSeen on #3.',
        state: 'open',
        url: opened.htmlUrl,
        pullRequest: false,
      });
      const asked = gh.requests.filter((r) => r.operation === 'issues/get');
      assert.equal(asked.at(-1)?.headers.authorization, `token ${TOKEN}`);
    });
  });

  describe('errors', () => {
    test('404 with a JSON error when the forge has no such issue', async () => {
      const res = await read(9999);
      assertError(res, 404, 'not_found');
      assert.match(res.json.error ?? '', /GitHub has no issue #9999/);
    });

    test('400 for a project on a plain git remote: it has no forge', async () => {
      const res = await read(1, undefined, fx.project.id);
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', /has no forge/);
    });

    test('400 for a number that is not a whole number from 1; 404 for an unknown project', async () => {
      for (const bad of ['0', '-1', 'abc', '1.5', '2147483648']) {
        const res = await read(bad);
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', /"number" must be a whole number/);
      }
      assertError(await read(1, undefined, randomProjectId()), 404, 'not_found');
    });

    test('503 when the forge fails, 502 forge_failed when it refuses, in its words, without the token', async () => {
      gh.failNext(503);
      const down = await read(1);
      assertError(down, 503, 'unavailable');
      assert.equal(down.headers.get('retry-after'), '5');
      assert.match(down.json.error ?? '', /GitHub failed to read issue #1 \(503\)/);
      gh.failNext(401);
      const refused = await read(1);
      assertError(refused, 502, 'forge_failed');
      assert.match(refused.json.error ?? '', /GitHub refused the credentials \(401\)/);
      for (const res of [down, refused]) assert.ok(!res.text.includes(TOKEN));
    });
  });

  describe('security', () => {
    describe('common cases', () => authCases(spec, fixture));

    test("the project's maintainer may read; a member, a maintainer of another project, a project key may not", async () => {
      const db = svc.service.ctx.db;
      const tokenOf = async (roles: Record<string, 'maintainer' | 'member'>) => {
        const userId = await createUser(db, { roles });
        const opts = { name: 'issues', expiresInDays: 1, projectIds: null, readOnly: false };
        return (await createToken(db, userId, opts)).token;
      };
      const opened = gh.openIssue('acme/app', { title: 'Readable', author: 'customer' });
      const maintainer = await read(opened.number, await tokenOf({ [projectId]: 'maintainer' }));
      assert.equal(maintainer.status, 200, maintainer.text);
      assert.match(maintainer.text, /"title":"Readable"/);
      const asked = gh.requests.length;
      assertError(
        await read(opened.number, await tokenOf({ [projectId]: 'member' })),
        403,
        'maintainer_required',
      );
      assertError(
        await read(opened.number, await tokenOf({ [fx.project.id]: 'maintainer' })),
        403,
        'maintainer_required',
      );
      const { key } = await svc.createProjectKey(projectId);
      assertError(await read(opened.number, key), 403, 'forbidden');
      assert.equal(
        gh.requests.length,
        asked,
        'a refused caller makes Errand ask the forge nothing',
      );
    });
  });
});
