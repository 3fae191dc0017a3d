// The dashboard's relying party at the OpenID provider, through openid-client's public API:
// discovery, the authorization code flow with PKCE, state and nonce, and an ID token whose
// signature is checked against the issuer's keys. What comes back is an Identity; making the
// user and the session is the caller's. Nothing here logs or shows the client secret or a token.
import * as client from 'openid-client';
import { z } from 'zod';
import type { OidcSettings } from '../config.ts';
import { AppError } from '../errors.ts';
import type { Identity } from './service.ts';

/** What one browser's sign-in needs back at the callback: single-use, kept by the caller. */
export interface PendingLogin {
  state: string;
  nonce: string;
  verifier: string;
  /** The redirect URI sent to the provider, which the token request must repeat. */
  redirectUri: string;
}

export const pendingLoginSchema = z.object({
  state: z.string().min(1).max(200),
  nonce: z.string().min(1).max(200),
  verifier: z.string().min(43).max(128),
  redirectUri: z.url(),
});

/** The provider's requests: discovery, token, keys, userinfo each give up after this. */
const PROVIDER_TIMEOUT_SECONDS = 10;

export class OidcRelyingParty {
  readonly #settings: OidcSettings;
  #configuration: Promise<client.Configuration> | undefined;

  constructor(settings: OidcSettings) {
    this.#settings = settings;
  }

  /** The name the sign-in button gives the provider. */
  get name(): string {
    return this.#settings.name;
  }

  /**
   * The provider's metadata, discovered at the first sign-in (not at start: a provider that is
   * down must not keep Errand from starting) and kept; a failed discovery is tried again next time.
   */
  #discover(): Promise<client.Configuration> {
    if (!this.#configuration) {
      const s = this.#settings;
      this.#configuration = client
        .discovery(
          new URL(s.issuer),
          s.clientId,
          // The client secret goes in the token request's Authorization header, only there.
          { client_secret: s.clientSecret },
          client.ClientSecretBasic(s.clientSecret),
          {
            timeout: PROVIDER_TIMEOUT_SECONDS,
            // config.ts allows http only for a loopback issuer with ERRAND_OIDC_ALLOW_HTTP=true.
            ...(s.allowHttp ? { execute: [client.allowInsecureRequests] } : {}),
          },
        )
        .then((configuration) => {
          // The ID token's signature is checked against the issuer's published keys even though
          // it came over the provider's own connection: a bug or proxy there cannot forge a user.
          client.enableNonRepudiationChecks(configuration);
          return configuration;
        });
      this.#configuration.catch(() => {
        this.#configuration = undefined;
      });
    }
    return this.#configuration.catch((err: unknown) => {
      throw unreachable(err);
    });
  }

  /** Where to send the browser, and what to keep for its callback. */
  async start(redirectUri: string): Promise<{ url: URL; pending: PendingLogin }> {
    const configuration = await this.#discover();
    const pending: PendingLogin = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      verifier: client.randomPKCECodeVerifier(),
      redirectUri,
    };
    const url = client.buildAuthorizationUrl(configuration, {
      redirect_uri: redirectUri,
      scope: this.#settings.scopes.join(' '),
      state: pending.state,
      nonce: pending.nonce,
      code_challenge: await client.calculatePKCECodeChallenge(pending.verifier),
      code_challenge_method: 'S256',
    });
    return { url, pending };
  }

  /**
   * The callback: checks the state, exchanges the code with the PKCE verifier, verifies the ID
   * token (signature, issuer, audience, expiry, nonce), and reads who signed in. Any failed
   * check is a 401 whose message says which.
   */
  async finish(pending: PendingLogin, callbackUrl: URL): Promise<Identity> {
    const configuration = await this.#discover();
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(
        configuration,
        callbackUrl,
        {
          pkceCodeVerifier: pending.verifier,
          expectedState: pending.state,
          expectedNonce: pending.nonce,
          idTokenExpected: true,
        },
        // The same redirect URI as the authorization request, whatever the callback's Host was.
        { redirect_uri: pending.redirectUri },
      );
    } catch (err) {
      throw refusal(err);
    }
    const claims = tokens.claims();
    if (!claims) throw new AppError('unauthorized', 'the provider sent no ID token');
    let merged: Record<string, unknown> = { ...claims };
    // Many providers (and oidc-provider by default) put the profile and groups in the userinfo
    // answer rather than the ID token; its subject is checked to be the ID token's.
    if (configuration.serverMetadata().userinfo_endpoint && tokens.access_token) {
      try {
        const info = await client.fetchUserInfo(configuration, tokens.access_token, claims.sub);
        merged = { ...merged, ...info, sub: claims.sub };
      } catch (err) {
        throw refusal(err);
      }
    }
    return identityOf(configuration.serverMetadata().issuer, merged, this.#settings.groupsClaim);
  }
}

/** The Identity of the checked claims; the groups claim may be a list or one string. */
export function identityOf(
  issuer: string,
  claims: Record<string, unknown>,
  groupsClaim: string,
): Identity {
  const text = (value: unknown) =>
    typeof value === 'string' && value.trim() !== '' ? value.trim().slice(0, 500) : null;
  const subject = text(claims.sub);
  if (!subject) throw new AppError('unauthorized', 'the provider sent no subject');
  const rawGroups = claims[groupsClaim];
  const groups = (Array.isArray(rawGroups) ? rawGroups : [rawGroups])
    .map(text)
    .filter((group): group is string => group !== null);
  return {
    issuer,
    subject,
    email: text(claims.email),
    emailVerified: claims.email_verified === true,
    name: text(claims.name) ?? text(claims.preferred_username),
    groups: [...new Set(groups)].slice(0, 1000),
  };
}

function causeMessage(err: unknown): string {
  if (err instanceof client.ClientError && err.cause instanceof Error) return err.cause.message;
  return err instanceof Error ? err.message : String(err);
}

/** The provider could not be asked: a 503, never the user's fault. */
function unreachable(err: unknown): AppError {
  return new AppError(
    'unavailable',
    `the identity provider could not be reached or answered unexpectedly (${causeMessage(err)}); try again later`,
  );
}

/** A failed check of the callback or of the provider's answer: the sign-in is refused. */
function refusal(err: unknown): AppError {
  if (err instanceof client.AuthorizationResponseError) {
    return new AppError(
      'unauthorized',
      `the identity provider refused the sign-in: ${err.error_description ?? err.error}`,
    );
  }
  if (err instanceof client.ResponseBodyError) {
    return new AppError(
      'unauthorized',
      `the identity provider refused the sign-in: ${err.error_description ?? err.error}`,
    );
  }
  if (err instanceof client.ClientError) {
    const message = causeMessage(err);
    if (err.code === 'OAUTH_JWT_TIMESTAMP_CHECK_FAILED')
      return new AppError(
        'unauthorized',
        `the identity provider's ID token has expired or is not valid yet (${message}); sign in again, and check this server's clock`,
      );
    if (/"state"/.test(message))
      return new AppError(
        'unauthorized',
        'the sign-in does not match the one this browser started (wrong state); start again from the sign-in page',
      );
    if (err.code === 'OAUTH_TIMEOUT' || err.code === 'OAUTH_RESPONSE_IS_NOT_CONFORM')
      return unreachable(err);
    return new AppError(
      'unauthorized',
      `the identity provider's answer failed a check: ${message}`,
    );
  }
  if (err instanceof TypeError) return unreachable(err);
  if (err instanceof AppError) return err;
  return unreachable(err);
}
