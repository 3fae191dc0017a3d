// The transport over the sandbox's socket: newline-delimited JSON-RPC read whole however the
// bytes arrive, a line that is not a message reported and skipped, and a line past the bound
// ending the connection.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { SocketTransport } from './socket-transport.ts';

/** Both ends of a real Unix socket: the transport's, and the "server" the test writes as. */
async function pair(): Promise<{ socket: Socket; feed(text: string): void; written: string[] }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'errand-mcp-socket-'));
  const listener = createServer();
  await new Promise<void>((resolve) => listener.listen(path.join(dir, 's.sock'), resolve));
  const accepted = once(listener, 'connection');
  const peer = connect(path.join(dir, 's.sock'));
  const [socket] = (await accepted) as [Socket];
  listener.close();
  await rm(dir, { recursive: true, force: true });
  const written: string[] = [];
  peer.on('data', (chunk) => written.push(String(chunk)));
  peer.on('error', () => {});
  return { socket, feed: (text) => peer.write(text), written };
}

/** Waits until `done()` holds: what the test checks next has then arrived (no fixed sleep). */
async function until(what: string, done: () => boolean): Promise<void> {
  for (let i = 0; !done(); i++) {
    if (i >= 1000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('SocketTransport', () => {
  test('reads messages split across chunks; reports a line that is not a message', async () => {
    const { socket, feed, written } = await pair();
    const transport = new SocketTransport(socket, 1024);
    const messages: JSONRPCMessage[] = [];
    const errors: string[] = [];
    transport.onmessage = (m) => messages.push(m);
    transport.onerror = (e) => errors.push(e.message);
    await transport.start();
    feed('{"jsonrpc":"2.0","id":1,"res');
    feed('ult":{}}\nnot json\n{"jsonrpc":"2.0","method":"x"}\n{"a":1}\n');
    // The last line's error: the lines are read in order, so every one before it is read.
    await until('the last line', () => errors.length === 2);
    assert.deepEqual(messages, [
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', method: 'x' },
    ]);
    assert.deepEqual(errors, [
      'the server wrote a line that is not JSON on its stdout',
      'the server wrote a line that is not a JSON-RPC message',
    ]);
    await transport.send({ jsonrpc: '2.0', id: 2, method: 'ping' });
    await until('the line sent', () => written.join('').endsWith('\n'));
    assert.equal(written.join(''), '{"jsonrpc":"2.0","id":2,"method":"ping"}\n');
    await transport.close();
  });

  test('a line past the bound ends the connection, with or without its newline', async () => {
    for (const tail of ['', '\n']) {
      const { socket, feed } = await pair();
      const transport = new SocketTransport(socket, 64);
      const errors: string[] = [];
      transport.onerror = (e) => errors.push(e.message);
      await transport.start();
      feed(`${'x'.repeat(100)}${tail}`);
      await until('the connection to end', () => socket.destroyed);
      assert.deepEqual(errors, ['the server wrote a message longer than 64 bytes']);
      assert.equal(socket.destroyed, true);
      await assert.rejects(transport.send({ jsonrpc: '2.0', method: 'x' }), /the server is gone/);
    }
  });
});
