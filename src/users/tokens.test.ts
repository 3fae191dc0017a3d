// Personal API tokens on a real database and the real API: made in the dashboard and shown once,
// kept as a hash, used where a key is (create, poll, admin), clamped to their projects and to
// reads, and refused from the very next request once revoked, expired or their user deactivated;
// never written to the log.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { startTestService, type TestService, waitFor } from '../../test/support/service.ts';
import { SESSION_COOKIE, startUserSession } from '../dashboard/sessions.ts';
import type { ProjectRole } from '../db/schema.ts';
import { isWellFormedKey, isWellFormedToken } from '../keys/format.ts';
import { createLogger } from '../log.ts';
import { upsertUser } from './service.ts';
import { createToken, type NewToken } from './tokens.ts';

describe('personal API tokens', () => {
  let svc: TestService;
  let logged = '';
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      logged += String(chunk);
      done();
    },
  });
  before(async () => {
    svc = await startTestService({ worker: false, log: createLogger('trace', logSink) });
  });
  after(async () => {
    await svc?.close();
  });
  const db = () => svc.service.ctx.db;
  /** Every token a test made, to look for in the log at the end. */
  const made: string[] = [];
  let people = 0;

  async function newUser(opts: { admin?: boolean } = {}) {
    people++;
    return upsertUser(
      db(),
      {
        issuer: 'https://idp.example.test',
        subject: `person-${people}`,
        email: `person-${people}@example.test`,
        emailVerified: true,
        name: `Person ${people}`,
        groups: [],
      },
      opts.admin ?? false,
    );
  }
  async function give(userId: string, projectId: string, role: ProjectRole) {
    await db()
      .insertInto('project_roles')
      .values({ project_id: projectId, grantee_kind: 'user', grantee: userId, role })
      .execute();
  }
  async function tokenOf(userId: string, opts: Partial<NewToken> = {}) {
    const { token, row } = await createToken(db(), userId, {
      name: 'script',
      expiresInDays: 30,
      projectIds: null,
      readOnly: false,
      ...opts,
    });
    made.push(token);
    return { token, id: row.id };
  }
  const createJob = (projectId: string, key: string) =>
    svc.request('POST', `/v2/agent/${projectId}/job`, { key, body: { prompt: 'Fix the typo' } });
  const listJobs = (projectId: string, key: string) =>
    svc.request('GET', `/v2/agent/${projectId}/jobs`, { key });

  test('a token is made in the dashboard, shown once, and only its hash is kept', async () => {
    const user = await newUser();
    const project = await svc.createProject();
    await give(user.id, project.id, 'member');
    const cookie = `${SESSION_COOKIE}=${await startUserSession(db(), user.id)}`;
    const form = (body: string) =>
      fetch(`${svc.url}/tokens`, {
        method: 'POST',
        headers: {
          cookie,
          origin: svc.url,
          accept: 'text/html',
          'content-type': 'application/x-www-form-urlencoded',
        },
        body,
      });
    const res = await form(`name=laptop&expiresInDays=90&project_${project.id}=1`);
    const page = await res.text();
    assert.equal(res.status, 201, page);
    const token = /errand_pat_[0-9A-Za-z]{38}/.exec(page)?.[0];
    assert.ok(token, 'the new token is on the page');
    made.push(token);
    assert.ok(isWellFormedToken(token), 'prefix and checksum');
    assert.ok(!isWellFormedKey(token), 'never taken for a key');
    const stored = await db()
      .selectFrom('user_tokens')
      .selectAll()
      .where('user_id', '=', user.id)
      .execute();
    assert.equal(stored.length, 1);
    const [row] = stored;
    assert.ok(row);
    assert.deepEqual(row.project_ids, [project.id]);
    assert.equal(row.read_only, false);
    const days = (row.expires_at.getTime() - row.created_at.getTime()) / 86_400_000;
    assert.ok(Math.abs(days - 90) < 0.01, `expires in 90 days, not ${days}`);
    assert.ok(!JSON.stringify(stored).includes(token.slice(11)), 'the table never holds the token');

    // Listed again, it shows its start, never the token.
    const list = await fetch(`${svc.url}/tokens`, { headers: { cookie, accept: 'text/html' } });
    const listed = await list.text();
    assert.equal(list.status, 200);
    assert.ok(listed.includes('laptop') && listed.includes(row.start));
    assert.ok(!listed.includes(token), 'shown once');

    // Bad input: refused with the reason, nothing made.
    for (const body of ['name=&expiresInDays=30', 'name=x&expiresInDays=366', 'name=x']) {
      const refused = await form(body);
      assert.equal(refused.status, 400, body);
    }
    const count = await db()
      .selectFrom('user_tokens')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('user_id', '=', user.id)
      .executeTakeFirstOrThrow();
    assert.equal(Number(count.n), 1);

    // A key's session has no tokens.
    const { key } = await svc.createProjectKey(project.id);
    const signIn = await fetch(`${svc.url}/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { origin: svc.url, 'content-type': 'application/x-www-form-urlencoded' },
      body: `key=${key}`,
    });
    const keyCookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    assert.match(keyCookie, /^errand_session=/);
    const forKey = await fetch(`${svc.url}/tokens`, { headers: { cookie: keyCookie } });
    assert.equal(forKey.status, 403);

    // Its making is a row of the audit log by its user, with its id and limits, never the token.
    const audited = await db()
      .selectFrom('audit_log')
      .selectAll()
      .where('action', '=', 'token.create')
      .where('target_id', '=', row.id)
      .execute();
    assert.equal(audited.length, 1);
    assert.deepEqual(audited[0]?.actor, { kind: 'user', id: user.id });
    assert.deepEqual(audited[0]?.details.projectIds, [project.id]);
    assert.ok(!JSON.stringify(audited).includes(token.slice(11)), 'the log never holds the token');
  });

  test("a member's token creates jobs and polls them where the user is a member", async () => {
    const user = await newUser();
    const project = await svc.createProject();
    await give(user.id, project.id, 'member');
    const { token, id } = await tokenOf(user.id);
    const created = await createJob(project.id, token);
    assert.equal(created.status, 201, created.text);
    const poll = await svc.request('GET', `/v2/agent/${project.id}/job/${created.json.id}`, {
      key: token,
    });
    assert.equal(poll.status, 200, poll.text);
    assert.equal((await listJobs(project.id, token)).status, 200);
    // Where the user has no role: 403, naming the role it would need.
    const other = await svc.createProject();
    const elsewhere = await createJob(other.id, token);
    assert.equal(elsewhere.status, 403, elsewhere.text);
    assert.equal(elsewhere.json.code, 'member_required');
    // Not an admin.
    assert.equal((await svc.request('GET', '/v2/admin/keys', { key: token })).status, 403);
    // Its last use is recorded (written after the answer, not in its way).
    await waitFor('the last use written', async () => {
      const row = await db()
        .selectFrom('user_tokens')
        .select('last_used_at')
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      return row.last_used_at ?? undefined;
    });
  });

  test('a token limited to projects is refused elsewhere, even where its user has a role', async () => {
    const user = await newUser();
    const [a, b] = [await svc.createProject(), await svc.createProject()];
    await give(user.id, a.id, 'maintainer');
    await give(user.id, b.id, 'maintainer');
    const { token } = await tokenOf(user.id, { projectIds: [a.id] });
    assert.equal((await listJobs(a.id, token)).status, 200);
    const refused = await listJobs(b.id, token);
    assert.equal(refused.status, 403, refused.text);
    assert.equal((await createJob(b.id, token)).status, 403);
  });

  test('a read-only token reads and is refused every write (403)', async () => {
    const user = await newUser();
    const project = await svc.createProject();
    await give(user.id, project.id, 'maintainer');
    const { token } = await tokenOf(user.id, { readOnly: true });
    assert.equal((await listJobs(project.id, token)).status, 200);
    const job = await createJob(project.id, svc.adminKey);
    assert.equal(job.status, 201);
    const poll = await svc.request('GET', `/v2/agent/${project.id}/job/${job.json.id}`, {
      key: token,
    });
    assert.equal(poll.status, 200, poll.text);
    const write = await createJob(project.id, token);
    assert.equal(write.status, 403, write.text);
    assert.equal(write.json.code, 'forbidden');
    assert.match(write.json.error ?? '', /read-only/);
    const archive = await svc.request(
      'POST',
      `/v2/agent/${project.id}/job/${job.json.id}/archive`,
      { key: token },
    );
    assert.equal(archive.status, 403, archive.text);

    // A read-only admin's token is not an admin, and reads as a viewer.
    const admin = await newUser({ admin: true });
    const adminToken = (await tokenOf(admin.id, { readOnly: true })).token;
    assert.equal((await svc.request('GET', '/v2/admin/keys', { key: adminToken })).status, 403);
    assert.equal((await listJobs(project.id, adminToken)).status, 200);
    assert.equal((await createJob(project.id, adminToken)).status, 403);
    // Without the clamps, an admin's token is an admin.
    const full = (await tokenOf(admin.id)).token;
    assert.equal((await svc.request('GET', '/v2/admin/keys', { key: full })).status, 200);
  });

  test('an expired token is refused (401)', async () => {
    const user = await newUser();
    const project = await svc.createProject();
    await give(user.id, project.id, 'member');
    const { token, id } = await tokenOf(user.id);
    assert.equal((await listJobs(project.id, token)).status, 200);
    await db()
      .updateTable('user_tokens')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', id)
      .execute();
    const res = await listJobs(project.id, token);
    assert.equal(res.status, 401, res.text);
    assert.match(res.json.error ?? '', /expired/);
  });

  test('a revoked token is refused from the very next request', async () => {
    const user = await newUser();
    const project = await svc.createProject();
    await give(user.id, project.id, 'member');
    const { token, id } = await tokenOf(user.id);
    const job = await createJob(project.id, token);
    assert.equal(job.status, 201);
    const cookie = `${SESSION_COOKIE}=${await startUserSession(db(), user.id)}`;
    const revoke = await fetch(`${svc.url}/tokens/${id}/revoke`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, origin: svc.url },
    });
    assert.equal(revoke.status, 303);
    const revoked = await db()
      .selectFrom('audit_log')
      .select(['actor', 'outcome'])
      .where('action', '=', 'token.revoke')
      .where('target_id', '=', id)
      .execute();
    assert.deepEqual(revoked, [{ actor: { kind: 'user', id: user.id }, outcome: 'success' }]);
    for (const res of [
      await listJobs(project.id, token),
      await createJob(project.id, token),
      await svc.request('GET', `/v2/agent/${project.id}/job/${job.json.id}`, { key: token }),
    ]) {
      assert.equal(res.status, 401, res.text);
      assert.match(res.json.error ?? '', /revoked/);
    }
    // Another user cannot revoke it, nor learn it exists.
    const stranger = await newUser();
    const theirs = await tokenOf(user.id);
    const strangerCookie = `${SESSION_COOKIE}=${await startUserSession(db(), stranger.id)}`;
    const notTheirs = await fetch(`${svc.url}/tokens/${theirs.id}/revoke`, {
      method: 'POST',
      headers: { cookie: strangerCookie, origin: svc.url },
    });
    assert.equal(notTheirs.status, 404);
    assert.equal((await listJobs(project.id, theirs.token)).status, 200);
  });

  test("a deactivated user's tokens are refused at once", async () => {
    const user = await newUser();
    const project = await svc.createProject();
    await give(user.id, project.id, 'member');
    const { token } = await tokenOf(user.id);
    assert.equal((await listJobs(project.id, token)).status, 200);
    await db()
      .updateTable('users')
      .set({ deactivated_at: new Date() })
      .where('id', '=', user.id)
      .execute();
    const res = await listJobs(project.id, token);
    assert.equal(res.status, 401, res.text);
    assert.match(res.json.error ?? '', /deactivated/);
  });

  test('a malformed or unknown token is refused (401); keys work as before', async () => {
    const project = await svc.createProject();
    const { token } = await tokenOf((await newUser()).id);
    const mistyped = `${token.slice(0, -1)}${token.endsWith('a') ? 'b' : 'a'}`;
    assert.equal((await listJobs(project.id, mistyped)).status, 401);
    assert.equal((await listJobs(project.id, 'errand_pat_short')).status, 401);
    const { key } = await svc.createProjectKey(project.id);
    assert.equal((await listJobs(project.id, key)).status, 200);
  });

  test('no token is ever written to the log', () => {
    assert.ok(made.length >= 8);
    assert.ok(logged.length > 0, 'the log was captured');
    for (const token of made) assert.ok(!logged.includes(token), 'a token in the log');
    for (const token of made) assert.ok(!logged.includes(token.slice(11)), 'a token in the log');
  });
});
