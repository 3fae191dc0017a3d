// Opens a turn's MCP servers for Errand's own agent (src/agent/tools/mcp.ts's OpenAgentMcp): the
// project's and the job's, their secrets put in, remote ones connected by the service and stdio
// ones started in the turn's sandbox; their tools listed for the loop. A server that fails is a
// `mcp.unavailable` event and a line of the model's note, never a failed turn; every server
// opened is closed when the turn ends (close(), and the turn's signal).
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Tool } from 'ai';
import {
  type AgentMcp,
  type AgentMcpInput,
  type OpenAgentMcp,
  serverTools,
} from '../../agent/tools/mcp.ts';
import type { McpServerConfig } from '../../db/schema.ts';
import { runNetwork, runSandboxed } from '../../sandbox/sandbox.ts';
import { jobServers, openForTurn } from './config.ts';
import { connectRemote, McpConnectError } from './remote.ts';
import { connectStdio } from './stdio.ts';

export interface AgentMcpOptions {
  /** ERRAND_WEBHOOK_ALLOW_PRIVATE: remote servers on loopback and private addresses. */
  allowPrivate: boolean;
  /** Bound on a server's start, handshake and listing (each call gets 15 times it). */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 20_000;

const MAX_REASON_CHARS = 500;

interface Opened {
  client: Client;
  close(): Promise<void>;
}

export function agentMcpOpener(options: AgentMcpOptions): OpenAgentMcp {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  return async (input) => {
    const servers = jobServers(input.project, input.job);
    const empty: AgentMcp = { tools: {}, note: undefined, close: async () => {} };
    if (servers.length === 0) return empty;
    const { scrub } = input;
    const opened: Opened[] = [];
    const failures: { server: string; reason: string }[] = [];
    const tools: Record<string, Tool> = {};
    const open = async ([name, config]: (typeof servers)[number]) => {
      try {
        const server = await openOne(name, config, input, options.allowPrivate, timeoutMs);
        opened.push(server);
        Object.assign(
          tools,
          await serverTools(name, server.client, {
            readOnly: input.readOnly,
            signal: input.signal,
            timeoutMs,
            scrub,
          }),
        );
      } catch (err) {
        input.signal.throwIfAborted();
        const text =
          err instanceof McpConnectError
            ? err.message
            : `server "${name}": ${String(err instanceof Error ? err.message : err)}`;
        const reason = scrub(text.replace(`server "${name}" `, '')).slice(0, MAX_REASON_CHARS);
        failures.push({ server: name, reason });
      }
    };
    // Every server is closed; then the first failure (a refused host's event that could not be
    // written) is thrown, as run_command's would be.
    const close = async () => {
      const closed = await Promise.allSettled(opened.map((s) => s.close()));
      const failed = closed.find((c) => c.status === 'rejected');
      if (failed) throw failed.reason;
    };
    try {
      await Promise.all(servers.map(open));
      for (const f of failures) await input.emit('mcp.unavailable', f);
    } catch (err) {
      await close();
      throw err;
    }
    const note =
      failures.length === 0
        ? undefined
        : `These MCP servers of the job are unavailable in this turn, so their tools are missing: ${failures.map((f) => `${f.server} (${f.reason})`).join('; ')}.`;
    return { tools, note, close };
  };
}

/** One server, connected: remote by the service, stdio in the turn's sandbox. */
async function openOne(
  name: string,
  config: McpServerConfig,
  input: AgentMcpInput,
  allowPrivate: boolean,
  timeoutMs: number,
): Promise<Opened> {
  const server = openForTurn(name, config, input.secrets);
  if (!server.ok) throw new McpConnectError(`server "${name}" is not opened: ${server.reason}`);
  if ('url' in server.config) {
    const client = await connectRemote(name, server.config, {
      allowPrivate,
      signal: input.signal,
      timeoutMs,
    });
    return { client, close: () => client.close() };
  }
  if (!input.sandbox)
    throw new McpConnectError(
      input.readOnly
        ? `server "${name}" is not started: stdio servers run only in code turns (an ask or plan turn runs no command)`
        : `server "${name}" is not started: it runs in the sandbox, and this turn has none (the project's commands are off, or the sandbox is unavailable)`,
    );
  const { checkout, limits, network } = input.sandbox;
  const egress = runNetwork(network.mode, network.allow, input.emit);
  const started = await connectStdio(name, server.config, {
    checkout,
    limits,
    network: egress.network,
    signal: input.signal,
    timeoutMs,
    run: runSandboxed,
  });
  return {
    client: started.client,
    close: async () => {
      await started.close();
      // The `network.denied` events of the server's run, written.
      await egress.settled();
    },
  };
}
