// The webhook endpoint service as the CLI and the dashboard call it, without the HTTP schema in
// front: each check of what a person may type, and the records it returns. Then the secret and
// redeliver end to end: a real receiver on loopback verifies every delivery with the Standard
// Webhooks reference library, using the secret create and rotate showed, and gets a redelivered
// event again under the same webhook-id. The admin API's own cases are in
// src/features/webhooks/routes.test.ts.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { createJobId, SCRIPTED_ENV, scriptedRunner } from '../../../test/support/route-cases.ts';
import { startTestService, type TestService, waitFor } from '../../../test/support/service.ts';
import type { AppContext } from '../../context.ts';
import type { ProjectRecord } from '../../records/project.ts';
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listDeliveries,
  listWebhooks,
  redeliver,
  rotateWebhookSecret,
  updateWebhook,
} from './endpoints.ts';
import { type DeliveryRecord, WEBHOOK_EVENT_TYPES, type WebhookEventType } from './types.ts';

const SECRET_KEY = 'endpoints-test-secret-key';
const PUBLIC_URL = 'https://93.184.215.14/hooks';
const RECORD_FIELDS = [
  'createdAt',
  'description',
  'enabled',
  'events',
  'id',
  'previousSecretExpiresAt',
  'projectId',
  'updatedAt',
  'url',
];

interface Received {
  headers: Record<string, string>;
  body: string;
}

/** A webhook receiver on loopback that answers 204 and keeps every request. */
async function startReceiver(): Promise<{
  url: string;
  received: Received[];
  close(): Promise<void>;
}> {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string') headers[name] = value;
      }
      received.push({ headers, body: Buffer.concat(chunks).toString('utf8') });
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    close: () =>
      new Promise<void>((resolve, reject) =>
        server.close((err) => (err ? reject(err) : resolve())),
      ),
  };
}

/** Expects `act` to throw the AppError `code` with a message matching `pattern`. */
async function refused(act: () => Promise<unknown>, code: string, pattern: RegExp): Promise<void> {
  await assert.rejects(act, (err: unknown) => {
    assert.ok(err instanceof Error && 'code' in err, String(err));
    assert.equal(err.code, code, err.message);
    assert.match(err.message, pattern);
    return true;
  });
}

