// The diff view on diffs made by real git (through the workspace's own diffAgainst, as a
// job's review diff is made): hostile names and lines, quoted non-UTF-8 paths, binary files,
// mode changes, empty files, renames, and a diff cut off at its size cap.
import assert from 'node:assert/strict';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { git, makeTempDir, removeDir, testConfig } from '../../test/support/git.ts';
import { diffAgainst } from '../workspace/commit.ts';
import { type DiffFile, parseDiff, renderDiff } from './diff.ts';

const HOSTILE = '"><img src=x onerror=alert(1)>';

describe('diff view', () => {
  let root: string;
  let repo: string;
  let base: string;
  let diff: string;
  let files: DiffFile[];
  const byName = (name: string): DiffFile => {
    const f = files.find((x) => x.newPath === name || x.oldPath === name);
    assert.ok(f, `no file ${name} in ${JSON.stringify(files.map((x) => [x.oldPath, x.newPath]))}`);
    return f;
  };

  before(async () => {
    root = await makeTempDir('diff-view');
    repo = join(root, 'repo');
    await mkdir(repo);
    git(repo, 'init', '--quiet');
    await writeFile(join(repo, 'app.txt'), 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n');
    await writeFile(join(repo, 'old name.txt'), 'moving\ncontent\nthat\nstays\n');
    await writeFile(join(repo, 'gone.txt'), 'bye\n');
    await writeFile(join(repo, 'run.sh'), 'echo hi\n');
    await writeFile(join(repo, 'tail.txt'), 'no newline');
    git(repo, 'add', '--all');
    git(repo, 'commit', '--quiet', '-m', 'base');
    base = git(repo, 'rev-parse', 'HEAD');

    await writeFile(
      join(repo, 'app.txt'),
      `one\ntwo\n<script>alert(1)</script>\nfour\nfive\nsix\n${HOSTILE}\neight\nnine\n`,
    );
    await writeFile(join(repo, 'with space <script>.txt'), 'spaced\n');
    await writeFile(join(repo, `${HOSTILE}.txt`), 'x\n');
    await writeFile(join(repo, 'quote"d.txt'), 'q\n');
    await writeFile(join(repo, 'café.txt'), 'accent\n');
    // A name that is not UTF-8 at all: git quotes it as octal bytes.
    await writeFile(
      Buffer.concat([Buffer.from(join(repo, 'bad')), Buffer.from([0xff, 0x2e])]),
      'b\n',
    );
    await writeFile(join(repo, 'image.bin'), Buffer.from([0, 1, 2, 0, 255, 0, 3]));
    await writeFile(join(repo, 'empty.txt'), '');
    await chmod(join(repo, 'run.sh'), 0o755);
    await writeFile(join(repo, 'tail.txt'), 'no newline, still');
    git(repo, 'rm', '--quiet', 'gone.txt');
    git(repo, 'mv', 'old name.txt', 'new name.txt');
    git(repo, 'add', '--all');
    git(repo, 'commit', '--quiet', '-m', 'work');
    ({ diff } = await diffAgainst(testConfig(root), { dir: repo, base }));
    files = parseDiff(diff);
  });

  after(async () => {
    await removeDir(root);
  });

  test('every file git lists is parsed, with its status and counts', () => {
    const names = git(repo, 'diff', '--name-status', '--find-renames', '-z', base, 'HEAD');
    const listed = names.split('\0').filter(Boolean);
    // name-status -z: status, path (and a second path for a rename).
    let count = 0;
    for (let i = 0; i < listed.length; count++) i += listed[i]?.startsWith('R') ? 3 : 2;
    assert.equal(files.length, count);
    assert.deepEqual(
      {
        status: byName('app.txt').status,
        add: byName('app.txt').additions,
        del: byName('app.txt').deletions,
      },
      { status: 'modified', add: 3, del: 2 },
    );
    assert.equal(byName('gone.txt').status, 'deleted');
    assert.equal(byName('gone.txt').newPath, null);
    assert.equal(byName('gone.txt').deletions, 1);
    const moved = byName('new name.txt');
    assert.equal(moved.status, 'renamed');
    assert.equal(moved.oldPath, 'old name.txt');
    assert.equal(byName('with space <script>.txt').status, 'added');
    assert.equal(byName('with space <script>.txt').additions, 1);
    assert.equal(byName(`${HOSTILE}.txt`).status, 'added');
    assert.equal(byName('quote"d.txt').status, 'added');
    assert.equal(byName('café.txt').additions, 1);
    assert.equal(byName('bad\uFFFD.').status, 'added');
  });

  test('line numbers follow the old and the new file', () => {
    const hunk = byName('app.txt').hunks[0];
    assert.ok(hunk);
    const rows = hunk.lines.map((l) => [l.kind, l.oldLine, l.newLine, l.text]);
    assert.deepEqual(rows.slice(0, 4), [
      ['context', 1, 1, 'one'],
      ['context', 2, 2, 'two'],
      ['del', 3, null, 'three'],
      ['add', null, 3, '<script>alert(1)</script>'],
    ]);
    assert.deepEqual(rows.at(-1), ['add', null, 9, 'nine']);
    const tail = byName('tail.txt').hunks[0]?.lines;
    assert.deepEqual(
      tail?.map((l) => [l.kind, l.noNewline]),
      [
        ['del', true],
        ['add', true],
      ],
    );
  });

  test('binary files, mode changes and empty files are recognised', () => {
    const bin = byName('image.bin');
    assert.equal(bin.binary, true);
    assert.equal(bin.hunks.length, 0);
    const sh = byName('run.sh');
    assert.deepEqual([sh.oldMode, sh.newMode, sh.hunks.length], ['100644', '100755', 0]);
    const empty = byName('empty.txt');
    assert.deepEqual([empty.status, empty.hunks.length, empty.binary], ['added', 0, false]);
  });

  test('the HTML escapes every name and line, and has a list and a section per file', () => {
    const html = renderDiff(files);
    assert.doesNotMatch(html, /<script/i);
    assert.doesNotMatch(html, /<img/i);
    assert.match(html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.match(html, /&quot;&gt;&lt;img src=x onerror=alert\(1\)&gt;\.txt/);
    assert.match(html, /quote&quot;d\.txt/);
    assert.match(html, /café\.txt/);
    assert.match(html, /old name\.txt → new name\.txt/);
    assert.match(html, /Binary file, not shown\./);
    assert.match(html, /Mode 100644 → 100755\./);
    assert.match(html, /Empty file\./);
    assert.equal((html.match(/<section class="diff-file"/g) ?? []).length, files.length);
    assert.equal((html.match(/<li><a href="#diff-\d+">/g) ?? []).length, files.length);
    // The added hostile line, with its new line number and no old one.
    assert.match(
      html,
      /<tr class="diff-add"><td class="diff-num"><\/td><td class="diff-num">7<\/td><td class="diff-code">\+&quot;&gt;&lt;img src=x onerror=alert\(1\)&gt;<\/td><\/tr>/,
    );
    // Only the markup's own tags remain once the escaped text is taken out.
    const tags = new Set([...html.matchAll(/<\/?([a-z0-9]+)/g)].map((m) => m[1]));
    assert.deepEqual([...tags].sort(), [
      'a',
      'code',
      'div',
      'h3',
      'li',
      'nav',
      'p',
      'section',
      'span',
      'table',
      'tbody',
      'td',
      'tr',
      'ul',
    ]);
  });

  test('a diff cut off anywhere parses to the files before the cut, the last one partial', () => {
    for (let cut = 0; cut < diff.length; cut += 7) {
      const part = parseDiff(diff.slice(0, cut));
      const html = renderDiff(part);
      assert.doesNotMatch(html, /<script|<img/i);
      assert.ok(part.length <= files.length);
    }
    const app = diff.indexOf('+nine');
    const cutInApp = parseDiff(diff.slice(0, app));
    const last = cutInApp.at(-1);
    assert.equal(last?.newPath, 'app.txt');
    assert.equal(last?.partial, true);
    assert.match(renderDiff(cutInApp), /The diff is cut off in this file\./);
    assert.equal(byName('app.txt').partial, false);
    // Cut inside the last line: the newline git ends every diff with is missing.
    assert.equal(parseDiff(diff.slice(0, -2)).at(-1)?.partial, true);
  });

  test('an empty diff renders as no changes', () => {
    assert.deepEqual(parseDiff(''), []);
    assert.match(renderDiff([]), /No changes\./);
  });
});
