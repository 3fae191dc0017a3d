// The GitHub App token source on its own: the JWT @octokit/auth-app signs for the exchange, when
// a new installation token is minted, and what never crosses from one installation to another.

import assert from 'node:assert/strict';
import { createPublicKey, verify } from 'node:crypto';
import { test } from 'node:test';
import { Octokit } from '@octokit/rest';
import { generateAppKeys } from '../../../test/support/fake-github.ts';
import { ForgeError } from '../types.ts';
import { githubAppTokens } from './auth.ts';

const keys = generateAppKeys();
const app = { appId: '42', installationId: '7', privateKey: keys.privateKey };

interface Exchange {
  url: string;
  authorization: string;
  /** The signal the exchange's request was made with, if any. */
  signal: AbortSignal | null;
}

/** A GitHub answering only the token exchange, the way `answer` says. */
function fakeGitHub(answer: (n: number) => Promise<Response> | Response) {
  const exchanges: Exchange[] = [];
  const fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = String(input instanceof Request ? input.url : input);
    const headers = new Headers(init?.headers);
    exchanges.push({
      url,
      authorization: headers.get('authorization') ?? '',
      signal: init?.signal ?? null,
    });
    assert.equal(init?.method, 'POST');
    assert.match(url, /\/app\/installations\/\d+\/access_tokens$/);
    return answer(exchanges.length);
  };
  const request = new Octokit({ baseUrl: 'https://github.example.test/api/v3', request: { fetch } })
    .request;
  return { exchanges, request };
}

function minted(token: string, expiresAt: number): Response {
  return Response.json(
    { token, expires_at: new Date(expiresAt).toISOString(), permissions: {} },
    { status: 201 },
  );
}

const failure = (err: unknown) =>
  new ForgeError('github', `exchange failed: ${String(err)}`, {
    transient: true,
  });
const unexpected = () => new ForgeError('github', 'unexpected answer', { transient: true });

