// The one place that reads the environment. Every setting has one name, one default and
// one parser here; flags from the command line override the environment.
import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import path from 'node:path';
import { z } from 'zod';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const decimal = (min: number, max: number) => z.coerce.number().min(min).max(max);

const envSchema = z.object({
  ERRAND_HOST: z.string().min(1).default('127.0.0.1'),
  ERRAND_PORT: int(0, 65535).default(8080),
  ERRAND_DATA_DIR: z.string().min(1).default('.errand'),
  ERRAND_ENGINES_DIR: z.string().min(1).optional(),
  ERRAND_ENGINES: z.string().optional(),
  DATABASE_URL: z.string().min(1).optional(),
  ERRAND_DB_CONNECT_TIMEOUT_SECONDS: int(1, 300).default(5),
  ERRAND_DB_STATEMENT_TIMEOUT_SECONDS: int(1, 3600).default(10),
  ERRAND_DB_POOL_SIZE: int(2, 1000).default(20),
  ERRAND_AUDIT_LOG: z.string().min(1).optional(),
  ERRAND_METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  ERRAND_METRICS_HOST: z.string().min(1).optional(),
  ERRAND_METRICS_PORT: int(0, 65535).optional(),
  ERRAND_ALLOW_LOCAL_REPOS: bool.optional(),
  ERRAND_MODEL: z.string().min(1).optional(),
  ERRAND_MODEL_CATALOG: z.string().min(1).optional(),
  ERRAND_MAX_PROMPT_CHARS: int(1, 10_000_000).default(100_000),
  ERRAND_HTTP_REQUEST_TIMEOUT_SECONDS: int(1, 3600).default(60),
  ERRAND_HTTP_HEADERS_TIMEOUT_SECONDS: int(1, 3600).default(15),
  ERRAND_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS: int(1, 3600).default(72),
  ERRAND_RATE_LIMIT_CREATE: int(0, 1_000_000).default(100),
  ERRAND_RATE_LIMIT_MESSAGE: int(0, 1_000_000).default(100),
  ERRAND_RATE_LIMIT_WINDOW_SECONDS: int(1, 86_400 * 31).default(3600),
  ERRAND_CONCURRENCY: int(1, 256).default(4),
  ERRAND_TURN_RETRIES: int(0, 20).default(3),
  ERRAND_TURN_RETRY_DELAY_SECONDS: int(0, 3600).default(5),
  ERRAND_TURN_TIMEOUT_SECONDS: int(10, 86_400).default(1800),
  ERRAND_HEARTBEAT_SECONDS: int(10, 600).default(10),
  ERRAND_DRAIN_SECONDS: int(0, 86_400).default(300),
  ERRAND_LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info'),
  ERRAND_MAX_STEPS: int(1, 1000).default(50),
  ERRAND_MAX_OUTPUT_TOKENS: int(256, 1_000_000).default(16_000),
  ERRAND_WORKSPACE_IDLE_HOURS: decimal(0, 24 * 366).default(24),
  ERRAND_WORKSPACE_MAX_MIRRORS: int(1, 100_000).default(50),
  ERRAND_WORKSPACE_GC_HOURS: decimal(0, 24 * 366).default(24),
  ERRAND_WORKSPACE_JANITOR_SECONDS: decimal(0.05, 86_400).default(300),
  ERRAND_ENVIRONMENT_CACHE_MB: int(0, 100_000_000).optional(),
  ERRAND_WORKER_NAME: z
    .string()
    .regex(
      /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/,
      'must be 1 to 100 letters, digits, ".", "_", ":" or "-"',
    )
    .optional(),
  ERRAND_GIT_AUTHOR_NAME: z.string().min(1).max(200).default('Errand'),
  ERRAND_GIT_AUTHOR_EMAIL: z.string().min(3).max(200).default('errand@localhost'),
  ANTHROPIC_API_KEY: z.string().min(1).optional(),
  ANTHROPIC_BASE_URL: z.url().optional(),
  OPENAI_API_KEY: z.string().min(1).optional(),
  OPENAI_BASE_URL: z.url().optional(),
  GOOGLE_GENERATIVE_AI_API_KEY: z.string().min(1).optional(),
  ERRAND_OPENAI_COMPATIBLE_BASE_URL: z.url().optional(),
  ERRAND_OPENAI_COMPATIBLE_API_KEY: z.string().min(1).optional(),
  ERRAND_SECRET_KEY: z
    .string()
    .min(16, 'must be at least 16 characters')
    .refine((key) => !/change[-_ ]?me/i.test(key), {
      error:
        "is the example files' placeholder; set it to 32 random characters (e.g. `openssl rand -base64 32`)",
    })
    .refine((key) => new Set(key).size >= 8, {
      error:
        'has fewer than 8 different characters, too guessable to seal secrets with; set it to 32 random characters (e.g. `openssl rand -base64 32`)',
    })
    .optional(),
  // Its shape (an Errand key, checksum included) is checked where it is stored: src/keys/bootstrap.ts.
  ERRAND_ADMIN_KEY: z.string().min(1).optional(),
  ERRAND_PUBLIC_URL: z.url().optional(),
  ERRAND_OIDC_ISSUER: z.url().optional(),
  ERRAND_OIDC_CLIENT_ID: z.string().min(1).optional(),
  ERRAND_OIDC_CLIENT_SECRET: z.string().min(1).optional(),
  ERRAND_OIDC_ALLOW_HTTP: bool.optional(),
  ERRAND_OIDC_NAME: z.string().min(1).max(60).optional(),
  ERRAND_OIDC_SCOPES: z.string().min(1).optional(),
  ERRAND_OIDC_GROUPS_CLAIM: z.string().min(1).max(200).optional(),
  ERRAND_OIDC_ADMIN_GROUPS: z.string().optional(),
  ERRAND_ADMIN_EMAILS: z.string().optional(),
  ERRAND_DASHBOARD_KEY_SIGNIN: bool.optional(),
  ERRAND_REQUIRE_SANDBOX: bool.optional(),
  ERRAND_FORGE_TOKEN_ENV_ALLOW: z.string().optional(),
  ERRAND_STREAMS_PER_KEY: int(1, 100_000).default(100),
  ERRAND_STREAM_KEEPALIVE_SECONDS: decimal(0.05, 3600).default(15),
  ERRAND_WEBHOOK_ALLOW_PRIVATE: bool.optional(),
  ERRAND_WEBHOOK_TIMEOUT_SECONDS: decimal(0.1, 120).default(10),
  ERRAND_WEBHOOK_RETRY_DELAY_SECONDS: int(1, 3600).default(5),
  ERRAND_WEBHOOK_RETRY_HOURS: decimal(0, 24 * 31).default(24),
  ERRAND_WEBHOOK_CONCURRENCY: int(1, 256).default(8),
  ERRAND_PR_POLL_SECONDS: int(5, 86_400).default(60),
  ERRAND_URL: z.string().min(1).optional(),
  ERRAND_API_KEY: z.string().min(1).optional(),
  ERRAND_PROJECT: z.string().min(1).optional(),
});

