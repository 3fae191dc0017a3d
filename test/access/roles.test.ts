// Every route against every kind of caller: the table below names each route's access, and the
// test asks each route as each principal, expecting it let through or refused (401, 403) as the
// access says. A route the app registers that the table does not name fails the test: a new
// route needs its rule (its config) and its row here. (A route without a rule at all does not
// even start the server: keys/route-access.ts.)
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Access } from '../../src/keys/access.ts';
import { declaredRoutes } from '../../src/keys/route-access.ts';
import { sessionCookie } from '../support/dashboard.ts';
import { createRouteFixture, type RouteFixture } from '../support/route-cases.ts';
import { startTestService, type TestService } from '../support/service.ts';
import { signedInUser } from '../support/users.ts';

/** Each route ("METHOD url", as registered) and the access it must declare. */
const TABLE: Record<string, Access> = {
  // Probes, documents and the public pages.
  'GET /healthz': 'open',
  'GET /readyz': 'open',
  'GET /metrics': 'open',
  'GET /openapi.json': 'open',
  'GET /docs': 'open',
  'GET /docs/': 'open',
  'GET /docs/static/index.html': 'open',
  'GET /docs/static/swagger-initializer.js': 'open',
  'GET /docs/json': 'open',
  'GET /docs/yaml': 'open',
  'GET /docs/static/*': 'open',
  'GET /review/:jobId': 'open',
  'POST /v2/forges/:projectId/webhook': 'open',
  'GET /': 'open',
  'POST /sign-in': 'open',
  'POST /sign-out': 'open',
  'GET /assets/*': 'open',
  'GET /assets/review.css': 'open',
  'GET /assets/diff.css': 'open',
  'GET /assets/dashboard.js': 'open',
  'GET /assets/dashboard.css': 'open',
  // The jobs API.
  'POST /v2/agent/:projectId/job': 'member',
  'GET /v2/agent/:projectId/job/:id': 'viewer',
  'POST /v2/agent/:projectId/job/:id/message': 'member',
  'POST /v2/agent/:projectId/job/:id/archive': 'member',
  'GET /v2/agent/:projectId/job/:id/events': 'viewer',
  'GET /v2/agent/:projectId/jobs': 'viewer',
  // The admin API: the server's, and a project's settings (a maintainer's).
  'POST /v2/admin/projects': 'admin',
  'GET /v2/admin/projects': 'admin',
  'GET /v2/admin/projects/:id': 'maintainer',
  'PATCH /v2/admin/projects/:id': 'maintainer',
  'POST /v2/admin/projects/:id/forge-webhook-secret': 'maintainer',
  'POST /v2/admin/projects/:projectId/schedules': 'maintainer',
  'GET /v2/admin/projects/:projectId/schedules': 'maintainer',
  'GET /v2/admin/projects/:projectId/schedules/:scheduleId': 'maintainer',
  'PATCH /v2/admin/projects/:projectId/schedules/:scheduleId': 'maintainer',
  'DELETE /v2/admin/projects/:projectId/schedules/:scheduleId': 'maintainer',
  // Eval runs name their projects in the suite: each route checks the role on every one.
  'POST /v2/admin/evals': 'signed-in',
  'GET /v2/admin/evals': 'signed-in',
  'GET /v2/admin/evals/:id': 'signed-in',
  'POST /v2/admin/evals/:id/cancel': 'signed-in',
  'POST /v2/admin/projects/:projectId/webhooks': 'maintainer',
  'GET /v2/admin/projects/:projectId/webhooks': 'maintainer',
  'GET /v2/admin/projects/:projectId/webhooks/:webhookId': 'maintainer',
  'PATCH /v2/admin/projects/:projectId/webhooks/:webhookId': 'maintainer',
  'DELETE /v2/admin/projects/:projectId/webhooks/:webhookId': 'maintainer',
  'POST /v2/admin/projects/:projectId/webhooks/:webhookId/rotate-secret': 'maintainer',
  'GET /v2/admin/projects/:projectId/webhooks/:webhookId/deliveries': 'maintainer',
  'POST /v2/admin/projects/:projectId/webhooks/:webhookId/deliveries/:deliveryId/redeliver':
    'maintainer',
  'GET /v2/admin/projects/:id/secrets': 'maintainer',
  'PUT /v2/admin/projects/:id/secrets/:name': 'maintainer',
  'DELETE /v2/admin/projects/:id/secrets/:name': 'maintainer',
  'GET /v2/admin/projects/:id/environments': 'maintainer',
  'DELETE /v2/admin/projects/:id/environments': 'maintainer',
  'DELETE /v2/admin/projects/:id/environments/:key': 'maintainer',
  'POST /v2/admin/projects/:id/environments/rebuild': 'maintainer',
  'GET /v2/admin/projects/:id/forge-issues/:number': 'maintainer',
  'POST /v2/admin/keys': 'admin',
  'GET /v2/admin/keys': 'admin',
  'GET /v2/admin/audit': 'admin',
  'POST /v2/admin/keys/:id/revoke': 'admin',
  // Dashboard pages.
  'GET /projects': 'signed-in',
  'POST /projects': 'admin',
  'GET /projects/:id/settings': 'maintainer',
  'POST /projects/:id/settings': 'maintainer',
  'POST /projects/:id/secrets': 'maintainer',
  'GET /projects/:id/secrets/:name/delete': 'maintainer',
  'POST /projects/:id/secrets/:name/delete': 'maintainer',
  'GET /projects/:id/jobs': 'viewer',
  'POST /projects/:id/jobs': 'member',
  'GET /projects/:id/jobs/:jobId': 'viewer',
  'POST /projects/:id/jobs/:jobId/message': 'member',
  'GET /projects/:id/jobs/:jobId/archive': 'member',
  'POST /projects/:id/jobs/:jobId/archive': 'member',
  'GET /projects/:id/jobs/:jobId/events': 'viewer',
  'GET /projects/:id/jobs/:jobId/turns/:seq/images/:n': 'viewer',
  'GET /projects/:id/keys': 'maintainer',
  'POST /projects/:id/keys': 'maintainer',
  'POST /projects/:id/environments/rebuild': 'maintainer',
  'POST /projects/:id/environments/delete': 'maintainer',
  'POST /projects/:id/environments/:key/delete': 'maintainer',
  'GET /projects/:id/webhooks': 'maintainer',
  'POST /projects/:id/webhooks': 'maintainer',
  'GET /projects/:id/webhooks/:webhookId': 'maintainer',
  'POST /projects/:id/webhooks/:webhookId': 'maintainer',
  'POST /projects/:id/webhooks/:webhookId/enabled': 'maintainer',
  'POST /projects/:id/webhooks/:webhookId/rotate': 'maintainer',
  'GET /projects/:id/webhooks/:webhookId/delete': 'maintainer',
  'POST /projects/:id/webhooks/:webhookId/delete': 'maintainer',
  'POST /projects/:id/webhooks/:webhookId/deliveries/:deliveryId/redeliver': 'maintainer',
  'GET /projects/:id/schedules': 'maintainer',
  'POST /projects/:id/schedules': 'maintainer',
  'POST /projects/:id/schedules/:scheduleId/paused': 'maintainer',
  'POST /projects/:id/schedules/:scheduleId/delete': 'maintainer',
  'GET /evals': 'signed-in',
  'GET /evals/:id': 'signed-in',
  'POST /evals/:id/cancel': 'signed-in',
  'GET /projects/:id/forge-webhook': 'maintainer',
  'POST /projects/:id/forge-webhook': 'maintainer',
  'POST /projects/:id/forge-webhook/secret': 'maintainer',
  'GET /keys': 'admin',
  'POST /keys': 'admin',
  'GET /keys/:id/revoke': 'admin',
  'POST /keys/:id/revoke': 'admin',
  'GET /users': 'admin',
  'GET /audit': 'admin',
  'POST /users/:id/deactivate': 'admin',
  'POST /users/:id/reactivate': 'admin',
  'GET /tokens': 'person',
  'POST /tokens': 'person',
  'GET /tokens/:id/revoke': 'person',
  'POST /tokens/:id/revoke': 'person',
  'GET /projects/:id/roles': 'admin',
  'POST /projects/:id/roles': 'admin',
  'POST /projects/:id/roles/delete': 'admin',
  'GET /v2/admin/users': 'admin',
  'POST /v2/admin/users/:id/deactivate': 'admin',
  'POST /v2/admin/users/:id/reactivate': 'admin',
  'GET /v2/admin/projects/:id/roles': 'admin',
  'PUT /v2/admin/projects/:id/roles/:granteeKind/:grantee': 'admin',
  'DELETE /v2/admin/projects/:id/roles/:granteeKind/:grantee': 'admin',
};

