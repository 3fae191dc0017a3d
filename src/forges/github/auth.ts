// Where the token for each GitHub call comes from: a fixed personal access token, or a GitHub
// App whose short-lived installation tokens are minted from a JWT signed with the app's private
// key (RS256, node:crypto) and cached until shortly before they expire.

import { createPrivateKey, type KeyObject, sign } from 'node:crypto';
import { ForgeError } from '../types.ts';

export interface TokenSource {
  readonly kind: 'token' | 'app';
  /** A token valid for the next few minutes. */
  token(signal?: AbortSignal): Promise<string>;
  /** Forgets a token GitHub refused, so the next `token()` mints a fresh one. */
  invalidate(token: string): void;
}

export function staticToken(token: string): TokenSource {
  return { kind: 'token', token: async () => token, invalidate() {} };
}

export interface GitHubAppCredentials {
  appId: string;
  privateKey: string;
  installationId: string;
}

/** Mints an installation token with the given JWT; returns it with its expiry (ms since epoch). */
export type MintInstallationToken = (
  jwt: string,
  installationId: number,
) => Promise<{ token: string; expiresAt: number }>;

/** GitHub allows at most 10 minutes; 9 leaves room for a clock running slightly fast. */
const jwtLifetimeSeconds = 9 * 60;
/** iat in the past absorbs a clock running slightly slow (GitHub's own recommendation). */
const jwtBackdateSeconds = 60;
const refreshMarginMs = 5 * 60 * 1000;

export function githubAppTokens(
  app: GitHubAppCredentials,
  mint: MintInstallationToken,
  now: () => number = Date.now,
): TokenSource {
  const installationId = parseInstallationId(app.installationId);
  if (!/^\d{1,20}$|^Iv[0-9A-Za-z.]{1,60}$/.test(app.appId)) {
    throw new ForgeError(
      'github',
      'The GitHub App id must be the numeric App ID (or the Client ID) shown on the app settings page',
      { transient: false },
    );
  }
  let key: KeyObject | undefined;
  let cached: { token: string; refreshAt: number } | undefined;
  let pending: Promise<string> | undefined;

  function privateKey(): KeyObject {
    if (key) return key;
    try {
      // Keys pasted into environment variables often arrive with literal "\n" sequences.
      const pem = app.privateKey.includes('\\n')
        ? app.privateKey.replaceAll('\\n', '\n')
        : app.privateKey;
      const parsed = createPrivateKey({ key: pem, format: 'pem' });
      if (parsed.asymmetricKeyType !== 'rsa') throw new Error('not an RSA key');
      key = parsed;
      return parsed;
    } catch {
      // No cause: parser errors are not known to quote the key, but nothing here needs to risk it.
      throw new ForgeError(
        'github',
        "The GitHub App private key is not a PEM RSA private key: paste the whole .pem file downloaded from the app's settings",
        { transient: false },
      );
    }
  }

  async function refresh(): Promise<string> {
    const jwt = createAppJwt(app.appId, privateKey(), now());
    const minted = await mint(jwt, installationId);
    const current = now();
    const lifetime = minted.expiresAt - current;
    // Refresh ~5 minutes early; a token living less than twice that (a test server's, or one
    // read through a skewed clock) is refreshed halfway instead of on every call.
    const margin = Math.min(refreshMarginMs, Math.max(0, lifetime / 2));
    cached = { token: minted.token, refreshAt: minted.expiresAt - margin };
    return minted.token;
  }

  return {
    kind: 'app',
    async token(signal) {
      signal?.throwIfAborted();
      if (cached && now() < cached.refreshAt) return cached.token;
      // Concurrent callers share one mint; one caller giving up must not fail the others,
      // so the mint runs unbound and each caller waits with its own signal.
      pending ??= refresh().finally(() => {
        pending = undefined;
      });
      return abortable(pending, signal);
    },
    invalidate(token) {
      if (cached?.token === token) cached = undefined;
    },
  };
}

export function createAppJwt(appId: string, key: KeyObject, nowMs: number): string {
  const nowSeconds = Math.floor(nowMs / 1000);
  const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'JWT' }));
  const payload = base64url(
    JSON.stringify({
      iat: nowSeconds - jwtBackdateSeconds,
      exp: nowSeconds + jwtLifetimeSeconds,
      iss: appId,
    }),
  );
  const input = `${header}.${payload}`;
  const signature = sign('sha256', Buffer.from(input), key).toString('base64url');
  return `${input}.${signature}`;
}

function parseInstallationId(value: string): number {
  const id = /^\d{1,15}$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(id) || id <= 0) {
    throw new ForgeError(
      'github',
      "The GitHub App installation id must be a positive number (the last part of the installation's settings URL)",
      { transient: false },
    );
  }
  return id;
}

function base64url(text: string): string {
  return Buffer.from(text).toString('base64url');
}

function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
