// The forwarder inside a sandbox: a command needs TCP (an engine's base URL, HTTP_PROXY), the
// sandbox has no network but its own loopback, and Errand's proxies (the model proxy, the egress
// proxy) are Unix sockets mounted in. Errand's own Node runs this script (`node -e`), listening
// on 127.0.0.1 at each port given and piping each connection to that port's socket, and prints
// one line once all listen; the sandbox's wrapper waits for that line before the command starts.
// It holds nothing secret: a key is added outside, by the model proxy.

/** The script, run as `node -e FORWARDER_SOURCE <port> <socket> [<port> <socket> …]`. */
export const FORWARDER_SOURCE = `'use strict';
const net = require('node:net');
const routes = process.argv.slice(1);
let waiting = routes.length / 2;
for (let i = 0; i < routes.length; i += 2) {
  const port = Number(routes[i]);
  const socket = routes[i + 1];
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
  server.listen(port, '127.0.0.1', () => {
    if (--waiting === 0) process.stdout.write('listening\\n');
  });
}
`;
