// The MCP servers a job's turns may use (docs/mcp-servers.md), as the project's settings and a
// job's create give them: the common JSON shape (a name, then a command for a stdio server or a
// URL for a remote one), checked here, and opened when a turn runs, where `${secret:NAME}`
// becomes the project secret's value. Stored as given: a value is never opened before a turn.
import { z } from 'zod';
import type { McpServerConfig, McpServers } from '../../db/schema.ts';
import type { TurnSecret } from '../../projects/secrets.ts';

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
const SECRET_REFERENCE = /\$\{secret:([^}]*)\}/g;

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

/** The servers a job's turns get: the project's, then the job's, which win a name they share. */
export function jobServers(
  project: McpServers | null,
  job: McpServers | null,
): [name: string, config: McpServerConfig][] {
  return Object.entries({ ...project, ...job });
}

/** A server's setting opened for a turn, or why it could not be. */
export type OpenedServer =
  | { name: string; ok: true; config: McpServerConfig }
  | { name: string; ok: false; reason: string };

/**
 * A server's setting with each `${secret:NAME}` replaced by the secret's value. A secret the
 * project does not have leaves the server unopened, with a reason that names it (never a value).
 */
export function openServer(
  name: string,
  config: McpServerConfig,
  secrets: readonly TurnSecret[],
): OpenedServer {
  const missing = secretNames(config).filter((s) => !secrets.some((secret) => secret.name === s));
  if (missing.length > 0)
    return {
      name,
      ok: false,
      reason: `it names ${missing.map((s) => `secret ${s}`).join(', ')}, which the project does not have`,
    };
  const open = (text: string) =>
    text.replace(
      SECRET_REFERENCE,
      (_, secret: string) => secrets.find((s) => s.name === secret)?.value ?? '',
    );
  const record = (entries: Record<string, string> | undefined) =>
    entries && Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, open(v)]));
  const opened: McpServerConfig =
    'command' in config
      ? {
          command: open(config.command),
          ...(config.args ? { args: config.args.map(open) } : {}),
          ...(config.env ? { env: record(config.env) } : {}),
        }
      : { url: open(config.url), ...(config.headers ? { headers: record(config.headers) } : {}) };
  return { name, ok: true, config: opened };
}
