// The part of oidc-provider's API the tests use (the package ships no types).
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export interface ClientMetadata {
    client_id: string;
    client_secret?: string;
    redirect_uris: string[];
    response_types?: string[];
    grant_types?: string[];
    token_endpoint_auth_method?: string;
  }

  export interface Account {
    accountId: string;
    claims(): Record<string, unknown>;
  }

  export interface Configuration {
    clients?: ClientMetadata[];
    findAccount?: (ctx: unknown, id: string) => Account | undefined;
    claims?: Record<string, string[]>;
    jwks?: { keys: JsonWebKey[] };
    cookies?: { keys: string[] };
    ttl?: Record<string, number>;
    pkce?: { required?: () => boolean };
    features?: Record<string, { enabled: boolean }>;
  }

  export class Provider {
    constructor(issuer: string, configuration?: Configuration);
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
  }
}
