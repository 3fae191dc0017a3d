// The one decision of who may call a route, without a server: roles by kind of principal, the
// codes of a refusal, and the archive rule of a member.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ProjectRole } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { type Access, hasRole, mayArchive, requireAccess, roleOn } from './access.ts';
import type { Principal } from './service.ts';

const A = 'prj_A';
const B = 'prj_B';
const user = (roles: Record<string, ProjectRole>, admin = false): Principal => ({
  kind: 'user',
  userId: 'usr_1',
  admin,
  roles: new Map(Object.entries(roles)),
});
const projectKey: Principal = { kind: 'key', keyId: 'key_1', projectId: A };
const adminKey: Principal = { kind: 'key', keyId: 'key_2', projectId: null };

function refusal(principal: Principal | null, access: Access, projectId?: string): string {
  try {
    requireAccess(principal, access, projectId);
    return 'allowed';
  } catch (err) {
    assert.ok(err instanceof AppError);
    return `${err.status} ${err.code}: ${err.message}`;
  }
}

test('a role on a project: an admin anywhere, a project key a member of its own, a user as given', () => {
  assert.equal(roleOn(adminKey, B), 'admin');
  assert.equal(roleOn(user({}, true), B), 'admin');
  assert.equal(roleOn(projectKey, A), 'member');
  assert.equal(roleOn(projectKey, B), undefined);
  assert.equal(roleOn(user({ [A]: 'viewer' }), A), 'viewer');
  assert.equal(roleOn(user({ [A]: 'viewer' }), B), undefined);
  assert.ok(hasRole(user({ [A]: 'maintainer' }), A, 'member'));
  assert.ok(!hasRole(user({ [A]: 'member' }), A, 'maintainer'));
  assert.ok(!hasRole(user({ [A]: 'maintainer' }), A, 'admin'));
});

test('a user is told the role they lack; keys are refused as they always were', () => {
  assert.equal(refusal(null, 'viewer', A).split(':')[0], '401 unauthorized');
  assert.equal(refusal(null, 'open'), 'allowed');
  assert.equal(refusal(user({}), 'signed-in'), 'allowed');
  assert.equal(
    refusal(user({ [A]: 'viewer' }), 'member', A),
    `403 member_required: this route needs the member role on project ${A}; you are a viewer`,
  );
  assert.equal(
    refusal(user({ [B]: 'maintainer' }), 'viewer', A),
    `403 viewer_required: this route needs the viewer role on project ${A}; you have no role on it`,
  );
  assert.equal(
    refusal(user({ [A]: 'maintainer' }), 'admin'),
    '403 admin_required: this route needs a server admin',
  );
  assert.equal(
    refusal(projectKey, 'member', B),
    `403 forbidden: this API key is not valid for project ${B}`,
  );
  assert.equal(
    refusal(projectKey, 'maintainer', A),
    '403 forbidden: this route needs an admin key; this is a project key',
  );
  assert.equal(
    refusal(projectKey, 'maintainer', B),
    '403 forbidden: this route needs an admin key; this is a project key',
  );
  assert.equal(refusal(projectKey, 'member', A), 'allowed');
  assert.equal(refusal(adminKey, 'maintainer', B), 'allowed');
  assert.equal(refusal(user({}, true), 'admin'), 'allowed');
});

test('a member archives the jobs they created; a maintainer and a project key any', () => {
  const member = user({ [A]: 'member' });
  assert.ok(mayArchive(member, A, 'usr_1'));
  assert.ok(!mayArchive(member, A, 'usr_2'));
  assert.ok(!mayArchive(member, A, undefined));
  assert.ok(!mayArchive(user({ [A]: 'viewer' }), A, 'usr_1'));
  assert.ok(mayArchive(user({ [A]: 'maintainer' }), A, undefined));
  assert.ok(mayArchive(projectKey, A, undefined));
  assert.ok(!mayArchive(projectKey, B, undefined));
  assert.ok(mayArchive(adminKey, B, undefined));
});