/** Each model provider's credentials and endpoint, as the registry (src/agent/models.ts) takes them. */
export type ModelSettings = {
  anthropic?: { apiKey?: string; baseURL?: string };
  openai?: { apiKey?: string; baseURL?: string };
  google?: { apiKey?: string; baseURL?: string };
  openaiCompatible?: { baseURL?: string; apiKey?: string };
  /** Replaces the global fetch for every provider (proxies, instrumentation). */
  fetch?: typeof globalThis.fetch;
};

export interface Config {
  host: string;
  port: number;
  /** Absolute path of the data directory (the embedded database, admin.key, workspaces). */
  dataDir: string;
  /**
   * Absolute path where `errand engine install` puts the coding CLIs a project may run
   * (src/engines/catalog.ts): ERRAND_ENGINES_DIR, else `<data dir>/engines`.
   */
  enginesDir: string;
  /**
   * What `errand engine install` without a name installs (ERRAND_ENGINES, comma-separated):
   * names as given, checked against the catalog by the command.
   */
  engines: readonly string[];
  /** PostgreSQL connection string; unset means the embedded PostgreSQL in the data directory. */
  databaseUrl: string | undefined;
  /**
   * Bounds on every PostgreSQL round trip of the service (not of migrations): a database that
   * is down or does not answer makes a request fail with 503 in this time, not hang.
   */
  database: { connectTimeoutSeconds: number; statementTimeoutSeconds: number; poolSize: number };
  /**
   * Where the audit log is streamed as JSON lines besides its table (src/audit/stream.ts):
   * 'stdout', an absolute file path appended to, or undefined for none.
   */
  auditLog: 'stdout' | string | undefined;
  /**
   * Where /metrics is served: on the API's own port behind `token`, and/or on a listener of
   * its own (`port`, e.g. bound to an internal interface), which workers can have too.
   */
  metrics: { token: string | undefined; host: string; port: number | undefined };
  allowLocalRepos: boolean;
  defaultModel: string | undefined;
  /** The operator's file of context windows and prices (ERRAND_MODEL_CATALOG), read at start. */
  modelCatalogFile: string | undefined;
  maxPromptChars: number;
  /** How long a client may take to send a request, its headers, and the next one on a kept-alive connection. */
  httpTimeouts: { requestSeconds: number; headersSeconds: number; keepAliveSeconds: number };
  rateLimits: { create: number; message: number; windowSeconds: number };
  concurrency: number;
  turn: {
    retries: number;
    retryDelaySeconds: number;
    timeoutSeconds: number;
    heartbeatSeconds: number;
    /**
     * How long a worker stopped by SIGTERM or SIGINT lets its running turns finish before it
     * hands the rest back to the queue (ERRAND_DRAIN_SECONDS).
     */
    drainSeconds: number;
  };
  agent: { maxSteps: number; maxOutputTokens: number };
  git: {
    authorName: string;
    authorEmail: string;
    /** What git inherits from this process's environment (see gitInheritedEnv). */
    inheritedEnv: Readonly<Record<string, string>>;
  };
  /** Retention of the worker's clones and mirrors (the janitor, src/workspace/retention.ts). */
  workspace: {
    /** A job with no turn queued or running for this long loses its clone. */
    idleSeconds: number;
    /** Mirrors kept on one machine; least recently used ones no clone needs are evicted. */
    maxMirrors: number;
    /** Each mirror is repacked at most this often. */
    gcIntervalSeconds: number;
    janitorIntervalMs: number;
  };
  /** Environment snapshots (src/environments/): where they are kept and how much disk they take. */
  environments: {
    /**
     * This worker's name in the environments table: ERRAND_WORKER_NAME, else the host's name and
     * a digest of the data directory (two data directories on one host are two workers).
     */
    worker: string;
    /** ERRAND_ENVIRONMENT_CACHE_MB; undefined: a default from the data directory's disk size. */
    cacheMb: number | undefined;
  };
  /** Provider credentials and endpoints, for the model registry. */
  models: ModelSettings;
  /** Key material for forge credentials stored in the database; unset: none can be stored. */
  secretKey: string | undefined;
  /**
   * The operator's first admin key (ERRAND_ADMIN_KEY): its hash is stored at the API's start
   * when no key exists yet, instead of minting, printing and saving one (src/keys/bootstrap.ts).
   */
  adminKey: string | undefined;
  /** Base URL of Errand's own pages (review pages, links in pull requests); no trailing slash. */
  publicUrl: string | undefined;
  /** Whether `serve` serves the dashboard at `/` (off with `--no-dashboard`). */
  dashboard: boolean;
  /** Single sign-on to the dashboard through an OpenID provider; undefined when not configured. */
  oidc: OidcSettings | undefined;
  /**
   * Whether the dashboard's sign-in page takes an API key: always without OIDC; with it, only
   * when ERRAND_DASHBOARD_KEY_SIGNIN=true (the admin key stays a break-glass for the API).
   */
  dashboardKeySignIn: boolean;
  /** A worker refuses to start where the sandbox does not work (ERRAND_REQUIRE_SANDBOX=true). */
  requireSandbox: boolean;
  /** The process environment, for forge tokens a project names by variable (read by workers). */
  workerEnv: Readonly<Record<string, string | undefined>>;
  /** Variable names a project may give for its forge token besides `ERRAND_FORGE_TOKEN_*`. */
  forgeTokenEnvAllow: readonly string[];
  /** Every secret value in this config, so that events and errors can be scrubbed of them. */
  secrets: string[];
  /** The live event stream: open streams per API key (per API process), and its keep-alive. */
  streams: { perKey: number; keepAliveMs: number };
  webhooks: {
    /** Allows http:// and loopback, private and link-local targets (local receivers, tests). */
    allowPrivate: boolean;
    /** Bound on one delivery attempt: connect, send, and the answer's head. */
    timeoutMs: number;
    /** The first retry's delay; each next one doubles, up to an hour. */
    retryDelaySeconds: number;
    /** How long after the event a delivery is retried before it is marked failed. */
    retryWindowMs: number;
    /** Deliveries a worker process sends at once. */
    concurrency: number;
  };
  /**
   * How often the pull request watch asks the forge about an open pull request of a project
   * whose forge sends no webhooks; ten times as long where it does (a safety net for lost ones).
   */
  prPollSeconds: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /**
   * For the CLI and the MCP server: where the API is, the key to use (default: the data dir's
   * admin.key), and the project a job command works in when it names none (ERRAND_PROJECT).
   */
  client: { url: string; apiKey: string | undefined; projectId: string | undefined };
}

