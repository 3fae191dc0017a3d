// Run by outside.ts as root in the outside's namespaces (not a test file itself): the host of
// the sandbox there. Its servers (TCP and UDP on each address, a resolver on its loopback's port
// 53, and where asked a fake npm registry over HTTPS) record what reaches them while the runner,
// a child of its own (as nobody where asked), runs one command. Prints one JSON report: the
// command's output and the refusals told, what reached a server, the names asked.
import { spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createServer } from 'node:net';

interface Spec {
  runner: string[];
  home: string;
  listen: string[];
  port: number;
  names: Record<string, string>;
  /** A fake npm registry on `address`:443 knowing `name`, with a certificate for its host. */
  registry?: { address: string; cert: string; key: string; name: string };
}

if (process.argv[2] === undefined) throw new Error('usage: outside-host.ts <spec as JSON>');
const spec = JSON.parse(process.argv[2]) as Spec;
const reached: string[] = [];
const asked: string[] = [];
const closers: (() => void)[] = [];

/** The question of a DNS query: its name (dotted) and type, and where the question ends. */
function question(query: Buffer): { name: string; type: number; end: number } {
  const labels: string[] = [];
  let at = 12;
  for (let length = query[at] ?? 0; length > 0; length = query[at] ?? 0) {
    labels.push(query.subarray(at + 1, at + 1 + length).toString('ascii'));
    at += 1 + length;
  }
  return { name: labels.join('.'), type: query.readUInt16BE(at + 1), end: at + 5 };
}

/** A DNS answer to `query` from the names of the spec (A records; NXDOMAIN for others). */
function answer(query: Buffer): Buffer {
  const q = question(query);
  asked.push(q.name);
  const address = spec.names[q.name.toLowerCase()]?.split('.').map(Number);
  const known = address !== undefined && q.type === 1;
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2);
  // A response, recursion desired and available; NXDOMAIN for a name it does not know.
  header.writeUInt16BE(address !== undefined ? 0x8180 : 0x8183, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(known ? 1 : 0, 6);
  const record = known
    ? Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, ...address])
    : Buffer.alloc(0);
  return Buffer.concat([header, query.subarray(12, q.end), record]);
}

/** A UDP socket bound to `address`, closed once the runner is done. */
async function udp(
  address: string,
  port: number,
  onMessage: (m: Buffer, peer: { address: string; port: number }) => void,
) {
  const socket = createSocket(address.includes(':') ? 'udp6' : 'udp4');
  socket.on('message', (message, peer) => onMessage(message, peer));
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(port, address, () => resolve());
  });
  closers.push(() => socket.close());
  return socket;
}

/** A TCP server on `address` that records each connection and answers it. */
async function tcp(address: string, port: number): Promise<void> {
  const server = createServer((socket) => {
    // Recorded before the answer: the command sees it only once this is in the report.
    reached.push(`${address} tcp`);
    socket.end('x\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, address, () => resolve());
  });
  closers.push(() => server.close());
}

/**
 * The fake registry: the package's document at /<name>, 404 for anything else. Each request is
 * recorded as `address https METHOD path`; an unexpected one fails the command's npm call.
 */
async function registry(spec: NonNullable<Spec['registry']>): Promise<void> {
  const PACKAGE = spec.name;
  const server = createHttpsServer(
    { cert: readFileSync(spec.cert), key: readFileSync(spec.key) },
    (req, res) => {
      reached.push(`${spec.address} https ${req.method} ${req.url}`);
      if (req.method !== 'GET' || req.url !== `/${PACKAGE}`) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Not found"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          _id: PACKAGE,
          name: PACKAGE,
          'dist-tags': { latest: '1.2.3' },
          versions: {
            '1.2.3': {
              name: PACKAGE,
              version: '1.2.3',
              dist: {
                tarball: `https://registry.npmjs.org/${PACKAGE}/-/${PACKAGE}-1.2.3.tgz`,
                shasum: '0000000000000000000000000000000000000000',
              },
            },
          },
          time: { '1.2.3': '2026-01-01T00:00:00.000Z' },
        }),
      );
    },
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(443, spec.address, () => resolve());
  });
  closers.push(() => server.close());
}

if (spec.registry) await registry(spec.registry);
const resolver = await udp('127.0.0.1', 53, (query, peer) => {
  resolver.send(answer(query), peer.port, peer.address);
});
for (const address of spec.listen) {
  await tcp(address, spec.port);
  const socket = await udp(address, spec.port, (_, peer) => {
    reached.push(`${address} udp`);
    socket.send('x\n', peer.port, peer.address);
  });
}

const [file = '', ...args] = spec.runner;
const child = spawn(file, args, {
  stdio: ['ignore', 'pipe', 'inherit'],
  env: { PATH: '/usr/bin:/bin', HOME: spec.home },
  cwd: spec.home,
});
let output = '';
child.stdout.on('data', (chunk: Buffer) => {
  output += chunk.toString('utf8');
});
const code = await new Promise<number | null>((resolve, reject) => {
  child.once('error', reject);
  child.once('close', resolve);
});
for (const close of closers) close();
if (code !== 0) {
  process.stderr.write(`the runner exited with ${code}\n`);
  process.exit(1);
}
const ran = JSON.parse(output) as { output: string; denied: unknown[] };
process.stdout.write(JSON.stringify({ ...ran, reached: [...new Set(reached)].sort(), asked }));
