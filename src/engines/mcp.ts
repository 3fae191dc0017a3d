// The MCP servers an engine's turn is given (docs/mcp-servers.md, "Engines"), as the turn
// pipeline hands them over: stdio servers, opened with the project's secrets, which the engine
// spawns itself inside the sandbox (so they run with its limits and network policy), and remote
// servers, which the engine reaches only through the service's bridge (a socket forwarded into
// the sandbox): their URLs and headers stay outside. Each engine writes them into its own MCP
// configuration (claude-code.ts, codex.ts, opencode.ts).
import type { McpServers } from '../db/schema.ts';
import type { Emit } from '../events/catalog.ts';
import type { TurnSecret } from '../projects/secrets.ts';

/** A stdio server as the engine spawns it, its `${secret:NAME}` already replaced. */
export interface EngineStdioServer {
  name: string;
  command: string;
  args: readonly string[];
  env: Readonly<Record<string, string>>;
}

/** The MCP servers of one engine turn. */
export interface EngineMcp {
  stdio: readonly EngineStdioServer[];
  /** The remote servers the bridge answers for, by name (at `/mcp/<name>`). */
  remote: readonly string[];
  /** The bridge's Unix socket (in a directory of the service's), when there are remote servers. */
  bridgeSocket: string | undefined;
  /** The servers left out this turn and why (each already an `mcp.unavailable` event). */
  unavailable: readonly { server: string; reason: string }[];
  /** Stops the bridge and closes the connections to the remote servers. */
  close(): Promise<void>;
}

/**
 * Opens a turn's MCP servers for an engine (src/features/mcp-servers/engines.ts): the project's
 * and the job's, secrets replaced; a server that cannot be opened is an `mcp.unavailable` event
 * and left out, never a failed turn. In a read-only turn (ask, plan) there are no stdio servers,
 * and the bridge offers only the remote tools marked `readOnlyHint`.
 */
export type OpenEngineMcp = (input: {
  project: McpServers | null;
  job: McpServers | null;
  secrets: readonly TurnSecret[];
  readOnly: boolean;
  signal: AbortSignal;
  emit: Emit;
}) => Promise<EngineMcp>;

/** The servers an engine's configuration names, as the sandbox reaches them. */
export type EngineMcpServer =
  | ({ type: 'stdio' } & EngineStdioServer)
  | { type: 'http'; name: string; url: string };

/** The servers of a turn as the engine's configuration names them. */
export function engineServers(mcp: EngineMcp | undefined, bridgeOrigin: string): EngineMcpServer[] {
  if (!mcp) return [];
  return [
    ...mcp.stdio.map((server): EngineMcpServer => ({ type: 'stdio', ...server })),
    ...mcp.remote.map(
      (name): EngineMcpServer => ({
        type: 'http',
        name,
        url: `${bridgeOrigin}/mcp/${encodeURIComponent(name)}`,
      }),
    ),
  ];
}

/** A note for the engine's prompt about the servers it will not find this turn. */
export function unavailableNote(mcp: EngineMcp | undefined): string {
  if (!mcp || mcp.unavailable.length === 0) return '';
  const lines = mcp.unavailable.map((u) => `- ${u.server}: ${u.reason}`);
  return `\n\nNote: these MCP servers are unavailable this turn, so their tools are not offered:\n${lines.join('\n')}`;
}
