// The MCP servers a job's turns may use (docs/mcp-servers.md), opened when a turn runs: the
// project's and the job's merged, and `${secret:NAME}` replaced by the project secret's value.
// The setting's shape is src/projects/mcp-servers.ts's; a value is never opened before a turn.
import type { McpServerConfig, McpServers } from '../../db/schema.ts';
import { SECRET_REFERENCE, secretNames } from '../../projects/mcp-servers.ts';
import type { TurnSecret } from '../../projects/secrets.ts';

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

/**
 * A server's setting opened for a turn. A stdio server runs in the job's sandbox, where the
 * agent's commands could read its environment: it gets only the secrets the project exposes to
 * commands. A remote server's headers stay in the service: any of the project's secrets.
 */
export function openForTurn(
  name: string,
  config: McpServerConfig,
  secrets: readonly TurnSecret[],
): OpenedServer {
  if (!('command' in config)) return openServer(name, config, secrets);
  const opened = openServer(
    name,
    config,
    secrets.filter((s) => s.exposure === 'commands'),
  );
  if (opened.ok || !openServer(name, config, secrets).ok) return opened;
  return {
    name,
    ok: false,
    reason: 'it runs in the sandbox, and a secret it names is not exposed to commands',
  };
}