/** The OpenID provider the dashboard signs people in with (src/users/oidc.ts). */
export interface OidcSettings {
  /** The issuer identifier, exactly as the provider's discovery document states it. */
  issuer: string;
  clientId: string;
  /** Never logged: it is in Config.secrets, which the logger and events are scrubbed of. */
  clientSecret: string;
  /** Plain http to the provider: only on a loopback address (tests and local trials). */
  allowHttp: boolean;
  /** What the sign-in button says: "Sign in with <name>" (default: the issuer's host). */
  name: string;
  /** The scopes asked for; always with `openid`. */
  scopes: readonly string[];
  /** The claim that lists the user's groups (default `groups`). */
  groupsClaim: string;
  /** Members of these groups are server admins (recomputed at each sign-in). */
  adminGroups: readonly string[];
  /** Users with these emails (lower-cased) are server admins. */
  adminEmails: readonly string[];
}

export type ConfigOverrides = Partial<{
  host: string;
  port: number;
  dataDir: string;
  concurrency: number;
  dashboard: boolean;
}>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Variables a project may always name as its forge token's: `ERRAND_FORGE_TOKEN_<anything>`. */
export const FORGE_TOKEN_ENV_PREFIX = 'ERRAND_FORGE_TOKEN_';
const SETTING_NAMES: ReadonlySet<string> = new Set(Object.keys(envSchema.shape));

