import assert from 'node:assert/strict';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { listFilesTool } from './list.ts';
import { makeRepo, modelText } from './testing.ts';
import { compileGlob } from './walk.ts';

// The tools return structured results (issue 9); these tests read the text the model sees,
// and modelText checks that the result's ok flag agrees with it.
const listFiles = modelText(listFilesTool);

const tree = {
  'README.md': '# x\n',
  '.github/workflows/ci.yml': 'on: push\n',
  'src/index.ts': 'export {};\n',
  'src/agent/loop.ts': 'export {};\n',
  'src/agent/loop.test.ts': 'export {};\n',
  'test/a.test.ts': 'export {};\n',
};

const lines = (out: string) => out.split('\n');

describe('list_files', () => {
  test('lists every file, sorted, dotfiles included, .git never', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.deepEqual(lines(await listFiles(repo.run, {})), [
      '.github/workflows/ci.yml',
      'README.md',
      'src/agent/loop.test.ts',
      'src/agent/loop.ts',
      'src/index.ts',
      'test/a.test.ts',
    ]);
  });

  test('nested .git folders (submodules, vendored repositories) are not listed either', async (t) => {
    const repo = await makeRepo(t, { 'vendor/lib/.git/config': 'x', 'vendor/lib/a.c': 'x' });
    assert.deepEqual(lines(await listFiles(repo.run, {})), ['vendor/lib/a.c']);
  });

  test('a glob with folders', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.deepEqual(lines(await listFiles(repo.run, { pattern: 'src/**/*.ts' })), [
      'src/agent/loop.test.ts',
      'src/agent/loop.ts',
      'src/index.ts',
    ]);
    assert.deepEqual(lines(await listFiles(repo.run, { pattern: 'src/*.ts' })), ['src/index.ts']);
  });

  test('a pattern without a slash matches names at any depth', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.deepEqual(lines(await listFiles(repo.run, { pattern: '*.test.ts' })), [
      'src/agent/loop.test.ts',
      'test/a.test.ts',
    ]);
  });

  test('a folder path lists everything in it', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.deepEqual(lines(await listFiles(repo.run, { pattern: 'src/agent' })), [
      'src/agent/loop.test.ts',
      'src/agent/loop.ts',
    ]);
  });

  test('honours the root .gitignore, including ignored folders and negations', async (t) => {
    const repo = await makeRepo(t, {
      ...tree,
      '.gitignore': 'node_modules/\n*.log\ndist\n!keep.log\n',
      'node_modules/pkg/index.js': 'x',
      'debug.log': 'x',
      'src/trace.log': 'x',
      'keep.log': 'x',
      'dist/out.js': 'x',
    });
    const out = lines(await listFiles(repo.run, {}));
    assert.ok(out.includes('keep.log'));
    assert.ok(out.includes('.gitignore'));
    for (const hidden of [
      'node_modules/pkg/index.js',
      'debug.log',
      'src/trace.log',
      'dist/out.js',
    ]) {
      assert.ok(!out.includes(hidden), `${hidden} should be ignored`);
    }
  });

  test('honours nested .gitignore files relative to their folder, deeper ones winning', async (t) => {
    const repo = await makeRepo(t, {
      '.gitignore': '*.gen.ts\n',
      'pkg/.gitignore': '/build\n!keep.gen.ts\n',
      'pkg/build/x.js': 'x',
      'pkg/src/build/y.js': 'x',
      'pkg/a.gen.ts': 'x',
      'pkg/keep.gen.ts': 'x',
      'other/build/z.js': 'x',
      'other/b.gen.ts': 'x',
    });
    assert.deepEqual(lines(await listFiles(repo.run, {})), [
      '.gitignore',
      'other/build/z.js',
      'pkg/.gitignore',
      'pkg/keep.gen.ts',
      'pkg/src/build/y.js',
    ]);
  });

  test('honours .git/info/exclude', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'a', 'local.env': 'x' });
    await fs.mkdir(path.join(repo.root, '.git', 'info'));
    await fs.writeFile(path.join(repo.root, '.git', 'info', 'exclude'), '*.env\n');
    assert.deepEqual(lines(await listFiles(repo.run, {})), ['a.txt']);
  });

  test('marks symlinks and does not walk into symlinked folders', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'a' });
    await fs.symlink(repo.outside, path.join(repo.root, 'ext'));
    await fs.symlink('a.txt', path.join(repo.root, 'b.txt'));
    assert.deepEqual(lines(await listFiles(repo.run, {})), [
      'a.txt',
      'b.txt (symlink)',
      'ext (symlink)',
    ]);
  });

  test('caps the count and says how many were left out', async (t) => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 12; i++) files[`f${String(i).padStart(2, '0')}.txt`] = 'x';
    const repo = await makeRepo(t, files, { listMaxEntries: 5 });
    const out = lines(await listFiles(repo.run, {}));
    assert.deepEqual(out.slice(0, 5), ['f00.txt', 'f01.txt', 'f02.txt', 'f03.txt', 'f04.txt']);
    assert.match(out[5] ?? '', /^\[Showing 5 of 12 matching files\. Use a narrower pattern/);
    assert.equal(out.length, 6);
  });

  test('no match is a plain message, an invalid glob an error result', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.match(await listFiles(repo.run, { pattern: '*.rs' }), /^No files match '\*\.rs'/);
    assert.match(await listFiles(repo.run, { pattern: 'src/{a,b' }), /^Error: glob .* unclosed/);
  });

  test('a glob cannot reach outside the checkout', async (t) => {
    const repo = await makeRepo(t, tree);
    assert.match(await listFiles(repo.run, { pattern: '../**' }), /^No files match/);
    assert.match(await listFiles(repo.run, { pattern: '../outside/*' }), /^No files match/);
    assert.match(await listFiles(repo.run, { pattern: '.git/**' }), /^No files match/);
  });
});