type Who =
  | 'none'
  | 'viewer'
  | 'member'
  | 'maintainer'
  | 'other maintainer'
  | 'server admin'
  | 'admin key'
  | 'project key';

const EVERYONE: Who[] = [
  'none',
  'viewer',
  'member',
  'maintainer',
  'other maintainer',
  'server admin',
  'admin key',
  'project key',
];

/** Who each access lets through, on project A (the project key's; "other" is B's maintainer). */
const ALLOWED: Record<Access, Who[]> = {
  open: EVERYONE,
  'signed-in': EVERYONE.filter((who) => who !== 'none'),
  person: ['viewer', 'member', 'maintainer', 'other maintainer', 'server admin'],
  viewer: ['viewer', 'member', 'maintainer', 'server admin', 'admin key', 'project key'],
  member: ['member', 'maintainer', 'server admin', 'admin key', 'project key'],
  maintainer: ['maintainer', 'server admin', 'admin key'],
  admin: ['server admin', 'admin key'],
};

const API = /^\/(v2|healthz|readyz|metrics|openapi\.json|docs)(\/|$)/;

let svc: TestService;
let fx: RouteFixture;
const callers = new Map<Who, { key?: string; cookie?: string }>();
/** A user the user routes act on (deactivating one with a session would end it). */
let spareUserId = '';

