// The `mcpServers` setting's shape (docs/mcp-servers.md), as a project's settings and a job's
// create give it: the common JSON shape (a name, then a command for a stdio server or a URL for a
// remote one), checked here, stored as given; src/features/mcp-servers/ opens it when a turn runs.
import { z } from 'zod';
import type { Config } from '../config.ts';
import type { McpServerConfig, McpServers } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { type Resolve, unsafeHostReason } from '../net/address.ts';
import type { ProjectRecord } from '../records/project.ts';

/** Most servers one project, or one job, names. */
const MAX_MCP_SERVERS = 16;

/** The most characters of a setting as JSON: servers are commands and URLs, not documents. */
const MAX_MCP_SERVERS_CHARS = 32 * 1024;

/**
 * A server's name: it prefixes its tools (`name__tool`), so it holds no `__` and stays short
 * enough to leave the tool's own name room under the providers' 64-character tool names.
 */
const NAME_PATTERN = /^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}$/;

const NAME_RULE =
  'a server name is 1 to 32 letters, digits, "-" or "_" (not "__"), starting with a letter or digit';

/** A reference to a project secret in a value: `${secret:NPM_TOKEN}`. */
export const SECRET_REFERENCE = /\$\{secret:([^}]*)\}/g;

const SECRET_NAME = /^[A-Z_][A-Z0-9_]*$/;

/** An environment variable's name, as POSIX shells take it. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** An HTTP header's name (RFC 9110's token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

const value = (what: string) =>
  z
    .string({ error: `${what} must be a string` })
    .max(8192, { error: `${what} is longer than 8192 characters` })
    .refine((text) => !text.includes('\0'), { error: `${what} holds a NUL character` });

const stdioServer = z.strictObject({
  command: value('"command"').refine((text) => text.trim().length > 0, {
    error: '"command" must not be empty',
  }),
  args: z
    .array(value('an argument'), { error: '"args" must be an array of strings' })
    .max(64, { error: '"args" holds more than 64 arguments' })
    .optional(),
  env: z
    .record(
      z.string().regex(ENV_NAME, { error: 'an "env" name must be a valid variable name' }),
      value('an "env" value'),
      { error: '"env" must be an object of strings' },
    )
    .optional(),
});

const remoteServer = z.strictObject({
  url: value('"url"').refine(isHttpUrl, { error: '"url" must be an https:// (or http://) URL' }),
  headers: z
    .record(
      z.string().regex(HEADER_NAME, { error: 'a "headers" name must be a valid header name' }),
      value('a header value').refine((text) => !/[\r\n]/.test(text), {
        error: 'a header value must be one line',
      }),
      { error: '"headers" must be an object of strings' },
    )
    .optional(),
});

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.username === '';
  } catch {
    return false;
  }
}

const server = z.union([stdioServer, remoteServer], {
  error: 'each server must be {"command", "args", "env"} (stdio) or {"url", "headers"} (remote)',
});

/**
 * The `mcpServers` field of a project's settings and of a job's create: at most
 * MAX_MCP_SERVERS servers by name, MAX_MCP_SERVERS_CHARS as JSON, each naming only secrets
 * whose names are well formed (whether the project has them is known when a turn runs).
 */
export const mcpServersField = z
  .record(z.string().regex(NAME_PATTERN), server, {
    error: (issue) =>
      issue.code === 'invalid_type'
        ? '"mcpServers" must be an object of servers by name'
        : issue.code === 'invalid_key'
          ? `"${String(issue.input).slice(0, 64)}" is not a server name: ${NAME_RULE}`
          : undefined,
  })
  .refine((servers) => Object.keys(servers).length <= MAX_MCP_SERVERS, {
    error: `"mcpServers" names more than ${MAX_MCP_SERVERS} servers`,
  })
  .refine((servers) => JSON.stringify(servers).length <= MAX_MCP_SERVERS_CHARS, {
    error: `"mcpServers" is longer than ${MAX_MCP_SERVERS_CHARS} characters as JSON`,
  })
  .superRefine((servers, ctx) => {
    for (const [name, config] of Object.entries(servers))
      for (const bad of secretNames(config).filter((s) => !SECRET_NAME.test(s)))
        ctx.addIssue({
          code: 'custom',
          message: `server "${name}" names the secret "${bad}", which is not a secret's name (A-Z, 0-9, _)`,
        });
  })
  .describe(
    'MCP servers by name: {"command", "args", "env"} runs in the job\'s sandbox (stdio), {"url", "headers"} is called by the service (remote). Values may name project secrets as ${secret:NAME}.',
  ) satisfies z.ZodType<McpServers>;

