// The MCP bridge on its Unix socket, as an engine in the sandbox reaches it: a remote server's
// tools listed and called through the service's own connection (its token never asked of the
// client), only read-only tools in a read-only turn, and everything else refused without a
// byte of the request trusted.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { type FakeRemoteMcp, startFakeRemoteMcp } from '../../../test/support/fake-mcp.ts';
import { errandVersion } from '../../version.ts';
import { type McpBridge, startMcpBridge } from './bridge.ts';
import { connectRemote } from './remote.ts';

const TOKEN = 'mcp-bridge-token-8d2e1a';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: Record<string, unknown> | undefined;
}

/** One HTTP request on the bridge's socket, with no header of the remote's. */
function send(
  bridge: McpBridge,
  path: string,
  body: string | Buffer | undefined,
  options: { method?: string; contentType?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath: bridge.socketPath,
        path,
        method: options.method ?? 'POST',
        headers: {
          'content-type': options.contentType ?? 'application/json',
          accept: 'application/json, text/event-stream',
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: Record<string, unknown> | undefined;
          try {
            json = JSON.parse(text) as Record<string, unknown>;
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    // A request cut off by the bridge (a body past its bound) ends in an error or an answer.
    req.on('error', reject);
    req.end(body);
  });
}

/** An answer's JSON-RPC result (an empty object when there is none). */
function resultOf(answer: Answer): Record<string, unknown> {
  const result = answer.json?.result;
  return typeof result === 'object' && result !== null ? (result as Record<string, unknown>) : {};
}

const rpc = (method: string, params?: unknown, id: number | string = 1) =>
  JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });

