import assert from 'node:assert/strict';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { deleteFileTool } from './delete.ts';
import { editFileTool } from './edit.ts';
import { moveFileTool } from './move.ts';
import { makeRepo, modelText } from './testing.ts';
import { writeFileTool } from './write.ts';

// The tools return structured results (issue 9); these tests read the text the model sees,
// and modelText checks that the result's ok flag agrees with it.
const writeFile = modelText(writeFileTool);
const editFile = modelText(editFileTool);
const deleteFile = modelText(deleteFileTool);
const moveFile = modelText(moveFileTool);

const read = (root: string, rel: string) => fs.readFile(path.join(root, rel), 'utf8');
const exists = (p: string) =>
  fs.lstat(p).then(
    () => true,
    () => false,
  );

describe('write_file', () => {
  test('creates a file and its missing parent folders', async (t) => {
    const repo = await makeRepo(t);
    const out = await writeFile(repo.run, { path: 'src/deep/new.ts', content: 'a\nb\n' });
    assert.equal(out, "Created 'src/deep/new.ts' (4 bytes, 2 lines).");
    assert.equal(await read(repo.root, 'src/deep/new.ts'), 'a\nb\n');
    assert.deepEqual(repo.changed, ['src/deep/new.ts']);
  });

  test('replaces the content of an existing file', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'old content that is longer' });
    const out = await writeFile(repo.run, { path: './a.txt', content: 'new' });
    assert.equal(out, "Wrote 'a.txt' (3 bytes, 1 line).");
    assert.equal(await read(repo.root, 'a.txt'), 'new');
    assert.deepEqual(repo.changed, ['a.txt']);
  });

  test('writing through a symlink inside the checkout changes and reports the target', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'old' });
    await fs.symlink('src/a.ts', path.join(repo.root, 'link.ts'));
    const out = await writeFile(repo.run, { path: 'link.ts', content: 'new' });
    assert.equal(out, "Wrote 'src/a.ts' (through the symlink 'link.ts') (3 bytes, 1 line).");
    assert.equal(await read(repo.root, 'src/a.ts'), 'new');
    assert.equal(await fs.readlink(path.join(repo.root, 'link.ts')), 'src/a.ts');
    assert.deepEqual(repo.changed, ['src/a.ts']);
  });

  test('refuses content over the size cap and writes nothing', async (t) => {
    const repo = await makeRepo(t, {}, { writeMaxBytes: 10 });
    const out = await writeFile(repo.run, { path: 'big.txt', content: 'x'.repeat(11) });
    assert.equal(out, 'Error: content is 11 bytes; write_file accepts at most 10 bytes');
    assert.equal(await exists(path.join(repo.root, 'big.txt')), false);
    assert.deepEqual(repo.changed, []);
  });

  test('refuses a directory, and a path under a file', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'a' });
    assert.equal(
      await writeFile(repo.run, { path: 'src', content: 'x' }),
      "Error: 'src' is a directory",
    );
    assert.equal(
      await writeFile(repo.run, { path: '.', content: 'x' }),
      "Error: '.' is a directory",
    );
    assert.match(
      await writeFile(repo.run, { path: 'src/a.ts/b.ts', content: 'x' }),
      /^Error: a parent folder of 'src\/a\.ts\/b\.ts' is a file/,
    );
    assert.deepEqual(repo.changed, []);
  });
});