before(async () => {
  svc = await startTestService({ worker: false });
  fx = await createRouteFixture(svc);
  const db = svc.service.ctx.db;
  const a = fx.project.id;
  callers.set('none', {});
  callers.set('viewer', { cookie: (await signedInUser(db, { roles: { [a]: 'viewer' } })).cookie });
  // The member's role comes through a group: a group's grant counts as the user's own.
  await db
    .insertInto('project_roles')
    .values({ project_id: a, grantee_kind: 'group', grantee: 'builders', role: 'member' })
    .execute();
  callers.set('member', { cookie: (await signedInUser(db, { groups: ['builders'] })).cookie });
  callers.set('maintainer', {
    cookie: (await signedInUser(db, { roles: { [a]: 'maintainer' } })).cookie,
  });
  const other = await signedInUser(db, { roles: { [fx.otherProject.id]: 'maintainer' } });
  spareUserId = (await signedInUser(db)).userId;
  callers.set('other maintainer', { cookie: other.cookie });
  callers.set('server admin', { cookie: (await signedInUser(db, { admin: true })).cookie });
  callers.set('admin key', { key: svc.adminKey, cookie: await sessionCookie(svc, svc.adminKey) });
  callers.set('project key', {
    key: fx.projectKey,
    cookie: await sessionCookie(svc, fx.projectKey),
  });
});

after(() => svc.close());

/** The route's path with its parameters filled in: project A, its job, harmless names. */
function concrete(url: string): string {
  const project = fx.project.id;
  return url
    .replace(':projectId', project)
    .replace(/\/projects\/:id(?=\/|$)/, `/projects/${project}`)
    .replace(/\/job\/:id/, `/job/${fx.jobId}`)
    .replace(':jobId', fx.jobId)
    .replace(/\/keys\/:id/, `/keys/${fx.spareKeyId}`)
    .replace(/\/users\/:id/, `/users/${spareUserId}`)
    .replace(/\/tokens\/:id/, '/tokens/tok_00000000000000000000')
    .replace(':webhookId', 'whk_00000000000000000000')
    .replace(':deliveryId', '1')
    .replace(':number', '1')
    .replace(':name', 'SOME_SECRET')
    .replace(':key', 'nokey')
    .replace(':granteeKind', 'group')
    .replace(':grantee', 'readers')
    .replace('*', 'x');
}