/**
 * Whether `name` is one of Errand's own settings or secrets (every name read here, every
 * other ERRAND_* name, and libpq's PG* variables the PostgreSQL driver reads). A project
 * admin chooses where a forge token is sent, so none of these may ever be a token's variable.
 */
export function isErrandSetting(name: string): boolean {
  return (
    SETTING_NAMES.has(name) ||
    (name.startsWith('ERRAND_') && !name.startsWith(FORGE_TOKEN_ENV_PREFIX)) ||
    /^PG[A-Z]+$/.test(name)
  );
}

function forgeTokenEnvAllow(value: string | undefined): string[] {
  const names = (value ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  for (const name of names) {
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(name)) {
      throw new ConfigError(
        `invalid setting ERRAND_FORGE_TOKEN_ENV_ALLOW: "${name}" is not an environment variable name (give exact names, comma-separated)`,
      );
    }
    if (isErrandSetting(name)) {
      throw new ConfigError(
        `invalid setting ERRAND_FORGE_TOKEN_ENV_ALLOW: ${name} is one of Errand's own settings or secrets and can never be a forge token's variable`,
      );
    }
  }
  return names;
}

/** A comma-separated list, trimmed, without empty items. */
function commaList(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

const OIDC_NAMES = [
  'ERRAND_OIDC_ISSUER',
  'ERRAND_OIDC_CLIENT_ID',
  'ERRAND_OIDC_CLIENT_SECRET',
] as const;

/**
 * A host that can only be this machine: 127.0.0.0/8, ::1 and `localhost` (RFC 6761). A plain
 * http issuer anywhere else would let whoever is on the path forge who signs in.
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host === '::1' || host === '0:0:0:0:0:0:0:1') return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

function oidcSettings(e: z.infer<typeof envSchema>): OidcSettings | undefined {
  const set = OIDC_NAMES.filter((name) => e[name] !== undefined);
  if (set.length === 0) {
    const stray = (
      [
        'ERRAND_OIDC_ALLOW_HTTP',
        'ERRAND_OIDC_NAME',
        'ERRAND_OIDC_SCOPES',
        'ERRAND_OIDC_GROUPS_CLAIM',
        'ERRAND_OIDC_ADMIN_GROUPS',
        'ERRAND_ADMIN_EMAILS',
        'ERRAND_DASHBOARD_KEY_SIGNIN',
      ] as const
    ).find((name) => e[name] !== undefined);
    if (stray)
      throw new ConfigError(
        `invalid setting ${stray}: it applies to sign-in through an OpenID provider; set ERRAND_OIDC_ISSUER, ERRAND_OIDC_CLIENT_ID and ERRAND_OIDC_CLIENT_SECRET too`,
      );
    return undefined;
  }
  const missing = OIDC_NAMES.filter((name) => e[name] === undefined);
  if (missing.length)
    throw new ConfigError(
      `invalid setting ${missing[0]}: sign-in through an OpenID provider needs ${OIDC_NAMES.join(', ')}; ${missing.join(' and ')} ${missing.length === 1 ? 'is' : 'are'} not set`,
    );
  const issuer = new URL(e.ERRAND_OIDC_ISSUER ?? '');
  const allowHttp = e.ERRAND_OIDC_ALLOW_HTTP ?? false;
  if (issuer.protocol === 'http:') {
    if (!allowHttp)
      throw new ConfigError(
        'invalid setting ERRAND_OIDC_ISSUER: the issuer must be an https URL (plain http is allowed only on a loopback address with ERRAND_OIDC_ALLOW_HTTP=true)',
      );
    if (!isLoopbackHost(issuer.hostname))
      throw new ConfigError(
        `invalid setting ERRAND_OIDC_ISSUER: plain http is allowed only on a loopback address (127.0.0.1, ::1, localhost), not ${issuer.hostname}; use https`,
      );
  } else if (issuer.protocol !== 'https:') {
    throw new ConfigError('invalid setting ERRAND_OIDC_ISSUER: the issuer must be an https URL');
  }
  if (issuer.search || issuer.hash || issuer.username || issuer.password)
    throw new ConfigError(
      'invalid setting ERRAND_OIDC_ISSUER: give the issuer identifier only, without a query, fragment or credentials',
    );
  const scopes = commaOrSpaceList(e.ERRAND_OIDC_SCOPES ?? 'openid email profile');
  for (const scope of scopes)
    if (!/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(scope))
      throw new ConfigError(`invalid setting ERRAND_OIDC_SCOPES: "${scope}" is not a scope`);
  if (!scopes.includes('openid')) scopes.unshift('openid');
  const adminEmails = commaList(e.ERRAND_ADMIN_EMAILS).map((email) => email.toLowerCase());
  for (const email of adminEmails)
    if (!/^[^\s@]+@[^\s@]+$/.test(email))
      throw new ConfigError(`invalid setting ERRAND_ADMIN_EMAILS: "${email}" is not an email`);
  return {
    // As given: discovery checks that the provider's document names this same issuer.
    issuer: e.ERRAND_OIDC_ISSUER ?? '',
    clientId: e.ERRAND_OIDC_CLIENT_ID ?? '',
    clientSecret: e.ERRAND_OIDC_CLIENT_SECRET ?? '',
    allowHttp,
    name: e.ERRAND_OIDC_NAME ?? issuer.hostname,
    scopes,
    groupsClaim: e.ERRAND_OIDC_GROUPS_CLAIM ?? 'groups',
    adminGroups: commaList(e.ERRAND_OIDC_ADMIN_GROUPS),
    adminEmails,
  };
}

function commaOrSpaceList(value: string): string[] {
  return value.split(/[\s,]+/).filter((item) => item !== '');
}

function httpTimeouts(e: z.infer<typeof envSchema>): Config['httpTimeouts'] {
  // Node refuses a server whose headers may take longer than the whole request.
  if (e.ERRAND_HTTP_HEADERS_TIMEOUT_SECONDS > e.ERRAND_HTTP_REQUEST_TIMEOUT_SECONDS)
    throw new ConfigError(
      `invalid setting ERRAND_HTTP_HEADERS_TIMEOUT_SECONDS: must not exceed ERRAND_HTTP_REQUEST_TIMEOUT_SECONDS (${e.ERRAND_HTTP_REQUEST_TIMEOUT_SECONDS})`,
    );
  return {
    requestSeconds: e.ERRAND_HTTP_REQUEST_TIMEOUT_SECONDS,
    headersSeconds: e.ERRAND_HTTP_HEADERS_TIMEOUT_SECONDS,
    keepAliveSeconds: e.ERRAND_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS,
  };
}

// Only these reach git: anything else (GIT_DIR, GIT_ALLOW_PROTOCOL, GIT_SSH_COMMAND, proxies
// with credentials...) could redirect or weaken it.
const GIT_INHERITED = ['PATH', 'TMPDIR', 'SSH_AUTH_SOCK', 'TZ'] as const;

/** The variables git may inherit from `env`: where programs are, temp files, the ssh agent. */
export function gitInheritedEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of GIT_INHERITED) {
    const value = env[key];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  overrides: ConfigOverrides = {},
): Config {
  const present = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v !== ''),
  );
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = issue?.path.join('.') ?? 'environment';
    throw new ConfigError(`invalid setting ${name}: ${issue?.message ?? 'invalid value'}`);
  }
  const e = parsed.data;
  const databaseUrl = e.DATABASE_URL;
  const oidc = oidcSettings(e);
  const dataDir = path.resolve(overrides.dataDir ?? e.ERRAND_DATA_DIR);
  return {
    host: overrides.host ?? e.ERRAND_HOST,
    port: overrides.port ?? e.ERRAND_PORT,
    dataDir,
    enginesDir: path.resolve(e.ERRAND_ENGINES_DIR ?? path.join(dataDir, 'engines')),
    engines: commaList(e.ERRAND_ENGINES),
    databaseUrl,
    database: {
      connectTimeoutSeconds: e.ERRAND_DB_CONNECT_TIMEOUT_SECONDS,
      statementTimeoutSeconds: e.ERRAND_DB_STATEMENT_TIMEOUT_SECONDS,
      poolSize: e.ERRAND_DB_POOL_SIZE,
    },
    auditLog:
      e.ERRAND_AUDIT_LOG === undefined || e.ERRAND_AUDIT_LOG === 'stdout'
        ? e.ERRAND_AUDIT_LOG
        : path.resolve(e.ERRAND_AUDIT_LOG),
    metrics: {
      token: e.ERRAND_METRICS_TOKEN,
      host: e.ERRAND_METRICS_HOST ?? '127.0.0.1',
      port: e.ERRAND_METRICS_PORT,
    },
    // Local repositories are how a newcomer tries Errand on their own disk; on a shared
    // PostgreSQL deployment they would let any project key read the server's files.
    allowLocalRepos: e.ERRAND_ALLOW_LOCAL_REPOS ?? databaseUrl === undefined,
    defaultModel: e.ERRAND_MODEL,
    modelCatalogFile:
      e.ERRAND_MODEL_CATALOG === undefined ? undefined : path.resolve(e.ERRAND_MODEL_CATALOG),
    maxPromptChars: e.ERRAND_MAX_PROMPT_CHARS,
    httpTimeouts: httpTimeouts(e),
    rateLimits: {
      create: e.ERRAND_RATE_LIMIT_CREATE,
      message: e.ERRAND_RATE_LIMIT_MESSAGE,
      windowSeconds: e.ERRAND_RATE_LIMIT_WINDOW_SECONDS,
    },
    concurrency: overrides.concurrency ?? e.ERRAND_CONCURRENCY,
    turn: {
      retries: e.ERRAND_TURN_RETRIES,
      retryDelaySeconds: e.ERRAND_TURN_RETRY_DELAY_SECONDS,
      timeoutSeconds: e.ERRAND_TURN_TIMEOUT_SECONDS,
      heartbeatSeconds: e.ERRAND_HEARTBEAT_SECONDS,
      drainSeconds: e.ERRAND_DRAIN_SECONDS,
    },
    agent: { maxSteps: e.ERRAND_MAX_STEPS, maxOutputTokens: e.ERRAND_MAX_OUTPUT_TOKENS },
    git: {
      authorName: e.ERRAND_GIT_AUTHOR_NAME,
      authorEmail: e.ERRAND_GIT_AUTHOR_EMAIL,
      inheritedEnv: gitInheritedEnv(env),
    },
    workspace: {
      idleSeconds: e.ERRAND_WORKSPACE_IDLE_HOURS * 3600,
      maxMirrors: e.ERRAND_WORKSPACE_MAX_MIRRORS,
      gcIntervalSeconds: e.ERRAND_WORKSPACE_GC_HOURS * 3600,
      janitorIntervalMs: Math.round(e.ERRAND_WORKSPACE_JANITOR_SECONDS * 1000),
    },
    environments: {
      worker: e.ERRAND_WORKER_NAME ?? defaultWorkerName(dataDir),
      cacheMb: e.ERRAND_ENVIRONMENT_CACHE_MB,
    },
    models: {
      anthropic: { apiKey: e.ANTHROPIC_API_KEY, baseURL: e.ANTHROPIC_BASE_URL },
      openai: { apiKey: e.OPENAI_API_KEY, baseURL: e.OPENAI_BASE_URL },
      google: { apiKey: e.GOOGLE_GENERATIVE_AI_API_KEY },
      openaiCompatible: {
        baseURL: e.ERRAND_OPENAI_COMPATIBLE_BASE_URL,
        apiKey: e.ERRAND_OPENAI_COMPATIBLE_API_KEY,
      },
    },
    secretKey: e.ERRAND_SECRET_KEY,
    adminKey: e.ERRAND_ADMIN_KEY,
    publicUrl: e.ERRAND_PUBLIC_URL?.replace(/\/+$/, ''),
    dashboard: overrides.dashboard ?? true,
    oidc,
    dashboardKeySignIn: oidc === undefined || (e.ERRAND_DASHBOARD_KEY_SIGNIN ?? false),
    requireSandbox: e.ERRAND_REQUIRE_SANDBOX ?? false,
    workerEnv: env,
    forgeTokenEnvAllow: forgeTokenEnvAllow(e.ERRAND_FORGE_TOKEN_ENV_ALLOW),
    secrets: [
      e.ERRAND_SECRET_KEY,
      e.ERRAND_ADMIN_KEY,
      e.ANTHROPIC_API_KEY,
      e.OPENAI_API_KEY,
      e.GOOGLE_GENERATIVE_AI_API_KEY,
      e.ERRAND_OPENAI_COMPATIBLE_API_KEY,
      e.ERRAND_API_KEY,
      e.ERRAND_METRICS_TOKEN,
      e.ERRAND_OIDC_CLIENT_SECRET,
    ].filter((v): v is string => v !== undefined && v.length >= 8),
    streams: {
      perKey: e.ERRAND_STREAMS_PER_KEY,
      keepAliveMs: Math.round(e.ERRAND_STREAM_KEEPALIVE_SECONDS * 1000),
    },
    webhooks: {
      allowPrivate: e.ERRAND_WEBHOOK_ALLOW_PRIVATE ?? false,
      timeoutMs: Math.round(e.ERRAND_WEBHOOK_TIMEOUT_SECONDS * 1000),
      retryDelaySeconds: e.ERRAND_WEBHOOK_RETRY_DELAY_SECONDS,
      retryWindowMs: Math.round(e.ERRAND_WEBHOOK_RETRY_HOURS * 3_600_000),
      concurrency: e.ERRAND_WEBHOOK_CONCURRENCY,
    },
    prPollSeconds: e.ERRAND_PR_POLL_SECONDS,
    logLevel: e.ERRAND_LOG_LEVEL,
    client: {
      // Where this machine's own `serve` listens, when nothing else is said (a port of 0 is
      // chosen at start, and cannot be known here).
      url: e.ERRAND_URL ?? `http://127.0.0.1:${e.ERRAND_PORT || 8080}`,
      apiKey: e.ERRAND_API_KEY,
      projectId: e.ERRAND_PROJECT,
    },
  };
}

/** The host's name and a digest of the data directory: each data directory keeps its own snapshots. */
function defaultWorkerName(dataDir: string): string {
  const digest = createHash('sha256').update(dataDir).digest('hex').slice(0, 8);
  const host =
    hostname()
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .slice(0, 80) || 'host';
  return `${host}:${digest}`;
}
