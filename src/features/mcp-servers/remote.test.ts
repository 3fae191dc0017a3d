import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type FakeRemoteMcp, startFakeRemoteMcp } from '../../../test/support/fake-mcp.ts';
import { checkedFetch, connectRemote, McpConnectError } from './remote.ts';

const TOKEN = 'mcp-remote-token-5f1c9e';

describe('connectRemote', () => {
  let fake: FakeRemoteMcp;
  before(async () => {
    fake = await startFakeRemoteMcp(TOKEN);
  });
  after(() => fake.close());

  test('connects with its headers, lists and calls tools', async () => {
    const client = await connectRemote(
      'tracker',
      { url: fake.url, headers: { Authorization: `Bearer ${TOKEN}` } },
      { allowPrivate: true },
    );
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), ['big', 'echo', 'shout']);
      assert.equal(tools.find((t) => t.name === 'echo')?.annotations?.readOnlyHint, true);
      const result = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
      assert.deepEqual(result.content, [{ type: 'text', text: 'echo: hi' }]);
      assert.ok(fake.requests.every((h) => h.authorization === `Bearer ${TOKEN}`));
    } finally {
      await client.close();
    }
  });

  test('refuses loopback without allowPrivate, before any request', async () => {
    const before = fake.requests.length;
    await assert.rejects(
      connectRemote('tracker', { url: fake.url }, { allowPrivate: false }),
      /server "tracker" is not allowed: its URL must use https:\/\//,
    );
    await assert.rejects(
      connectRemote(
        'tracker',
        { url: fake.url.replace('http:', 'https:') },
        { allowPrivate: false },
      ),
      (err: unknown) =>
        err instanceof McpConnectError &&
        /server "tracker" is not allowed: address 127\.0\.0\.1 is loopback/.test(err.message),
    );
    await assert.rejects(
      connectRemote(
        'tracker',
        { url: fake.url.replace('http://127.0.0.1', 'https://tracker.example') },
        { allowPrivate: false, resolve: async () => [{ address: '10.1.2.3', family: 4 }] },
      ),
      /host tracker\.example resolves to address 10\.1\.2\.3 is private/,
    );
    assert.equal(fake.requests.length, before);
  });

  test('every request is checked by the lookup that connects (DNS can change)', async () => {
    const before = fake.requests.length;
    const fetch = checkedFetch({
      allowPrivate: false,
      resolve: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    await assert.rejects(
      fetch(fake.url.replace('http://127.0.0.1', 'https://tracker.example'), { method: 'GET' }),
      /host tracker\.example resolves to address 127\.0\.0\.1 is loopback/,
    );
    assert.equal(fake.requests.length, before);
  });

  test('a refused token is a reason without the header value', async () => {
    await assert.rejects(
      connectRemote(
        'tracker',
        { url: fake.url, headers: { Authorization: 'Bearer wrong-token-77aa' } },
        { allowPrivate: true },
      ),
      (err: unknown) =>
        err instanceof McpConnectError &&
        err.message.startsWith('server "tracker" did not connect: ') &&
        /401/.test(err.message) &&
        !err.message.includes('wrong-token-77aa'),
    );
  });

  test('an answer past the bound fails the call', async () => {
    const client = await connectRemote(
      'tracker',
      { url: fake.url, headers: { Authorization: `Bearer ${TOKEN}` } },
      { allowPrivate: true, maxAnswerBytes: 16 * 1024 },
    );
    try {
      await assert.rejects(
        client.callTool({ name: 'big', arguments: { n: 64 * 1024 } }),
        /longer than 16384 bytes/,
      );
    } finally {
      await client.close();
    }
  });

  test('the turn ending (abort) closes the client', async () => {
    const controller = new AbortController();
    const client = await connectRemote(
      'tracker',
      { url: fake.url, headers: { Authorization: `Bearer ${TOKEN}` } },
      { allowPrivate: true, signal: controller.signal },
    );
    const closed = new Promise<void>((resolve) => {
      client.onclose = () => resolve();
    });
    controller.abort();
    await closed;
    await assert.rejects(client.listTools(), /Not connected/);
  });

  test('a server that never answers times out', async () => {
    const silent = createServer(() => undefined);
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const { port } = silent.address() as AddressInfo;
    try {
      const started = Date.now();
      await assert.rejects(
        connectRemote(
          'slow',
          { url: `http://127.0.0.1:${port}/mcp` },
          { allowPrivate: true, timeoutMs: 300 },
        ),
        (err: unknown) => err instanceof McpConnectError && /did not connect/.test(err.message),
      );
      assert.ok(Date.now() - started < 5000);
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });
});
