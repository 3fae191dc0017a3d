// What the route schemas refuse beyond the shared route cases: a body field Errand does not know
// (a client must never believe an option was honoured when it was not), messages that name the
// field, and a database failure behind a body check, which is the server's fault, not the
// caller's.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import {
  assertError,
  createRouteFixture,
  type RouteFixture,
  unchanged,
} from '../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../test/support/service.ts';

describe('route schemas', () => {
  let svc: TestService;
  let fx: RouteFixture;

  before(async () => {
    svc = await startTestService({ worker: false });
    fx = await createRouteFixture(svc);
  });
  after(async () => {
    await svc?.close();
  });

  test('a body field Errand does not know is a 400 bad_request naming it, on every body route', async () => {
    const routes: [string, string, string, Record<string, unknown>][] = [
      ['POST', `/v2/agent/${fx.project.id}/job`, fx.projectKey, { prompt: 'p' }],
      [
        'POST',
        `/v2/agent/${fx.project.id}/job/${fx.jobId}/message`,
        fx.projectKey,
        { prompt: 'p' },
      ],
      ['POST', '/v2/admin/keys', svc.adminKey, { admin: true }],
      [
        'POST',
        '/v2/admin/projects',
        svc.adminKey,
        { name: 'n', repository: 'https://github.com/acme/app.git' },
      ],
      ['PATCH', `/v2/admin/projects/${fx.project.id}`, svc.adminKey, { name: 'n' }],
    ];
    for (const [method, path, key, valid] of routes) {
      // A create takes `model` and `baseRef`; a follow-up and the admin routes take neither.
      const isCreate = path.endsWith('/job');
      const extras: Record<string, unknown>[] = [{ Prompt: 'x' }];
      extras.push(isCreate ? { branch: 'errand/mine' } : { baseRef: 'main' });
      if (path.endsWith('/message')) extras.push({ model: 'openai:gpt-5' });
      for (const extra of extras) {
        const res = await unchanged(svc, () =>
          svc.request(method, path, { key, body: { ...valid, ...extra } }),
        );
        assertError(res, 400, 'bad_request');
        const name = Object.keys(extra)[0] ?? '';
        assert.match(res.json.error ?? '', new RegExp(`unknown field "${name}"`), path);
      }
    }
  });

  test('an unknown field inside a nested object is named by its path', async () => {
    const res = await unchanged(svc, () =>
      svc.request('POST', '/v2/admin/projects', {
        key: svc.adminKey,
        body: {
          name: 'app',
          repository: 'https://github.com/acme/app.git',
          githubApp: {
            appId: '1',
            installationId: '2',
            privateKey: '-----BEGIN PRIVATE KEY-----',
            clientSecret: 'x',
          },
        },
      }),
    );
    assertError(res, 400, 'bad_request');
    assert.match(res.json.error ?? '', /unknown field "githubApp\.clientSecret"/);
  });

  test('a prompt problem stays invalid_prompt beside an unknown field; the prompt comes first', async () => {
    const res = await unchanged(svc, () =>
      svc.request('POST', `/v2/agent/${fx.project.id}/job`, {
        key: fx.projectKey,
        body: { prompt: 42, colour: 'blue' },
      }),
    );
    assertError(res, 400, 'invalid_prompt');
    assert.match(res.json.error ?? '', /"prompt" must be a string/);
  });

  test('query and body refusals name the field', async () => {
    const cases: [string, string, unknown, RegExp][] = [
      ['GET', `/v2/agent/${fx.project.id}/jobs?limit=abc`, undefined, /"limit"/],
      ['GET', `/v2/agent/${fx.project.id}/job/${fx.jobId}/events?after=x`, undefined, /"after"/],
      ['POST', '/v2/admin/keys', { admin: 'yes' }, /"admin" must be a boolean/],
      ['POST', '/v2/admin/keys', { projectId: 7 }, /"projectId" must be a string/],
      ['POST', '/v2/admin/keys', {}, /exactly one of "projectId" or "admin"/],
      [
        'PATCH',
        `/v2/admin/projects/${fx.project.id}`,
        { draftPullRequests: 'yes' },
        /"draftPullRequests" must be a boolean/,
      ],
      [
        'PATCH',
        `/v2/admin/projects/${fx.project.id}`,
        { forge: 'bitbucket' },
        /"forge" must be one of/,
      ],
    ];
    for (const [method, path, body, message] of cases) {
      const key = path.startsWith('/v2/admin') ? svc.adminKey : fx.projectKey;
      const res = await unchanged(svc, () =>
        svc.request(method, path, { key, ...(body !== undefined ? { body } : {}) }),
      );
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', message, `${method} ${path}`);
    }
  });

  test('POST /v2/admin/keys: a failing project lookup is a 500, not the caller’s 400', async () => {
    const db = svc.service.ctx.db;
    // The key check reads api_keys only; the project lookup behind the body then fails.
    await sql`ALTER TABLE projects RENAME TO projects_away`.execute(db);
    try {
      const res = await svc.request('POST', '/v2/admin/keys', {
        key: svc.adminKey,
        body: { projectId: fx.project.id },
      });
      assertError(res, 500, 'internal');
    } finally {
      await sql`ALTER TABLE projects_away RENAME TO projects`.execute(db);
    }
    const keys = await db
      .selectFrom('api_keys')
      .select('id')
      .where('project_id', '=', fx.project.id)
      .execute();
    const minted = await svc.request('POST', '/v2/admin/keys', {
      key: svc.adminKey,
      body: { projectId: fx.project.id },
    });
    assert.equal(minted.status, 201, minted.text);
    const after = await db
      .selectFrom('api_keys')
      .select('id')
      .where('project_id', '=', fx.project.id)
      .execute();
    assert.equal(after.length, keys.length + 1);
  });
});
