// A real OpenID provider (oidc-provider, the certified one) in the test process, on IPv6
// loopback: a different site from the service on 127.0.0.1, as a real provider is. Its
// development sign-in form takes any login; the accounts given here are who exists. The client
// is registered once the service's callback URL is known (the service needs the issuer first).
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Provider } from 'oidc-provider';

export interface TestAccount {
  sub: string;
  email: string;
  name: string;
  groups: string[];
}

export interface TestProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Registers the client with the service's callback URL and starts answering. */
  register(redirectUri: string): void;
  /** Called when the provider has sent a token response (a test's clock moves then). */
  afterToken: (() => void) | undefined;
  close(): Promise<void>;
}

export async function startOidcProvider(accounts: TestAccount[]): Promise<TestProvider> {
  let handle: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const server = createServer((req, res) => {
    if (!handle) {
      res.statusCode = 503;
      res.end('the test provider has no client yet');
      return;
    }
    if (req.url?.startsWith('/token')) res.on('finish', () => provider.afterToken?.());
    handle(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '::1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  const issuer = `http://[::1]:${port}`;
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test', use: 'sig', alg: 'RS256' };
  const provider: TestProvider = {
    issuer,
    clientId: 'errand-test',
    clientSecret: randomBytes(24).toString('base64url'),
    afterToken: undefined,
    register(redirectUri) {
      const oidc = new Provider(issuer, {
        clients: [
          {
            client_id: provider.clientId,
            client_secret: provider.clientSecret,
            redirect_uris: [redirectUri],
            response_types: ['code'],
            grant_types: ['authorization_code'],
            token_endpoint_auth_method: 'client_secret_basic',
          },
        ],
        findAccount: (_ctx, id) => {
          const account = accounts.find((a) => a.sub === id);
          if (!account) return undefined;
          return {
            accountId: account.sub,
            claims: () => ({
              sub: account.sub,
              email: account.email,
              email_verified: true,
              name: account.name,
              groups: account.groups,
            }),
          };
        },
        claims: {
          openid: ['sub'],
          email: ['email', 'email_verified'],
          profile: ['name'],
          groups: ['groups'],
        },
        jwks: { keys: [jwk] },
        cookies: { keys: [randomBytes(16).toString('hex')] },
        pkce: { required: () => true },
        ttl: { Interaction: 600, Session: 3600, Grant: 3600, AccessToken: 3600, IdToken: 3600 },
        features: { devInteractions: { enabled: true } },
      });
      handle = oidc.callback();
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return provider;
}