async function ask(
  method: string,
  url: string,
  who: Who,
): Promise<{ status: number; code?: string }> {
  const caller = callers.get(who) ?? {};
  const path = concrete(url);
  const headers: Record<string, string> = {};
  let body: string | undefined;
  if (API.test(path)) {
    if (caller.key) headers.authorization = `Bearer ${caller.key}`;
    if (['POST', 'PUT', 'PATCH'].includes(method)) {
      headers['content-type'] = 'application/json';
      body = '{}';
    }
  } else {
    if (caller.cookie) headers.cookie = caller.cookie;
    if (method === 'POST') {
      headers.origin = svc.url;
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = '';
    }
  }
  const response = await fetch(`${svc.url}${path}`, {
    method,
    headers,
    redirect: 'manual',
    ...(body !== undefined ? { body } : {}),
  });
  const text = await response.text();
  let code: string | undefined;
  try {
    code = (JSON.parse(text) as { code?: string }).code;
  } catch {
    code = undefined;
  }
  return { status: response.status, ...(code ? { code } : {}) };
}

test('every route the app registers has its row in the table, with the same access', () => {
  const app = svc.service.app;
  assert.ok(app);
  const routes = declaredRoutes(app).filter((route) => route.method !== 'HEAD');
  const names = routes.map((route) => `${route.method} ${route.url}`);
  const missing = names.filter((name) => !(name in TABLE));
  assert.deepEqual(missing, [], 'routes without a row in the table (and so unchecked)');
  for (const route of routes) {
    assert.equal(
      route.access,
      TABLE[`${route.method} ${route.url}`],
      `${route.method} ${route.url}`,
    );
  }
});

test('every route lets in whom its access allows and refuses the others (401, 403)', async () => {
  const app = svc.service.app;
  assert.ok(app);
  const routes = declaredRoutes(app)
    .filter((route) => route.method !== 'HEAD' && `${route.method} ${route.url}` in TABLE)
    // Sign-out ends the session it is sent with: last.
    .sort((a, b) => Number(a.url === '/sign-out') - Number(b.url === '/sign-out'));
  const wrong: string[] = [];
  for (const route of routes) {
    const access = TABLE[`${route.method} ${route.url}`] ?? 'admin';
    const api = API.test(route.url);
    for (const who of EVERYONE) {
      const { status, code } = await ask(route.method, route.url, who);
      const name = `${route.method} ${route.url} as ${who}: ${status} ${code ?? ''}`;
      // Users reach the API only through personal tokens (not part of this test): there they
      // are no one.
      const asUser = api && !['none', 'admin key', 'project key'].includes(who);
      let allowed = ALLOWED[access].includes(asUser ? 'none' : who);
      // A member archives only the jobs they created, and fixture jobs are a key's.
      if (route.url.endsWith('/archive') && who === 'member') allowed = false;
      if (access === 'open') {
        if (status === 403) wrong.push(`${name} (an open route refused)`);
        continue;
      }
      if (allowed && (status === 401 || status === 403)) wrong.push(`${name} (should be let in)`);
      if (!allowed) {
        const refusedAs = asUser || who === 'none' ? 401 : 403;
        if (status !== refusedAs) wrong.push(`${name} (should be ${refusedAs})`);
        // Users are told the role they lack; keys keep the code they always had.
        const codeWanted =
          refusedAs === 401
            ? 'unauthorized'
            : who.includes('key')
              ? 'forbidden'
              : route.url.endsWith('/archive') && who === 'member'
                ? 'maintainer_required'
                : `${access}_required`;
        if (code !== codeWanted) wrong.push(`${name} (code should be ${codeWanted})`);
      }
    }
  }
  assert.deepEqual(wrong, []);
});
