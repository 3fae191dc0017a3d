// POST /v2/forges/{projectId}/webhook, driven by each forge's fake as the forge sends: a signed
// delivery is queued with its events recorded by what the forge signed (202); a redelivery, and
// the same signed body replayed under new delivery ids, are acknowledged and not queued twice;
// a missing, wrong or tampered signature, another project's secret, an unknown project
// and a project without a secret are one 401 that stores nothing; a body that is not JSON or
// not the forge's shape is a 400 that stores nothing; a ping or an unused event is a 200 that
// queues nothing (pushes: forge-webhook.push.test.ts). And the settings behind it: the secret,
// chosen or made, shown once.
import assert from 'node:assert/strict';
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
import type { ForgeRequest, RequestAnswer } from '../../../test/support/forge-requests.ts';
import { assertError, randomProjectId, unchanged } from '../../../test/support/route-cases.ts';
import {
  type ApiBody,
  type HttpResult,
  startTestService,
  type TestService,
} from '../../../test/support/service.ts';
import { seal } from '../../secrets/box.ts';
import { runUpkeep } from '../../service.ts';

/** A request's answer as the route-case assertions read a response. */
const asResult = (res: RequestAnswer): HttpResult => ({ ...res, json: res.json as ApiBody });

/** Forgejo's fake stands for Gitea's here (it sends both's headers); the pushes' test runs both. */
const CASES = FAKE_FORGES.filter((c) => c.name !== 'Gitea');

