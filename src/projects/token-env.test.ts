// Which variables may hold a project's forge token, and the operator's setting that allows more.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../config.ts';
import { forgeTokenEnvRefusal } from './token-env.ts';

const none = { forgeTokenEnvAllow: [] };

test('ERRAND_FORGE_TOKEN_<NAME> is always allowed; the bare prefix is not', () => {
  for (const name of [
    'ERRAND_FORGE_TOKEN_GITHUB',
    'ERRAND_FORGE_TOKEN_acme_2',
    'ERRAND_FORGE_TOKEN__',
  ]) {
    assert.equal(forgeTokenEnvRefusal(name, none), undefined, name);
  }
  assert.match(forgeTokenEnvRefusal('ERRAND_FORGE_TOKEN_', none) ?? '', /not an allowed/);
});

test('every name Errand reads, and every other ERRAND_* and PG* name, is refused whatever the operator allows', () => {
  const config = loadConfig({});
  for (const name of [
    'ERRAND_SECRET_KEY',
    'ERRAND_API_KEY',
    'ERRAND_OPENAI_COMPATIBLE_API_KEY',
    'ERRAND_FORGE_TOKEN_ENV_ALLOW',
    'ERRAND_PORT',
    'ERRAND_SOMETHING_ADDED_LATER',
    'DATABASE_URL',
    'ANTHROPIC_API_KEY',
    'OPENAI_API_KEY',
    'OPENAI_BASE_URL',
    'GOOGLE_GENERATIVE_AI_API_KEY',
    'PGPASSWORD',
    'PGPASSFILE',
  ]) {
    const refusal = forgeTokenEnvRefusal(name, { forgeTokenEnvAllow: [name] });
    assert.match(refusal ?? '', /one of Errand's own settings or secrets/, name);
    assert.match(refusal ?? '', /ERRAND_FORGE_TOKEN_<NAME>/);
    assert.notEqual(forgeTokenEnvRefusal(name, config), undefined, name);
  }
});

test('other names only when the operator lists them exactly', () => {
  const allow = { forgeTokenEnvAllow: ['GITHUB_TOKEN', 'GITLAB_TOKEN'] };
  assert.equal(forgeTokenEnvRefusal('GITHUB_TOKEN', allow), undefined);
  assert.equal(forgeTokenEnvRefusal('GITLAB_TOKEN', allow), undefined);
  for (const name of ['GITHUB_TOKEN_X', 'github_token', 'GITEA_TOKEN', 'PATH', 'HOME']) {
    assert.match(
      forgeTokenEnvRefusal(name, allow) ?? '',
      new RegExp(
        `^${name} is not an allowed forge token variable: use a name starting with ERRAND_FORGE_TOKEN_ \\(e\\.g\\. ERRAND_FORGE_TOKEN_GITHUB\\) or one of GITHUB_TOKEN, GITLAB_TOKEN; the operator can allow other names with ERRAND_FORGE_TOKEN_ENV_ALLOW`,
      ),
    );
  }
  assert.match(
    forgeTokenEnvRefusal('GITHUB_TOKEN', none) ?? '',
    /\(e\.g\. ERRAND_FORGE_TOKEN_GITHUB\); the operator/,
  );
});

test('ERRAND_FORGE_TOKEN_ENV_ALLOW: exact names, comma-separated; unset allows none', () => {
  assert.deepEqual(loadConfig({}).forgeTokenEnvAllow, []);
  assert.deepEqual(
    loadConfig({ ERRAND_FORGE_TOKEN_ENV_ALLOW: ' GITHUB_TOKEN,GITLAB_TOKEN ,, ' })
      .forgeTokenEnvAllow,
    ['GITHUB_TOKEN', 'GITLAB_TOKEN'],
  );
});

test("ERRAND_FORGE_TOKEN_ENV_ALLOW naming one of Errand's settings, or no variable name, stops the start", () => {
  for (const name of [
    'ERRAND_SECRET_KEY',
    'DATABASE_URL',
    'ANTHROPIC_API_KEY',
    'GOOGLE_GENERATIVE_AI_API_KEY',
    'ERRAND_FORGE_TOKEN_ENV_ALLOW',
    'ERRAND_ANYTHING',
    'PGPASSWORD',
  ]) {
    assert.throws(
      () => loadConfig({ ERRAND_FORGE_TOKEN_ENV_ALLOW: `GITHUB_TOKEN,${name}` }),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.message ===
          `invalid setting ERRAND_FORGE_TOKEN_ENV_ALLOW: ${name} is one of Errand's own settings or secrets and can never be a forge token's variable`,
      name,
    );
  }
  for (const value of ['GITHUB TOKEN', 'GITHUB-TOKEN', '1TOKEN', 'A=B']) {
    assert.throws(
      () => loadConfig({ ERRAND_FORGE_TOKEN_ENV_ALLOW: value }),
      (err: unknown) =>
        err instanceof ConfigError &&
        /ERRAND_FORGE_TOKEN_ENV_ALLOW: ".*" is not an environment variable name/.test(err.message),
      value,
    );
  }
});
