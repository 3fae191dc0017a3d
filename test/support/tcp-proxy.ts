// A TCP proxy in front of PostgreSQL (on a TCP port, or on the Unix socket of the embedded test
// server), so a test can take the database away from a service and give it back without
// touching the server other tests share: `down('refuse')` is a stopped server (connections
// reset, new ones refused), `down('hang')` a server that accepts and never answers (a dead
// peer, a full network), `up()` its return.
import net from 'node:net';

export type Outage = 'refuse' | 'hang';

export interface TcpProxy {
  /** The proxy's port on 127.0.0.1. */
  port: number;
  /** `DATABASE_URL` of the target with its host and port (or socket) replaced by the proxy's. */
  url(targetUrl: string): string;
  down(mode: Outage): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

/** Where the proxy connects: a TCP address, or the path of a Unix socket. */
export type ProxyTarget = { host: string; port: number } | { path: string };

export async function startTcpProxy(target: ProxyTarget): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  let mode: 'up' | Outage = 'up';
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server = net.createServer((client) => {
    track(client);
    // A hanging server keeps the connection open and reads nothing into PostgreSQL.
    if (mode === 'hang') return;
    const upstream =
      'path' in target ? net.connect(target.path) : net.connect(target.port, target.host);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        const address = server.address();
        resolve(typeof address === 'object' && address ? address.port : port);
      });
    });
  const port = await listen(0);
  const cut = () => {
    for (const socket of sockets) socket.destroy();
    sockets.clear();
  };
  const stopListening = () =>
    new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));
  return {
    port,
    url(targetUrl) {
      const u = new URL(targetUrl);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      u.searchParams.delete('host');
      return u.toString();
    },
    async down(next) {
      mode = next;
      cut();
      // A stopped server refuses: nothing listens on its port. A hanging one accepts, even
      // right after refusing.
      if (next === 'refuse') await stopListening();
      else if (!server.listening) await listen(port);
    },
    async up() {
      mode = 'up';
      if (!server.listening) await listen(port);
    },
    async close() {
      mode = 'refuse';
      cut();
      await stopListening();
    },
  };
}