describe('compileGlob', () => {
  const cases: [string, string, boolean][] = [
    ['**/*', 'a.ts', true],
    ['**/*', '.github/x.yml', true],
    ['**', 'a/b/c', true],
    ['src/**/*.ts', 'src/a.ts', true],
    ['src/**/*.ts', 'src/x/y/a.ts', true],
    ['src/**/*.ts', 'lib/a.ts', false],
    ['src/*.ts', 'src/x/a.ts', false],
    ['*.ts', 'deep/dir/a.ts', true],
    ['*.ts', 'a.tsx', false],
    ['/*.ts', 'deep/a.ts', false],
    ['/*.ts', 'a.ts', true],
    ['{src,test}/**', 'test/a.ts', true],
    ['{src,test}/**', 'lib/a.ts', false],
    ['file?.txt', 'file1.txt', true],
    ['file?.txt', 'file10.txt', false],
    ['[ab].txt', 'b.txt', true],
    ['[!ab].txt', 'b.txt', false],
    ['[!ab].txt', 'c.txt', true],
    ['src', 'src/a/b.ts', true],
    ['a.b', 'axb', false],
    ['./src/*.ts', 'src/a.ts', true],
    // Where picomatch's defaults differ from the dialect the tools describe to the model.
    ['meta/**', 'meta', false],
    ['meta/**', 'meta/.hidden/x', true],
    ['!a.txt', '!a.txt', true],
    ['!a.txt', 'b.txt', false],
    ['+(a|b).txt', 'a.txt', false],
    ['**/.env', '.env', true],
    ['agent', 'src/agent/loop.ts', true],
  ];
  for (const [glob, rel, expected] of cases) {
    test(`${glob} ${expected ? 'matches' : 'does not match'} ${rel}`, () => {
      assert.equal(compileGlob(glob).matches(rel), expected);
    });
  }

  test('fixed leading folders let the walk skip the rest of the tree', () => {
    const glob = compileGlob('src/agent/**/*.ts');
    assert.equal(glob.mayMatchUnder('src'), true);
    assert.equal(glob.mayMatchUnder('src/agent'), true);
    assert.equal(glob.mayMatchUnder('src/agent/tools'), true);
    assert.equal(glob.mayMatchUnder('src/http'), false);
    assert.equal(glob.mayMatchUnder('node_modules'), false);
    assert.equal(compileGlob('*.ts').mayMatchUnder('node_modules'), true);
  });
});
