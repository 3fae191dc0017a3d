// Where the service's servers for a sandbox listen (the model proxy, the egress proxy, an
// engine's MCP bridge): a Unix socket in a new directory only this process's user may enter,
// mounted into the sandbox by the forwarder's routes, and removed with it when the server stops.
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface PrivateSocket {
  /** The socket to mount into the sandbox. */
  readonly socketPath: string;
  /** Stops listening, cuts every connection, and removes the socket's directory; once. */
  close(): Promise<void>;
}

export interface PrivateSocketOptions {
  /** The directory's name starts with it (`errand-model-`). */
  prefix: string;
  /** The socket's name in it (`model.sock`). */
  name: string;
  /** Where the directory is made (default: the system's temporary directory). */
  parentDir?: string | undefined;
  /** On close, before the connections are cut: what else the server holds open. */
  cut?: () => void;
  /** On close, once the server has stopped: work to wait for before the directory goes. */
  drain?: () => Promise<unknown>;
}

/**
 * `server` (an HTTP server, with `closeAllConnections`) listening on its socket. A server that
 * cannot listen leaves no directory behind.
 */
export async function listenPrivately(
  server: Server & { closeAllConnections(): void },
  options: PrivateSocketOptions,
): Promise<PrivateSocket> {
  // mkdtemp makes the directory 0700: only this user may reach the socket inside.
  const dir = await mkdtemp(join(options.parentDir ?? tmpdir(), options.prefix));
  const socketPath = join(dir, options.name);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  let closed: Promise<void> | undefined;
  return {
    socketPath,
    close() {
      closed ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        options.cut?.();
        server.closeAllConnections();
        await stopped;
        await options.drain?.();
        await rm(dir, { recursive: true, force: true });
      })();
      return closed;
    },
  };
}
