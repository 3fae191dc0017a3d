// Where the token for each GitHub call comes from: a fixed personal access token, or a GitHub
// App whose short-lived installation tokens @octokit/auth-app mints (the app's JWT, the
// exchange) and this module caches until shortly before they expire.

import { createPrivateKey } from 'node:crypto';
import { createAppAuth } from '@octokit/auth-app';
import type { Octokit } from '@octokit/rest';
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

export interface GitHubAppTokenOptions {
  /** The client's request function: the exchange goes to its base URL through its fetch. */
  request: Octokit['request'];
  /** What a failed exchange becomes: a ForgeError naming the installation. */
  failure(err: unknown): Error;
  /** What an answer without a usable token becomes. */
  unexpected(): Error;
  /** The clock a cached token's age is read on, in milliseconds; default `Date.now`. */
  now?: () => number;
}

const refreshMarginMs = 5 * 60 * 1000;
const quietLog = { warn() {}, debug() {}, info() {}, error() {} };

// @octokit/auth-app shares an exchange in flight between every caller asking for the same
// installation id, across clients. Two GitHub instances (github.com and a GHES) may both have
// an installation 7: one exchange at a time per id keeps one's token from reaching the other.
const exchanges = new Map<number, Promise<unknown>>();

function oneAtATime<T>(installationId: number, run: () => Promise<T>): Promise<T> {
  const previous = exchanges.get(installationId) ?? Promise.resolve();
  const next = previous.then(run, run);
  const settled = next.then(
    () => undefined,
    () => undefined,
  );
  exchanges.set(installationId, settled);
  void settled.then(() => {
    if (exchanges.get(installationId) === settled) exchanges.delete(installationId);
  });
  return next;
}

export function githubAppTokens(
  app: GitHubAppCredentials,
  options: GitHubAppTokenOptions,
): TokenSource {
  const now = options.now ?? Date.now;
  const installationId = parseInstallationId(app.installationId);
  if (!/^\d{1,20}$|^Iv[0-9A-Za-z.]{1,60}$/.test(app.appId)) {
    throw new ForgeError(
      'github',
      'The GitHub App id must be the numeric App ID (or the Client ID) shown on the app settings page',
      { transient: false },
    );
  }

  // The library's cache, with Errand's clock and margin: a token is handed out until ~5 minutes
  // before it expires; one living less than twice that (a test server's, or one read through a
  // skewed clock) is refreshed halfway instead of on every call.
  const entries = new Map<string, { value: string; token: string; refreshAt: number }>();
  const cache = {
    get(key: string): string {
      const entry = entries.get(key);
      return entry && now() < entry.refreshAt ? entry.value : '';
    },
    set(key: string, value: string): void {
      // The library's format: token|createdAt|expiresAt|…
      const [token = '', , expires = ''] = value.split('|');
      const expiresAt = Date.parse(expires);
      if (token === '' || Number.isNaN(expiresAt)) return;
      const margin = Math.min(refreshMarginMs, Math.max(0, (expiresAt - now()) / 2));
      entries.set(key, { value, token, refreshAt: expiresAt - margin });
    },
  };

  let auth: ReturnType<typeof createAppAuth> | undefined;
  function appAuth(): ReturnType<typeof createAppAuth> {
    auth ??= createAppAuth({
      appId: app.appId,
      privateKey: checkedPrivateKey(app.privateKey),
      installationId,
      request: options.request,
      cache,
      log: quietLog,
    });
    return auth;
  }

  let pending: Promise<string> | undefined;
  async function mint(): Promise<string> {
    const auth = appAuth();
    let minted: { token?: unknown; expiresAt?: unknown };
    try {
      minted = await oneAtATime(installationId, () => auth({ type: 'installation' }));
    } catch (err) {
      throw options.failure(err);
    }
    if (
      typeof minted.token !== 'string' ||
      minted.token === '' ||
      typeof minted.expiresAt !== 'string' ||
      Number.isNaN(Date.parse(minted.expiresAt))
    ) {
      throw options.unexpected();
    }
    return minted.token;
  }

  return {
    kind: 'app',
    async token(signal) {
      signal?.throwIfAborted();
      // Concurrent callers share one mint; one caller giving up must not fail the others,
      // so the mint runs unbound and each caller waits with its own signal.
      pending ??= mint().finally(() => {
        pending = undefined;
      });
      return abortable(pending, signal);
    },
    invalidate(token) {
      for (const [key, entry] of entries) if (entry.token === token) entries.delete(key);
    },
  };
}

/** The key as the library needs it, refused here with a message that cannot quote it. */
function checkedPrivateKey(privateKey: string): string {
  // Keys pasted into environment variables often arrive with literal "\n" sequences.
  const pem = privateKey.includes('\\n') ? privateKey.replaceAll('\\n', '\n') : privateKey;
  try {
    const parsed = createPrivateKey({ key: pem, format: 'pem' });
    if (parsed.asymmetricKeyType !== 'rsa') throw new Error('not an RSA key');
  } catch {
    // No cause: parser errors are not known to quote the key, but nothing here needs to risk it.
    throw new ForgeError(
      'github',
      "The GitHub App private key is not a PEM RSA private key: paste the whole .pem file downloaded from the app's settings",
      { transient: false },
    );
  }
  return pem;
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