describe('MCP bridge', () => {
  let fake: FakeRemoteMcp;
  let client: Client;
  let bridge: McpBridge;
  let readOnly: McpBridge;

  before(async () => {
    fake = await startFakeRemoteMcp(TOKEN);
    client = await connectRemote(
      'docs',
      { url: fake.url, headers: { Authorization: `Bearer ${TOKEN}` } },
      { allowPrivate: true },
    );
    const servers = new Map([['docs', client]]);
    bridge = await startMcpBridge({ servers, readOnly: false });
    readOnly = await startMcpBridge({ servers, readOnly: true });
  });
  after(async () => {
    await bridge?.close();
    await readOnly?.close();
    await client?.close();
    await fake?.close();
  });

  test('initializes, lists the remote tools and forwards a call with the remote token', async () => {
    const init = await send(
      bridge,
      '/mcp/docs',
      rpc('initialize', {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'engine', version: '1' },
      }),
    );
    assert.equal(init.status, 200, init.text);
    assert.match(String(init.headers['content-type']), /^application\/json/);
    assert.deepEqual(init.json?.result, {
      protocolVersion: '2025-06-18',
      capabilities: { tools: {} },
      serverInfo: { name: 'errand-bridge/docs', version: errandVersion() },
    });
    const initialized = await send(
      bridge,
      '/mcp/docs',
      JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    );
    assert.equal(initialized.status, 202);
    assert.equal(initialized.text, '');

    const list = await send(bridge, '/mcp/docs', rpc('tools/list', {}, 'a'));
    const tools = resultOf(list).tools as { name: string }[];
    assert.deepEqual(tools.map((t) => t.name).sort(), ['big', 'echo', 'shout']);
    assert.equal(list.json?.id, 'a');

    const before = fake.requests.length;
    const call = await send(
      bridge,
      '/mcp/docs',
      rpc('tools/call', { name: 'shout', arguments: { text: 'hi' } }, 7),
    );
    assert.deepEqual(call.json, {
      jsonrpc: '2.0',
      id: 7,
      result: { content: [{ type: 'text', text: 'HI' }] },
    });
    // The remote saw the token on every request: the service's connection added it.
    const seen = fake.requests.slice(before);
    assert.ok(seen.length > 0);
    assert.ok(seen.every((h) => h.authorization === `Bearer ${TOKEN}`));
  });

  test('in a read-only turn, offers and calls only the tools marked readOnlyHint', async () => {
    const list = await send(readOnly, '/mcp/docs', rpc('tools/list'));
    const tools = resultOf(list).tools as { name: string }[];
    assert.deepEqual(
      tools.map((t) => t.name),
      ['echo'],
    );
    const calls = fake.calls.length;
    const refused = await send(
      readOnly,
      '/mcp/docs',
      rpc('tools/call', { name: 'shout', arguments: { text: 'hi' } }),
    );
    assert.equal(refused.status, 200);
    assert.deepEqual(refused.json?.error, {
      code: -32602,
      message: 'server "docs" offers no tool "shout"',
    });
    assert.equal(fake.calls.length, calls, 'the remote was not called');
    const echo = await send(
      readOnly,
      '/mcp/docs',
      rpc('tools/call', { name: 'echo', arguments: { text: 'x' } }),
    );
    assert.deepEqual(resultOf(echo).content, [{ type: 'text', text: 'echo: x' }]);
  });

  test('refuses what it does not answer, and changes nothing at the remote', async () => {
    const calls = fake.calls.length;
    const cases: [string, Promise<Answer>, number, RegExp][] = [
      [
        'an unknown server',
        send(bridge, '/mcp/other', rpc('tools/list')),
        404,
        /no such MCP server/,
      ],
      ['a path outside /mcp', send(bridge, '/admin', rpc('tools/list')), 404, /no such MCP server/],
      [
        'a stream of server messages',
        send(bridge, '/mcp/docs', undefined, { method: 'GET' }),
        405,
        /only POST/,
      ],
      [
        'a session to end',
        send(bridge, '/mcp/docs', undefined, { method: 'DELETE' }),
        405,
        /only POST/,
      ],
      ['a body that is not JSON', send(bridge, '/mcp/docs', '{"jsonrpc":', {}), 400, /not JSON/],
      [
        'another content type',
        send(bridge, '/mcp/docs', rpc('tools/list'), { contentType: 'text/plain' }),
        415,
        /application\/json/,
      ],
      [
        'a batch',
        send(bridge, '/mcp/docs', `[${rpc('tools/list')}]`),
        400,
        /one JSON-RPC 2\.0 request/,
      ],
      [
        'an id that is an object',
        send(bridge, '/mcp/docs', JSON.stringify({ jsonrpc: '2.0', id: {}, method: 'ping' })),
        400,
        /id must be a string or a number/,
      ],
    ];
    for (const [what, answer, status, message] of cases) {
      const got = await answer;
      assert.equal(got.status, status, `${what}: ${got.text}`);
      assert.match(got.text, message, what);
    }
    const rpcCases: [string, string, number, RegExp][] = [
      ['another method', rpc('resources/list'), -32601, /does not answer resources\/list/],
      ['sampling', rpc('sampling/createMessage', {}), -32601, /does not answer/],
      ['params not an object', rpc('tools/list', [1]), -32602, /params must be an object/],
      ['a call without a name', rpc('tools/call', { arguments: {} }), -32602, /needs a name/],
      [
        'arguments not an object',
        rpc('tools/call', { name: 'echo', arguments: 'x' }),
        -32602,
        /object of arguments/,
      ],
      ['a tool the remote lacks', rpc('tools/call', { name: 'rm' }), -32602, /offers no tool "rm"/],
    ];
    for (const [what, body, code, message] of rpcCases) {
      const got = await send(bridge, '/mcp/docs', body);
      const error = got.json?.error as { code: number; message: string } | undefined;
      assert.equal(error?.code, code, `${what}: ${got.text}`);
      assert.match(error?.message ?? '', message, what);
    }
    assert.equal(fake.calls.length, calls, 'no refused request reached the remote');
  });

  test('refuses a body past its bound without reading the rest', async () => {
    const big = Buffer.alloc(2 * 1024 * 1024, 'a');
    const got = await send(bridge, '/mcp/docs', big).catch((err: unknown) => err);
    // The bridge answers 413 and closes; a client still sending may see the reset instead.
    if (got instanceof Error) assert.match(got.message, /EPIPE|ECONNRESET|socket hang up/);
    else assert.equal((got as Answer).status, 413);
  });

  test('closing removes its socket', async () => {
    const other = await startMcpBridge({ servers: new Map([['docs', client]]), readOnly: false });
    await other.close();
    await assert.rejects(send(other, '/mcp/docs', rpc('ping')), /ENOENT|ECONNREFUSED/);
  });
});
