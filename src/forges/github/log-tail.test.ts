// The bounded tail of a log: never more than asked, started at a line (or a character), and
// read from a stream without keeping more than the tail.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cutTail, streamTail, textTail } from './log-tail.ts';

function streamOf(chunks: string[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(Buffer.from(chunk, 'utf8'));
      controller.close();
    },
  });
}

describe('log tail', () => {
  test('a text that fits is whole; one that does not starts at a line', () => {
    assert.equal(textTail('a\nb\n', 10), 'a\nb\n');
    assert.equal(textTail('first line\nsecond\nthird\n', 13), 'third\n');
    assert.equal(textTail('anything', 0), '');
  });

  test('one long line keeps its end, from a whole character', () => {
    // '✓' is three bytes: a cut inside it skips to the next character.
    assert.equal(cutTail(Buffer.from('✓✓✓', 'utf8'), 7), '✓✓');
    assert.equal(cutTail(Buffer.from('✓✓✓', 'utf8'), 6), '✓✓');
  });

  test('a stream in many chunks gives the same tail as the whole text', async () => {
    const lines = Array.from({ length: 2000 }, (_, i) => `step ${i} — ok`);
    const text = `${lines.join('\n')}\n`;
    const chunks: string[] = [];
    for (let i = 0; i < text.length; i += 97) chunks.push(text.slice(i, i + 97));
    for (const max of [1, 50, 1000, 100_000]) {
      const tail = await streamTail(streamOf(chunks), max);
      assert.equal(tail, textTail(text, max));
      assert.ok(Buffer.byteLength(tail) <= max);
    }
  });

  test('a stream given no room is cancelled, not read', async () => {
    let pulled = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled++;
        controller.enqueue(new Uint8Array(10));
      },
    });
    assert.equal(await streamTail(stream, 0), '');
    assert.ok(pulled <= 1);
  });
});
