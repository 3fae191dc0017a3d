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

async function* lines(count: number, size: number, seen: { max: number }) {
  for (let i = 0; i < count; i++) {
    seen.max = i;
    yield Buffer.from(`${String(i).padStart(8, '0')} ${'x'.repeat(size - 10)}\n`);
  }
}

describe('log tail', () => {
  test('a text that fits is whole; one that does not starts at a line', () => {
    assert.equal(textTail('a\nb\n', 10), 'a\nb\n');
    assert.equal(textTail('first line\nsecond\nthird\n', 13), 'second\nthird\n');
    assert.equal(textTail('first line\nsecond\nthird\n', 12), 'third\n');
    assert.equal(textTail('anything', 0), '');
  });

  test('a cut that falls just after a newline keeps the whole line', () => {
    assert.equal(textTail('ab\ncd\n', 3), 'cd\n');
    assert.equal(textTail('ab\ncd\n', 5), 'cd\n');
    assert.equal(textTail('ab\ncd\n', 6), 'ab\ncd\n');
    assert.equal(textTail('', 5), '');
  });

  test('one long line keeps its end, from a whole character', () => {
    // '✓' is three bytes, 'é' two: a cut inside one skips to the next character.
    assert.equal(cutTail(Buffer.from('✓✓✓', 'utf8'), 7), '✓✓');
    assert.equal(cutTail(Buffer.from('✓✓✓', 'utf8'), 6), '✓✓');
    assert.equal(textTail('ééééé', 5), 'éé');
  });

  test('a stream in many chunks gives the same tail as the whole text', async () => {
    const all = Array.from({ length: 2000 }, (_, i) => `step ${i} — ok`);
    const text = `${all.join('\n')}\n`;
    const chunks: string[] = [];
    for (let i = 0; i < text.length; i += 97) chunks.push(text.slice(i, i + 97));
    for (const max of [1, 50, 1000, 100_000]) {
      const tail = await streamTail(streamOf(chunks), max);
      assert.equal(tail, textTail(text, max));
      assert.ok(Buffer.byteLength(tail) <= max);
    }
  });

  test('a long stream is read through, keeping only its end', async () => {
    const seen = { max: 0 };
    // 200 MB through, 2.5 kB kept.
    const tail = await streamTail(lines(200_000, 1000, seen), 2500);
    assert.equal(seen.max, 199_999);
    assert.ok(Buffer.byteLength(tail) <= 2500);
    assert.deepEqual(
      tail
        .split('\n')
        .filter(Boolean)
        .map((l) => l.slice(0, 8)),
      ['00199998', '00199999'],
    );
    assert.equal(await streamTail(null, 10), '');
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
