// The event-stream reader on its own: the line endings, chunk boundaries and fields of the
// text/event-stream format that Errand's own stream does not exercise (a proxy in between may
// rewrite line endings or split anywhere); and events() over a server that ends streams early.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { ErrandClient } from '../../src/client/index.ts';
import { type SseMessage, sseMessages } from '../../src/client/sse.ts';

async function read(chunks: (string | Uint8Array)[]): Promise<SseMessage[]> {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks)
        controller.enqueue(typeof chunk === 'string' ? encoder.encode(chunk) : chunk);
      controller.close();
    },
  });
  const out: SseMessage[] = [];
  for await (const message of sseMessages(body)) out.push(message);
  return out;
}

test('messages split anywhere, with \\n, \\r\\n and \\r line endings', async () => {
  const text =
    'retry: 3000\n: a comment\n\nid: 1\nevent: job.created\ndata: {"a":1}\n\n' +
    'id: 2\r\nevent: turn.started\r\ndata: {"b":\r\ndata: 2}\r\n\r\n' +
    'id: 3\revent: agent.step\rdata:no-space\r\r';
  const whole = await read([text]);
  assert.deepEqual(whole, [
    { id: '1', event: 'job.created', data: '{"a":1}' },
    { id: '2', event: 'turn.started', data: '{"b":\n2}' },
    { id: '3', event: 'agent.step', data: 'no-space' },
  ]);
  // Every split point, including between \r and \n, gives the same messages.
  for (let at = 1; at < text.length; at++)
    assert.deepEqual(await read([text.slice(0, at), text.slice(at)]), whole, `split at ${at}`);
});

test('a character split across chunks stays whole; an unfinished message is dropped', async () => {
  const bytes = new TextEncoder().encode('id: 7\ndata: "café ✓"\n\nid: 8\ndata: cut');
  const split = bytes.indexOf(0xc3) + 1;
  assert.deepEqual(await read([bytes.slice(0, split), bytes.slice(split)]), [
    { id: '7', event: 'message', data: '"café ✓"' },
  ]);
});

test('a block without data is no message; the last id carries over as the spec says', async () => {
  assert.deepEqual(await read(['id: 4\nevent: x\n\ndata: y\n\n']), [
    { id: '4', event: 'message', data: 'y' },
  ]);
});

test('events: a stream that ends before a terminal event is opened again after the last seq', async () => {
  const seen: (string | undefined)[] = [];
  const event = (seq: number, type: string) =>
    `id: ${seq}\nevent: ${type}\ndata: ${JSON.stringify({ seq, turn: null, type, data: {}, at: '2025-01-01T00:00:00Z' })}\n\n`;
  const server = http.createServer((req, res) => {
    seen.push(req.headers['last-event-id']?.toString());
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    // First a server that stops after one event (a restart), then one with nothing new and
    // an end, then the rest.
    if (seen.length === 1) res.end(event(5, 'job.created'));
    else if (seen.length === 2) res.end(': nothing yet\n\n');
    else res.end(event(5, 'job.created') + event(9, 'turn.started') + event(12, 'job.completed'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const client = new ErrandClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'k' });
    const started = Date.now();
    const events: number[] = [];
    for await (const e of client.events('j1', { projectId: 'p', after: 2 })) events.push(e.seq);
    assert.deepEqual(events, [5, 9, 12], 'no repeat of 5, nothing after the terminal event');
    assert.deepEqual(seen, ['2', '5', '5']);
    assert.ok(
      Date.now() - started >= 450,
      'a stream that brought nothing is retried after a pause',
    );
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
