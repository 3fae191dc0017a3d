// A project's environment settings through the admin API: maintenanceCommand and
// environmentKeyFiles (stored, shown, reset; each bad glob a 400 naming it that stores
// nothing), and the background builds a change asks for once it has committed: a create with a
// setup command, an update of what the setup runs with, a secret set or deleted; never for the
// maintenance command or a project without a setup. A build queue that refuses fails no change.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import {
  assertError,
  takeEnvironmentBuildRequests,
  unchanged,
} from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import { createLogger } from '../../log.ts';
import type { ProjectRecord } from '../../records/project.ts';
import { DEFAULT_ENVIRONMENT_KEY_FILES } from '../../records/project.ts';

const REPO = 'https://github.com/acme/widgets.git';

describe("a project's environment settings", () => {
  let svc: TestService;
  let logged = '';
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      logged += String(chunk);
      done();
    },
  });

  before(async () => {
    svc = await startTestService({
      worker: false,
      log: createLogger('warn', logSink),
      env: { ERRAND_SECRET_KEY: 'environment-settings-test-secret-key' },
    });
  });
  after(async () => {
    await svc?.close();
  });

  const create = async (fields: Record<string, unknown> = {}): Promise<ProjectRecord> => {
    const res = await svc.request('POST', '/v2/admin/projects', {
      body: { name: 'environment', repository: REPO, ...fields },
    });
    assert.equal(res.status, 201, res.text);
    return res.json as ProjectRecord;
  };
  const patch = (id: string, fields: Record<string, unknown>) =>
    svc.request('PATCH', `/v2/admin/projects/${id}`, { body: fields });
  /** The reasons of the builds asked for `projectId` since the last look, oldest first. */
  const builds = (projectId: string) => takeEnvironmentBuildRequests(svc, projectId);

  describe('maintenanceCommand and environmentKeyFiles', () => {
    test('none by default; set, shown, trimmed, kept by an update that does not name them, reset by null', async () => {
      const plain = await create();
      assert.equal(plain.maintenanceCommand, null);
      assert.equal(plain.environmentKeyFiles, null);

      const project = await create({
        setupCommand: 'npm ci',
        maintenanceCommand: '  npm run build  ',
        environmentKeyFiles: [
          ' package-lock.json ',
          'packages/*/package.json',
          'package-lock.json',
        ],
      });
      assert.equal(project.maintenanceCommand, 'npm run build');
      // Trimmed, and a glob given twice kept once.
      assert.deepEqual(project.environmentKeyFiles, [
        'package-lock.json',
        'packages/*/package.json',
      ]);
      const renamed = await patch(project.id, { name: 'renamed' });
      assert.equal(renamed.status, 200, renamed.text);
      assert.equal(renamed.json.maintenanceCommand, 'npm run build');
      assert.deepEqual(renamed.json.environmentKeyFiles, project.environmentKeyFiles);

      // [] is no key files (the setup command alone keys it); null the default again.
      const none = await patch(project.id, { environmentKeyFiles: [] });
      assert.deepEqual(none.json.environmentKeyFiles, []);
      const reset = await patch(project.id, { environmentKeyFiles: null, maintenanceCommand: '' });
      assert.equal(reset.status, 200, reset.text);
      assert.equal(reset.json.environmentKeyFiles, null);
      // A blank command is no command.
      assert.equal(reset.json.maintenanceCommand, null);
      const read = await svc.request('GET', `/v2/admin/projects/${project.id}`);
      assert.deepEqual(read.json, reset.json);
    });

    test('50 globs of 200 characters are accepted', async () => {
      const globs = Array.from(
        { length: 50 },
        (_, i) => `${String(i).padStart(2, '0')}/${'x'.repeat(197)}`,
      );
      assert.ok(globs.every((g) => g.length === 200));
      const project = await create({ environmentKeyFiles: globs });
      assert.deepEqual(project.environmentKeyFiles, globs);
    });

    test('the default key files are the common lock files, anywhere in the tree', () => {
      for (const name of [
        'package-lock.json',
        'pnpm-lock.yaml',
        'yarn.lock',
        'requirements*.txt',
        'uv.lock',
        'poetry.lock',
        'Cargo.lock',
        'go.sum',
        'Gemfile.lock',
        'composer.lock',
      ])
        assert.ok(DEFAULT_ENVIRONMENT_KEY_FILES.includes(`**/${name}`), name);
    });

    test('400 for a bad glob, list or command, naming it; nothing is stored or changed', async () => {
      const project = await create({ setupCommand: 'npm ci', environmentKeyFiles: ['go.sum'] });
      const cases: [Record<string, unknown>, RegExp][] = [
        [{ environmentKeyFiles: [''] }, /^invalid "environmentKeyFiles\[0\]": a glob is empty$/],
        [
          { environmentKeyFiles: ['go.sum', '   '] },
          /^invalid "environmentKeyFiles\[1\]": a glob is empty$/,
        ],
        [{ environmentKeyFiles: ['/etc/passwd'] }, /"\/etc\/passwd" is absolute/],
        [{ environmentKeyFiles: ['~/.npmrc'] }, /is absolute/],
        [{ environmentKeyFiles: ['..'] }, /leaves the checkout/],
        [{ environmentKeyFiles: ['../other/package-lock.json'] }, /leaves the checkout/],
        [{ environmentKeyFiles: ['a/../../b'] }, /leaves the checkout/],
        [{ environmentKeyFiles: ['a\\b'] }, /backslash/],
        [{ environmentKeyFiles: ['a\nb'] }, /control character/],
        [{ environmentKeyFiles: ['x'.repeat(201)] }, /at most 200 characters/],
        [
          { environmentKeyFiles: Array.from({ length: 51 }, (_, i) => `f${i}`) },
          /^"environmentKeyFiles" must be a list of at most 50 globs/,
        ],
        [{ environmentKeyFiles: 'package-lock.json' }, /^"environmentKeyFiles" must be a list/],
        [{ environmentKeyFiles: [1] }, /^"environmentKeyFiles" must be a list/],
        [{ environmentKeyFiles: {} }, /^"environmentKeyFiles" must be a list/],
        [
          { maintenanceCommand: 'x'.repeat(2001) },
          /^"maintenanceCommand" must be a string of at most 2000/,
        ],
        [{ maintenanceCommand: 42 }, /^"maintenanceCommand" must be a string/],
      ];
      for (const [body, pattern] of cases) {
        const updated = await unchanged(svc, () => patch(project.id, body));
        assertError(updated, 400, 'bad_request');
        assert.match(updated.json.error ?? '', pattern, JSON.stringify(body));
        const created = await unchanged(svc, () =>
          svc.request('POST', '/v2/admin/projects', {
            body: { name: 'refused', repository: REPO, setupCommand: 'npm ci', ...body },
          }),
        );
        assertError(created, 400, 'bad_request');
      }
      // Not too eager: dots inside a name, and a glob's own characters, are a glob's.
      const fine = await patch(project.id, {
        environmentKeyFiles: ['..foo/x', 'a..b', '**/requirements-*.txt', 'deps/{a,b}.lock'],
      });
      assert.equal(fine.status, 200, fine.text);
    });
  });

  describe('background builds', () => {
    test('a create asks for one when it has a setup command, and only then', async () => {
      const without = await create();
      const withSetup = await create({ setupCommand: 'npm ci' });
      assert.deepEqual(await builds(without.id), []);
      assert.deepEqual(await builds(withSetup.id), ['created']);
    });

    test('an update asks for one when what the setup runs with changes, not otherwise', async () => {
      const project = await create({ setupCommand: 'npm ci' });
      assert.deepEqual(await builds(project.id), ['created']);
      const step = async (fields: Record<string, unknown>, asks: boolean) => {
        const res = await patch(project.id, fields);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(
          await builds(project.id),
          asks ? ['settings'] : [],
          JSON.stringify(fields),
        );
      };
      await step({ name: 'renamed', commandTimeoutSeconds: 120 }, false);
      // The maintenance command runs after a restore: it is not what the environment is.
      await step({ maintenanceCommand: 'npm run build' }, false);
      // The same value again is no change.
      await step({ setupCommand: 'npm ci' }, false);
      await step({ setupCommand: 'npm ci --ignore-scripts' }, true);
      await step({ environmentKeyFiles: ['package-lock.json'] }, true);
      await step({ environmentKeyFiles: ['package-lock.json'] }, false);
      await step({ network: { setup: 'allowlist', allow: ['@npm'] } }, true);
      await step({ network: { allow: ['@npm', 'npm.example.com'] } }, true);
      await step({ network: { commands: 'allowlist' } }, false);
      await step({ setupNetwork: true }, true);
      // Without a setup command there is no environment to build.
      await step({ setupCommand: null }, false);
      await step({ environmentKeyFiles: null, network: { setup: 'none' } }, false);
      await step({ setupCommand: 'pip install -r requirements.txt' }, true);
    });

    test('a secret set, replaced or deleted asks for one when the project has a setup command', async () => {
      const project = await create({ setupCommand: 'npm ci' });
      const plain = await create();
      const put = (id: string, name: string, exposure: string) =>
        svc.request('PUT', `/v2/admin/projects/${id}/secrets/${name}`, {
          body: { value: `value-of-${name}-${crypto.randomUUID()}`, exposure },
        });
      assert.deepEqual(await builds(project.id), ['created']);
      assert.equal((await put(project.id, 'NPM_TOKEN', 'setup')).status, 201);
      assert.deepEqual(await builds(project.id), ['settings']);
      assert.equal((await put(project.id, 'NPM_TOKEN', 'setup')).status, 200);
      assert.deepEqual(await builds(project.id), ['settings']);
      // The setup command gets every secret, whatever its exposure.
      assert.equal((await put(project.id, 'LICENSE_KEY', 'commands')).status, 201);
      assert.deepEqual(await builds(project.id), ['settings']);
      const deleted = await svc.request(
        'DELETE',
        `/v2/admin/projects/${project.id}/secrets/NPM_TOKEN`,
      );
      assert.equal(deleted.status, 204, deleted.text);
      assert.deepEqual(await builds(project.id), ['settings']);
      assert.equal((await put(plain.id, 'NPM_TOKEN', 'setup')).status, 201);
      assert.deepEqual(await builds(plain.id), []);
      // A refused secret changes nothing and asks for nothing.
      const refused = await unchanged(svc, () => put(project.id, 'PATH', 'setup'));
      assertError(refused, 400, 'bad_request');
    });

    test('a build queue that refuses fails no change: the change is stored, the refusal logged', async () => {
      const db = svc.service.ctx.db;
      const project = await create({ setupCommand: 'npm ci' });
      // The database refuses every new entry of the build queue, as a broken queue would.
      await sql`CREATE FUNCTION refuse_environment_builds() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'no builds today'; END $$`.execute(db);
      await sql`CREATE TRIGGER refuse_builds BEFORE INSERT ON pgboss.job FOR EACH ROW
        WHEN (NEW.name = 'environment-builds') EXECUTE FUNCTION refuse_environment_builds()`.execute(
        db,
      );
      try {
        const res = await patch(project.id, { setupCommand: 'npm install' });
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.setupCommand, 'npm install');
        const created = await create({ setupCommand: 'npm ci' });
        const secret = await svc.request('PUT', `/v2/admin/projects/${project.id}/secrets/TOKEN`, {
          body: { value: 'a-token-of-some-length' },
        });
        assert.equal(secret.status, 201, secret.text);
        const read = await svc.request('GET', `/v2/admin/projects/${project.id}`);
        assert.equal(read.json.setupCommand, 'npm install');
        assert.deepEqual(await builds(project.id), ['created']);
        assert.deepEqual(await builds(created.id), []);
        const lines = logged
          .split('\n')
          .filter((line) => line.includes('environment build request failed'));
        assert.equal(lines.length, 3, logged);
        assert.match(lines[0] ?? '', new RegExp(`"projectId":"${project.id}","reason":"settings"`));
        assert.match(lines[0] ?? '', /no builds today/);
        // The rebuild asked for by an admin is the answer itself: its refusal is the server's.
        const rebuild = await svc.request(
          'POST',
          `/v2/admin/projects/${project.id}/environments/rebuild`,
        );
        assert.equal(rebuild.status, 500, rebuild.text);
        assert.equal(rebuild.json.code, 'internal');
        assert.doesNotMatch(rebuild.text, /no builds today/);
      } finally {
        await sql`DROP TRIGGER refuse_builds ON pgboss.job`.execute(db);
        await sql`DROP FUNCTION refuse_environment_builds()`.execute(db);
      }
      const after = await patch(project.id, { setupCommand: 'npm ci' });
      assert.equal(after.status, 200, after.text);
      assert.deepEqual(await builds(project.id), ['settings']);
    });
  });
});
