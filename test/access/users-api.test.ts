// The admin API of users and roles: list users with their roles, give and take a project role
// to a user or a group, and deactivate a user, whose session stops at the next request.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestService, type TestService } from '../support/service.ts';
import { signedInUser } from '../support/users.ts';

let svc: TestService;

/** An answer's JSON, as the admin API of users and roles sends it. */
function data(res: { text: string }): {
  users: { id: string; roles: unknown[] }[];
  roles: unknown[];
  deactivatedAt: string | null;
} {
  return JSON.parse(res.text);
}
let projectId = '';

before(async () => {
  svc = await startTestService({ worker: false });
  projectId = (await svc.createProject({ name: 'roles' })).id;
});

after(() => svc.close());

async function page(cookie: string, path: string): Promise<number> {
  const response = await fetch(`${svc.url}${path}`, { headers: { cookie }, redirect: 'manual' });
  await response.text();
  return response.status;
}

test('a role given to a user opens the project to them, and taking it closes it again', async () => {
  const user = await signedInUser(svc.service.ctx.db);
  assert.equal(await page(user.cookie, `/projects/${projectId}/jobs`), 403);
  const given = await svc.request(
    'PUT',
    `/v2/admin/projects/${projectId}/roles/user/${user.userId}`,
    {
      body: { role: 'viewer' },
    },
  );
  assert.equal(given.status, 200, given.text);
  assert.deepEqual(
    { ...given.json, createdAt: undefined },
    { projectId, granteeKind: 'user', grantee: user.userId, role: 'viewer', createdAt: undefined },
  );
  assert.equal(await page(user.cookie, `/projects/${projectId}/jobs`), 200);
  // A viewer may not create a job: the code names the role that is missing.
  const create = await fetch(`${svc.url}/projects/${projectId}/jobs`, {
    method: 'POST',
    headers: {
      cookie: user.cookie,
      origin: svc.url,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: 'prompt=hello',
  });
  const refusal = (await create.json()) as { code: string; error: string };
  assert.equal(create.status, 403);
  assert.equal(refusal.code, 'member_required');
  assert.match(refusal.error, /needs the member role on project .*; you are a viewer/);

  const listed = await svc.request('GET', '/v2/admin/users');
  assert.equal(listed.status, 200);
  const entry = data(listed).users.find((u) => u.id === user.userId);
  assert.deepEqual(entry?.roles, [{ projectId, role: 'viewer' }]);
  const roles = await svc.request('GET', `/v2/admin/projects/${projectId}/roles`);
  assert.equal(data(roles).roles.length, 1);

  const taken = await svc.request(
    'DELETE',
    `/v2/admin/projects/${projectId}/roles/user/${user.userId}`,
  );
  assert.equal(taken.status, 200);
  assert.equal(await page(user.cookie, `/projects/${projectId}/jobs`), 403);
  const again = await svc.request(
    'DELETE',
    `/v2/admin/projects/${projectId}/roles/user/${user.userId}`,
  );
  assert.equal(again.status, 404);
  // Given and taken, each one row of the audit log, by the admin key; the refused take too.
  const rows = await svc.service.ctx.db
    .selectFrom('audit_log')
    .select(['action', 'outcome', 'error_code', 'details', 'actor'])
    .where('target_id', '=', projectId)
    .where('action', 'in', ['role.grant', 'role.revoke'])
    .orderBy('seq')
    .execute();
  assert.deepEqual(
    rows.map((r) => [r.action, r.outcome, r.error_code, r.details.grantee, r.actor?.kind]),
    [
      ['role.grant', 'success', null, user.userId, 'key'],
      ['role.revoke', 'success', null, user.userId, 'key'],
      ['role.revoke', 'refused', 'not_found', undefined, 'key'],
    ],
  );
});

test("a group's role counts for its members; the strongest role wins", async () => {
  const user = await signedInUser(svc.service.ctx.db, {
    groups: ['ops'],
    roles: { [projectId]: 'viewer' },
  });
  assert.equal(await page(user.cookie, `/projects/${projectId}/settings`), 403);
  const given = await svc.request('PUT', `/v2/admin/projects/${projectId}/roles/group/ops`, {
    body: { role: 'maintainer' },
  });
  assert.equal(given.status, 200, given.text);
  assert.equal(await page(user.cookie, `/projects/${projectId}/settings`), 200);
  await svc.request('DELETE', `/v2/admin/projects/${projectId}/roles/group/ops`);
});

test('bad role requests are refused and change nothing', async () => {
  const before = data(await svc.request('GET', `/v2/admin/projects/${projectId}/roles`)).roles;
  const cases = [
    [
      'PUT',
      `/v2/admin/projects/${projectId}/roles/user/usr_00000000000000000000`,
      { role: 'viewer' },
      400,
    ],
    ['PUT', `/v2/admin/projects/${projectId}/roles/group/ops`, { role: 'owner' }, 400],
    ['PUT', `/v2/admin/projects/${projectId}/roles/team/ops`, { role: 'viewer' }, 400],
    ['PUT', '/v2/admin/projects/prj_00000000000000000000/roles/group/ops', { role: 'viewer' }, 404],
  ] as const;
  for (const [method, path, body, status] of cases) {
    const res = await svc.request(method, path, { body });
    assert.equal(res.status, status, `${path} ${res.text}`);
  }
  assert.deepEqual(
    data(await svc.request('GET', `/v2/admin/projects/${projectId}/roles`)).roles,
    before,
  );
});

test("a deactivated user's session stops at the next request; reactivated, they sign in again", async () => {
  const db = svc.service.ctx.db;
  const user = await signedInUser(db, { roles: { [projectId]: 'member' } });
  assert.equal(await page(user.cookie, '/projects'), 200);
  const off = await svc.request('POST', `/v2/admin/users/${user.userId}/deactivate`);
  assert.equal(off.status, 200, off.text);
  assert.ok(data(off).deactivatedAt);
  assert.equal(await page(user.cookie, '/projects'), 401);
  const on = await svc.request('POST', `/v2/admin/users/${user.userId}/reactivate`);
  assert.equal(data(on).deactivatedAt, null);
  // The old session ended for good; a new sign-in is needed.
  assert.equal(await page(user.cookie, '/projects'), 401);
  const missing = await svc.request('POST', '/v2/admin/users/usr_00000000000000000000/deactivate');
  assert.equal(missing.status, 404);
  const rows = await db
    .selectFrom('audit_log')
    .select(['action', 'outcome'])
    .where('target_kind', '=', 'user')
    .where('target_id', '=', user.userId)
    .orderBy('seq')
    .execute();
  assert.deepEqual(
    rows.map((r) => [r.action, r.outcome]),
    [
      ['user.deactivate', 'success'],
      ['user.reactivate', 'success'],
    ],
  );
});

test('the Users and Roles pages: an admin gives and takes a role and deactivates a user', async () => {
  const db = svc.service.ctx.db;
  const admin = await signedInUser(db, { admin: true, email: 'ada@example.test' });
  const user = await signedInUser(db, { email: 'bob@example.test' });
  const form = (path: string, fields: Record<string, string>) =>
    fetch(`${svc.url}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie: admin.cookie,
        origin: svc.url,
        accept: 'text/html',
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams(fields).toString(),
    });
  const usersPage = await fetch(`${svc.url}/users`, { headers: { cookie: admin.cookie } });
  assert.equal(usersPage.status, 200);
  assert.match(await usersPage.text(), /bob@example\.test/);

  const given = await form(`/projects/${projectId}/roles`, {
    granteeKind: 'user',
    grantee: user.userId,
    role: 'member',
  });
  assert.equal(given.status, 303);
  assert.equal(await page(user.cookie, `/projects/${projectId}/jobs`), 200);
  const rolesPage = await fetch(`${svc.url}/projects/${projectId}/roles`, {
    headers: { cookie: admin.cookie },
  });
  assert.match(await rolesPage.text(), /bob@example\.test[\s\S]*member/);
  const bad = await form(`/projects/${projectId}/roles`, {
    granteeKind: 'user',
    grantee: user.userId,
    role: 'owner',
  });
  assert.equal(bad.status, 400);
  assert.match(await bad.text(), /role/);

  const taken = await form(`/projects/${projectId}/roles/delete`, {
    granteeKind: 'user',
    grantee: user.userId,
  });
  assert.equal(taken.status, 303);
  assert.equal(await page(user.cookie, `/projects/${projectId}/jobs`), 403);

  const off = await form(`/users/${user.userId}/deactivate`, {});
  assert.equal(off.status, 303);
  assert.equal(await page(user.cookie, '/projects'), 401);
});
