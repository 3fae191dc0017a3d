import assert from 'node:assert/strict';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { searchTool } from './search.ts';
import { makeRepo, modelText } from './testing.ts';

// The tools return structured results (issue 9); these tests read the text the model sees,
// and modelText checks that the result's ok flag agrees with it.
const searchFiles = modelText(searchTool);

const tree = {
  'src/a.ts': 'import x from "y";\n// TODO: fix\nexport const a = 1;\n',
  'src/b.ts': 'export const b = 2; // todo later\n',
  'docs/guide.md': 'TODO write the guide\n',
};

describe('search: happy path', () => {
  test('reports path:line: text for every match, in path order', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.equal(
      await searchFiles(repo.run, { pattern: 'TODO' }),
      'docs/guide.md:1: TODO write the guide\nsrc/a.ts:2: // TODO: fix',
    );
  });

  test('flags apply; g and y are accepted and dropped', async (t) => {
    const repo = await makeRepo(t, tree);
    const out = await searchFiles(repo.run, { pattern: 'todo', flags: 'gi' });
    assert.equal(
      out,
      'docs/guide.md:1: TODO write the guide\nsrc/a.ts:2: // TODO: fix\nsrc/b.ts:1: export const b = 2; // todo later',
    );
  });

  test('a glob narrows the files searched', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.equal(
      await searchFiles(repo.run, { pattern: 'TODO', glob: '*.ts' }),
      'src/a.ts:2: // TODO: fix',
    );
    assert.equal(
      await searchFiles(repo.run, { pattern: 'TODO', glob: 'docs/**' }),
      'docs/guide.md:1: TODO write the guide',
    );
  });

  test('no match is a plain message', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.equal(
      await searchFiles(repo.run, { pattern: 'nothing\\s+here' }),
      'No matches for /nothing\\s+here/ in 3 text files.',
    );
  });

  test('honours .gitignore and skips binary files, .git and symlinks', async (t) => {
    const repo = await makeRepo(t, {
      ...tree,
      '.gitignore': 'build/\n',
      'build/out.js': '// TODO generated\n',
      'blob.bin': Buffer.concat([Buffer.from('TODO'), Buffer.from([0, 1, 2])]),
    });
    await fs.appendFile(path.join(repo.root, '.git', 'config'), '# TODO in git config\n');
    await fs.writeFile(repo.sentinel, 'TODO outside\n');
    await fs.symlink(repo.sentinel, path.join(repo.root, 'leak.txt'));
    await fs.symlink(repo.outside, path.join(repo.root, 'ext'));
    assert.equal(
      await searchFiles(repo.run, { pattern: 'TODO' }),
      'docs/guide.md:1: TODO write the guide\nsrc/a.ts:2: // TODO: fix',
    );
  });

  test('CRLF files match without the carriage return', async (t) => {
    const repo = await makeRepo(t, { 'win.txt': 'alpha\r\nbeta\r\n' });
    assert.equal(await searchFiles(repo.run, { pattern: 'alpha$' }), 'win.txt:1: alpha');
  });
});

describe('search: caps', () => {
  test('stops at the match cap and says so', async (t) => {
    const repo = await makeRepo(t, { 'many.txt': 'hit\n'.repeat(50) }, { searchMaxMatches: 7 });
    const out = (await searchFiles(repo.run, { pattern: 'hit' })).split('\n');
    assert.equal(out.length, 8);
    assert.equal(out[6], 'many.txt:7: hit');
    assert.match(out[7] ?? '', /^\[Stopped at 7 matches/);
  });

  test('long lines are cut around the match', async (t) => {
    const line = `${'a'.repeat(1000)}NEEDLE${'b'.repeat(1000)}`;
    const repo = await makeRepo(t, { 'min.js': `${line}\n` });
    const out = await searchFiles(repo.run, { pattern: 'NEEDLE' });
    const text = out.slice('min.js:1: '.length);
    assert.ok(text.includes('NEEDLE'));
    assert.ok(text.startsWith('…') && text.endsWith('…'));
    assert.equal(text.length, 300 + 2);
  });

  test('files over the size cap are skipped and named', async (t) => {
    const repo = await makeRepo(
      t,
      { 'big.txt': `needle\n${'x'.repeat(5000)}\n`, 'small.txt': 'needle\n' },
      { searchMaxFileBytes: 1000 },
    );
    assert.equal(
      await searchFiles(repo.run, { pattern: 'needle' }),
      'small.txt:1: needle\n[Skipped 1 file larger than 1000 bytes: big.txt.]',
    );
  });

  test('matches across many files and batches are all found', async (t) => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 600; i++) files[`d/f${String(i).padStart(3, '0')}.txt`] = `n ${i}\n`;
    const repo = await makeRepo(t, files, { searchMaxMatches: 1000 });
    const out = (await searchFiles(repo.run, { pattern: '^n \\d+$' })).split('\n');
    assert.equal(out.length, 600);
    assert.equal(out[599], 'd/f599.txt:1: n 599');
  });

  test('catastrophic backtracking is interrupted and reported', async (t) => {
    const repo = await makeRepo(
      t,
      { 'evil.txt': `${'a'.repeat(40)}!\n` },
      { searchRegexTimeoutMs: 200 },
    );
    const started = performance.now();
    const out = await searchFiles(repo.run, { pattern: '^(a+)+$' });
    assert.ok(performance.now() - started < 5000);
    assert.match(
      out,
      /^Error: the regular expression ran for over 200 ms .*backtracks catastrophically/,
    );
  });
});

describe('search: errors', () => {
  test('an invalid regular expression', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.match(
      await searchFiles(repo.run, { pattern: 'foo(' }),
      /^Error: invalid regular expression: .*Unterminated group/,
    );
  });

  test('invalid flags', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.match(
      await searchFiles(repo.run, { pattern: 'x', flags: 'q' }),
      /^Error: invalid regular expression flags 'q'/,
    );
    assert.match(
      await searchFiles(repo.run, { pattern: 'x', flags: 'uv' }),
      /^Error: invalid regular expression/,
    );
  });

  test('an empty pattern', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.equal(await searchFiles(repo.run, { pattern: '' }), 'Error: pattern is empty');
  });

  test('a cancelled search throws', async (t) => {
    const repo = await makeRepo(t, tree);
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(
      searchFiles({ ...repo.run, signal: controller.signal }, { pattern: 'x' }),
      {
        name: 'AbortError',
      },
    );
  });
});