describe('edit_file', () => {
  const source = 'function a() {\n  return 1;\n}\n\nfunction b() {\n  return 1;\n}\n';

  test('replaces text that occurs exactly once', async (t) => {
    const repo = await makeRepo(t, { 'src/x.ts': source });
    const out = await editFile(repo.run, {
      path: 'src/x.ts',
      old: 'function b() {\n  return 1;',
      new: 'function b() {\n  // two\n  return 2;',
    });
    assert.equal(out, "Edited 'src/x.ts': the new text is at lines 5-7.");
    assert.equal(
      await read(repo.root, 'src/x.ts'),
      'function a() {\n  return 1;\n}\n\nfunction b() {\n  // two\n  return 2;\n}\n',
    );
    assert.deepEqual(repo.changed, ['src/x.ts']);
  });

  test('several matches are an error naming the count and lines; nothing changes', async (t) => {
    const repo = await makeRepo(t, { 'src/x.ts': source });
    const out = await editFile(repo.run, {
      path: 'src/x.ts',
      old: '  return 1;',
      new: '  return 3;',
    });
    assert.equal(
      out,
      "Error: old text matches 2 times in 'src/x.ts' (at lines 2, 6); include more surrounding lines in old so that it matches exactly once",
    );
    assert.equal(await read(repo.root, 'src/x.ts'), source);
    assert.deepEqual(repo.changed, []);
  });

  test('overlapping matches count as several', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'aaa' });
    assert.match(
      await editFile(repo.run, { path: 'a.txt', old: 'aa', new: 'b' }),
      /matches 2 times/,
    );
    assert.equal(await read(repo.root, 'a.txt'), 'aaa');
  });

  test('no match is an error with a hint; nothing changes', async (t) => {
    const repo = await makeRepo(t, { 'src/x.ts': source });
    const out = await editFile(repo.run, { path: 'src/x.ts', old: 'function c()', new: 'x' });
    assert.match(
      out,
      /^Error: old text not found in 'src\/x\.ts'\. old must match the current file exactly/,
    );
    assert.equal(await read(repo.root, 'src/x.ts'), source);
    assert.deepEqual(repo.changed, []);
  });

  test('hints at whitespace and at line-number prefixes copied from read_file', async (t) => {
    const repo = await makeRepo(t, { 'src/x.ts': source });
    assert.match(
      await editFile(repo.run, {
        path: 'src/x.ts',
        old: 'function a() {\n    return 1;',
        new: 'x',
      }),
      /matches when whitespace is ignored/,
    );
    assert.match(
      await editFile(repo.run, {
        path: 'src/x.ts',
        old: '1\tfunction a() {\n2\t  return 1;',
        new: 'x',
      }),
      /line numbers shown by read_file/,
    );
  });

  test('the new text is inserted literally, $& and $1 included', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'price: X\n' });
    await editFile(repo.run, { path: 'a.txt', old: 'X', new: "$& $1 $$ $'" });
    assert.equal(await read(repo.root, 'a.txt'), "price: $& $1 $$ $'\n");
  });

  test('matches a CRLF file with the bare line breaks read_file shows, keeping CRLF', async (t) => {
    const repo = await makeRepo(t, { 'win.txt': 'one\r\ntwo\r\nthree\r\n' });
    const out = await editFile(repo.run, { path: 'win.txt', old: 'one\ntwo', new: 'uno\ndos' });
    assert.match(out, /^Edited/);
    assert.equal(await read(repo.root, 'win.txt'), 'uno\r\ndos\r\nthree\r\n');
  });

  test('an empty new text deletes the old one', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'keep\ndrop\nkeep too\n' });
    assert.equal(
      await editFile(repo.run, { path: 'a.txt', old: 'drop\n', new: '' }),
      "Edited 'a.txt': removed the text at line 2.",
    );
    assert.equal(await read(repo.root, 'a.txt'), 'keep\nkeep too\n');
  });

  test('refuses empty or unchanged old text, missing, binary and non-UTF-8 files', async (t) => {
    const repo = await makeRepo(t, {
      'a.txt': 'a',
      'bin.dat': Buffer.from([1, 0, 2]),
      'latin1.txt': Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]),
    });
    assert.match(
      await editFile(repo.run, { path: 'a.txt', old: '', new: 'b' }),
      /^Error: old is empty/,
    );
    assert.match(
      await editFile(repo.run, { path: 'a.txt', old: 'a', new: 'a' }),
      /^Error: old and new are identical/,
    );
    assert.equal(
      await editFile(repo.run, { path: 'no.txt', old: 'a', new: 'b' }),
      "Error: 'no.txt' does not exist",
    );
    assert.match(await editFile(repo.run, { path: 'bin.dat', old: 'a', new: 'b' }), /binary/);
    assert.match(
      await editFile(repo.run, { path: 'latin1.txt', old: 'caf', new: 'b' }),
      /not valid UTF-8/,
    );
    assert.deepEqual(
      await fs.readFile(path.join(repo.root, 'latin1.txt')),
      Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]),
    );
    assert.deepEqual(repo.changed, []);
  });

  test('refuses an edit that would exceed the size cap', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'x' }, { writeMaxBytes: 10 });
    assert.match(
      await editFile(repo.run, { path: 'a.txt', old: 'x', new: 'y'.repeat(20) }),
      /over the limit/,
    );
    assert.equal(await read(repo.root, 'a.txt'), 'x');
  });
});

