// The tail of a job log: bounded while reading, cut at a line start (or a character start for
// one long line), and GitLab's trace markup removed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { plainTrace, readTail, tailOfText } from './log-tail.ts';

async function* chunks(count: number, size: number, seen: { max: number }) {
  for (let i = 0; i < count; i++) {
    const line = `${String(i).padStart(8, '0')} ${'x'.repeat(size - 10)}\n`;
    seen.max = Math.max(seen.max, i);
    yield Buffer.from(line);
  }
}

describe('log tail', () => {
  it('keeps only the end of a long stream, from a line start', async () => {
    const seen = { max: 0 };
    // 200 MB through, a kilobyte kept.
    const tail = await readTail(chunks(200_000, 1000, seen), 2500);
    assert.equal(seen.max, 199_999);
    const text = tail.toString('utf8');
    assert.ok(tail.length <= 2500);
    assert.deepEqual(
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => l.slice(0, 8)),
      ['00199998', '00199999'],
    );
  });

  it('a cut that falls just after a newline keeps the whole line', async () => {
    assert.equal(await tailOfText('ab\ncd\n', 3), 'cd\n');
    assert.equal(await tailOfText('ab\ncd\n', 6), 'ab\ncd\n');
    assert.equal(await tailOfText('ab\ncd\n', 5), 'cd\n');
    assert.equal(await tailOfText('', 5), '');
    assert.equal(await tailOfText('abc', 0), '');
  });

  it('one line longer than the limit: its end, from a whole character', async () => {
    const tail = await tailOfText('ééééé', 5);
    assert.equal(tail, 'éé');
    assert.equal(await readTail(null, 10).then((b) => b.length), 0);
  });

  it("removes GitLab's colours and section markers", () => {
    const raw =
      'section_start:1700000000:prepare_script[collapsed=true]\r\u001b[0K\u001b[36;1mPreparing\u001b[0;m\r\nok\rdone\n';
    assert.equal(plainTrace(Buffer.from(raw)), 'Preparing\nok\ndone\n');
  });
});
