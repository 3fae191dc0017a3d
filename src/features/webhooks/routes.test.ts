// The admin webhook routes under /v2/admin/projects/{projectId}/webhooks: create, list, get,
// update, delete, rotate-secret, the delivery log and redeliver. Each refusal is checked to
// store nothing; the signing secret is shown by create and rotate only, stored sealed, and never
// listed or logged. The delivery of events to endpoints is tested in src/features/webhooks/.
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
import { newId } from '../../ids.ts';
import { createLogger } from '../../log.ts';
import { open } from '../../secrets/box.ts';
import type { DeliveryRecord, WebhookRecord, WebhookWithSecret } from './types.ts';
import { WEBHOOK_EVENT_TYPES } from './types.ts';

const SECRET_KEY = 'admin-webhooks-test-secret-key';
/** A public address: accepted without ERRAND_WEBHOOK_ALLOW_PRIVATE, and no DNS is needed. */
const PUBLIC_URL = 'https://93.184.215.14/hooks/errand';
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
const WEBHOOK_ID = /^whk_[0-9A-Za-z]{20}$/;
const DAY = 86_400;

const WEBHOOK_FIELDS = [
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

function parse<T>(res: HttpResult): T {
  return JSON.parse(res.text) as T;
}

describe('admin webhook routes', () => {
  // svc: the usual server, private targets refused. priv: ERRAND_WEBHOOK_ALLOW_PRIVATE=true.
  // noKey: no ERRAND_SECRET_KEY, so no secret can be stored.
  let svc: TestService;
  let priv: TestService;
  let noKey: TestService;
  let fx: RouteFixture;
  const fixture = () => fx;
  /** A webhook of project A with a failed delivery, and one of project B. */
  let hook: WebhookWithSecret;
  let otherHook: WebhookWithSecret;
  let deliveryId: string;
  /** Every signing secret this file was shown, to look for in listings and the log. */
  const secrets: string[] = [];
  // Everything svc logs at the most detailed level.
  let logged = '';
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      logged += String(chunk);
      done();
    },
  });

  const path = (projectId: string, rest = '') => `/v2/admin/projects/${projectId}/webhooks${rest}`;

  const create = async (
    body: Record<string, unknown>,
    s: TestService = svc,
    projectId = fx.project.id,
  ): Promise<WebhookWithSecret> => {
    const res = await s.request('POST', path(projectId), { body });
    assert.equal(res.status, 201, res.text);
    const created = parse<WebhookWithSecret>(res);
    secrets.push(created.secret);
    return created;
  };

  /** A delivery as the outbox writes one, with attempts, for the log and redeliver cases. */
  const insertDelivery = async (
    s: TestService,
    webhookId: string,
    jobId: string,
    state: 'pending' | 'delivered' | 'failed',
    attempts: { status: number | null; error: string | null; latencyMs: number }[] = [],
    createdAt?: Date,
  ): Promise<string> => {
    const db = s.service.ctx.db;
    const id = newId('msg');
    await db
      .insertInto('webhook_deliveries')
      .values({
        id,
        webhook_id: webhookId,
        job_id: jobId,
        event_seq: 1,
        type: 'job.created',
        payload: JSON.stringify({ type: 'job.created' }),
        state,
        attempts: attempts.length,
        created_at: createdAt ?? new Date(),
        delivered_at: state === 'delivered' ? new Date() : null,
        failed_at: state === 'failed' ? new Date() : null,
      })
      .execute();
    for (const [i, a] of attempts.entries()) {
      await db
        .insertInto('webhook_attempts')
        .values({
          delivery_id: id,
          attempt: i + 1,
          at: new Date(Date.now() + i),
          status: a.status,
          error: a.error,
          latency_ms: a.latencyMs,
        })
        .execute();
    }
    return id;
  };

  const deliveryRow = (s: TestService, id: string) =>
    s.service.ctx.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirstOrThrow();

  before(async () => {
    [svc, priv, noKey] = await Promise.all([
      startTestService({
        worker: false,
        log: createLogger('trace', logSink),
        env: { ERRAND_SECRET_KEY: SECRET_KEY },
      }),
      startTestService({
        worker: false,
        env: { ERRAND_SECRET_KEY: SECRET_KEY, ERRAND_WEBHOOK_ALLOW_PRIVATE: 'true' },
      }),
      startTestService({ worker: false }),
    ]);
    fx = await createRouteFixture(svc);
    hook = await create({ url: PUBLIC_URL, description: 'fixture A' });
    otherHook = await create(
      { url: PUBLIC_URL, description: 'fixture B' },
      svc,
      fx.otherProject.id,
    );
    deliveryId = await insertDelivery(svc, hook.id, fx.jobId, 'failed', [
      { status: 500, error: null, latencyMs: 12 },
    ]);
  });
  after(async () => {
    await Promise.all([svc?.close(), priv?.close(), noKey?.close()]);
  });

  const specs: Record<string, RouteSpec> = {
    create: {
      method: 'POST',
      scope: 'admin',
      path: ({ projectId }) => path(projectId),
      body: () => ({ url: PUBLIC_URL, description: 'from the common cases' }),
    },
    list: { method: 'GET', scope: 'admin', path: ({ projectId }) => path(projectId) },
    get: {
      method: 'GET',
      scope: 'admin',
      path: ({ projectId }) => path(projectId, `/${hook.id}`),
    },
    update: {
      method: 'PATCH',
      scope: 'admin',
      path: ({ projectId }) => path(projectId, `/${hook.id}`),
      // The fixture's own description: accepted, and changes nothing that matters.
      body: () => ({ description: 'fixture A' }),
    },
    delete: {
      method: 'DELETE',
      scope: 'admin',
      path: ({ projectId }) => path(projectId, `/${hook.id}`),
    },
    rotate: {
      method: 'POST',
      scope: 'admin',
      path: ({ projectId }) => path(projectId, `/${hook.id}/rotate-secret`),
      body: () => ({ overlapSeconds: 60 }),
    },
    deliveries: {
      method: 'GET',
      scope: 'admin',
      path: ({ projectId }) => path(projectId, `/${hook.id}/deliveries`),
    },
    redeliver: {
      method: 'POST',
      scope: 'admin',
      path: ({ projectId }) => path(projectId, `/${hook.id}/deliveries/${deliveryId}/redeliver`),
    },
  };

  describe('happy path', () => {
    test('POST: 201 with the record and the secret, shown once; readable by id and listed', async () => {
      const res = await svc.request('POST', path(fx.project.id), {
        body: { url: PUBLIC_URL },
      });
      assert.equal(res.status, 201, res.text);
      const created = parse<WebhookWithSecret>(res);
      secrets.push(created.secret);
      assert.deepEqual(Object.keys(created).sort(), [...WEBHOOK_FIELDS, 'secret'].sort());
      assert.match(created.id, WEBHOOK_ID);
      assert.equal(created.projectId, fx.project.id);
      assert.equal(created.url, PUBLIC_URL);
      // Every event type when none are named, enabled, no description.
      assert.deepEqual(created.events, [...WEBHOOK_EVENT_TYPES]);
      assert.equal(created.enabled, true);
      assert.equal(created.description, null);
      assert.equal(created.previousSecretExpiresAt, null);
      isoNear(created.createdAt);
      isoNear(created.updatedAt);
      // The Standard Webhooks format: whsec_ and 32 random bytes in base64.
      assert.match(created.secret, SECRET);
      assert.equal(Buffer.from(created.secret.slice(6), 'base64').length, 32);

      const { secret, ...record } = created;
      const read = await svc.request('GET', path(fx.project.id, `/${created.id}`));
      assert.equal(read.status, 200, read.text);
      assert.deepEqual(parse<WebhookRecord>(read), record);

      const list = await svc.request('GET', path(fx.project.id));
      assert.equal(list.status, 200, list.text);
      const { webhooks } = parse<{ webhooks: WebhookRecord[] }>(list);
      assert.deepEqual(Object.keys(parse<object>(list)), ['webhooks']);
      // Oldest first, this project's only.
      const ids = webhooks.map((w) => w.id);
      assert.ok(ids.indexOf(hook.id) < ids.indexOf(created.id));
      assert.ok(!ids.includes(otherHook.id));
      assert.ok(webhooks.every((w) => w.projectId === fx.project.id));
      assert.deepEqual(
        webhooks.find((w) => w.id === created.id),
        record,
      );

      // Stored sealed with ERRAND_SECRET_KEY, never in the clear.
      const row = await svc.service.ctx.db
        .selectFrom('webhooks')
        .selectAll()
        .where('id', '=', created.id)
        .executeTakeFirstOrThrow();
      assert.ok(!row.secret.includes(secret.slice(6)));
      assert.equal(open(SECRET_KEY, row.secret), secret);
      assert.equal(row.previous_secret, null);
    });

    test('POST: chosen events (repeats dropped, in the canonical order), a description, disabled', async () => {
      const created = await create({
        url: `${PUBLIC_URL}?project=a`,
        events: ['pull_request.opened', 'job.completed', 'job.failed', 'job.completed'],
        description: '  CI notifier  ',
        enabled: false,
      });
      assert.deepEqual(created.events, ['job.completed', 'job.failed', 'pull_request.opened']);
      assert.equal(created.description, 'CI notifier');
      assert.equal(created.enabled, false);
      assert.equal(created.url, `${PUBLIC_URL}?project=a`);
      const every = await create({
        url: PUBLIC_URL,
        events: [...WEBHOOK_EVENT_TYPES].reverse(),
        description: null,
      });
      assert.deepEqual(every.events, [...WEBHOOK_EVENT_TYPES]);
      assert.equal(every.description, null);
      const longest = await create({ url: PUBLIC_URL, description: 'd'.repeat(500) });
      assert.equal(longest.description, 'd'.repeat(500));
      // Every secret is new.
      assert.equal(new Set([created.secret, every.secret, longest.secret]).size, 3);
    });

    test('PATCH: 200 with the changed record; what the body does not name stays', async () => {
      const created = await create({ url: PUBLIC_URL, description: 'before' });
      const patch = (body: unknown) =>
        svc.request('PATCH', path(fx.project.id, `/${created.id}`), { body });
      const res = await patch({ url: 'https://93.184.215.15/other', events: ['job.failed'] });
      assert.equal(res.status, 200, res.text);
      const changed = parse<WebhookRecord>(res);
      assert.deepEqual(Object.keys(changed).sort(), WEBHOOK_FIELDS);
      assert.equal(changed.url, 'https://93.184.215.15/other');
      assert.deepEqual(changed.events, ['job.failed']);
      assert.equal(changed.description, 'before');
      assert.equal(changed.enabled, true);
      assert.equal(changed.createdAt, created.createdAt);
      assert.ok(changed.updatedAt > created.updatedAt);

      const disabled = parse<WebhookRecord>(await patch({ enabled: false, description: null }));
      assert.equal(disabled.enabled, false);
      assert.equal(disabled.description, null);
      assert.deepEqual(disabled.events, ['job.failed']);
      const read = parse<WebhookRecord>(
        await svc.request('GET', path(fx.project.id, `/${created.id}`)),
      );
      assert.deepEqual(read, disabled);

      // The secret is not changed by an update.
      const row = await svc.service.ctx.db
        .selectFrom('webhooks')
        .select('secret')
        .where('id', '=', created.id)
        .executeTakeFirstOrThrow();
      assert.equal(open(SECRET_KEY, row.secret), created.secret);
    });

    test('DELETE: 204 without a body; gone from get and list, with its delivery log', async () => {
      const created = await create({ url: PUBLIC_URL });
      const delivery = await insertDelivery(svc, created.id, fx.jobId, 'delivered', [
        { status: 200, error: null, latencyMs: 5 },
      ]);
      const res = await svc.request('DELETE', path(fx.project.id, `/${created.id}`));
      assert.equal(res.status, 204, res.text);
      assert.equal(res.text, '');
      assertError(
        await svc.request('GET', path(fx.project.id, `/${created.id}`)),
        404,
        'not_found',
      );
      const list = parse<{ webhooks: WebhookRecord[] }>(
        await svc.request('GET', path(fx.project.id)),
      );
      assert.ok(!list.webhooks.some((w) => w.id === created.id));
      const left = await svc.service.ctx.db
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('id', '=', delivery)
        .execute();
      assert.deepEqual(left, []);
      // A second delete finds nothing.
      const again = await unchanged(svc, () =>
        svc.request('DELETE', path(fx.project.id, `/${created.id}`)),
      );
      assertError(again, 404, 'not_found');
    });

    test('rotate-secret: a new secret; the previous one sealed, signing for the overlap', async () => {
      const created = await create({ url: PUBLIC_URL });
      const rotatePath = path(fx.project.id, `/${created.id}/rotate-secret`);
      const row = () =>
        svc.service.ctx.db
          .selectFrom('webhooks')
          .selectAll()
          .where('id', '=', created.id)
          .executeTakeFirstOrThrow();

      // No body: a day's overlap.
      const res = await svc.request('POST', rotatePath);
      assert.equal(res.status, 200, res.text);
      const rotated = parse<WebhookWithSecret>(res);
      secrets.push(rotated.secret);
      assert.deepEqual(Object.keys(rotated).sort(), [...WEBHOOK_FIELDS, 'secret'].sort());
      assert.match(rotated.secret, SECRET);
      assert.notEqual(rotated.secret, created.secret);
      isoNear(rotated.previousSecretExpiresAt, 5_000 + DAY * 1000);
      const expires = Date.parse(rotated.previousSecretExpiresAt ?? '');
      assert.ok(Math.abs(expires - (Date.now() + DAY * 1000)) < 60_000, `expires ${expires}`);
      let stored = await row();
      assert.equal(open(SECRET_KEY, stored.secret), rotated.secret);
      assert.ok(stored.previous_secret);
      assert.ok(!stored.previous_secret.includes(created.secret.slice(6)));
      assert.equal(open(SECRET_KEY, stored.previous_secret), created.secret);
      assert.equal(
        stored.previous_secret_expires_at?.toISOString(),
        rotated.previousSecretExpiresAt,
      );
      const read = parse<WebhookRecord>(
        await svc.request('GET', path(fx.project.id, `/${created.id}`)),
      );
      assert.equal(read.previousSecretExpiresAt, rotated.previousSecretExpiresAt);

      // A given overlap: the secret before this rotation becomes the previous one.
      const hour = parse<WebhookWithSecret>(
        await svc.request('POST', rotatePath, { body: { overlapSeconds: 3600 } }),
      );
      secrets.push(hour.secret);
      stored = await row();
      assert.equal(open(SECRET_KEY, stored.secret), hour.secret);
      assert.equal(open(SECRET_KEY, stored.previous_secret ?? ''), rotated.secret);
      const hourExpires = Date.parse(hour.previousSecretExpiresAt ?? '');
      assert.ok(Math.abs(hourExpires - (Date.now() + 3_600_000)) < 60_000);

      // Overlap 0: the previous secret is dropped at once.
      const none = await svc.request('POST', rotatePath, { body: { overlapSeconds: 0 } });
      assert.equal(none.status, 200, none.text);
      const dropped = parse<WebhookWithSecret>(none);
      secrets.push(dropped.secret);
      assert.equal(dropped.previousSecretExpiresAt, null);
      stored = await row();
      assert.equal(open(SECRET_KEY, stored.secret), dropped.secret);
      assert.equal(stored.previous_secret, null);
      assert.equal(stored.previous_secret_expires_at, null);

      // The longest overlap, a week, and an empty object (the default).
      const week = await svc.request('POST', rotatePath, { body: { overlapSeconds: 604_800 } });
      assert.equal(week.status, 200, week.text);
      secrets.push(parse<WebhookWithSecret>(week).secret);
      const empty = await svc.request('POST', rotatePath, { body: {} });
      assert.equal(empty.status, 200, empty.text);
      const byDefault = parse<WebhookWithSecret>(empty);
      secrets.push(byDefault.secret);
      const defaultExpires = Date.parse(byDefault.previousSecretExpiresAt ?? '');
      assert.ok(Math.abs(defaultExpires - (Date.now() + DAY * 1000)) < 60_000);
      const nullBody = await svc.request('POST', rotatePath, {
        rawBody: 'null',
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(nullBody.status, 200, nullBody.text);
      secrets.push(parse<WebhookWithSecret>(nullBody).secret);
    });

    test('deliveries: newest first, a page at a time, each with its attempts in order', async () => {
      const created = await create({ url: PUBLIC_URL });
      const deliveriesPath = path(fx.project.id, `/${created.id}/deliveries`);
      const empty = await svc.request('GET', deliveriesPath);
      assert.equal(empty.status, 200, empty.text);
      assert.deepEqual(parse<object>(empty), { deliveries: [], nextCursor: null });

      // Five deliveries, a second apart; two share a timestamp (ordered by id then).
      const base = Date.now() - 60_000;
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const at = new Date(base + Math.min(i, 3) * 1000);
        ids.push(
          await insertDelivery(
            svc,
            created.id,
            fx.jobId,
            i === 0 ? 'failed' : 'delivered',
            i === 0
              ? [
                  { status: 500, error: null, latencyMs: 30 },
                  { status: null, error: 'timed out after 10000 ms', latencyMs: 10_000 },
                  { status: 503, error: null, latencyMs: 7 },
                ]
              : [{ status: 204, error: null, latencyMs: 3 }],
            at,
          ),
        );
      }
      // Another webhook's delivery is not in this log.
      await insertDelivery(svc, hook.id, fx.jobId, 'delivered');
      // The default page is 20: one page holds all five, the two of one time first (ordered
      // by id, in the database's collation), then the others newest first.
      const all = parse<{ deliveries: DeliveryRecord[]; nextCursor: string | null }>(
        await svc.request('GET', deliveriesPath),
      );
      assert.equal(all.nextCursor, null);
      const newestFirst = all.deliveries.map((d) => d.id);
      assert.deepEqual(new Set(newestFirst.slice(0, 2)), new Set(ids.slice(3)));
      assert.deepEqual(newestFirst.slice(2), [ids[2], ids[1], ids[0]]);

      const seen: DeliveryRecord[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const query: string = `?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
        const res = await svc.request('GET', `${deliveriesPath}${query}`);
        assert.equal(res.status, 200, res.text);
        const page = parse<{ deliveries: DeliveryRecord[]; nextCursor: string | null }>(res);
        assert.ok(page.deliveries.length <= 2);
        seen.push(...page.deliveries);
        cursor = page.nextCursor;
        pages++;
      } while (cursor);
      // Pages of two: every delivery once, in the same order, ties included.
      assert.equal(pages, 3);
      assert.deepEqual(
        seen.map((d) => d.id),
        newestFirst,
      );

      const oldest = seen.at(-1);
      assert.ok(oldest);
      assert.deepEqual(Object.keys(oldest).sort(), [
        'attempts',
        'createdAt',
        'deliveredAt',
        'eventSeq',
        'failedAt',
        'id',
        'jobId',
        'state',
        'type',
        'webhookId',
      ]);
      assert.equal(oldest.webhookId, created.id);
      assert.equal(oldest.jobId, fx.jobId);
      assert.equal(oldest.eventSeq, 1);
      assert.equal(oldest.type, 'job.created');
      assert.equal(oldest.state, 'failed');
      isoNear(oldest.failedAt);
      assert.equal(oldest.deliveredAt, null);
      assert.deepEqual(
        oldest.attempts.map((a) => [a.attempt, a.status, a.error, a.latencyMs]),
        [
          [1, 500, null, 30],
          [2, null, 'timed out after 10000 ms', 10_000],
          [3, 503, null, 7],
        ],
      );
      for (const a of oldest.attempts) isoNear(a.at);
    });

    test('redeliver: 202, a failed or delivered delivery is pending again, its attempts kept', async () => {
      const created = await create({ url: PUBLIC_URL });
      for (const state of ['failed', 'delivered'] as const) {
        const id = await insertDelivery(svc, created.id, fx.jobId, state, [
          { status: state === 'failed' ? 500 : 200, error: null, latencyMs: 9 },
        ]);
        const res = await svc.request(
          'POST',
          path(fx.project.id, `/${created.id}/deliveries/${id}/redeliver`),
        );
        assert.equal(res.status, 202, res.text);
        const record = parse<DeliveryRecord>(res);
        assert.equal(record.id, id);
        assert.equal(record.state, 'pending');
        assert.equal(record.deliveredAt, null);
        assert.equal(record.failedAt, null);
        assert.equal(record.attempts.length, 1);
        const row = await deliveryRow(svc, id);
        assert.equal(row.state, 'pending');
        // Pending now, so a second redeliver is refused until it has been attempted.
        const again = await svc.request(
          'POST',
          path(fx.project.id, `/${created.id}/deliveries/${id}/redeliver`),
        );
        assertError(again, 409, 'conflict');
      }
    });

    test('private targets and http:// are accepted with ERRAND_WEBHOOK_ALLOW_PRIVATE=true', async () => {
      const project = await priv.createProject({ name: 'local receivers' });
      for (const url of [
        'http://127.0.0.1:9999/hook',
        'http://localhost:8080/hook',
        'https://10.0.0.5/hook',
        'http://[::1]:3000/',
        'http://192.168.1.20/errand',
      ]) {
        const res = await priv.request('POST', path(project.id), { body: { url } });
        assert.equal(res.status, 201, `${url}: ${res.text}`);
        assert.equal(parse<WebhookRecord>(res).url, url);
        secrets.push(parse<WebhookWithSecret>(res).secret);
      }
    });

    test(`a project may have 20 webhooks; the 21st is refused with 409`, async () => {
      const project = await svc.createProject({ name: 'many webhooks' });
      const made = await Promise.all(
        Array.from({ length: 20 }, () => create({ url: PUBLIC_URL }, svc, project.id)),
      );
      assert.equal(made.length, 20);
      const res = await unchanged(svc, () =>
        svc.request('POST', path(project.id), { body: { url: PUBLIC_URL } }),
      );
      assertError(res, 409, 'conflict');
      assert.match(res.json.error ?? '', /20 webhooks/);
      // Concurrent creates cannot pass the limit together.
      const other = await svc.createProject({ name: 'racing webhooks' });
      const raced = await Promise.all(
        Array.from({ length: 25 }, () =>
          svc.request('POST', path(other.id), { body: { url: PUBLIC_URL } }),
        ),
      );
      assert.equal(raced.filter((r) => r.status === 201).length, 20);
      for (const r of raced.filter((r) => r.status !== 201)) assertError(r, 409, 'conflict');
      // Another project is not counted.
      await create({ url: PUBLIC_URL }, svc, fx.otherProject.id);
    });
  });

  describe('errors', () => {
    describe('POST …/webhooks', () => jsonBodyCases(specs.create as RouteSpec, fixture));
    describe('PATCH …/webhooks/{webhookId}', () =>
      jsonBodyCases(specs.update as RouteSpec, fixture));

    /** Asserts that creating a webhook with `body` is refused with a 400 and stores nothing. */
    const refused = async (body: unknown, pattern: RegExp, s = svc, projectId?: string) => {
      const res = await unchanged(s, () =>
        s.request('POST', path(projectId ?? fx.project.id), { body }),
      );
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', pattern, JSON.stringify(body));
      return res;
    };

    test('400 for a missing, empty, non-string, too long or malformed url', async () => {
      for (const url of [
        undefined,
        '',
        42,
        null,
        ['https://a.example'],
        `https://93.184.215.14/${'a'.repeat(2048)}`,
      ]) {
        await refused({ url }, /"url"/);
      }
      for (const url of ['not a url', '/relative/path', 'https://', 'hooks.example.com/x']) {
        await refused({ url }, /not a valid URL/);
      }
    });

    test('400 for schemes other than https://, and for credentials in the url', async () => {
      for (const url of [
        'http://93.184.215.14/hook',
        'ftp://93.184.215.14/hook',
        'file:///etc/passwd',
        'javascript:alert(1)',
        'ws://93.184.215.14/',
      ]) {
        await refused({ url }, /https:\/\/.*ERRAND_WEBHOOK_ALLOW_PRIVATE/);
      }
      await refused({ url: 'https://user:pass@93.184.215.14/hook' }, /credentials/);
      await refused({ url: 'https://token@93.184.215.14/hook' }, /credentials/);
    });

    test('400 for loopback, private, link-local and metadata targets (ERRAND_WEBHOOK_ALLOW_PRIVATE off)', async () => {
      for (const url of [
        'https://127.0.0.1/hook',
        'https://127.1.2.3:8443/hook',
        'https://localhost/hook',
        'https://[::1]/hook',
        'https://10.0.0.1/hook',
        'https://172.16.5.4/hook',
        'https://192.168.0.10/hook',
        'https://169.254.169.254/latest/meta-data/',
        'https://[fe80::1]/hook',
        'https://0.0.0.0/hook',
        'https://[::ffff:127.0.0.1]/hook',
      ]) {
        const res = await refused({ url }, /not allowed/);
        assert.match(res.json.error ?? '', /ERRAND_WEBHOOK_ALLOW_PRIVATE=true/);
      }
      // And on an update, which leaves the stored url as it was.
      const res = await unchanged(svc, () =>
        svc.request('PATCH', path(fx.project.id, `/${hook.id}`), {
          body: { url: 'https://169.254.169.254/' },
        }),
      );
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', /cloud metadata/);
    });

    test('400 for an empty events list, unknown types, or a list that is not one', async () => {
      for (const events of [[], null, 'job.completed', { 'job.completed': true }]) {
        await refused({ url: PUBLIC_URL, events }, /"events"/);
      }
      for (const events of [
        ['job.nope'],
        ['job.completed', 'agent.step'],
        ['JOB.COMPLETED'],
        [42],
        [null],
      ]) {
        const res = await refused({ url: PUBLIC_URL, events }, /is not an event type/);
        assert.match(res.json.error ?? '', /job\.completed, /);
      }
    });

    test('400 for a description over 500 characters or not a string', async () => {
      for (const description of ['d'.repeat(501), 42, ['a'], { a: 1 }]) {
        await refused({ url: PUBLIC_URL, description }, /"description"/);
      }
    });

    test('400 for a non-boolean enabled', async () => {
      for (const enabled of ['yes', 1, null, 'true']) {
        await refused({ url: PUBLIC_URL, enabled }, /"enabled" must be a boolean/);
      }
    });

    test('400 for unknown fields: a secret cannot be chosen', async () => {
      for (const [body, pattern] of [
        [{ url: PUBLIC_URL, secret: `whsec_${'A'.repeat(43)}=` }, /unknown field "secret"/],
        [{ url: PUBLIC_URL, projectId: fx.otherProject.id }, /unknown field "projectId"/],
        [{ url: PUBLIC_URL, event: ['job.completed'] }, /unknown field "event"/],
      ] as const) {
        await refused(body, pattern);
      }
    });

    test('PATCH: 400 for an empty body, unknown fields and bad values; nothing changes', async () => {
      for (const [body, pattern] of [
        [{}, /at least one of/],
        [{ secret: 'whsec_x' }, /unknown field "secret"/],
        [{ events: [] }, /"events"/],
        [{ events: ['job.nope'] }, /not an event type/],
        [{ url: 'http://93.184.215.14/' }, /https:\/\//],
        [{ url: null }, /"url"/],
        [{ enabled: null }, /"enabled"/],
        [{ description: 'd'.repeat(501) }, /"description"/],
      ] as const) {
        const res = await unchanged(svc, () =>
          svc.request('PATCH', path(fx.project.id, `/${hook.id}`), { body }),
        );
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', pattern, JSON.stringify(body));
      }
    });

    test('rotate-secret: 400 for a bad overlap, unknown fields, a body that is not an object; 415 for non-JSON', async () => {
      const rotatePath = path(fx.project.id, `/${hook.id}/rotate-secret`);
      for (const overlapSeconds of [-1, 604_801, 1.5, '60', null, true]) {
        const res = await unchanged(svc, () =>
          svc.request('POST', rotatePath, { body: { overlapSeconds } }),
        );
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', /"overlapSeconds" must be an integer from 0 to 604800/);
      }
      const unknown = await unchanged(svc, () =>
        svc.request('POST', rotatePath, { body: { overlap: 60 } }),
      );
      assertError(unknown, 400, 'bad_request');
      assert.match(unknown.json.error ?? '', /unknown field "overlap"/);
      // A JSON null is no body (Fastify validates a request without one as null).
      for (const rawBody of ['[]', '60', '"x"', 'true']) {
        const res = await unchanged(svc, () =>
          svc.request('POST', rotatePath, {
            rawBody,
            headers: { 'content-type': 'application/json' },
          }),
        );
        assertError(res, 400, 'bad_request');
      }
      for (const rawBody of ['{"overlapSeconds": ', '']) {
        const res = await unchanged(svc, () =>
          svc.request('POST', rotatePath, {
            rawBody,
            headers: { 'content-type': 'application/json' },
          }),
        );
        assertError(res, 400, 'invalid_json');
      }
      const text = await unchanged(svc, () =>
        svc.request('POST', rotatePath, {
          rawBody: '{"overlapSeconds": 0}',
          headers: { 'content-type': 'text/plain' },
        }),
      );
      assertError(text, 415, 'unsupported_media_type');
    });

    test('deliveries: 400 for a bad limit or cursor', async () => {
      const deliveriesPath = path(fx.project.id, `/${hook.id}/deliveries`);
      for (const query of [
        '?limit=0',
        '?limit=101',
        '?limit=x',
        '?limit=1.5',
        '?limit=',
        '?limit=1&limit=2',
      ]) {
        const res = await svc.request('GET', `${deliveriesPath}${query}`);
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', /"limit"/, query);
      }
      for (const cursor of [
        'nope',
        Buffer.from(fx.jobId).toString('base64url'),
        Buffer.from('msg_short').toString('base64url'),
      ]) {
        const res = await svc.request('GET', `${deliveriesPath}?cursor=${cursor}`);
        assertError(res, 400, 'bad_request');
        assert.match(res.json.error ?? '', /"cursor"/);
      }
      const twice = await svc.request('GET', `${deliveriesPath}?cursor=a&cursor=b`);
      assertError(twice, 400, 'bad_request');
    });

    test('404 on every route for an unknown or malformed project id', async () => {
      for (const projectId of [randomProjectId(), 'not-a-project', `${fx.project.id}x`]) {
        for (const [name, spec] of Object.entries(specs)) {
          const body = spec.body?.(fx);
          const res = await unchanged(svc, () =>
            svc.request(spec.method, spec.path({ projectId, jobId: '', keyId: '' }), {
              ...(body !== undefined ? { body } : {}),
            }),
          );
          assertError(res, 404, 'not_found');
          assert.match(res.json.error ?? '', /project/, name);
        }
      }
    });

    test("404 for an unknown, malformed or another project's webhook id", async () => {
      const routes: [RouteSpec['method'], string, unknown][] = [
        ['GET', '', undefined],
        ['PATCH', '', { enabled: false }],
        ['DELETE', '', undefined],
        ['POST', '/rotate-secret', { overlapSeconds: 0 }],
        ['GET', '/deliveries', undefined],
        ['POST', `/deliveries/${deliveryId}/redeliver`, undefined],
      ];
      for (const webhookId of [
        newId('whk'),
        'not-a-webhook',
        `${hook.id}x`,
        hook.id.toUpperCase(),
        fx.jobId,
        otherHook.id,
      ]) {
        for (const [method, rest, body] of routes) {
          const res = await unchanged(svc, () =>
            svc.request(method, path(fx.project.id, `/${webhookId}${rest}`), {
              ...(body !== undefined ? { body } : {}),
            }),
          );
          assertError(res, 404, 'not_found');
          assert.match(res.json.error ?? '', /webhook/);
        }
      }
      // Project B's webhook through project B is found: the 404 above was the project's.
      const found = await svc.request('GET', path(fx.otherProject.id, `/${otherHook.id}`));
      assert.equal(found.status, 200, found.text);
    });

    test("redeliver: 404 for an unknown, malformed or another webhook's delivery", async () => {
      const elsewhere = await insertDelivery(svc, otherHook.id, fx.otherJobId, 'failed');
      const before = await deliveryRow(svc, elsewhere);
      for (const id of [newId('msg'), 'not-a-delivery', `${deliveryId}x`, elsewhere, hook.id]) {
        const res = await unchanged(svc, () =>
          svc.request('POST', path(fx.project.id, `/${hook.id}/deliveries/${id}/redeliver`)),
        );
        assertError(res, 404, 'not_found');
        assert.match(res.json.error ?? '', /delivery/);
      }
      assert.deepEqual(await deliveryRow(svc, elsewhere), before);
    });

    test('redeliver: 409 for a pending delivery, and for a disabled webhook; nothing changes', async () => {
      const created = await create({ url: PUBLIC_URL });
      const pending = await insertDelivery(svc, created.id, fx.jobId, 'pending');
      const failed = await insertDelivery(svc, created.id, fx.jobId, 'failed');
      const redeliverPath = (id: string) =>
        path(fx.project.id, `/${created.id}/deliveries/${id}/redeliver`);
      const pendingBefore = await deliveryRow(svc, pending);
      const res = await unchanged(svc, () => svc.request('POST', redeliverPath(pending)));
      assertError(res, 409, 'conflict');
      assert.match(res.json.error ?? '', /pending/);
      assert.deepEqual(await deliveryRow(svc, pending), pendingBefore);

      const disable = await svc.request('PATCH', path(fx.project.id, `/${created.id}`), {
        body: { enabled: false },
      });
      assert.equal(disable.status, 200, disable.text);
      const failedBefore = await deliveryRow(svc, failed);
      const refused = await unchanged(svc, () => svc.request('POST', redeliverPath(failed)));
      assertError(refused, 409, 'conflict');
      assert.match(refused.json.error ?? '', /disabled/);
      assert.deepEqual(await deliveryRow(svc, failed), failedBefore);
    });

    test('without ERRAND_SECRET_KEY: create and rotate are refused naming the setting', async () => {
      const project = await noKey.createProject({ name: 'no secret key' });
      const res = await unchanged(noKey, () =>
        noKey.request('POST', path(project.id), { body: { url: PUBLIC_URL } }),
      );
      assertError(res, 400, 'bad_request');
      assert.match(res.json.error ?? '', /ERRAND_SECRET_KEY/);
      // A webhook stored while a key was set (sealed with it) cannot be rotated without one.
      const id = newId('whk');
      await noKey.service.ctx.db
        .insertInto('webhooks')
        .values({
          id,
          project_id: project.id,
          url: PUBLIC_URL,
          events: ['job.completed'],
          description: null,
          secret: 'v1.sealed.elsewhere.x',
          updated_at: new Date(),
        })
        .execute();
      const rotate = await unchanged(noKey, () =>
        noKey.request('POST', path(project.id, `/${id}/rotate-secret`)),
      );
      assertError(rotate, 400, 'bad_request');
      assert.match(rotate.json.error ?? '', /ERRAND_SECRET_KEY/);
      // Reading needs no key.
      const list = await noKey.request('GET', path(project.id));
      assert.equal(list.status, 200, list.text);
      assert.equal(parse<{ webhooks: WebhookRecord[] }>(list).webhooks.length, 1);
    });
  });

  describe('security', () => {
    for (const [name, spec] of Object.entries(specs)) {
      describe(`${name}`, () => authCases(spec, fixture));
    }

    test('no listing, read or update shows a secret; the log never has one', async () => {
      const bodies = [
        await svc.request('GET', path(fx.project.id)),
        await svc.request('GET', path(fx.otherProject.id)),
        await svc.request('GET', path(fx.project.id, `/${hook.id}`)),
        await svc.request('PATCH', path(fx.project.id, `/${hook.id}`), {
          body: { description: 'fixture A' },
        }),
        await svc.request('GET', path(fx.project.id, `/${hook.id}/deliveries`)),
      ];
      assert.ok(secrets.length > 20, `only ${secrets.length} secrets seen`);
      for (const res of bodies) {
        assert.equal(res.status, 200, res.text);
        assert.doesNotMatch(res.text, /whsec_/);
        assert.doesNotMatch(res.text, /"secret"/);
        for (const secret of secrets) assert.ok(!res.text.includes(secret.slice(6)));
      }
      assert.match(logged, /webhook created/, 'the log was not captured');
      assert.doesNotMatch(logged, /whsec_/);
      for (const secret of secrets) {
        assert.ok(!logged.includes(secret.slice(6)), 'a webhook secret is in the log');
      }
      assert.ok(!logged.includes(SECRET_KEY), 'ERRAND_SECRET_KEY is in the log');
    });

    test('the fixture webhook survived every refused request', async () => {
      const res = await svc.request('GET', path(fx.project.id, `/${hook.id}`));
      assert.equal(res.status, 200, res.text);
      const { secret, ...record } = hook;
      const read = parse<WebhookRecord>(res);
      assert.deepEqual({ ...read, updatedAt: record.updatedAt }, record);
      const row = await svc.service.ctx.db
        .selectFrom('webhooks')
        .select('secret')
        .where('id', '=', hook.id)
        .executeTakeFirstOrThrow();
      assert.equal(open(SECRET_KEY, row.secret), secret);
    });
  });
});