function decode(jwt: string): { header: unknown; claims: Record<string, unknown>; valid: boolean } {
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

test('the exchange carries an RS256 JWT signed with the app key, issued in the past, for at most 10 minutes', async () => {
  const gh = fakeGitHub(() => minted('ghs_1', Date.now() + 3_600_000));
  const tokens = githubAppTokens(app, { request: gh.request, failure, unexpected });
  assert.equal(await tokens.token(), 'ghs_1');
  const [exchange] = gh.exchanges;
  assert.equal(
    exchange?.url,
    'https://github.example.test/api/v3/app/installations/7/access_tokens',
  );
  const [scheme, jwt = ''] = (exchange?.authorization ?? '').split(' ');
  assert.equal(scheme?.toLowerCase(), 'bearer');
  const { header, claims, valid } = decode(jwt);
  assert.deepEqual(header, { alg: 'RS256', typ: 'JWT' });
  assert.equal(valid, true);
  assert.equal(String(claims.iss), '42');
  const now = Math.floor(Date.now() / 1000);
  const iat = Number(claims.iat);
  const exp = Number(claims.exp);
  assert.ok(iat <= now && iat >= now - 120, `iat ${iat} vs now ${now}`);
  assert.ok(exp > now && exp - iat <= 600, `exp ${exp}, iat ${iat}`);
});

test('caches the installation token and refreshes it 5 minutes before it expires', async () => {
  let clock = Date.parse('2025-06-01T12:00:00Z');
  const gh = fakeGitHub((n) => minted(`ghs_${n}`, clock + 60 * 60 * 1000));
  const tokens = githubAppTokens(app, {
    request: gh.request,
    failure,
    unexpected,
    now: () => clock,
  });
  assert.equal(await tokens.token(), 'ghs_1');
  clock += 54 * 60 * 1000;
  assert.equal(await tokens.token(), 'ghs_1');
  clock += 61 * 1000;
  assert.equal(await tokens.token(), 'ghs_2');
  assert.equal(gh.exchanges.length, 2);

  tokens.invalidate('ghs_1'); // an old token: nothing to forget
  assert.equal(await tokens.token(), 'ghs_2');
  tokens.invalidate('ghs_2');
  assert.equal(await tokens.token(), 'ghs_3');
});

test('a short-lived token is refreshed halfway through its life, not on every call', async () => {
  let clock = Date.parse('2025-06-01T12:00:00Z');
  const gh = fakeGitHub((n) => minted(`ghs_${n}`, clock + 4 * 60 * 1000));
  const tokens = githubAppTokens(app, {
    request: gh.request,
    failure,
    unexpected,
    now: () => clock,
  });
  assert.equal(await tokens.token(), 'ghs_1');
  clock += 119 * 1000;
  assert.equal(await tokens.token(), 'ghs_1');
  clock += 2 * 1000;
  assert.equal(await tokens.token(), 'ghs_2');
});

test('a failed exchange is not cached, and one caller giving up does not fail the others', async () => {
  let release: () => void = () => {};
  let arrived: () => void = () => {};
  const exchanging = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const gh = fakeGitHub(async (n) => {
    if (n === 1) return Response.json({ message: 'boom' }, { status: 500 });
    await new Promise<void>((resolve) => {
      release = resolve;
      arrived();
    });
    return minted('ghs_ok', Date.now() + 3_600_000);
  });
  const tokens = githubAppTokens(app, { request: gh.request, failure, unexpected });
  await assert.rejects(tokens.token(), (err: unknown) => {
    assert.ok(err instanceof ForgeError);
    assert.match(err.message, /^exchange failed: .*boom/);
    return true;
  });

  const controller = new AbortController();
  const impatient = tokens.token(controller.signal);
  const patient = tokens.token();
  const alsoPatient = tokens.token();
  controller.abort(new Error('cancelled'));
  await assert.rejects(impatient, /cancelled/);
  // The abort reached the impatient caller only: the shared exchange, which reaches GitHub
  // after it, was not cancelled with it, and the others get its token.
  // (A patient caller failed with the abort would end this wait too, and the test.)
  await Promise.race([exchanging, patient]);
  assert.equal(gh.exchanges.length, 2);
  assert.equal(gh.exchanges[1]?.signal?.aborted ?? false, false);
  release();
  assert.equal(await patient, 'ghs_ok');
  assert.equal(await alsoPatient, 'ghs_ok');
  assert.equal(gh.exchanges.length, 2, 'concurrent callers share one exchange');
});

test('an answer without a usable token is refused, not cached', async () => {
  const gh = fakeGitHub((n) =>
    n === 1
      ? Response.json({ token: '', expires_at: 'soon' }, { status: 201 })
      : minted('ghs_2', Date.now() + 3_600_000),
  );
  const tokens = githubAppTokens(app, { request: gh.request, failure, unexpected });
  await assert.rejects(tokens.token(), /unexpected answer/);
  assert.equal(await tokens.token(), 'ghs_2');
});

test("the same installation id on two GitHub instances never gets the other one's token", async () => {
  // The GHES exchange is held at GitHub while dotcom's token is asked for: the two overlap.
  let releaseSlow: () => void = () => {};
  let slowArrived: () => void = () => {};
  const slowAsked = new Promise<void>((resolve) => {
    slowArrived = resolve;
  });
  const slow = fakeGitHub(async () => {
    await new Promise<void>((resolve) => {
      releaseSlow = resolve;
      slowArrived();
    });
    return minted('ghs_from_ghes', Date.now() + 3_600_000);
  });
  const fast = fakeGitHub(() => minted('ghs_from_dotcom', Date.now() + 3_600_000));
  const ghes = githubAppTokens(app, { request: slow.request, failure, unexpected });
  const dotcom = githubAppTokens(app, { request: fast.request, failure, unexpected });
  const a = ghes.token();
  await Promise.race([slowAsked, a]);
  const b = dotcom.token();
  releaseSlow();
  assert.equal(await b, 'ghs_from_dotcom');
  assert.equal(await a, 'ghs_from_ghes');
  assert.equal(slow.exchanges.length, 1);
  assert.equal(fast.exchanges.length, 1);
});

test('a bad key or id is refused with a message that never quotes the key', async () => {
  const gh = fakeGitHub(() => minted('never', Date.now() + 3_600_000));
  const garbled = `${keys.privateKey.slice(0, 200)}NOT-A-KEY${keys.privateKey.slice(200, 400)}`;
  const tokens = githubAppTokens(
    { ...app, privateKey: garbled },
    { request: gh.request, failure, unexpected },
  );
  await assert.rejects(tokens.token(), (err: unknown) => {
    assert.ok(err instanceof ForgeError);
    assert.equal(err.transient, false);
    assert.match(err.message, /not a PEM RSA private key/);
    assert.ok(!err.message.includes('NOT-A-KEY') && !err.message.includes('MII'));
    assert.equal(err.cause, undefined);
    return true;
  });
  assert.equal(gh.exchanges.length, 0);
  assert.throws(
    () =>
      githubAppTokens(
        { ...app, installationId: '7/../8' },
        { request: gh.request, failure, unexpected },
      ),
    /installation id must be a positive number/,
  );
  assert.throws(
    () => githubAppTokens({ ...app, appId: 'x y' }, { request: gh.request, failure, unexpected }),
    /App id must be the numeric App ID/,
  );
});
