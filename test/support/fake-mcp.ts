// A remote MCP server for tests: the SDK's McpServer over Streamable HTTP (stateless, JSON
// answers) on 127.0.0.1, refusing any request without its bearer token, and recording the
// headers of every request so a test can see what reached it. Its tools: `echo` (read-only)
// gives back its text, `shout` (not read-only) its text in capitals, `big` a text of n bytes.
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface FakeRemoteMcp {
  url: string;
  /** The headers of every request that reached the server, refused ones included. */
  requests: IncomingHttpHeaders[];
  /** Names of the tools called, in order. */
  calls: string[];
  close(): Promise<void>;
}

function tools(calls: string[]): McpServer {
  const server = new McpServer({ name: 'fake-remote', version: '1.0.0' });
  server.registerTool(
    'echo',
    {
      description: 'Gives back its text.',
      inputSchema: { text: z.string() },
      annotations: { readOnlyHint: true },
    },
    async ({ text }) => {
      calls.push('echo');
      return { content: [{ type: 'text', text: `echo: ${text}` }] };
    },
  );
  server.registerTool(
    'shout',
    { description: 'Gives back its text in capitals.', inputSchema: { text: z.string() } },
    async ({ text }) => {
      calls.push('shout');
      return { content: [{ type: 'text', text: text.toUpperCase() }] };
    },
  );
  server.registerTool(
    'big',
    { description: 'A text of n bytes.', inputSchema: { n: z.number().int() } },
    async ({ n }) => {
      calls.push('big');
      return { content: [{ type: 'text', text: 'x'.repeat(n) }] };
    },
  );
  return server;
}

export async function startFakeRemoteMcp(token: string): Promise<FakeRemoteMcp> {
  const requests: IncomingHttpHeaders[] = [];
  const calls: string[] = [];
  const http = createServer((req, res) => {
    requests.push(req.headers);
    if (req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    // Stateless: a server and a transport per request, as the SDK's stateless example does.
    const server = tools(calls);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    server
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch((err: unknown) => {
        res.writeHead(500).end(String(err));
      });
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    requests,
    calls,
    close: async () => {
      http.closeAllConnections();
      http.close();
      await once(http, 'close');
    },
  };
}
