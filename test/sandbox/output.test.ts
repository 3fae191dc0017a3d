// The output cap on its own: characters (not bytes) across chunk boundaries, the exact
// head and tail kept, and nothing cut at or under the cap; and output read line by line, on its
// own and from a real sandboxed command while it runs.
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CappedOutput, LineSplitter } from '../../src/sandbox/output.ts';
import { makeTempDir, removeDir } from '../support/git.ts';
import { run, skip, TEST_LIMITS } from './support.ts';

function capped(cap: number, chunks: Buffer[]) {
  const out = new CappedOutput(cap);
  for (const chunk of chunks) out.write(chunk);
  return out.finish();
}

describe('capped output', () => {
  test('at the cap nothing is cut', () => {
    const r = capped(10, [Buffer.from('01234'), Buffer.from('56789')]);
    assert.deepEqual(r, { text: '0123456789', truncated: false, totalChars: 10 });
  });

  test('one over: head and tail halves with the count cut', () => {
    const r = capped(10, [Buffer.from('0123456789X')]);
    assert.deepEqual(r, {
      text: '01234\n[… 1 characters cut …]\n6789X',
      truncated: true,
      totalChars: 11,
    });
  });

  test('a character split across chunks is one, and no surrogate pair is cut in half', () => {
    const bytes = Buffer.from('é€😀'.repeat(1000));
    const chunks: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += 7) chunks.push(bytes.subarray(i, i + 7));
    const r = capped(8, chunks);
    assert.equal(capped(3, [Buffer.from('😀😀😀')]).text, '😀\n[… 4 characters cut …]\n');
    // The head stays a prefix even when the pair it left out was followed by more chunks.
    assert.equal(
      capped(5, [Buffer.from('ab😀'), Buffer.from('cdefgh')]).text,
      'ab\n[… 6 characters cut …]\ngh',
    );
    assert.equal(r.totalChars, 'é€😀'.length * 1000);
    assert.ok(r.text.startsWith('é€😀\n[… 3,992 characters cut …]\né€😀'), r.text);
    assert.doesNotMatch(r.text, /\uFFFD/);
  });

  test('large output keeps a bounded tail while streaming', () => {
    const out = new CappedOutput(100);
    for (let i = 0; i < 100_000; i++) out.write(Buffer.from(`${i}\n`));
    const r = out.finish();
    assert.ok(r.text.startsWith('0\n1\n2\n'));
    assert.ok(r.text.endsWith('99998\n99999\n'));
    assert.match(r.text, /\[… 588,790 characters cut …\]/);
  });
});

describe('lines as they come', () => {
  test('split across chunks and characters, a last line without its newline, no empty tail', () => {
    const lines = new LineSplitter();
    const bytes = Buffer.from('{"a":"é"}\n{"b":2}\n\nlast');
    const seen: string[] = [];
    for (let i = 0; i < bytes.length; i += 3) seen.push(...lines.push(bytes.subarray(i, i + 3)));
    assert.deepEqual(seen, ['{"a":"é"}', '{"b":2}', '']);
    assert.deepEqual(lines.end(), ['last']);
    const ended = new LineSplitter();
    assert.deepEqual(ended.push(Buffer.from('one\n')), ['one']);
    assert.deepEqual(ended.end(), []);
  });
});

describe('a run read line by line', { skip }, () => {
  test('stdout lines arrive while the command runs; stderr apart; stdin and env given', async () => {
    const root = await makeTempDir('sandbox-lines');
    try {
      await mkdir(join(root, '.git'));
      const lines: string[] = [];
      // The command waits for a file that the callback writes on the first line: lines reach
      // the callback while the command still runs, not when it ends.
      const r = await run(
        root,
        'echo "first $GREETING"; echo warning >&2; while [ ! -e go ]; do sleep 0.05; done; cat; echo',
        {
          env: { GREETING: 'hello' },
          stdin: 'from stdin',
          limits: { ...TEST_LIMITS, timeoutSeconds: 10 },
          onStdoutLine: (line) => {
            lines.push(line);
            if (line === 'first hello') void writeFile(join(root, 'go'), '');
          },
        },
      );
      assert.equal(r.timedOut, false);
      assert.equal(r.exitCode, 0);
      assert.deepEqual(lines, ['first hello', 'from stdin']);
      assert.equal(r.output, 'first hello\nfrom stdin\n');
      assert.equal(r.stderr, 'warning\n');
    } finally {
      await removeDir(root);
    }
  });
});
