// Who did it and the audit log (issue 32): every change the API and the dashboard make is one
// row, written with the change, naming the actor, the address and the request; refused attempts
// too; GET /v2/admin/audit lists them with filters and cursor pages, for the admin only; jobs
// record who created them and turns who sent them; the rows stream as JSON lines to
// ERRAND_AUDIT_LOG; and no row ever holds a secret.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase } from '../../../test/support/databases.ts';
import { assertError } from '../../../test/support/route-cases.ts';
import { startTestService, type TestService, waitFor } from '../../../test/support/service.ts';
import { SESSION_COOKIE } from '../../dashboard/sessions.ts';
import type { AuditRecord } from '../../records/audit.ts';

const SECRET_KEY = 'audit-test-secret-key-3f9a1c7e5b2d4068';
const SECRET_VALUE = 'npm-audit-secret-value-91c4e7a2b6';
const PUBLIC_URL = 'https://93.184.215.14/hooks/errand';

type Page = { entries: AuditRecord[]; nextCursor: string | null };

describe('audit log', () => {
  let svc: TestService;
  let logFile: string;
  /** Every secret this file makes or sends: none may be in any row, nor in the stream. */
  const secrets: string[] = [SECRET_KEY, SECRET_VALUE];

  before(async () => {
    const database = await createTestDatabase();
    logFile = path.join(database.dataDir, 'audit.jsonl');
    svc = await startTestService({
      worker: false,
      database,
      env: { ERRAND_SECRET_KEY: SECRET_KEY, ERRAND_AUDIT_LOG: logFile },
    });
    secrets.push(svc.adminKey);
  });
  after(async () => {
    await svc?.close();
  });

  const audit = async (query = ''): Promise<Page> => {
    const res = await svc.request('GET', `/v2/admin/audit${query}`);
    assert.equal(res.status, 200, res.text);
    return res.json as unknown as Page;
  };
  const adminKeyId = async () =>
    (
      await svc.service.ctx.db
        .selectFrom('api_keys')
        .select('id')
        .where('project_id', 'is', null)
        .executeTakeFirstOrThrow()
    ).id;
  const rows = async () =>
    svc.service.ctx.db.selectFrom('audit_log').selectAll().orderBy('seq').execute();

  test('every change is a row: who, from where, what, on what, the request id', async () => {
    const created = await svc.request('POST', '/v2/admin/projects', {
      body: { name: 'audited', repository: svc.database.dataDir, setupCommand: 'npm ci' },
    });
    assert.equal(created.status, 201, created.text);
    const projectId = String(created.json.id);
    const adminId = await adminKeyId();
    const [newest] = (await audit('?limit=1')).entries;
    assert.equal(newest?.action, 'project.create');
    assert.deepEqual(newest?.actor, { kind: 'key', id: adminId });
    assert.deepEqual(newest?.target, { kind: 'project', id: projectId });
    assert.equal(newest?.outcome, 'success');
    assert.equal(newest?.errorCode, null);
    assert.equal(newest?.requestId, created.headers.get('x-request-id'));
    assert.equal(newest?.address, '127.0.0.1');
    assert.deepEqual(newest?.details, { name: 'audited' });

    // Every other action of the API, and the dashboard's sign-in and sign-out.
    const key = await svc.request('POST', '/v2/admin/keys', { body: { projectId, name: 'ci' } });
    assert.equal(key.status, 201);
    const projectKey = String(key.json.key);
    const projectKeyId = String(key.json.id);
    secrets.push(projectKey);
    const calls: [string, () => Promise<{ status: number; text: string; json: unknown }>][] = [
      [
        'project.update',
        () =>
          svc.request('PATCH', `/v2/admin/projects/${projectId}`, {
            body: { name: 'audited again', draftPullRequests: true },
          }),
      ],
      [
        'secret.set',
        () =>
          svc.request('PUT', `/v2/admin/projects/${projectId}/secrets/NPM_TOKEN`, {
            body: { value: SECRET_VALUE },
          }),
      ],
      [
        'secret.delete',
        () => svc.request('DELETE', `/v2/admin/projects/${projectId}/secrets/NPM_TOKEN`),
      ],
      [
        'environment.rebuild',
        () => svc.request('POST', `/v2/admin/projects/${projectId}/environments/rebuild`),
      ],
      [
        'environment.delete',
        () => svc.request('DELETE', `/v2/admin/projects/${projectId}/environments`),
      ],
    ];
    for (const [action, call] of calls) {
      const res = await call();
      assert.ok(res.status < 300, `${action}: ${res.status} ${res.text}`);
      const [row] = (await audit('?limit=1')).entries;
      assert.equal(row?.action, action);
      assert.equal(row?.outcome, 'success');
    }
    const hook = await svc.request('POST', `/v2/admin/projects/${projectId}/webhooks`, {
      body: { url: PUBLIC_URL },
    });
    assert.equal(hook.status, 201, hook.text);
    secrets.push(String((hook.json as Record<string, unknown>).secret));
    const hookId = String(hook.json.id);
    const rotated = await svc.request(
      'POST',
      `/v2/admin/projects/${projectId}/webhooks/${hookId}/rotate-secret`,
      { body: { overlapSeconds: 0 } },
    );
    assert.equal(rotated.status, 200, rotated.text);
    secrets.push(String((rotated.json as Record<string, unknown>).secret));
    assert.equal(
      (
        await svc.request('PATCH', `/v2/admin/projects/${projectId}/webhooks/${hookId}`, {
          body: { enabled: false },
        })
      ).status,
      200,
    );
    assert.equal(
      (await svc.request('DELETE', `/v2/admin/projects/${projectId}/webhooks/${hookId}`)).status,
      204,
    );
    const forge = await svc.request('POST', '/v2/admin/projects', {
      body: { name: 'forge', repository: 'https://github.com/acme/app.git' },
    });
    const forgeSecret = await svc.request(
      'POST',
      `/v2/admin/projects/${forge.json.id}/forge-webhook-secret`,
    );
    assert.equal(forgeSecret.status, 200, forgeSecret.text);
    secrets.push(String((forgeSecret.json as Record<string, unknown>).secret));

    // Jobs: created, followed up and archived with the project key.
    const job = await svc.request('POST', `/v2/agent/${projectId}/job`, {
      key: projectKey,
      body: { prompt: 'audit me' },
    });
    assert.equal(job.status, 201, job.text);
    const jobId = String(job.json.id);
    assert.deepEqual(job.json.createdBy, { kind: 'key', id: projectKeyId });
    const message = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/message`, {
      key: projectKey,
      body: { prompt: 'and this' },
    });
    assert.equal(message.status, 200, message.text);
    const archived = await svc.request('POST', `/v2/agent/${projectId}/job/${jobId}/archive`, {
      key: projectKey,
    });
    assert.equal(archived.status, 200, archived.text);
    const turns = await svc.service.ctx.db
      .selectFrom('turns')
      .select(['seq', 'sent_by'])
      .where('job_id', '=', jobId)
      .orderBy('seq')
      .execute();
    assert.deepEqual(
      turns.map((t) => t.sent_by),
      [
        { kind: 'key', id: projectKeyId },
        { kind: 'key', id: projectKeyId },
      ],
    );

    // The dashboard: a key sign-in and a sign-out, and one refused sign-in.
    const form = { origin: svc.url, 'content-type': 'application/x-www-form-urlencoded' };
    const signIn = await fetch(`${svc.url}/sign-in`, {
      method: 'POST',
      headers: form,
      body: `key=${encodeURIComponent(svc.adminKey)}`,
      redirect: 'manual',
    });
    assert.equal(signIn.status, 303);
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    assert.ok(cookie.startsWith(`${SESSION_COOKIE}=`));
    secrets.push(cookie.slice(SESSION_COOKIE.length + 1));
    const refusedSignIn = await fetch(`${svc.url}/sign-in`, {
      method: 'POST',
      headers: form,
      body: 'key=not-a-key',
      redirect: 'manual',
    });
    assert.equal(refusedSignIn.status, 401);
    const signOut = await fetch(`${svc.url}/sign-out`, {
      method: 'POST',
      headers: { ...form, cookie },
      redirect: 'manual',
    });
    assert.equal(signOut.status, 303);

    // Revoked last: the key signed the job's requests above.
    assert.equal((await svc.request('POST', `/v2/admin/keys/${projectKeyId}/revoke`)).status, 200);

    const actions = (await rows()).map((r) => `${r.action} ${r.outcome}`);
    for (const expected of [
      'project.create success',
      'key.create success',
      'project.update success',
      'secret.set success',
      'secret.delete success',
      'environment.rebuild success',
      'environment.delete success',
      'webhook.create success',
      'webhook.rotate_secret success',
      'webhook.update success',
      'webhook.delete success',
      'project.forge_secret success',
      'job.create success',
      'job.message success',
      'job.archive success',
      'session.sign_in success',
      'session.sign_in refused',
      'session.sign_out success',
      'key.revoke success',
    ])
      assert.ok(actions.includes(expected), `no row ${expected}: ${actions.join(', ')}`);
    const jobRows = (await audit(`?target=${jobId}`)).entries;
    assert.deepEqual(
      jobRows.map((r) => [r.action, r.actor, r.details]),
      [
        ['job.archive', { kind: 'key', id: projectKeyId }, { projectId }],
        ['job.message', { kind: 'key', id: projectKeyId }, { turn: 2 }],
        ['job.create', { kind: 'key', id: projectKeyId }, { projectId, model: job.json.model }],
      ],
    );
    const update = (await audit('?action=project.update')).entries[0];
    // Which fields changed, never their values.
    assert.deepEqual(update?.details, { fields: ['draftPullRequests', 'name'] });
  });

  test('a refused change is a row with its error code; a read is none', async () => {
    const before = (await rows()).length;
    const missing = 'prj_00000000000000000000';
    const refused = await svc.request('PATCH', `/v2/admin/projects/${missing}`, {
      body: { name: 'nope' },
    });
    assertError(refused, 404, 'not_found');
    const noKey = await svc.request('POST', '/v2/admin/keys', { key: null, body: {} });
    assertError(noKey, 401, 'unauthorized');
    assert.equal((await svc.request('GET', '/v2/admin/projects')).status, 200);
    const after = (await rows()).slice(before);
    assert.deepEqual(
      after.map((r) => [r.action, r.outcome, r.error_code, r.target_id, r.actor]),
      [
        [
          'project.update',
          'refused',
          'not_found',
          missing,
          { kind: 'key', id: await adminKeyId() },
        ],
        ['key.create', 'refused', 'unauthorized', null, null],
      ],
    );
    assert.equal(after[0]?.request_id, refused.headers.get('x-request-id'));
  });

  test('the filters and the cursor', async () => {
    const all = (await audit('?limit=100')).entries;
    assert.ok(all.length >= 20);
    // Newest first, by id.
    const ids = all.map((r) => BigInt(r.id));
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => (a > b ? -1 : a < b ? 1 : 0)),
    );
    const pages: AuditRecord[] = [];
    let cursor: string | null = null;
    do {
      const page: Page = await audit(`?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
      assert.ok(page.entries.length <= 3);
      pages.push(...page.entries);
      cursor = page.nextCursor;
    } while (cursor);
    assert.deepEqual(
      pages.map((r) => r.id),
      all.map((r) => r.id),
    );
    const key = all.find((r) => r.actor?.kind === 'key' && r.action === 'job.create')?.actor;
    assert.ok(key && key.kind === 'key');
    const byActor = (await audit(`?actor=${key.id}&limit=100`)).entries;
    assert.ok(byActor.length >= 3);
    assert.ok(byActor.every((r) => r.actor?.kind === 'key' && r.actor.id === key.id));
    const creates = (await audit('?action=job.create')).entries;
    assert.ok(creates.length >= 1 && creates.every((r) => r.action === 'job.create'));
    const first = all.at(-1);
    assert.ok(first);
    const since = (await audit(`?since=${encodeURIComponent(first.at)}&limit=100`)).entries;
    assert.equal(since.length, all.length);
    const until = (await audit(`?until=${encodeURIComponent(first.at)}&limit=100`)).entries;
    assert.ok(until.every((r) => r.at < first.at));
    assertError(await svc.request('GET', '/v2/admin/audit?action=job.fly'), 400, 'bad_request');
    assertError(await svc.request('GET', '/v2/admin/audit?since=yesterday'), 400, 'bad_request');
    assertError(await svc.request('GET', '/v2/admin/audit?cursor=bm9wZQ'), 400, 'bad_request');
  });

  test('the admin only', async () => {
    const project = await svc.createProject({ name: 'not admin' });
    const { key } = await svc.createProjectKey(project.id);
    assertError(await svc.request('GET', '/v2/admin/audit', { key }), 403, 'forbidden');
    assertError(await svc.request('GET', '/v2/admin/audit', { key: null }), 401, 'unauthorized');
  });

  test('append-only: the table refuses updates and deletes', async () => {
    const db = svc.service.ctx.db;
    await assert.rejects(sql`UPDATE audit_log SET action = 'import'`.execute(db), /append-only/);
    await assert.rejects(sql`DELETE FROM audit_log`.execute(db), /append-only/);
  });

  test('jobs are listed by creator', async () => {
    const project = await svc.createProject({ name: 'creators' });
    const a = await svc.createProjectKey(project.id);
    const b = await svc.createProjectKey(project.id);
    const made: Record<string, string[]> = { [a.id]: [], [b.id]: [] };
    for (const [by, prompt] of [
      [a, 'one'],
      [b, 'two'],
      [a, 'three'],
    ] as const) {
      const res = await svc.request('POST', `/v2/agent/${project.id}/job`, {
        key: by.key,
        body: { prompt },
      });
      made[by.id]?.unshift(String(res.json.id));
    }
    for (const by of [a, b]) {
      const res = await svc.request('GET', `/v2/agent/${project.id}/jobs?createdBy=${by.id}`, {
        key: a.key,
      });
      assert.equal(res.status, 200, res.text);
      const jobs = res.json.jobs as { id: string; createdBy: unknown }[];
      assert.deepEqual(
        jobs.map((j) => j.id),
        made[by.id],
      );
      for (const job of jobs) assert.deepEqual(job.createdBy, { kind: 'key', id: by.id });
    }
    const none = await svc.request('GET', `/v2/agent/${project.id}/jobs?createdBy=github:nobody`, {
      key: a.key,
    });
    assert.deepEqual(none.json.jobs, []);
  });

  test('jobs created together: one row each, with its own creator, in their batch', async () => {
    const project = await svc.createProject({ name: 'batched' });
    const keys = await Promise.all([0, 1, 2, 3].map(() => svc.createProjectKey(project.id)));
    const made = await Promise.all(
      Array.from({ length: 24 }, (_, i) => {
        const by = keys[i % keys.length];
        return svc
          .request('POST', `/v2/agent/${project.id}/job`, {
            key: by?.key ?? '',
            body: { prompt: `batched ${i}` },
          })
          .then((res) => ({ res, by }));
      }),
    );
    const rowsOf = await svc.service.ctx.db
      .selectFrom('audit_log')
      .select(['target_id', 'actor', 'request_id'])
      .where('action', '=', 'job.create')
      .where(
        'target_id',
        'in',
        made.map(({ res }) => String(res.json.id)),
      )
      .execute();
    assert.equal(rowsOf.length, made.length);
    for (const { res, by } of made) {
      assert.equal(res.status, 201, res.text);
      const row = rowsOf.find((r) => r.target_id === res.json.id);
      assert.deepEqual(row?.actor, { kind: 'key', id: by?.id });
      assert.deepEqual(res.json.createdBy, { kind: 'key', id: by?.id });
      assert.equal(row?.request_id, res.headers.get('x-request-id'));
    }
  });

  test('the stream: each committed row once, as the API shows it, to ERRAND_AUDIT_LOG', async () => {
    const table = (await audit('?limit=100')).entries;
    const lines = await waitFor('the streamed rows', async () => {
      const text = await readFile(logFile, 'utf8').catch(() => '');
      const parsed = text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as AuditRecord);
      return parsed.length >= table.length ? parsed : undefined;
    });
    // The import's row is the CLI's, and no service streams it; every API row is here.
    const byId = new Map(lines.map((l) => [l.id, l]));
    assert.equal(byId.size, lines.length, 'a row was streamed twice');
    for (const row of table) assert.deepEqual(byId.get(row.id), row);
  });

  test("the dashboard: the Audit page (admin) with its filters; a job's creator and senders", async () => {
    const session = async (key: string) => {
      const res = await fetch(`${svc.url}/sign-in`, {
        method: 'POST',
        headers: { origin: svc.url, 'content-type': 'application/x-www-form-urlencoded' },
        body: `key=${encodeURIComponent(key)}`,
        redirect: 'manual',
      });
      assert.equal(res.status, 303);
      return (res.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    };
    const get = async (cookie: string, path: string) => {
      const res = await fetch(`${svc.url}${path}`, { headers: { cookie, accept: 'text/html' } });
      return { status: res.status, text: await res.text() };
    };
    const admin = await session(svc.adminKey);
    const all = await get(admin, '/audit');
    assert.equal(all.status, 200);
    assert.match(all.text, /<h1>Audit log<\/h1>/);
    assert.match(all.text, /job\.create/);
    assert.match(all.text, /project\.create/);
    const filtered = await get(admin, '/audit?action=secret.set');
    assert.equal(filtered.status, 200);
    assert.match(filtered.text, /secret\.set/);
    assert.doesNotMatch(filtered.text, /<td class="mono" data-label="Action">job\.create/);
    const bad = await get(admin, '/audit?since=yesterday');
    assert.equal(bad.status, 400);
    assert.match(bad.text, /&quot;since&quot; must be an ISO 8601 time/);

    const project = await svc.createProject({ name: 'dashboard creators' });
    const { key, id: keyId } = await svc.createProjectKey(project.id);
    const made = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      key,
      body: { prompt: 'shown with its creator' },
    });
    const own = await session(key);
    assert.equal((await get(own, '/audit')).status, 403);
    const list = await get(own, `/projects/${project.id}/jobs`);
    assert.match(list.text, /data-label="Created by">key <span class="mono">key_/);
    assert.ok(list.text.includes(keyId));
    const page = await get(own, `/projects/${project.id}/jobs/${made.json.id}`);
    assert.ok(page.text.includes(`createdBy=${keyId}`), "a link to the creator's jobs");
    assert.match(page.text, /Sent by key <span class="mono">key_/);
    const mine = await get(own, `/projects/${project.id}/jobs?createdBy=${keyId}`);
    assert.ok(mine.text.includes(String(made.json.id)));
    const others = await get(own, `/projects/${project.id}/jobs?createdBy=github:nobody`);
    assert.ok(!others.text.includes(String(made.json.id)));
  });

  test('no row and no line holds a secret', async () => {
    const all = JSON.stringify(await rows());
    const streamed = await readFile(logFile, 'utf8');
    assert.ok(secrets.length >= 8, 'the secrets of every action were collected');
    for (const secret of secrets) {
      assert.ok(secret.length >= 8);
      assert.ok(!all.includes(secret), `a row holds a secret (${secret.slice(0, 4)}…)`);
      assert.ok(!streamed.includes(secret), `a line holds a secret (${secret.slice(0, 4)}…)`);
    }
  });
});
