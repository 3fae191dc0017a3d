// Pushes to POST /v2/forges/{projectId}/webhook, driven by each forge's fake as the forge sends
// them: a signed push to the project's base ref asks for one background build of its
// environment (202, build), and a redelivery adds none to the one waiting; a push to another
// branch, a tag, a deletion of the base branch, a push to another repository and a bad
// signature ask for nothing; nor does a push to a project without a setup command or without
// commands. No push is recorded as a forge event or queued for the forge-events worker. A
// build queue that refuses is logged and the push answered 200.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import {
  FAKE_FORGES,
  FORGE_REPO,
  FORGE_TOKEN,
  forgeWebhookAddress,
  makeForgeWebhookSecret,
  queuedForgeEvents,
  type WebhookFake,
} from '../../../test/support/forge-intake.ts';
import type { ForgeRequest, SendOptions } from '../../../test/support/forge-requests.ts';
import {
  assertError,
  environmentBuildRequests,
  unchanged,
} from '../../../test/support/route-cases.ts';
import { startTestService, type TestService } from '../../../test/support/service.ts';
import { createLogger } from '../../log.ts';

describe('POST /v2/forges/{projectId}/webhook: pushes', () => {
  let svc: TestService;
  let logged = '';
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      logged += String(chunk);
      done();
    },
  });

  before(async () => {
    // No worker: the builds asked for stay in the queue, where the test reads them.
    svc = await startTestService({
      worker: false,
      log: createLogger('warn', logSink),
      env: { ERRAND_SECRET_KEY: 'test-secret-key-for-forge-pushes' },
    });
  });
  after(async () => {
    await svc?.close();
  });

  /** The reasons of the builds asked for `projectId`, oldest first. */
  const builds = async (projectId: string) =>
    (await environmentBuildRequests(svc))
      .filter((b) => b.projectId === projectId)
      .map((b) => b.reason);
  /** Forge events recorded or queued for the project: a push is neither. */
  const forgeEvents = async (projectId: string) => {
    const db = svc.service.ctx.db;
    const recorded = await db
      .selectFrom('forge_events')
      .select('key')
      .where('project_id', '=', projectId)
      .execute();
    return recorded.length + (await queuedForgeEvents(svc, projectId)).length;
  };

  /**
   * A project of the fake's repository with a webhook secret, whose setup command is set in
   * the database: through the API, its create would ask for a build of its own, and the one
   * build of a project that waits would hide the push's.
   */
  const project = async (
    fake: WebhookFake,
    forge: string,
    fields: { ref?: string; setupCommand?: string | null; commandsEnabled?: boolean } = {},
  ) => {
    const res = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name: `push ${forge} ${crypto.randomUUID().slice(0, 8)}`,
        repository: `${fake.url}/${FORGE_REPO}.git`,
        ref: fields.ref ?? 'main',
        forge,
        forgeUrl: fake.apiUrl,
        forgeToken: FORGE_TOKEN,
        commandsEnabled: fields.commandsEnabled ?? true,
      },
    });
    assert.equal(res.status, 201, res.text);
    const id = res.json.id as string;
    await svc.service.ctx.db
      .updateTable('projects')
      .set({ setup_command: fields.setupCommand === undefined ? 'npm ci' : fields.setupCommand })
      .where('id', '=', id)
      .execute();
    return { id, secret: await makeForgeWebhookSecret(svc, id) };
  };
  const hook = (projectId: string) => forgeWebhookAddress(svc, projectId);

  for (const c of FAKE_FORGES) {
    describe(c.name, () => {
      let fake: WebhookFake;
      let projectId: string;
      let secret: string;

      before(async () => {
        fake = await c.start(['acme/other']);
        ({ id: projectId, secret } = await project(fake, c.forge));
      });
      after(async () => {
        await fake?.close();
      });

      test('another branch, a tag, a deletion, another repository: 200, nothing asked', async () => {
        const ignored: [ForgeRequest, SendOptions][] = [
          [{ type: 'push', ref: 'refs/heads/feature' }, {}],
          // A branch whose name ends like the base ref's is another branch.
          [{ type: 'push', ref: 'refs/heads/x/main' }, {}],
          [{ type: 'push', ref: 'refs/tags/main' }, {}],
          [{ type: 'push', ref: 'refs/tags/v1.0.0' }, {}],
          [{ type: 'push', ref: 'refs/heads/main', deleted: true }, {}],
          [{ type: 'push', ref: 'refs/heads/main' }, { repo: 'acme/other' }],
        ];
        for (const [delivery, options] of ignored) {
          const res = await unchanged(svc, () =>
            fake.sendWebhook(hook(projectId), secret, delivery, options),
          );
          const what = `${JSON.stringify(delivery)} ${JSON.stringify(options)}`;
          assert.equal(res.status, 200, `${what}: ${res.text}`);
          assert.deepEqual(res.json, { outcome: 'ignored', events: 0 }, what);
        }
        assert.deepEqual(await builds(projectId), []);
        assert.equal(await forgeEvents(projectId), 0);
      });

      test('a push to the base ref with a bad or missing signature: 401, nothing asked', async () => {
        const push: ForgeRequest = { type: 'push', ref: 'refs/heads/main' };
        for (const [key, options] of [
          ['not-the-secret-at-all', {}],
          [secret, { signature: 'none' }],
        ] as const) {
          const res = await unchanged(svc, () =>
            fake.sendWebhook(hook(projectId), key, push, options),
          );
          assertError({ ...res, json: res.json as { error?: string } }, 401, 'unauthorized');
        }
        assert.deepEqual(await builds(projectId), []);
      });

      test('a push to the base ref asks for one build (202); its redelivery adds none', async () => {
        const res = await fake.sendWebhook(hook(projectId), secret, {
          type: 'push',
          ref: 'refs/heads/main',
        });
        assert.equal(res.status, 202, res.text);
        assert.deepEqual(res.json, { outcome: 'build', events: 0 });
        assert.deepEqual(await builds(projectId), ['base-moved']);
        // The forge's "Redeliver", and a later push while that build waits: the one waiting
        // build is the answer to both.
        const again = await res.redeliver();
        assert.equal(again.status, 202, again.text);
        const later = await fake.sendWebhook(hook(projectId), secret, {
          type: 'push',
          ref: 'refs/heads/main',
          after: 'b2c3d4e5f60718293a4b5c6d7e8f9012345678a1',
        });
        assert.equal(later.status, 202, later.text);
        assert.deepEqual(await builds(projectId), ['base-moved']);
        assert.equal(await forgeEvents(projectId), 0, 'a push was taken as a forge event');
      });
    });
  }

  describe('which projects', () => {
    let fake: WebhookFake;
    before(async () => {
      const github = FAKE_FORGES.find((c) => c.forge === 'github');
      assert.ok(github);
      fake = await github.start();
    });
    after(async () => {
      await fake?.close();
    });
    const push = (ref = 'refs/heads/main'): ForgeRequest => ({ type: 'push', ref });

    test('a base ref written in full, or another branch, is matched as the branch it names', async () => {
      const full = await project(fake, 'github', { ref: 'refs/heads/main' });
      const res = await fake.sendWebhook(hook(full.id), full.secret, push());
      assert.equal(res.status, 202, res.text);
      assert.deepEqual(await builds(full.id), ['base-moved']);

      const release = await project(fake, 'github', { ref: 'release/2' });
      const main = await unchanged(svc, () =>
        fake.sendWebhook(hook(release.id), release.secret, push()),
      );
      assert.equal(main.status, 200, main.text);
      const own = await fake.sendWebhook(
        hook(release.id),
        release.secret,
        push('refs/heads/release/2'),
      );
      assert.equal(own.status, 202, own.text);
      assert.deepEqual(await builds(release.id), ['base-moved']);
    });

    test('a project without a setup command, or without commands, asks for none', async () => {
      for (const fields of [{ setupCommand: null }, { commandsEnabled: false }]) {
        const p = await project(fake, 'github', fields);
        const res = await unchanged(svc, () => fake.sendWebhook(hook(p.id), p.secret, push()));
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.json, { outcome: 'ignored', events: 0 }, JSON.stringify(fields));
        assert.deepEqual(await builds(p.id), []);
      }
    });

    test('a build queue that refuses: logged, and the push answered 200', async () => {
      const db = svc.service.ctx.db;
      const p = await project(fake, 'github');
      await sql`CREATE FUNCTION refuse_pushed_builds() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'no builds today'; END $$`.execute(db);
      await sql`CREATE TRIGGER refuse_pushed_builds BEFORE INSERT ON pgboss.job FOR EACH ROW
        WHEN (NEW.name = 'environment-builds') EXECUTE FUNCTION refuse_pushed_builds()`.execute(db);
      try {
        const res = await fake.sendWebhook(hook(p.id), p.secret, push());
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.json, { outcome: 'ignored', events: 0 });
      } finally {
        await sql`DROP TRIGGER refuse_pushed_builds ON pgboss.job`.execute(db);
        await sql`DROP FUNCTION refuse_pushed_builds()`.execute(db);
      }
      assert.deepEqual(await builds(p.id), []);
      const lines = logged
        .split('\n')
        .filter((line) => line.includes('environment build request failed'));
      assert.equal(lines.length, 1, logged);
      assert.match(lines[0] ?? '', new RegExp(`"projectId":"${p.id}","reason":"base-moved"`));
      // The queue mended, the same push asks again.
      const again = await fake.sendWebhook(hook(p.id), p.secret, push());
      assert.equal(again.status, 202, again.text);
      assert.deepEqual(await builds(p.id), ['base-moved']);
    });
  });
});
