// A turn's MCP servers opened for an engine (src/engines/mcp.ts): the project's and the job's
// (config.ts), each `${secret:NAME}` replaced; a stdio server handed to the engine, which spawns
// it in its sandbox; a remote one connected by the service (remote.ts) and offered to the
// engine through the turn's bridge (bridge.ts), so that its headers stay here. A server that
// cannot be opened is an `mcp.unavailable` event and a note in the engine's prompt, never a
// failed turn.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { EngineStdioServer, OpenEngineMcp } from '../../engines/mcp.ts';
import { errorMessage } from '../../errors.ts';
import { oneLine } from '../../text.ts';
import { startMcpBridge } from './bridge.ts';
import { jobServers, openForTurn } from './config.ts';
import type { RemoteServer } from './remote.ts';

/** Connects the service to a remote server (remote.ts's connectRemote). */
type ConnectRemote = (
  name: string,
  server: RemoteServer,
  opts: { allowPrivate: boolean; signal?: AbortSignal | undefined },
) => Promise<Client>;

/** Why a stdio server is left out of an ask or a plan turn. */
const READ_ONLY_STDIO =
  "a stdio server is not started in an ask or a plan turn (its tools' read-only hints are not known before it runs)";

/**
 * The opener the turn pipeline calls for an engine's turn. `allowPrivate` is
 * ERRAND_WEBHOOK_ALLOW_PRIVATE: a remote server follows the webhooks' address rules.
 */
export function engineMcpOpener(options: {
  allowPrivate: boolean;
  connect: ConnectRemote;
}): OpenEngineMcp {
  return async ({ project, job, secrets, readOnly, signal, emit }) => {
    const unavailable: { server: string; reason: string }[] = [];
    const leaveOut = async (server: string, reason: string) => {
      unavailable.push({ server, reason });
      await emit('mcp.unavailable', { server, reason });
    };
    const stdio: EngineStdioServer[] = [];
    const remote: { name: string; server: RemoteServer }[] = [];
    for (const [name, config] of jobServers(project, job)) {
      const opened = openForTurn(name, config, secrets);
      if (!opened.ok) await leaveOut(name, opened.reason);
      else if (!('command' in opened.config)) remote.push({ name, server: opened.config });
      else if (readOnly) await leaveOut(name, READ_ONLY_STDIO);
      else
        stdio.push({
          name,
          command: opened.config.command,
          args: opened.config.args ?? [],
          env: opened.config.env ?? {},
        });
    }
    // Connected side by side: each is bounded by its own handshake timeout.
    const connected = await Promise.all(
      remote.map(async ({ name, server }) => {
        try {
          const client = await options.connect(name, server, {
            allowPrivate: options.allowPrivate,
            signal,
          });
          return { name, client, reason: '' };
        } catch (err) {
          return { name, client: undefined, reason: oneLine(errorMessage(err), 500) };
        }
      }),
    );
    const clients = new Map<string, Client>();
    for (const entry of connected) {
      if (entry.client) clients.set(entry.name, entry.client);
      else await leaveOut(entry.name, entry.reason);
    }
    const closeClients = () =>
      Promise.all([...clients.values()].map((c) => c.close().catch(() => undefined)));
    let bridge: Awaited<ReturnType<typeof startMcpBridge>> | undefined;
    try {
      bridge = clients.size > 0 ? await startMcpBridge({ servers: clients, readOnly }) : undefined;
    } catch (err) {
      await closeClients();
      throw err;
    }
    return {
      stdio,
      remote: [...clients.keys()],
      bridgeSocket: bridge?.socketPath,
      unavailable,
      async close() {
        await bridge?.close();
        await closeClients();
      },
    };
  };
}