describe('webhook endpoint service', () => {
  let svc: TestService;
  let noKey: TestService;
  let ctx: AppContext;
  let project: ProjectRecord;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  before(async () => {
    receiver = await startReceiver();
    [svc, noKey] = await Promise.all([
      startTestService({
        runner: scriptedRunner(),
        env: {
          ...SCRIPTED_ENV,
          ERRAND_SECRET_KEY: SECRET_KEY,
          ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true',
          ERRAND_WEBHOOK_RETRY_DELAY_SECONDS: '1',
        },
      }),
      startTestService({ worker: false }),
    ]);
    ctx = svc.service.ctx;
    project = await svc.createProject({ name: 'webhook service' });
  });
  after(async () => {
    await Promise.all([svc?.close(), noKey?.close()]);
    await receiver?.close();
  });

  const count = async () =>
    Number(
      (
        await ctx.db
          .selectFrom('webhooks')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  describe('checks of what a person typed', () => {
    test('create refuses bad events, descriptions and flags, and writes nothing', async () => {
      const before = await count();
      const bad: [Record<string, unknown>, RegExp][] = [
        [{ events: [] }, /"events" must list at least one of job\.created/],
        [{ events: ['job.done'] }, /"job\.done" is not an event type/],
        [{ events: ['agent.step'] }, /"agent\.step" is not an event type/],
        [{ description: 'd'.repeat(501) }, /"description" is 501 characters; the maximum is 500/],
        [{ description: 'a\u0000b' }, /NUL/],
        [{ description: 42 }, /"description" must be a string/],
        [{ enabled: 'yes' }, /"enabled" must be a boolean/],
        [{ url: '' }, /"url" must be 1 to 2048 characters/],
        [{ url: 'not a url' }, /not a valid URL/],
        [{ url: 'ftp://93.184.215.14/' }, /https:\/\/ or http:\/\//],
      ];
      for (const [fields, pattern] of bad) {
        const input = { url: PUBLIC_URL, ...fields } as Parameters<typeof createWebhook>[2];
        await refused(() => createWebhook(ctx, project.id, input), 'bad_request', pattern);
      }
      assert.equal(await count(), before);
    });

    test('unknown or malformed project and webhook ids are not_found on every function', async () => {
      const own = await createWebhook(ctx, project.id, { url: PUBLIC_URL });
      const other = await svc.createProject({ name: 'other' });
      const calls: [string, (projectId: string, webhookId: string) => Promise<unknown>][] = [
        ['get', (p, w) => getWebhook(ctx, p, w)],
        ['update', (p, w) => updateWebhook(ctx, p, w, { enabled: false })],
        ['delete', (p, w) => deleteWebhook(ctx, p, w)],
        ['rotate', (p, w) => rotateWebhookSecret(ctx, p, w, 0)],
        ['deliveries', (p, w) => listDeliveries(ctx, p, w, { limit: 5 })],
        ['redeliver', (p, w) => redeliver(ctx, p, w, 'msg_AAAAAAAAAAAAAAAAAAAA')],
      ];
      const before = await getWebhook(ctx, project.id, own.id);
      for (const [name, call] of calls) {
        await refused(() => call('prj_AAAAAAAAAAAAAAAAAAAA', own.id), 'not_found', /project/);
        await refused(() => call('nope', own.id), 'not_found', /project/);
        await refused(() => call(other.id, own.id), 'not_found', /webhook/);
        await refused(() => call(project.id, 'whk_x'), 'not_found', /webhook/);
        await refused(() => call(project.id, project.id), 'not_found', /webhook/);
        assert.deepEqual(await getWebhook(ctx, project.id, own.id), before, name);
      }
      await refused(() => listWebhooks(ctx, 'prj_AAAAAAAAAAAAAAAAAAAA'), 'not_found', /project/);
      await refused(
        () => createWebhook(ctx, 'prj_AAAAAAAAAAAAAAAAAAAA', { url: PUBLIC_URL }),
        'not_found',
        /project/,
      );
      await refused(
        () => redeliver(ctx, project.id, own.id, 'msg_AAAAAAAAAAAAAAAAAAAA'),
        'not_found',
        /delivery msg_/,
      );
    });

    test('update needs a change and checks each field as create does', async () => {
      const hook = await createWebhook(ctx, project.id, {
        url: PUBLIC_URL,
        events: ['job.completed'],
      });
      const { secret: _, ...record } = hook;
      await refused(
        () => updateWebhook(ctx, project.id, hook.id, {}),
        'bad_request',
        /at least one/,
      );
      await refused(
        () => updateWebhook(ctx, project.id, hook.id, { events: [] }),
        'bad_request',
        /"events"/,
      );
      await refused(
        () =>
          updateWebhook(ctx, project.id, hook.id, {
            events: ['nope' as WebhookEventType],
          }),
        'bad_request',
        /not an event type/,
      );
      await refused(
        () => updateWebhook(ctx, project.id, hook.id, { url: 'https://user:pw@93.184.215.14/' }),
        'bad_request',
        /credentials/,
      );
      assert.deepEqual(await getWebhook(ctx, project.id, hook.id), record);
      // An empty description is none.
      const cleared = await updateWebhook(ctx, project.id, hook.id, { description: '   ' });
      assert.equal(cleared.description, null);
    });

    test('rotate refuses an overlap outside 0 to a week; deliveries a limit outside 1 to 100', async () => {
      const hook = await createWebhook(ctx, project.id, { url: PUBLIC_URL });
      for (const overlap of [-1, 604_801, 0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        await refused(
          () => rotateWebhookSecret(ctx, project.id, hook.id, overlap),
          'bad_request',
          /"overlapSeconds" must be an integer from 0 to 604800/,
        );
      }
      for (const limit of [0, 101, 2.5]) {
        await refused(
          () => listDeliveries(ctx, project.id, hook.id, { limit }),
          'bad_request',
          /"limit"/,
        );
      }
      await refused(
        () => listDeliveries(ctx, project.id, hook.id, { limit: 5, cursor: 'x' }),
        'bad_request',
        /"cursor"/,
      );
    });

    test('records never carry a secret; the listing is the project’s, oldest first', async () => {
      const listed = await listWebhooks(ctx, project.id);
      assert.ok(listed.length > 0);
      for (const record of listed) {
        assert.deepEqual(Object.keys(record).sort(), RECORD_FIELDS);
        assert.equal(record.projectId, project.id);
      }
      const times = listed.map((r) => r.createdAt);
      assert.deepEqual([...times].sort(), times);
      const got = await getWebhook(ctx, project.id, listed[0]?.id ?? '');
      assert.deepEqual(Object.keys(got).sort(), RECORD_FIELDS);
    });

    test('without ERRAND_SECRET_KEY, create and rotate say which setting is missing', async () => {
      const c = noKey.service.ctx;
      const p = await noKey.createProject({ name: 'no key' });
      await refused(
        () => createWebhook(c, p.id, { url: PUBLIC_URL }),
        'bad_request',
        /ERRAND_SECRET_KEY/,
      );
      await refused(
        () => rotateWebhookSecret(c, p.id, 'whk_AAAAAAAAAAAAAAAAAAAA', 60),
        'bad_request',
        /ERRAND_SECRET_KEY/,
      );
      assert.deepEqual(await listWebhooks(c, p.id), []);
    });
  });

  describe('end to end with a receiver', () => {
    /** Waits until the receiver has `n` requests, and returns them. */
    const receivedCount = (n: number) =>
      waitFor(`${n} webhook requests`, async () =>
        receiver.received.length >= n ? receiver.received.slice(0, n) : undefined,
      );
    // Each test has a project of its own: only its endpoints get its jobs' events (the
    // endpoints above name a public address, which no test may reach).
    let project: ProjectRecord;
    beforeEach(async () => {
      project = await svc.createProject({ name: 'webhook receiver' });
    });
    const deliveriesOf = async (webhookId: string) =>
      (await listDeliveries(ctx, project.id, webhookId, { limit: 100 })).deliveries;

    test('a delivery verifies with the created secret; redeliver sends it again under the same id; rotation overlaps', async () => {
      const hook = await createWebhook(ctx, project.id, {
        url: receiver.url,
        events: ['job.completed'],
        description: 'loopback receiver',
      });
      const jobId = await createJobId(svc, project.id, 'complete the first turn');
      const [first] = await receivedCount(1);
      assert.ok(first);
      const verified = new Webhook(hook.secret).verify(first.body, first.headers) as {
        type: string;
        data: { jobId: string };
      };
      assert.equal(verified.type, 'job.completed');
      assert.equal(verified.data.jobId, jobId);

      const delivered = await waitFor('the delivery to be recorded', async () => {
        const [d] = await deliveriesOf(hook.id);
        return d?.state === 'delivered' ? d : undefined;
      });
      assert.equal(delivered.id, first.headers['webhook-id']);
      assert.equal(delivered.jobId, jobId);
      assert.equal(delivered.type, 'job.completed');
      assert.deepEqual(
        delivered.attempts.map((a) => [a.attempt, a.status]),
        [[1, 204]],
      );

      // Redeliver: pending at once, then the same id and body again, a second attempt logged.
      const requeued = await redeliver(ctx, project.id, hook.id, delivered.id);
      assert.equal(requeued.state, 'pending');
      assert.equal(requeued.deliveredAt, null);
      const [, again] = await receivedCount(2);
      assert.ok(again);
      assert.equal(again.headers['webhook-id'], delivered.id);
      assert.equal(again.body, first.body);
      new Webhook(hook.secret).verify(again.body, again.headers);
      const redelivered: DeliveryRecord = await waitFor(
        'the redelivery to be recorded',
        async () => {
          const d = (await deliveriesOf(hook.id)).find((x) => x.id === delivered.id);
          return d?.state === 'delivered' && d.attempts.length === 2 ? d : undefined;
        },
      );
      assert.deepEqual(
        redelivered.attempts.map((a) => [a.attempt, a.status]),
        [
          [1, 204],
          [2, 204],
        ],
      );
      assert.equal((await deliveriesOf(hook.id)).length, 1);

      // Rotation with an overlap: the next delivery verifies with the new and the old secret.
      const rotated = await rotateWebhookSecret(ctx, project.id, hook.id, 3600);
      assert.notEqual(rotated.secret, hook.secret);
      assert.deepEqual(Object.keys(rotated).sort(), [...RECORD_FIELDS, 'secret'].sort());
      const sent = await svc.request('POST', `/v2/agent/${project.id}/job/${jobId}/message`, {
        body: { prompt: 'complete a second turn' },
      });
      assert.equal(sent.status, 200, sent.text);
      const [, , third] = await receivedCount(3);
      assert.ok(third);
      new Webhook(rotated.secret).verify(third.body, third.headers);
      new Webhook(hook.secret).verify(third.body, third.headers);

      // Without an overlap, the old secrets no longer verify.
      const dropped = await rotateWebhookSecret(ctx, project.id, hook.id, 0);
      assert.equal(dropped.previousSecretExpiresAt, null);
      const sentAgain = await svc.request('POST', `/v2/agent/${project.id}/job/${jobId}/message`, {
        body: { prompt: 'complete a third turn' },
      });
      assert.equal(sentAgain.status, 200, sentAgain.text);
      const [, , , fourth] = await receivedCount(4);
      assert.ok(fourth);
      new Webhook(dropped.secret).verify(fourth.body, fourth.headers);
      for (const old of [hook.secret, rotated.secret]) {
        assert.throws(
          () => new Webhook(old).verify(fourth.body, fourth.headers),
          WebhookVerificationError,
        );
      }
      // No secret of any kind in what the receiver got.
      for (const r of receiver.received) {
        for (const secret of [hook.secret, rotated.secret, dropped.secret, SECRET_KEY]) {
          assert.ok(!r.body.includes(secret.replace(/^whsec_/, '')));
          assert.ok(!JSON.stringify(r.headers).includes(secret.replace(/^whsec_/, '')));
        }
      }
    });

    test('a disabled endpoint gets nothing; deleting one leaves the others', async () => {
      const start = receiver.received.length;
      const off = await createWebhook(ctx, project.id, {
        url: receiver.url,
        events: [...WEBHOOK_EVENT_TYPES],
        enabled: false,
      });
      // job.archived is the sentinel: archiving the job after it completed sends it last.
      const on = await createWebhook(ctx, project.id, {
        url: `${receiver.url}?on`,
        events: ['job.completed', 'job.archived'],
      });
      const jobId = await createJobId(svc, project.id, 'complete with one endpoint disabled');
      await receivedCount(start + 1);
      // Nothing else is sent. The sentinel: this endpoint gets job.archived only after every
      // earlier delivery of the job to it; a delivery to the disabled one, were there any, is
      // written with its event, so the disabled endpoint's log below would show it.
      const archived = await svc.request('POST', `/v2/agent/${project.id}/job/${jobId}/archive`);
      assert.equal(archived.status, 200, archived.text);
      await receivedCount(start + 2);
      const mine = receiver.received.slice(start);
      const sent = await deliveriesOf(on.id);
      assert.deepEqual(
        mine.map((r) => r.headers['webhook-id']),
        ['job.completed', 'job.archived'].map((type) => sent.find((d) => d.type === type)?.id),
      );
      assert.deepEqual(await deliveriesOf(off.id), []);
      await deleteWebhook(ctx, project.id, off.id);
      assert.ok((await listWebhooks(ctx, project.id)).some((w) => w.id === on.id));
      await refused(() => getWebhook(ctx, project.id, off.id), 'not_found', /webhook/);
    });
  });
});
