// A stdio MCP server (`{"command", "args", "env"}`) for Errand's own agent: it runs in the job's
// sandbox, under the project's command limits and commands network, while the service talks MCP
// with it. The sandboxed command is Errand's Node running RELAY_SOURCE, which starts the server
// and pipes its stdin and stdout to a Unix socket the service listens on, mounted into the
// sandbox; the service reads that socket as newline-delimited JSON-RPC (socket-transport.ts).
// The server's env is given as the sandbox's secret environment (never on a command line), and
// its stderr is kept, bounded, to say why it failed. It stops when the turn ends.
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { SandboxLimits } from '../../projects/limits.ts';
import type { SandboxNetwork, SandboxResult, SandboxRun } from '../../sandbox/types.ts';
import { connectClient, McpConnectError } from './remote.ts';
import { SocketTransport } from './socket-transport.ts';

/** The relay, run as `node -e RELAY_SOURCE <socket> <command> [<arg> …]` in the sandbox. */
const RELAY_SOURCE = `'use strict';
const net = require('node:net');
const { spawn } = require('node:child_process');
const [socketPath, command, ...args] = process.argv.slice(1);
const socket = net.connect(socketPath);
socket.on('connect', () => {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  child.on('error', (err) => {
    process.stderr.write('cannot start ' + command + ': ' + err.message + '\\n');
    process.exit(127);
  });
  socket.pipe(child.stdin);
  child.stdout.pipe(socket);
  child.stdin.on('error', () => {});
  child.on('exit', (code, signal) => {
    socket.end();
    process.exit(code === null ? 128 : code);
  });
  socket.on('close', () => child.kill('SIGTERM'));
});
socket.on('error', (err) => {
  process.stderr.write('errand mcp relay: ' + err.message + '\\n');
  process.exit(1);
});
`;

/** The most of the server's stderr kept (its tail says why it stopped). */
const STDERR_CAP = 4000;

/** How long a server whose connection closed during the handshake is given to exit. */
const EXIT_WAIT_MS = 2000;

/** The longest a server may run: the turn's end stops it before. */
const SERVER_SECONDS = 3600;

export interface StdioServer {
  command: string;
  args?: string[] | undefined;
  env?: Record<string, string> | undefined;
}

export interface StdioOptions {
  /** The job's checkout (real path): the server starts there, as run_command does. */
  checkout: string;
  limits: SandboxLimits;
  network: SandboxNetwork;
  /** The turn's: aborting stops the server. */
  signal: AbortSignal;
  /** Bound on the start and the handshake. */
  timeoutMs: number;
  /** The sandbox's runner (src/sandbox/sandbox.ts runSandboxed). */
  run: (run: SandboxRun) => Promise<SandboxResult>;
}

export interface OpenStdio {
  client: Client;
  /** Stops the server and waits for its sandbox to end. */
  close(): Promise<void>;
}

/** A shell word: the sandbox runs its command with `sh -c`. */
function quote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

function tail(text: string): string {
  const trimmed = text.trim();
  const cut = trimmed.length > 500 ? `…${trimmed.slice(-500)}` : trimmed;
  return cut.replace(/\s+/g, ' ');
}

/** Why a server's sandbox ended before it spoke MCP. */
function endedReason(result: SandboxResult): string {
  const how = result.timedOut
    ? 'timed out'
    : result.exitCode === null
      ? `was stopped${result.signal ? ` (${result.signal})` : ''}`
      : `exited with code ${result.exitCode}`;
  const said = tail(result.output);
  return `it ${how} before it answered${said ? `: ${said}` : ''}`;
}

/** Starts the server in the sandbox and connects an MCP client to it, or throws McpConnectError. */
export async function connectStdio(
  name: string,
  server: StdioServer,
  opts: StdioOptions,
): Promise<OpenStdio> {
  const dir = await realpath(await mkdtemp(join(tmpdir(), 'errand-mcp-')));
  const socketPath = join(dir, 'server.sock');
  const stop = new AbortController();
  const onTurnEnd = () => stop.abort();
  opts.signal.addEventListener('abort', onTurnEnd, { once: true });
  const listener = createServer();
  let accepted: Socket | undefined;
  const connected = new Promise<Socket>((resolve) => {
    // One connection: the relay's. The listener closes once it has it.
    listener.once('connection', (socket) => {
      accepted = socket;
      listener.close();
      resolve(socket);
    });
  });
  let done: Promise<SandboxResult> | undefined;
  const close = async () => {
    opts.signal.removeEventListener('abort', onTurnEnd);
    stop.abort();
    accepted?.destroy();
    listener.close();
    await done?.catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(socketPath, () => resolve());
    });
    const command = [process.execPath, '-e', RELAY_SOURCE, socketPath, server.command]
      .concat(server.args ?? [])
      .map(quote)
      .join(' ');
    done = opts.run({
      checkout: opts.checkout,
      cwd: opts.checkout,
      command: `exec ${command}`,
      limits: { ...opts.limits, timeoutSeconds: SERVER_SECONDS },
      network: opts.network,
      signal: stop.signal,
      outputCap: STDERR_CAP,
      readOnlyBinds: [process.execPath, socketPath],
      ...(server.env && Object.keys(server.env).length > 0 ? { secretEnv: server.env } : {}),
    });
    const ended = done.then(
      (result) => {
        throw new McpConnectError(`server "${name}" did not start: ${endedReason(result)}`);
      },
      (err: unknown) => {
        throw new McpConnectError(
          `server "${name}" did not start: ${err instanceof Error ? err.message : String(err)}`,
        );
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new McpConnectError(`server "${name}" did not start within ${opts.timeoutMs / 1000} s`),
          ),
        opts.timeoutMs,
      );
    });
    try {
      const socket = await Promise.race([connected, ended, timeout]);
      const client = await Promise.race([
        connectClient(new SocketTransport(socket), {
          signal: stop.signal,
          timeoutMs: opts.timeoutMs,
        }),
        ended,
      ]).catch(async (err: unknown) => {
        // A server that exits closes the connection first: its exit (and stderr) says why.
        const result = await Promise.race([done?.catch(() => undefined), sleep(EXIT_WAIT_MS)]);
        if (result)
          throw new McpConnectError(`server "${name}" did not start: ${endedReason(result)}`);
        throw err;
      });
      return {
        client,
        close: async () => {
          await client.close().catch(() => undefined);
          await close();
        },
      };
    } finally {
      clearTimeout(timer);
      ended.catch(() => undefined);
    }
  } catch (err) {
    await close();
    if (err instanceof McpConnectError) {
      // connectClient's reason names no server: said once, here.
      throw err.message.startsWith(`server "${name}"`)
        ? err
        : new McpConnectError(`server "${name}" did not connect: ${err.message}`);
    }
    throw err;
  }
}
