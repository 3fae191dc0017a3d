// Single sign-on's settings as loadConfig reads them: what is accepted, and each bad value
// refused at start with a message that names the setting (and never holds the client secret).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, isLoopbackHost, loadConfig } from './config.ts';

const SECRET = 'oidc-client-secret-5b1e9f';
const base = {
  ERRAND_OIDC_ISSUER: 'https://idp.example.test/realms/acme',
  ERRAND_OIDC_CLIENT_ID: 'errand',
  ERRAND_OIDC_CLIENT_SECRET: SECRET,
};

function refused(env: Record<string, string>, pattern: RegExp): void {
  assert.throws(
    () => loadConfig(env),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, String(err));
      assert.match(err.message, pattern);
      assert.ok(!err.message.includes(SECRET), 'the secret is not in the message');
      return true;
    },
  );
}

describe('OpenID Connect settings', () => {
  test('unset: no single sign-on, and the key form stays', () => {
    const config = loadConfig({});
    assert.equal(config.oidc, undefined);
    assert.equal(config.dashboardKeySignIn, true);
  });

  test('set: defaults, lists trimmed, the secret among the scrubbed secrets, key sign-in off', () => {
    const config = loadConfig({
      ...base,
      ERRAND_OIDC_ADMIN_GROUPS: ' errand-admins , ops ,',
      ERRAND_ADMIN_EMAILS: 'Ada@Example.test, bob@example.test',
    });
    assert.deepEqual(config.oidc, {
      issuer: base.ERRAND_OIDC_ISSUER,
      clientId: 'errand',
      clientSecret: SECRET,
      allowHttp: false,
      name: 'idp.example.test',
      scopes: ['openid', 'email', 'profile'],
      groupsClaim: 'groups',
      adminGroups: ['errand-admins', 'ops'],
      adminEmails: ['ada@example.test', 'bob@example.test'],
    });
    assert.equal(config.dashboardKeySignIn, false);
    assert.ok(config.secrets.includes(SECRET));
  });

  test('key sign-in, the name, the scopes and the groups claim can be set', () => {
    const config = loadConfig({
      ...base,
      ERRAND_DASHBOARD_KEY_SIGNIN: 'true',
      ERRAND_OIDC_NAME: 'Acme SSO',
      ERRAND_OIDC_SCOPES: 'email profile groups',
      ERRAND_OIDC_GROUPS_CLAIM: 'roles',
    });
    assert.equal(config.dashboardKeySignIn, true);
    assert.equal(config.oidc?.name, 'Acme SSO');
    assert.deepEqual(config.oidc?.scopes, ['openid', 'email', 'profile', 'groups']);
    assert.equal(config.oidc?.groupsClaim, 'roles');
  });

  test('plain http: only on a loopback address, and only with ERRAND_OIDC_ALLOW_HTTP=true', () => {
    for (const issuer of [
      'http://127.0.0.1:9000',
      'http://[::1]:9000/x',
      'http://localhost:8080',
    ]) {
      const config = loadConfig({
        ...base,
        ERRAND_OIDC_ISSUER: issuer,
        ERRAND_OIDC_ALLOW_HTTP: 'true',
      });
      assert.equal(config.oidc?.allowHttp, true, issuer);
    }
    refused(
      { ...base, ERRAND_OIDC_ISSUER: 'http://127.0.0.1:9000' },
      /ERRAND_OIDC_ISSUER: the issuer must be an https URL .*ERRAND_OIDC_ALLOW_HTTP=true/,
    );
    // A config check: refused before anything is sent anywhere.
    for (const issuer of [
      'http://idp.example.test',
      'http://10.0.0.5:8080',
      'http://127.0.0.1.nip.io',
    ]) {
      refused(
        { ...base, ERRAND_OIDC_ISSUER: issuer, ERRAND_OIDC_ALLOW_HTTP: 'true' },
        /ERRAND_OIDC_ISSUER: plain http is allowed only on a loopback address/,
      );
    }
    refused({ ...base, ERRAND_OIDC_ISSUER: 'ftp://idp.example.test' }, /must be an https URL/);
  });

  test('bad values are refused, naming the setting', () => {
    refused({ ERRAND_OIDC_ISSUER: base.ERRAND_OIDC_ISSUER }, /ERRAND_OIDC_CLIENT_ID: .*not set/);
    refused(
      { ERRAND_OIDC_ISSUER: base.ERRAND_OIDC_ISSUER, ERRAND_OIDC_CLIENT_ID: 'errand' },
      /ERRAND_OIDC_CLIENT_SECRET: .*is not set/,
    );
    refused({ ERRAND_OIDC_CLIENT_SECRET: SECRET }, /ERRAND_OIDC_ISSUER: .*not set/);
    refused({ ...base, ERRAND_OIDC_ISSUER: 'not a url' }, /ERRAND_OIDC_ISSUER/);
    refused(
      { ...base, ERRAND_OIDC_ISSUER: 'https://idp.example.test/?tenant=1' },
      /ERRAND_OIDC_ISSUER: give the issuer identifier only/,
    );
    refused({ ...base, ERRAND_OIDC_ALLOW_HTTP: 'maybe' }, /ERRAND_OIDC_ALLOW_HTTP/);
    refused({ ...base, ERRAND_DASHBOARD_KEY_SIGNIN: 'sometimes' }, /ERRAND_DASHBOARD_KEY_SIGNIN/);
    refused(
      { ...base, ERRAND_ADMIN_EMAILS: 'ada@example.test, not-an-email' },
      /ERRAND_ADMIN_EMAILS: "not-an-email"/,
    );
    refused({ ...base, ERRAND_OIDC_SCOPES: 'openid "email"' }, /ERRAND_OIDC_SCOPES/);
    // Without an issuer, a setting of single sign-on is a mistake worth saying.
    refused(
      { ERRAND_DASHBOARD_KEY_SIGNIN: 'true' },
      /ERRAND_DASHBOARD_KEY_SIGNIN: it applies to sign-in through an OpenID provider/,
    );
    refused({ ERRAND_OIDC_ADMIN_GROUPS: 'admins' }, /ERRAND_OIDC_ADMIN_GROUPS/);
  });

  test("ERRAND_SECRET_KEY: the example files' placeholder and a guessable key are refused", () => {
    refused(
      { ERRAND_SECRET_KEY: 'change-me-to-32-random-characters' },
      /ERRAND_SECRET_KEY: is the example files' placeholder; set it to 32 random characters/,
    );
    refused(
      { ERRAND_SECRET_KEY: 'aaaaaaaaaaaaaaaaaaaaaaaa' },
      /ERRAND_SECRET_KEY: has fewer than 8/,
    );
    refused({ ERRAND_SECRET_KEY: 'short' }, /ERRAND_SECRET_KEY: must be at least 16 characters/);
    const key = 'k3Jq9vX2pL7wR4tZ8mN1bC6d';
    assert.equal(loadConfig({ ERRAND_SECRET_KEY: key }).secretKey, key);
  });

  test('loopback hosts', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '[::1]', '::1', 'localhost', 'LOCALHOST'])
      assert.equal(isLoopbackHost(host), true, host);
    for (const host of [
      '10.0.0.1',
      '0.0.0.0',
      '[::]',
      'localhost.example.test',
      '127.0.0.1.nip.io',
      '128.0.0.1',
    ])
      assert.equal(isLoopbackHost(host), false, host);
  });
});

describe('ERRAND_DRAIN_SECONDS', () => {
  test('300 by default, 0 to 86400 accepted, anything else refused naming the setting', () => {
    assert.equal(loadConfig({}).turn.drainSeconds, 300);
    assert.equal(loadConfig({ ERRAND_DRAIN_SECONDS: '0' }).turn.drainSeconds, 0);
    assert.equal(loadConfig({ ERRAND_DRAIN_SECONDS: '86400' }).turn.drainSeconds, 86_400);
    for (const bad of ['-1', '86401', '2.5', 'soon'])
      refused({ ERRAND_DRAIN_SECONDS: bad }, /ERRAND_DRAIN_SECONDS/);
  });
});
