// Dashboard sessions on a real database: what a sign-in stores (a hash, never the id or the
// key), and every way a session ends: idle time, its maximum age, sign-out, a revoked key.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { startTestService, type TestService } from '../../test/support/service.ts';
import { createKey, revokeKey } from '../keys/service.ts';
import { endSession, readSession, SESSION_IDLE_SECONDS, signIn } from './sessions.ts';

describe('dashboard sessions', () => {
  let svc: TestService;
  before(async () => {
    svc = await startTestService({ worker: false });
  });
  after(async () => {
    await svc?.close();
  });
  const db = () => svc.service.ctx.db;
  const row = (id: string) =>
    db()
      .selectFrom('dashboard_sessions')
      .selectAll()
      .where('hash', '=', sql<string>`encode(sha256(convert_to(${id}, 'UTF8')), 'hex')`)
      .executeTakeFirst();

  test('a sign-in stores only the hash of a random id; the session reads back as its key', async () => {
    const project = await svc.createProject();
    const { id: keyId, key } = await svc.createProjectKey(project.id);
    const { id, principal } = await signIn(db(), ` ${key}\n`);
    assert.deepEqual(principal, { kind: 'key', keyId, projectId: project.id });
    assert.match(id, /^[0-9A-Za-z]{43}$/);
    const stored = await row(id);
    assert.ok(stored, 'stored under the hash of the id');
    assert.notEqual(stored.hash, id);
    const all = JSON.stringify(await db().selectFrom('dashboard_sessions').selectAll().execute());
    assert.ok(!all.includes(id) && !all.includes(key));
    assert.ok(
      stored.expires_at.getTime() - stored.created_at.getTime() === 7 * 24 * 3600 * 1000,
      'at most 7 days',
    );
    assert.deepEqual(await readSession(db(), id), principal);
    // The dashboard finds the session's cookie among others (@fastify/cookie reads them).
    const signedIn = async (cookie: string) =>
      (await fetch(`${svc.url}/projects`, { headers: { cookie } })).status;
    assert.equal(await signedIn(`theme=dark; errand_session=${id}; other=1`), 200);
    assert.equal(await signedIn('theme=dark'), 401);
  });

  test('refused keys start no session', async () => {
    const count = async () =>
      Number(
        (
          await db()
            .selectFrom('dashboard_sessions')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = await count();
    await assert.rejects(signIn(db(), ''), { code: 'unauthorized' });
    await assert.rejects(signIn(db(), 'errand_nope'), { message: 'malformed API key' });
    const { key, row: keyRow } = await createKey(db(), { projectId: null, name: 'to revoke' });
    await revokeKey(svc.service.ctx, keyRow.id);
    await assert.rejects(signIn(db(), key), { message: 'this API key has been revoked' });
    assert.equal(await count(), before);
  });

  test('a session ends after 12 h idle, after its maximum age, at sign-out, and when its key is revoked', async () => {
    const { id: keyId, key } = await svc.createProjectKey((await svc.createProject()).id);
    const idle = (await signIn(db(), key)).id;
    await db()
      .updateTable('dashboard_sessions')
      .set({ last_seen_at: sql`now() - make_interval(secs => ${SESSION_IDLE_SECONDS + 1})` })
      .where('hash', '=', (await row(idle))?.hash ?? '')
      .execute();
    assert.equal(await readSession(db(), idle), undefined);
    assert.equal(await row(idle), undefined, 'an ended session is deleted');

    // Used within the idle time, a session still ends at its maximum age.
    const old = (await signIn(db(), key)).id;
    await db()
      .updateTable('dashboard_sessions')
      .set({ expires_at: sql`now() - interval '1 second'` })
      .where('hash', '=', (await row(old))?.hash ?? '')
      .execute();
    assert.equal(await readSession(db(), old), undefined);

    const out = (await signIn(db(), key)).id;
    assert.ok(await readSession(db(), out));
    await endSession(db(), out);
    assert.equal(await readSession(db(), out), undefined);

    const revoked = (await signIn(db(), key)).id;
    assert.ok(await readSession(db(), revoked));
    await revokeKey(svc.service.ctx, keyId);
    assert.equal(await readSession(db(), revoked), undefined);

    assert.equal(await readSession(db(), undefined), undefined);
    assert.equal(await readSession(db(), 'x'.repeat(43)), undefined);
  });

  test('reading a session renews its idle time at most once a minute', async () => {
    const { key } = await svc.createProjectKey((await svc.createProject()).id);
    const { id } = await signIn(db(), key);
    const hash = (await row(id))?.hash ?? '';
    const set = (seconds: number) =>
      db()
        .updateTable('dashboard_sessions')
        .set({ last_seen_at: sql`now() - make_interval(secs => ${seconds})` })
        .where('hash', '=', hash)
        .execute();
    await set(30);
    const recent = (await row(id))?.last_seen_at;
    assert.ok(await readSession(db(), id));
    assert.deepEqual((await row(id))?.last_seen_at, recent, 'not written within the minute');
    await set(3600);
    assert.ok(await readSession(db(), id));
    const renewed = (await row(id))?.last_seen_at;
    assert.ok(renewed && Date.now() - renewed.getTime() < 60_000, 'renewed after it');
  });
});