/** Every value of a server's setting that may name a secret. */
function values(config: McpServerConfig): string[] {
  return 'command' in config
    ? [config.command, ...(config.args ?? []), ...Object.values(config.env ?? {})]
    : [config.url, ...Object.values(config.headers ?? {})];
}

/** The secrets a server's setting names, each once. */
export function secretNames(config: McpServerConfig): string[] {
  const names = new Set<string>();
  for (const text of values(config))
    for (const match of text.matchAll(SECRET_REFERENCE)) names.add(match[1] ?? '');
  return [...names];
}

/**
 * A job's own servers (its create's `mcpServers`): the same shape, naming no project secret.
 * Project secrets are an admin's; a member who could name one could send it to any URL.
 */
export const jobMcpServersField = mcpServersField
  .superRefine((servers, ctx) => {
    for (const [name, config] of Object.entries(servers)) {
      const named = secretNames(config);
      if (named.length > 0)
        ctx.addIssue({
          code: 'custom',
          message: `server "${name}" names ${named.map((s) => `\${secret:${s}}`).join(', ')}: a job's own servers may not use project secrets (only the project's "mcpServers" setting may)`,
        });
    }
  })
  .describe(
    'MCP servers for this job besides the project\'s (a name the project\'s setting has too is replaced): {"command", "args", "env"} runs in the job\'s sandbox, {"url", "headers"} is called by the service. Project secrets (${secret:NAME}) are refused here: only the project\'s setting may name them.',
  );

/**
 * Checks each remote server's URL against the address rules webhooks follow (https, and a
 * public address unless `allowPrivate`), now; a turn checks again when it connects.
 */
export async function checkMcpTargets(
  servers: McpServers,
  allowPrivate: boolean,
  resolve?: Resolve,
): Promise<void> {
  for (const [name, config] of Object.entries(servers)) {
    if (!('url' in config)) continue;
    const url = new URL(config.url);
    if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:'))
      throw new AppError(
        'bad_request',
        `MCP server "${name}": its URL must use https:// (http:// only with ERRAND_WEBHOOK_ALLOW_PRIVATE=true)`,
      );
    const unsafe = allowPrivate ? undefined : await unsafeHostReason(url, resolve);
    if (unsafe)
      throw new AppError(
        'bad_request',
        `MCP server "${name}": its URL is not allowed: ${unsafe}; only public addresses can be reached (ERRAND_WEBHOOK_ALLOW_PRIVATE=true allows private ones)`,
      );
  }
}

/** A project's setting as its column stores it, its remote servers' URLs checked; null clears. */
export async function mcpServersChange(
  { mcpServers: servers }: { mcpServers?: McpServers | null | undefined },
  config: Config,
): Promise<{ mcp_servers?: string | null }> {
  if (servers === undefined) return {};
  if (servers !== null) await checkMcpTargets(servers, config.webhooks.allowPrivate);
  return { mcp_servers: servers === null ? null : JSON.stringify(servers) };
}

/**
 * What a record shows of a setting: names, commands, arguments and URLs as stored (a secret
 * appears as its `${secret:NAME}`), but only the NAMES of env variables and headers, whose values
 * are often tokens written in.
 */
export function mcpServersView(servers: McpServers | null): ProjectRecord['mcpServers'] {
  if (!servers) return null;
  return Object.fromEntries(
    Object.entries(servers).map(([name, config]) => [
      name,
      'command' in config
        ? {
            command: config.command,
            args: config.args ?? [],
            envNames: Object.keys(config.env ?? {}).sort(),
          }
        : { url: config.url, headerNames: Object.keys(config.headers ?? {}).sort() },
    ]),
  );
}
