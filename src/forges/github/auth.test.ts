// The GitHub App token source on its own: the JWT it signs, and when it mints a new token.

import assert from 'node:assert/strict';
import { createPrivateKey, createPublicKey, verify } from 'node:crypto';
import { test } from 'node:test';
import { generateAppKeys } from '../../../test/support/fake-github.ts';
import { createAppJwt, githubAppTokens, type MintInstallationToken } from './auth.ts';

const keys = generateAppKeys();
const app = { appId: '42', installationId: '7', privateKey: keys.privateKey };

function decode(jwt: string): { header: unknown; claims: unknown; valid: boolean } {
  const [header = '', payload = '', signature = ''] = jwt.split('.');
  return {
    header: JSON.parse(Buffer.from(header, 'base64url').toString()),
    claims: JSON.parse(Buffer.from(payload, 'base64url').toString()),
    valid: verify(
      'sha256',
      Buffer.from(`${header}.${payload}`),
      createPublicKey(keys.publicKey),
      Buffer.from(signature, 'base64url'),
    ),
  };
}

test('the JWT is RS256, backdated a minute, valid nine minutes, issued by the app', () => {
  const now = Date.parse('2025-06-01T12:00:00.700Z');
  const jwt = createAppJwt('42', createPrivateKey(keys.privateKey), now);
  const seconds = Math.floor(now / 1000);
  assert.deepEqual(decode(jwt), {
    header: { alg: 'RS256', typ: 'JWT' },
    claims: { iat: seconds - 60, exp: seconds + 540, iss: '42' },
    valid: true,
  });
});

test('caches the installation token and refreshes it 5 minutes before it expires', async () => {
  let clock = Date.parse('2025-06-01T12:00:00Z');
  const minted: { jwt: string; installationId: number }[] = [];
  const mint: MintInstallationToken = async (jwt, installationId) => {
    minted.push({ jwt, installationId });
    return { token: `ghs_${minted.length}`, expiresAt: clock + 60 * 60 * 1000 };
  };
  const tokens = githubAppTokens(app, mint, () => clock);
  assert.equal(await tokens.token(), 'ghs_1');
  clock += 54 * 60 * 1000;
  assert.equal(await tokens.token(), 'ghs_1');
  clock += 61 * 1000;
  assert.equal(await tokens.token(), 'ghs_2');
  assert.deepEqual(
    minted.map((m) => [m.installationId, decode(m.jwt).valid]),
    [
      [7, true],
      [7, true],
    ],
  );

  tokens.invalidate('ghs_1'); // an old token: nothing to forget
  assert.equal(await tokens.token(), 'ghs_2');
  tokens.invalidate('ghs_2');
  assert.equal(await tokens.token(), 'ghs_3');
});

test('a failed exchange is not cached, and one caller giving up does not fail the others', async () => {
  let calls = 0;
  let release: () => void = () => {};
  const mint: MintInstallationToken = async () => {
    calls++;
    if (calls === 1) throw new Error('boom');
    await new Promise<void>((resolve) => {
      release = resolve;
    });
    return { token: 'ghs_ok', expiresAt: Date.now() + 3_600_000 };
  };
  const tokens = githubAppTokens(app, mint);
  await assert.rejects(tokens.token(), /boom/);

  const controller = new AbortController();
  const impatient = tokens.token(controller.signal);
  const patient = tokens.token();
  controller.abort(new Error('cancelled'));
  await assert.rejects(impatient, /cancelled/);
  release();
  assert.equal(await patient, 'ghs_ok');
  assert.equal(calls, 2);
});
