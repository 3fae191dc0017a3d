import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { readFileTool } from './read.ts';
import { makeRepo, modelText } from './testing.ts';

// The tools return structured results (issue 9); these tests read the text the model sees,
// and modelText checks that the result's ok flag agrees with it.
const readFile = modelText(readFileTool);

const tenLines = `${Array.from({ length: 10 }, (_, i) => `line ${i + 1}`).join('\n')}\n`;

describe('read_file: happy path', () => {
  test('returns the whole file with line numbers', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'const a = 1;\n\nexport { a };\n' });
    const out = await readFile(repo.run, { path: 'src/a.ts' });
    assert.equal(out, '1\tconst a = 1;\n2\t\n3\texport { a };');
  });

  test('a last line without a newline is still shown', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'one\ntwo' });
    assert.equal(await readFile(repo.run, { path: 'a.txt' }), '1\tone\n2\ttwo');
  });

  test('line numbers are padded to the widest one shown', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': tenLines });
    const out = await readFile(repo.run, { path: 'a.txt', startLine: 8 });
    assert.equal(out, ' 8\tline 8\n 9\tline 9\n10\tline 10\n[Showing lines 8-10 of 10.]');
  });

  test('startLine and endLine select an inclusive window', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': tenLines });
    const out = await readFile(repo.run, { path: 'a.txt', startLine: 3, endLine: 4 });
    assert.equal(out, '3\tline 3\n4\tline 4\n[Showing lines 3-4 of 10.]');
  });

  test('endLine past the end shows up to the end', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': tenLines });
    const out = await readFile(repo.run, { path: 'a.txt', startLine: 9, endLine: 500 });
    assert.equal(out, '9\tline 9\n10\tline 10\n[Showing lines 9-10 of 10.]'.replace('9\t', ' 9\t'));
  });

  test('an empty file says so', async (t) => {
    const repo = await makeRepo(t, { 'empty.txt': '' });
    assert.equal(await readFile(repo.run, { path: 'empty.txt' }), "'empty.txt' is empty.");
  });

  test('CRLF line endings are hidden and mentioned', async (t) => {
    const repo = await makeRepo(t, { 'win.txt': 'a\r\nb\r\n' });
    assert.equal(
      await readFile(repo.run, { path: 'win.txt' }),
      '1\ta\n2\tb\n[The file uses CRLF line endings; they are not shown.]',
    );
  });

  test('reads through a symlink that stays inside the checkout', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'hello\n' });
    await fs.symlink('src/a.ts', path.join(repo.root, 'link.ts'));
    assert.equal(await readFile(repo.run, { path: 'link.ts' }), '1\thello');
  });
});

describe('read_file: caps', () => {
  test('stops at the line cap and says how to continue', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': tenLines }, { readMaxLines: 3 });
    const out = await readFile(repo.run, { path: 'a.txt' });
    assert.equal(
      out,
      '1\tline 1\n2\tline 2\n3\tline 3\n' +
        '[Showing lines 1-3 of 10 (a read returns at most 3 lines). Call read_file with startLine 4 to continue.]',
    );
    const next = await readFile(repo.run, { path: 'a.txt', startLine: 4 });
    assert.match(next, /^4\tline 4\n5\tline 5\n6\tline 6\n\[Showing lines 4-6 of 10/);
  });

  test('stops at the byte cap', async (t) => {
    const line = 'x'.repeat(99);
    const repo = await makeRepo(t, { 'big.txt': `${line}\n`.repeat(100) }, { readMaxBytes: 1000 });
    const out = await readFile(repo.run, { path: 'big.txt' });
    const shown = out.split('\n').filter((l) => l.includes('\t'));
    assert.ok(shown.length >= 5 && shown.length < 10, `showed ${shown.length} lines`);
    assert.match(out, /\(a read returns at most 1000 bytes\)\. Call read_file with startLine \d+/);
    assert.ok(Buffer.byteLength(out) < 1300);
  });

  test('a single line longer than the byte cap is cut', async (t) => {
    const repo = await makeRepo(
      t,
      { 'min.js': `${'y'.repeat(5000)}\nsecond\n` },
      { readMaxBytes: 1000 },
    );
    const out = await readFile(repo.run, { path: 'min.js' });
    assert.match(out, /^1\ty{1000}\n/);
    assert.match(out, /\[Line 1 is longer than 1000 bytes and was cut\.\]/);
    assert.match(out, /Call read_file with startLine 2/);
  });

  test('reads a window deep into a file larger than the scan chunk', async (t) => {
    const lines = Array.from({ length: 30000 }, (_, i) => `row ${i + 1}`);
    const repo = await makeRepo(t, { 'long.txt': `${lines.join('\n')}\n` });
    const out = await readFile(repo.run, { path: 'long.txt', startLine: 29999, endLine: 30000 });
    assert.equal(out, '29999\trow 29999\n30000\trow 30000\n[Showing lines 29999-30000 of 30000.]');
  });
});

describe('read_file: errors', () => {
  test('a missing file is an error result naming only the repository path', async (t) => {
    const repo = await makeRepo(t);
    const out = await readFile(repo.run, { path: 'nope/missing.ts' });
    assert.equal(out, "Error: 'nope/missing.ts' does not exist");
  });

  test('a directory', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'a' });
    assert.match(
      await readFile(repo.run, { path: 'src' }),
      /^Error: 'src' is a directory; use list_files/,
    );
  });

  test('a binary file', async (t) => {
    const repo = await makeRepo(t, {
      'img.png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 1, 2]),
    });
    assert.match(
      await readFile(repo.run, { path: 'img.png' }),
      /^Error: 'img.png' looks like a binary file/,
    );
  });

  test('startLine past the end, and endLine before startLine', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': tenLines });
    assert.equal(
      await readFile(repo.run, { path: 'a.txt', startLine: 11 }),
      "Error: startLine 11 is past the end of 'a.txt', which has 10 lines",
    );
    assert.match(
      await readFile(repo.run, { path: 'a.txt', startLine: 5, endLine: 4 }),
      /^Error: endLine/,
    );
    assert.match(await readFile(repo.run, { path: 'a.txt', startLine: 0 }), /^Error: startLine/);
  });

  test('a FIFO is refused instead of blocking forever', async (t) => {
    const repo = await makeRepo(t);
    try {
      execFileSync('mkfifo', [path.join(repo.root, 'pipe')]);
    } catch {
      t.skip('mkfifo is not available');
      return;
    }
    assert.equal(await readFile(repo.run, { path: 'pipe' }), "Error: 'pipe' is not a regular file");
  });

  test('a cancelled call throws instead of returning a result', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'a' });
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(readFile({ ...repo.run, signal: controller.signal }, { path: 'a.txt' }), {
      name: 'AbortError',
    });
  });
});
