// Who the provider's claims say signed in, and who of them is a server admin.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { identityOf } from './oidc.ts';
import { isAdminIdentity } from './service.ts';

const ISSUER = 'https://idp.example.test';

describe('identity from the claims', () => {
  test('the groups claim is a list or one string; names fall back to the username', () => {
    const listed = identityOf(
      ISSUER,
      {
        sub: 's1',
        email: 'a@example.test',
        email_verified: true,
        name: ' Ada ',
        groups: ['x', 'x', 'y', 3],
      },
      'groups',
    );
    assert.deepEqual(listed, {
      issuer: ISSUER,
      subject: 's1',
      email: 'a@example.test',
      emailVerified: true,
      name: 'Ada',
      groups: ['x', 'y'],
    });
    const single = identityOf(
      ISSUER,
      { sub: 's2', preferred_username: 'bob', roles: 'ops' },
      'roles',
    );
    assert.equal(single.name, 'bob');
    assert.deepEqual(single.groups, ['ops']);
    assert.equal(single.email, null);
    assert.equal(single.emailVerified, false);
    assert.throws(() => identityOf(ISSUER, { email: 'a@example.test' }, 'groups'), {
      code: 'unauthorized',
    });
  });

  test('a server admin by group, or by an email the provider verified', () => {
    const rule = { adminGroups: ['errand-admins'], adminEmails: ['ada@example.test'] };
    const who = (claims: Record<string, unknown>) =>
      isAdminIdentity(identityOf(ISSUER, { sub: 's', ...claims }, 'groups'), rule);
    assert.equal(who({ groups: ['errand-admins'] }), true);
    assert.equal(who({ groups: ['errand-admin'] }), false);
    assert.equal(who({ email: 'Ada@Example.test', email_verified: true }), true);
    // Unverified, an email is whatever the user typed at the provider.
    assert.equal(who({ email: 'ada@example.test', email_verified: false }), false);
    assert.equal(who({ email: 'ada@example.test' }), false);
    assert.equal(who({ email: 'bob@example.test', email_verified: true }), false);
  });
});
