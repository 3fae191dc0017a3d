// The forwarder inside an engine's sandbox: the engine needs a TCP base URL, the sandbox has no
// network but its own loopback, and the model proxy is a Unix socket mounted in. Errand's own
// Node runs this script (`node -e`) on 127.0.0.1:<port>, piping each connection to the socket,
// and prints one line once it listens; the sandbox's wrapper waits for that line before the
// engine starts. It holds nothing secret: the key is added outside, by the proxy.

/** The script, run as `node -e FORWARDER_SOURCE <port> <socket>`. */
export const FORWARDER_SOURCE = `'use strict';
const net = require('node:net');
const port = Number(process.argv[1]);
const socket = process.argv[2];
const server = net.createServer((client) => {
  const proxy = net.connect(socket);
  client.on('error', () => proxy.destroy());
  proxy.on('error', () => client.destroy());
  client.pipe(proxy);
  proxy.pipe(client);
});
server.on('error', (err) => {
  process.stderr.write('errand forwarder: ' + err.message + '\\n');
  process.exit(1);
});
server.listen(port, '127.0.0.1', () => process.stdout.write('listening\\n'));
`;
