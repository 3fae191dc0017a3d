// The admin secret routes under /v2/admin/projects/{id}/secrets: PUT (create or replace), list,
// delete. Each refusal is checked to store nothing; a value is stored sealed, and never appears
// in an answer or the log. What turns do with secrets is tested in test/agent/secrets.test.ts.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import {
  assertError,
  authCases,
  createRouteFixture,
  isoNear,
  jsonBodyCases,
  type RouteFixture,
  type RouteSpec,
  randomProjectId,
  unchanged,
} from '../../../test/support/route-cases.ts';
import {
  type HttpResult,
  startTestService,
  type TestService,
} from '../../../test/support/service.ts';
import { createLogger } from '../../log.ts';
import { MAX_SECRET_VALUE_BYTES, MAX_SECRETS_PER_PROJECT } from '../../projects/secrets.ts';
import type { SecretRecord } from '../../records/secret.ts';
import { open } from '../../secrets/box.ts';

const SECRET_KEY = 'admin-secrets-test-secret-key';

function parse<T>(res: HttpResult): T {
  return JSON.parse(res.text) as T;
}

describe('admin secret routes', () => {
  let svc: TestService;
  let noKey: TestService;
  let fx: RouteFixture;
  const fixture = () => fx;
  /** Every value this file stored, to look for in answers and the log. */
  const values: string[] = [];
  let logged = '';
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      logged += String(chunk);
      done();
    },
  });

  const path = (projectId: string, name = '') =>
    `/v2/admin/projects/${projectId}/secrets${name ? `/${name}` : ''}`;
  const value = (label: string) => {
    const v = `${label}-${crypto.randomUUID()}`;
    values.push(v);
    return v;
  };
  const put = (projectId: string, name: string, body: unknown, s: TestService = svc) =>
    s.request('PUT', path(projectId, name), { body });
  const list = async (projectId: string, s: TestService = svc): Promise<SecretRecord[]> => {
    const res = await s.request('GET', path(projectId));
    assert.equal(res.status, 200, res.text);
    return parse<{ secrets: SecretRecord[] }>(res).secrets;
  };
  const stored = (projectId: string, name: string) =>
    svc.service.ctx.db
      .selectFrom('project_secrets')
      .selectAll()
      .where('project_id', '=', projectId)
      .where('name', '=', name)
      .executeTakeFirst();

  before(async () => {
    [svc, noKey] = await Promise.all([
      startTestService({
        worker: false,
        log: createLogger('trace', logSink),
        env: { ERRAND_SECRET_KEY: SECRET_KEY },
      }),
      startTestService({ worker: false }),
    ]);
    fx = await createRouteFixture(svc);
    const res = await put(fx.project.id, 'FIXTURE_TOKEN', { value: value('fixture') });
    assert.equal(res.status, 201, res.text);
  });
  after(async () => {
    await Promise.all([svc?.close(), noKey?.close()]);
  });

  const specs: Record<string, RouteSpec> = {
    put: {
      method: 'PUT',
      scope: 'admin',
      path: ({ projectId }) => path(projectId, 'COMMON_CASES'),
      body: () => ({ value: 'from the common cases', exposure: 'setup' }),
    },
    list: { method: 'GET', scope: 'admin', path: ({ projectId }) => path(projectId) },
    delete: {
      method: 'DELETE',
      scope: 'admin',
      path: ({ projectId }) => path(projectId, 'FIXTURE_TOKEN'),
    },
  };

  describe('happy path', () => {
    test('PUT: 201 with the record, stored sealed; listed by name without its value', async () => {
      const v = value('npm');
      const res = await put(fx.project.id, 'NPM_TOKEN', { value: v });
      assert.equal(res.status, 201, res.text);
      const record = parse<SecretRecord>(res);
      assert.deepEqual(Object.keys(record).sort(), ['createdAt', 'exposure', 'name', 'updatedAt']);
      assert.equal(record.name, 'NPM_TOKEN');
      assert.equal(record.exposure, 'setup');
      isoNear(record.createdAt);
      assert.equal(record.updatedAt, record.createdAt);
      const row = await stored(fx.project.id, 'NPM_TOKEN');
      assert.ok(row);
      assert.ok(!row.sealed_value.includes(v));
      assert.equal(open(SECRET_KEY, row.sealed_value), v);
      const listed = await list(fx.project.id);
      assert.deepEqual(
        listed.find((s) => s.name === 'NPM_TOKEN'),
        record,
      );
    });

    test('PUT again: 200, the value and exposure replaced, createdAt kept', async () => {
      const first = parse<SecretRecord>(
        await put(fx.project.id, 'LICENSE_KEY', { value: value('licence'), exposure: 'commands' }),
      );
      const v = value('licence-2');
      const res = await put(fx.project.id, 'LICENSE_KEY', { value: v });
      assert.equal(res.status, 200, res.text);
      const record = parse<SecretRecord>(res);
      // PUT replaces the whole secret: an exposure not given is the default again.
      assert.equal(record.exposure, 'setup');
      assert.equal(record.createdAt, first.createdAt);
      assert.ok(Date.parse(record.updatedAt) >= Date.parse(first.updatedAt));
      const row = await stored(fx.project.id, 'LICENSE_KEY');
      assert.equal(open(SECRET_KEY, row?.sealed_value ?? ''), v);
      assert.equal(row?.exposure, 'setup');
    });

    test('GET: by name, only the project’s own', async () => {
      await put(fx.otherProject.id, 'OTHER_PROJECT_TOKEN', { value: value('other') });
      await put(fx.project.id, 'A_FIRST', { value: value('a'), exposure: 'commands' });
      const names = (await list(fx.project.id)).map((s) => s.name);
      assert.deepEqual(names, [...names].sort());
      assert.ok(names.includes('A_FIRST'));
      assert.ok(!names.includes('OTHER_PROJECT_TOKEN'));
      assert.deepEqual(
        (await list(fx.otherProject.id)).map((s) => s.name),
        ['OTHER_PROJECT_TOKEN'],
      );
    });

    test('DELETE: 204 without a body; gone from the list, a second DELETE is 404', async () => {
      await put(fx.project.id, 'GONE_SOON', { value: value('gone') });
      const res = await svc.request('DELETE', path(fx.project.id, 'GONE_SOON'));
      assert.equal(res.status, 204, res.text);
      assert.equal(res.text, '');
      assert.ok(!(await list(fx.project.id)).some((s) => s.name === 'GONE_SOON'));
      assert.equal(await stored(fx.project.id, 'GONE_SOON'), undefined);
      const again = await unchanged(svc, () =>
        svc.request('DELETE', path(fx.project.id, 'GONE_SOON')),
      );
      assertError(again, 404, 'not_found');
      assert.match(again.json.error ?? '', /has no secret GONE_SOON/);
    });

    test(`a value of ${MAX_SECRET_VALUE_BYTES} bytes is kept whole, multi-byte characters counted as bytes`, async () => {
      const v = `${'é'.repeat(MAX_SECRET_VALUE_BYTES / 2 - 1)}ab`;
      assert.equal(Buffer.byteLength(v), MAX_SECRET_VALUE_BYTES);
      const res = await put(fx.project.id, 'BIG', { value: v });
      assert.equal(res.status, 201, res.text);
      assert.equal(open(SECRET_KEY, (await stored(fx.project.id, 'BIG'))?.sealed_value ?? ''), v);
      const over = await unchanged(svc, () => put(fx.project.id, 'BIG', { value: `${v}c` }));
      assertError(over, 400, 'bad_request');
      assert.match(over.json.error ?? '', new RegExp(`at most ${MAX_SECRET_VALUE_BYTES} bytes`));
      await svc.request('DELETE', path(fx.project.id, 'BIG'));
    });

    test('names programs read as their own settings but the sandbox does not are accepted', async () => {
      for (const name of ['NODE_AUTH_TOKEN', '_PRIVATE', 'PIP_INDEX_URL', 'X', 'TOKEN_2']) {
        const res = await put(fx.otherProject.id, name, { value: value(name) });
        assert.equal(res.status, 201, `${name}: ${res.text}`);
      }
    });

    test(`concurrent PUTs of one new name: one creates (201), the others replace (200)`, async () => {
      const project = await svc.createProject({ name: 'racing puts' });
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) => put(project.id, 'RACE', { value: value(`race-${i}`) })),
      );
      const statuses = answers.map((r) => r.status).sort();
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 201]);
    });

    test(`a project may have ${MAX_SECRETS_PER_PROJECT} secrets, also when many PUTs race; the next is 409`, async () => {
      const project = await svc.createProject({ name: 'many secrets' });
      const answers = await Promise.all(
        Array.from({ length: MAX_SECRETS_PER_PROJECT + 5 }, (_, i) =>
          put(project.id, `S_${i}`, { value: value(`many-${i}`) }),
        ),
      );
      const created = answers.filter((r) => r.status === 201).length;
      const refused = answers.filter((r) => r.status === 409);
      assert.equal(created, MAX_SECRETS_PER_PROJECT);
      assert.equal(refused.length, 5);
      for (const res of refused) {
        assertError(res, 409, 'conflict');
        assert.match(res.json.error ?? '', /already has 50 secrets/);
      }
      assert.equal((await list(project.id)).length, MAX_SECRETS_PER_PROJECT);
      // Replacing one at the limit is no new secret.
      const name = (await list(project.id))[0]?.name ?? '';
      assert.equal((await put(project.id, name, { value: value('replace') })).status, 200);
    });
  });

  describe('errors', () => {
    describe('PUT …/secrets/{name}', () => jsonBodyCases(specs.put as RouteSpec, fixture));

    const refusedPut = async (name: string, body: unknown, message: RegExp) => {
      const res = await unchanged(svc, () => put(fx.project.id, name, body));
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', message, `${name}: ${res.json.error}`);
    };

    test('400 for a name that is not an environment variable’s, or too long', async () => {
      for (const name of ['npm_token', '1TOKEN', 'NPM-TOKEN', 'NPM.TOKEN', 'NPM%20TOKEN', 'Ä']) {
        await refusedPut(name, { value: value('bad') }, /is not a secret's name/);
      }
      // A name as long as a path segment may be is accepted; a longer one is no route's.
      assert.equal(
        (await put(fx.otherProject.id, 'B'.repeat(100), { value: value('l') })).status,
        201,
      );
      const long = await unchanged(svc, () =>
        put(fx.project.id, 'A'.repeat(101), { value: value('long') }),
      );
      assertError(long, 404, 'not_found');
    });

    test('400 for a name the sandbox, its shell or a loader reads first', async () => {
      for (const name of [
        'PATH',
        'HOME',
        'TMPDIR',
        'IFS',
        'ENV',
        'BASH_ENV',
        'LD_PRELOAD',
        'LD_LIBRARY_PATH',
        'LC_ALL',
        'NODE_OPTIONS',
        'PYTHONPATH',
        'PYTHONSTARTUP',
        'GIT_DIR',
        'GIT_SSH_COMMAND',
        'ERRAND_SECRET_KEY',
        'JAVA_TOOL_OPTIONS',
        'PERL5OPT',
        'RUBYOPT',
      ]) {
        await refusedPut(name, { value: value('reserved') }, new RegExp(`^${name} is reserved`));
      }
      await refusedPut('LD_AUDIT', { value: value('r') }, /as every name starting with LD_/);
    });

    test('400 for a missing, short, non-string or null value, and a bad exposure', async () => {
      await refusedPut('V', {}, /^"value" is required$/);
      await refusedPut('V', { exposure: 'setup' }, /^"value" is required$/);
      await refusedPut('V', { value: '' }, /at least 8 characters/);
      await refusedPut('V', { value: '1234567' }, /at least 8 characters/);
      for (const bad of [12345678, null, ['12345678'], { v: '12345678' }, true]) {
        await refusedPut('V', { value: bad }, /^"value" must be a string/);
      }
      for (const bad of ['model', 'SETUP', '', null, 1]) {
        await refusedPut(
          'V',
          { value: value('e'), exposure: bad },
          /^"exposure" must be one of setup, commands$/,
        );
      }
      await refusedPut('V', { value: value('u'), name: 'V' }, /unknown field "name"/);
      const after = await list(fx.project.id);
      assert.ok(!after.some((s) => s.name === 'V'));
    });

    test('404 on every route for an unknown or malformed project id', async () => {
      for (const projectId of [randomProjectId(), 'not-a-project', `${fx.project.id}x`]) {
        for (const res of [
          await unchanged(svc, () => put(projectId, 'NPM_TOKEN', { value: value('nf') })),
          await unchanged(svc, () => svc.request('GET', path(projectId))),
          await unchanged(svc, () => svc.request('DELETE', path(projectId, 'FIXTURE_TOKEN'))),
        ]) {
          assertError(res, 404, 'not_found');
        }
      }
    });

    test('DELETE: 404 for another project’s secret, 400 for a name no secret can have', async () => {
      await put(fx.otherProject.id, 'ONLY_THERE', { value: value('there') });
      const res = await unchanged(svc, () =>
        svc.request('DELETE', path(fx.project.id, 'ONLY_THERE')),
      );
      assertError(res, 404, 'not_found');
      const bad = await unchanged(svc, () =>
        svc.request('DELETE', path(fx.project.id, 'bad-name')),
      );
      assertError(bad, 400, 'bad_request');
    });

    test('without ERRAND_SECRET_KEY: PUT is refused naming the setting; listing works', async () => {
      const project = await noKey.createProject({ name: 'no secret key' });
      const res = await unchanged(noKey, () =>
        put(project.id, 'NPM_TOKEN', { value: value('nokey') }, noKey),
      );
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', /ERRAND_SECRET_KEY/);
      assert.deepEqual(await list(project.id, noKey), []);
    });
  });

  describe('security', () => {
    for (const [name, spec] of Object.entries(specs)) {
      describe(`${name}`, () => authCases(spec, fixture));
    }

    test('no answer and no log line holds a value', async () => {
      const answers = [
        await svc.request('GET', path(fx.project.id)),
        await svc.request('GET', path(fx.otherProject.id)),
        await put(fx.project.id, 'SHOWN_NOWHERE', { value: value('nowhere') }),
        await put(fx.project.id, 'SHOWN_NOWHERE', { value: value('nowhere-2') }),
        await svc.request('GET', `/v2/admin/projects/${fx.project.id}`),
      ];
      assert.ok(values.length > 20, `only ${values.length} values stored`);
      for (const res of answers) {
        assert.ok(res.status === 200 || res.status === 201, res.text);
        for (const v of values) assert.ok(!res.text.includes(v), `a value is in ${res.text}`);
      }
      assert.match(
        logged,
        /"PUT","route":"\/v2\/admin\/projects\/:id\/secrets\/:name"/,
        'the log was not captured',
      );
      for (const v of values) assert.ok(!logged.includes(v), 'a secret value is in the log');
      assert.ok(!logged.includes(SECRET_KEY), 'ERRAND_SECRET_KEY is in the log');
    });

    test('the fixture secret survived every refused request', async () => {
      const row = await stored(fx.project.id, 'FIXTURE_TOKEN');
      assert.equal(open(SECRET_KEY, row?.sealed_value ?? ''), values[0]);
    });
  });
});