describe('delete_file', () => {
  test('deletes a file', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'a' });
    assert.equal(await deleteFile(repo.run, { path: 'src/a.ts' }), "Deleted 'src/a.ts'.");
    assert.equal(await exists(path.join(repo.root, 'src/a.ts')), false);
    assert.deepEqual(repo.changed, ['src/a.ts']);
  });

  test('deleting a symlink removes the link, not its target', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'a' });
    await fs.symlink('src/a.ts', path.join(repo.root, 'link.ts'));
    assert.equal(await deleteFile(repo.run, { path: 'link.ts' }), "Deleted 'link.ts'.");
    assert.equal(await exists(path.join(repo.root, 'link.ts')), false);
    assert.equal(await read(repo.root, 'src/a.ts'), 'a');
    assert.deepEqual(repo.changed, ['link.ts']);
  });

  test('refuses folders and missing files', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'a' });
    assert.match(
      await deleteFile(repo.run, { path: 'src' }),
      /^Error: 'src' is a directory; delete_file only removes files/,
    );
    assert.match(await deleteFile(repo.run, { path: '.' }), /is a directory/);
    assert.equal(
      await deleteFile(repo.run, { path: 'gone.ts' }),
      "Error: 'gone.ts' does not exist",
    );
    assert.equal(await read(repo.root, 'src/a.ts'), 'a');
    assert.deepEqual(repo.changed, []);
  });
});

describe('move_file', () => {
  test('moves a file, creating the destination folders', async (t) => {
    const repo = await makeRepo(t, { 'a.ts': 'a' });
    assert.equal(
      await moveFile(repo.run, { from: 'a.ts', to: 'lib/new/b.ts' }),
      "Moved 'a.ts' to 'lib/new/b.ts'.",
    );
    assert.equal(await exists(path.join(repo.root, 'a.ts')), false);
    assert.equal(await read(repo.root, 'lib/new/b.ts'), 'a');
    assert.deepEqual(repo.changed, ['a.ts', 'lib/new/b.ts']);
  });

  test('refuses to overwrite unless asked', async (t) => {
    const repo = await makeRepo(t, { 'a.ts': 'a', 'b.ts': 'b' });
    assert.equal(
      await moveFile(repo.run, { from: 'a.ts', to: 'b.ts' }),
      "Error: 'b.ts' already exists; pass overwrite: true to replace it",
    );
    assert.equal(await read(repo.root, 'b.ts'), 'b');
    assert.equal(await read(repo.root, 'a.ts'), 'a');
    assert.deepEqual(repo.changed, []);
    assert.match(await moveFile(repo.run, { from: 'a.ts', to: 'b.ts', overwrite: true }), /^Moved/);
    assert.equal(await read(repo.root, 'b.ts'), 'a');
    assert.equal(await exists(path.join(repo.root, 'a.ts')), false);
  });

  test('refuses folders as source or destination, missing sources and no-op moves', async (t) => {
    const repo = await makeRepo(t, { 'a.ts': 'a', 'src/x.ts': 'x' });
    assert.match(
      await moveFile(repo.run, { from: 'src', to: 'lib' }),
      /is a directory; move_file moves one file/,
    );
    assert.match(
      await moveFile(repo.run, { from: 'a.ts', to: 'src', overwrite: true }),
      /'src' is a directory/,
    );
    assert.equal(
      await moveFile(repo.run, { from: 'nope.ts', to: 'b.ts' }),
      "Error: 'nope.ts' does not exist",
    );
    assert.match(await moveFile(repo.run, { from: 'a.ts', to: './a.ts' }), /same file/);
    assert.deepEqual(repo.changed, []);
  });

  test('moves a symlink as a link, and refuses a move that would make it point outside', async (t) => {
    const repo = await makeRepo(t, { 'a/target.txt': 't', 'a/b/x.txt': 'x' });
    await fs.symlink('../target.txt', path.join(repo.root, 'a', 'b', 'link'));
    assert.match(await moveFile(repo.run, { from: 'a/b/link', to: 'a/b/link2' }), /^Moved/);
    assert.equal(await fs.readlink(path.join(repo.root, 'a/b/link2')), '../target.txt');
    assert.match(
      await moveFile(repo.run, { from: 'a/b/link2', to: 'top-link' }),
      /^Error: moving the symlink 'a\/b\/link2' to 'top-link' would make it point outside/,
    );
    assert.equal(await exists(path.join(repo.root, 'top-link')), false);
    assert.equal(await exists(path.join(repo.root, 'a/b/link2')), true);
  });
});