describe('POST /v2/forges/{projectId}/webhook', () => {
  let svc: TestService;

  before(async () => {
    svc = await startTestService({
      worker: false,
      env: { ERRAND_SECRET_KEY: 'test-secret-key-for-forge-webhooks' },
    });
  });
  after(async () => {
    await svc?.close();
  });

  /** The events queued for the forge-events worker, oldest first. */
  const queued = (projectId: string) => queuedForgeEvents(svc, projectId);
  /** The project's recorded events, oldest first. */
  const recorded = async (projectId: string) =>
    (
      await svc.service.ctx.db
        .selectFrom('forge_events')
        .select(['key', 'delivery_id', 'last_delivery_id', 'repeats', 'outcome'])
        .where('project_id', '=', projectId)
        .orderBy('received_at')
        .orderBy('key')
        .execute()
    ).map((r) => ({
      key: r.key,
      deliveryId: r.delivery_id,
      lastDeliveryId: r.last_delivery_id,
      repeats: r.repeats,
      outcome: r.outcome,
    }));

  /** Runs `act`; asserts that it stored nothing: no project change, event recorded or queued. */
  const nothingStored = async <T>(projectId: string, act: () => Promise<T>): Promise<T> => {
    const [events, records] = [await queued(projectId), await recorded(projectId)];
    const result = await unchanged(svc, act);
    assert.deepEqual(await queued(projectId), events, 'an event was queued');
    assert.deepEqual(await recorded(projectId), records, 'an event was recorded');
    return result;
  };

  const createForgeProject = async (fake: WebhookFake, forge: string, name: string) => {
    const res = await svc.request('POST', '/v2/admin/projects', {
      body: {
        name,
        repository: `${fake.url}/${FORGE_REPO}.git`,
        forge,
        forgeUrl: fake.apiUrl,
        forgeToken: FORGE_TOKEN,
      },
    });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  };
  const makeSecret = (projectId: string) => makeForgeWebhookSecret(svc, projectId);
  const hook = (projectId: string) => forgeWebhookAddress(svc, projectId);

  /** A 401 in the one shape every refused delivery gets. */
  const assertRefused = (res: RequestAnswer) => {
    assertError(asResult(res), 401, 'unauthorized');
    assert.equal(
      res.json.error,
      "the delivery is not signed with this project's forge webhook secret",
    );
  };

  for (const c of CASES) {
    describe(c.name, () => {
      let fake: WebhookFake;
      let projectId: string;
      let otherProjectId: string;
      let secret: string;
      let otherSecret: string;

      before(async () => {
        fake = await c.start();
        await fake.openPull();
        projectId = await createForgeProject(fake, c.forge, `${c.name} A`);
        otherProjectId = await createForgeProject(fake, c.forge, `${c.name} B`);
        secret = await makeSecret(projectId);
        otherSecret = await makeSecret(otherProjectId);
      });
      after(async () => {
        await fake?.close();
      });

      test('a signed line comment is queued as the event it is (202)', async () => {
        const res = await fake.sendWebhook(hook(projectId), secret, {
          type: 'review-comment',
          pull: 1,
          path: 'src/app.ts',
          line: 12,
          body: '@errand rename this',
        });
        assert.equal(res.status, 202, res.text);
        assert.deepEqual(res.json, { outcome: 'queued', events: 1 });
        const [event, ...more] = await queued(projectId);
        assert.equal(more.length, 0);
        assert.ok(event && event.type === 'comment');
        assert.equal(event.forge, c.forge);
        assert.equal(event.deliveryId, res.deliveryId);
        assert.equal(event.repositoryUrl, `${fake.url}/${FORGE_REPO}`);
        assert.equal(event.author.login, 'reviewer');
        assert.equal(event.author.bot, false);
        assert.equal(event.thread.kind, 'pull-request');
        assert.equal(event.thread.number, 1);
        assert.equal(event.thread.title, 'Job');
        assert.equal(event.body, '@errand rename this');
        assert.ok(event.url.startsWith(fake.url), event.url);
        if (c.forge === 'gitea') {
          // Gitea's payload of a single line comment does not say where it is.
          assert.equal(event.where, 'conversation');
          assert.equal(event.anchor, null);
        } else {
          assert.equal(event.where, 'line');
          assert.equal(event.anchor?.path, 'src/app.ts');
          assert.equal(event.anchor?.line, 12);
        }
        if (c.forge === 'gitlab') assert.match(event.discussionId ?? '', /^[0-9a-f]{40}$/);
        assert.deepEqual(await recorded(projectId), [
          {
            key: event.key,
            deliveryId: res.deliveryId,
            lastDeliveryId: null,
            repeats: 0,
            outcome: 'queued',
          },
        ]);

        // The forge's "Redeliver": the same bytes, acknowledged, not queued again; counted.
        const again = await res.redeliver();
        assert.equal(again.status, 200, again.text);
        assert.deepEqual(again.json, { outcome: 'duplicate', events: 0 });
        assert.equal((await queued(projectId)).length, 1, 'the redelivery was queued');
        assert.equal((await recorded(projectId))[0]?.repeats, 1);
      });

      test('one signed body under three delivery ids is one event, queued once', async () => {
        const issue = { number: 8, title: 'Replayed', body: 'Once is enough.' };
        const deliveries: ForgeRequest[] = [
          { type: 'comment', pull: 1, body: '@errand go' },
          { type: 'labeled', issue, label: 'errand' },
        ];
        // GitLab has no review body: a review's summary is a comment there.
        if (c.forge !== 'gitlab') deliveries.push({ type: 'review', pull: 1, body: '@errand hm' });
        for (const delivery of deliveries) {
          const earlier = (await queued(projectId)).length;
          const first = await fake.sendWebhook(hook(projectId), secret, delivery);
          assert.equal(first.status, 202, first.text);
          const before = await queued(projectId);
          const keys = before.slice(earlier).map((e) => e.key);
          assert.equal(keys.length, 1, delivery.type);
          for (const _ of [1, 2]) {
            // The signature covers the body, not the delivery id: a new id, the same bytes.
            const replayed = await first.replay();
            assert.notEqual(replayed.deliveryId, first.deliveryId);
            assert.equal(replayed.status, 200, replayed.text);
            assert.deepEqual(replayed.json, { outcome: 'duplicate', events: 0 });
          }
          assert.deepEqual(await queued(projectId), before, 'a replay was queued');
          const records = (await recorded(projectId)).filter((r) => keys.includes(r.key));
          assert.equal(records.length, keys.length);
          for (const record of records) {
            assert.equal(record.deliveryId, first.deliveryId);
            assert.equal(record.repeats, 2);
            assert.notEqual(record.lastDeliveryId, first.deliveryId);
          }
        }
      });

      test('a comment, a review and a label each read as their event', async () => {
        const before = (await queued(projectId)).length;
        const comment = await fake.sendWebhook(hook(projectId), secret, {
          type: 'comment',
          pull: 1,
          body: '@errand also the tests',
          author: { login: 'maintainer', id: 77 },
        });
        assert.equal(comment.status, 202, comment.text);
        const issue = { number: 5, title: 'Crash on start', body: 'It crashes.' };
        const label = await fake.sendWebhook(hook(projectId), secret, {
          type: 'labeled',
          issue,
          label: 'errand',
          others: ['bug'],
        });
        assert.equal(label.status, 202, label.text);
        const events = (await queued(projectId)).slice(before);
        const [first, ...labels] = events;
        assert.ok(first?.type === 'comment');
        assert.equal(first.where, 'conversation');
        assert.equal(first.author.login, 'maintainer');
        assert.equal(first.thread.kind, 'pull-request');
        assert.equal(first.body, '@errand also the tests');
        // Gitea says only which labels the issue has now: one event per label.
        assert.deepEqual(
          labels.map((e) => (e.type === 'labeled' ? e.label : e.type)).sort(),
          c.forge === 'gitea' ? ['bug', 'errand'] : ['errand'],
        );
        const labeled = labels.find((e) => e.type === 'labeled' && e.label === 'errand');
        assert.ok(labeled?.type === 'labeled');
        assert.equal(labeled.thread.kind, 'issue');
        assert.equal(labeled.thread.number, 5);
        assert.equal(labeled.thread.title, 'Crash on start');
        assert.equal(labeled.thread.body, 'It crashes.');

        if (c.forge !== 'gitlab') {
          // GitLab has no review body: a review's summary is a comment there.
          const review = await fake.sendWebhook(hook(projectId), secret, {
            type: 'review',
            pull: 1,
            body: '@errand please split the function',
          });
          assert.equal(review.status, 202, review.text);
          const last = (await queued(projectId)).at(-1);
          assert.ok(last?.type === 'comment');
          assert.equal(last.where, 'review');
          assert.equal(last.body, '@errand please split the function');
        }
        const bot = await fake.sendWebhook(hook(projectId), secret, {
          type: 'issue-comment',
          issue,
          body: '@errand hello',
          author: { login: 'ci', id: 90, bot: true },
        });
        assert.equal(bot.status, 202, bot.text);
        const botEvent = (await queued(projectId)).at(-1);
        assert.ok(botEvent?.type === 'comment');
        assert.equal(botEvent.author.bot, true, 'a bot is read as one');
        assert.equal(botEvent.thread.kind, 'issue');
      });

      test('a ping and an event Errand does not read: 200, nothing queued', async () => {
        for (const type of ['ping', 'unused'] as const) {
          const res = await nothingStored(projectId, () =>
            fake.sendWebhook(hook(projectId), secret, { type }),
          );
          assert.equal(res.status, 200, res.text);
          assert.deepEqual(res.json, { outcome: 'ignored', events: 0 });
        }
      });

      test('a missing, wrong or tampered signature, or another project’s secret: 401', async () => {
        const delivery: ForgeRequest = { type: 'comment', pull: 1, body: '@errand go' };
        assertRefused(
          await nothingStored(projectId, () =>
            fake.sendWebhook(hook(projectId), secret, delivery, { signature: 'none' }),
          ),
        );
        assertRefused(
          await nothingStored(projectId, () =>
            fake.sendWebhook(hook(projectId), 'not-the-secret-at-all', delivery),
          ),
        );
        assertRefused(
          await nothingStored(projectId, () =>
            fake.sendWebhook(hook(projectId), otherSecret, delivery),
          ),
        );
        if (c.signsBody)
          assertRefused(
            await nothingStored(projectId, () =>
              fake.sendWebhook(hook(projectId), secret, delivery, { signature: 'tampered' }),
            ),
          );
        // The other project's own deliveries are let in with its own secret.
        const own = await fake.sendWebhook(hook(otherProjectId), otherSecret, delivery);
        assert.equal(own.status, 202, own.text);
      });

      test('a signed body that is not JSON, or not the forge’s shape: 400', async () => {
        const notJson = await nothingStored(projectId, () =>
          fake.sendWebhook(
            hook(projectId),
            secret,
            { type: 'comment', pull: 1, body: 'x' },
            {
              rawBody: '{"action": "created", ',
            },
          ),
        );
        assertError(asResult(notJson), 400, 'invalid_json');
        const wrongShape = await nothingStored(projectId, () =>
          fake.sendWebhook(
            hook(projectId),
            secret,
            { type: 'comment', pull: 1, body: 'x' },
            {
              rawBody: JSON.stringify({ action: 'created', object_kind: 'note', is_pull: true }),
            },
          ),
        );
        assert.equal(wrongShape.status, 400, wrongShape.text);
        assert.equal(wrongShape.json.code, 'bad_request');
        assert.match(String(wrongShape.json.error), /is not what the forge sends/);
      });
    });
  }

  describe('projects a delivery cannot be for', () => {
    let fake: WebhookFake;
    before(async () => {
      fake = (await CASES[0]?.start()) as WebhookFake;
      await fake.openPull();
    });
    after(async () => {
      await fake?.close();
    });

    test('an unknown or malformed project id, a project without a secret: the same 401', async () => {
      const withoutSecret = await createForgeProject(fake, 'github', 'no secret');
      const delivery: ForgeRequest = { type: 'comment', pull: 1, body: '@errand go' };
      for (const id of [randomProjectId(), 'not-a-project', withoutSecret])
        assertRefused(
          await nothingStored(withoutSecret, () =>
            fake.sendWebhook(hook(id), 'some-secret-value', delivery),
          ),
        );
    });

    test('a project moved to plain git keeps its secret but takes no delivery: 401', async () => {
      const id = await createForgeProject(fake, 'github', 'moved');
      const secret = await makeSecret(id);
      const delivery: ForgeRequest = { type: 'comment', pull: 1, body: '@errand go' };
      const before = await fake.sendWebhook(hook(id), secret, delivery);
      assert.equal(before.status, 202, before.text);
      const moved = await svc.request('PATCH', `/v2/admin/projects/${id}`, {
        body: { forge: 'git', forgeUrl: null },
      });
      assert.equal(moved.status, 200, moved.text);
      assert.equal(moved.json.forgeWebhookSecretSet, true);
      assertRefused(await nothingStored(id, () => fake.sendWebhook(hook(id), secret, delivery)));
    });

    test('a secret sealed with another server key: 503 that says so, nothing stored', async () => {
      const id = await createForgeProject(fake, 'github', 'other key');
      await svc.service.ctx.db
        .updateTable('projects')
        .set({
          forge_webhook_secret: seal('a-different-errand-secret-key', 'the-secret-value-1234'),
        })
        .where('id', '=', id)
        .execute();
      const res = await nothingStored(id, () =>
        fake.sendWebhook(hook(id), 'the-secret-value-1234', { type: 'ping' }),
      );
      assertError(asResult(res), 503, 'unavailable');
      assert.match(String(res.json.error), /another ERRAND_SECRET_KEY/);
    });

    test('another content type than JSON: 415, nothing stored', async () => {
      const id = await createForgeProject(fake, 'github', 'form');
      const secret = await makeSecret(id);
      const res = await nothingStored(id, () =>
        fetch(hook(id), {
          method: 'POST',
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            'x-github-event': 'ping',
          },
          body: `payload=${encodeURIComponent('{}')}`,
        }),
      );
      assert.equal(res.status, 415);
      assert.equal(((await res.json()) as { code: string }).code, 'unsupported_media_type');
      assert.ok(secret.length > 0);
    });
  });

  test('recorded events are forgotten after 30 days, by the upkeep', async () => {
    const project = await svc.createProject({ name: 'upkeep' });
    const db = svc.service.ctx.db;
    const event = (key: string, age: string) => ({
      project_id: project.id,
      key,
      delivery_id: `d-${key}`,
      forge: 'github' as const,
      kind: 'comment',
      thread_kind: 'issue' as const,
      thread_number: 1,
      author: 'someone',
      url: 'https://github.com/acme/app/issues/1',
      received_at: sql<Date>`now() - ${age}::interval`,
    });
    await db
      .insertInto('forge_events')
      .values([event('old', '31 days'), event('recent', '29 days')])
      .execute();
    await runUpkeep(svc.service.ctx);
    assert.deepEqual(
      (await recorded(project.id)).map((r) => r.key),
      ['recent'],
    );
  });

  test('the threads told of missing write access are forgotten after 30 days, by the upkeep', async () => {
    const project = await svc.createProject({ name: 'refusals upkeep' });
    const db = svc.service.ctx.db;
    await db
      .insertInto('forge_refusals')
      .values([
        {
          project_id: project.id,
          thread: 'github:issue:1',
          at: sql<Date>`now() - interval '31 days'`,
        },
        {
          project_id: project.id,
          thread: 'github:issue:2',
          at: sql<Date>`now() - interval '29 days'`,
        },
      ])
      .execute();
    await runUpkeep(svc.service.ctx);
    const left = await db
      .selectFrom('forge_refusals')
      .select('thread')
      .where('project_id', '=', project.id)
      .execute();
    assert.deepEqual(
      left.map((r) => r.thread),
      ['github:issue:2'],
    );
  });

  describe('the settings', () => {
    let fake: WebhookFake;
    before(async () => {
      fake = (await CASES[0]?.start()) as WebhookFake;
    });
    after(async () => {
      await fake?.close();
    });

    test('a made secret is shown once, with the URL and the events; never again', async () => {
      const id = await createForgeProject(fake, 'github', 'settings');
      const created = await svc.request('GET', `/v2/admin/projects/${id}`);
      assert.equal(created.json.forgeWebhookSecretSet, false);
      assert.equal(created.json.forgeHandle, 'errand');
      assert.equal(created.json.forgeLabel, 'errand');

      const res = await svc.request('POST', `/v2/admin/projects/${id}/forge-webhook-secret`);
      assert.equal(res.status, 200, res.text);
      const body = res.json as {
        secret?: string;
        url?: string;
        events?: string[];
        project?: { forgeWebhookSecretSet: boolean };
      };
      assert.match(body.secret ?? '', /^[0-9A-Za-z]{40}$/);
      assert.equal(body.url, `${svc.url}/v2/forges/${id}/webhook`);
      assert.deepEqual(body.events, [
        // The pull request watch's: the checks of its head, and its changes.
        'Check runs',
        'Check suites',
        'Issue comments',
        'Issues',
        'Pull request review comments',
        'Pull request reviews',
        'Pull requests',
        // The base ref's pushes, for the environment's background build and the watch.
        'Pushes',
        'Statuses',
        'Workflow runs',
      ]);
      assert.equal(body.project?.forgeWebhookSecretSet, true);
      const secret = body.secret ?? '';
      for (const path of [`/v2/admin/projects/${id}`, '/v2/admin/projects']) {
        const read = await svc.request('GET', path);
        assert.equal(read.status, 200);
        assert.ok(!read.text.includes(secret), `${path} shows the secret`);
      }
      const row = await svc.service.ctx.db
        .selectFrom('projects')
        .select('forge_webhook_secret')
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.ok(row.forge_webhook_secret?.startsWith('v1.'), 'the secret is stored sealed');
      assert.ok(!row.forge_webhook_secret?.includes(secret));

      // A second one replaces the first: deliveries signed with the first are refused.
      const second = await svc.request('POST', `/v2/admin/projects/${id}/forge-webhook-secret`);
      const newSecret = (second.json as { secret?: string }).secret ?? '';
      assert.notEqual(newSecret, secret);
      await fake.openPull();
      assertRefused(
        await fake.sendWebhook(hook(id), secret, { type: 'comment', pull: 1, body: 'x' }),
      );
      const ok = await fake.sendWebhook(hook(id), newSecret, {
        type: 'comment',
        pull: 1,
        body: 'x',
      });
      assert.equal(ok.status, 202, ok.text);
    });

    test('a chosen secret, the handle and the label through PATCH; null removes the secret', async () => {
      const id = await createForgeProject(fake, 'github', 'chosen');
      const chosen = 'our-own-secret-value-1234';
      const res = await svc.request('PATCH', `/v2/admin/projects/${id}`, {
        body: { forgeWebhookSecret: chosen, forgeHandle: 'robot.helper', forgeLabel: 'ai: fix' },
      });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.forgeWebhookSecretSet, true);
      assert.equal(res.json.forgeHandle, 'robot.helper');
      assert.equal(res.json.forgeLabel, 'ai: fix');
      assert.ok(!res.text.includes(chosen));
      const ok = await fake.sendWebhook(hook(id), chosen, { type: 'ping' });
      assert.equal(ok.status, 200, ok.text);

      const cleared = await svc.request('PATCH', `/v2/admin/projects/${id}`, {
        body: { forgeWebhookSecret: null },
      });
      assert.equal(cleared.json.forgeWebhookSecretSet, false);
      assertRefused(await fake.sendWebhook(hook(id), chosen, { type: 'ping' }));
    });

    test('refused settings change nothing', async () => {
      const id = await createForgeProject(fake, 'github', 'refusals');
      const cases: [Record<string, unknown>, RegExp][] = [
        [{ forgeWebhookSecret: 'short' }, /"forgeWebhookSecret" must be 16 to 256 characters/],
        [{ forgeWebhookSecret: 'has a space in it, sadly' }, /"forgeWebhookSecret" must be/],
        [
          { forgeHandle: '@errand' },
          /"forgeHandle" must be the name comments mention, without the @/,
        ],
        [{ forgeHandle: '' }, /"forgeHandle"/],
        [{ forgeLabel: '   ' }, /"forgeLabel" must be 1 to 100 characters/],
        [{ forgeLabel: 'x'.repeat(101) }, /"forgeLabel" must be 1 to 100 characters/],
      ];
      for (const [body, pattern] of cases) {
        const res = await unchanged(svc, () =>
          svc.request('PATCH', `/v2/admin/projects/${id}`, { body }),
        );
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', pattern, JSON.stringify(body));
      }
    });

    test('a plain git project takes no webhook secret', async () => {
      const git = await svc.request('POST', '/v2/admin/projects', {
        body: { name: 'plain', repository: svc.database.dataDir, forge: 'git' },
      });
      assert.equal(git.status, 201, git.text);
      const id = git.json.id as string;
      const made = await unchanged(svc, () =>
        svc.request('POST', `/v2/admin/projects/${id}/forge-webhook-secret`),
      );
      assertError(made, 400, 'bad_request');
      assert.match(made.json.error ?? '', /plain git, which sends no webhooks/);
      const chosen = await unchanged(svc, () =>
        svc.request('PATCH', `/v2/admin/projects/${id}`, {
          body: { forgeWebhookSecret: 'our-own-secret-value-1234' },
        }),
      );
      assertError(chosen, 400, 'bad_request');
    });
  });
});
