import assert from 'node:assert/strict';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { isGitDirName, resolveInside, resolvePath, ToolError } from './paths.ts';
import { makeRepo } from './testing.ts';

async function refused(promise: Promise<unknown>, message: RegExp): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof ToolError, `expected a ToolError, got ${String(err)}`);
    assert.match(err.message, message);
    return true;
  });
}

describe('resolveInside: accepted paths', () => {
  test('an existing file resolves to its real path', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'a' });
    const real = await fs.realpath(repo.root);
    assert.equal(await resolveInside(repo.root, 'src/a.ts'), path.join(real, 'src/a.ts'));
  });

  test('redundant separators, ./ and inner .. are normalised', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'a', 'b.txt': 'b' });
    const real = await fs.realpath(repo.root);
    assert.equal(await resolveInside(repo.root, './src//a.ts'), path.join(real, 'src/a.ts'));
    assert.equal(await resolveInside(repo.root, 'src/../b.txt'), path.join(real, 'b.txt'));
    assert.equal(await resolveInside(repo.root, '.'), real);
    const resolved = await resolvePath(repo.root, './src//a.ts');
    assert.equal(resolved.display, 'src/a.ts');
    assert.equal(resolved.rel, 'src/a.ts');
  });

  test('paths that do not exist yet resolve under the nearest existing folder', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'a' });
    const real = await fs.realpath(repo.root);
    assert.equal(
      await resolveInside(repo.root, 'src/new/deep/file.ts'),
      path.join(real, 'src/new/deep/file.ts'),
    );
  });

  test('percent-encoding is not decoded: %2e%2e is an ordinary name inside the checkout', async (t) => {
    const repo = await makeRepo(t);
    const real = await fs.realpath(repo.root);
    assert.equal(
      await resolveInside(repo.root, '%2e%2e/%2e%2e/etc/passwd'),
      path.join(real, '%2e%2e/%2e%2e/etc/passwd'),
    );
  });

  test('a symlink to a file inside the checkout resolves to its target', async (t) => {
    const repo = await makeRepo(t, { 'src/a.ts': 'a' });
    await fs.symlink('src/a.ts', path.join(repo.root, 'alias.ts'));
    const real = await fs.realpath(repo.root);
    const resolved = await resolvePath(repo.root, 'alias.ts');
    assert.equal(resolved.real, path.join(real, 'src/a.ts'));
    assert.equal(resolved.rel, 'src/a.ts');
    assert.equal(resolved.entry, path.join(real, 'alias.ts'));
    assert.equal(resolved.entryRel, 'alias.ts');
  });

  test('a symlinked folder inside the checkout resolves, also for new files under it', async (t) => {
    const repo = await makeRepo(t, { 'lib/x.ts': 'x' });
    await fs.symlink(path.join(repo.root, 'lib'), path.join(repo.root, 'vendor'));
    const real = await fs.realpath(repo.root);
    assert.equal(await resolveInside(repo.root, 'vendor/x.ts'), path.join(real, 'lib/x.ts'));
    assert.equal(await resolveInside(repo.root, 'vendor/new.ts'), path.join(real, 'lib/new.ts'));
  });

  test('a root given through a symlink still confines to the checkout', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'a' });
    const alias = path.join(repo.base, 'alias');
    await fs.symlink(repo.root, alias);
    const real = await fs.realpath(repo.root);
    assert.equal(await resolveInside(alias, 'a.txt'), path.join(real, 'a.txt'));
    await refused(resolveInside(alias, '../outside/secret.txt'), /outside the repository/);
  });
});

describe('resolveInside: refused paths', () => {
  test('.. that climbs out of the checkout', async (t) => {
    const repo = await makeRepo(t);
    await refused(resolveInside(repo.root, '../x'), /path '\.\.\/x' is outside the repository/);
    await refused(resolveInside(repo.root, '..'), /outside the repository/);
    await refused(resolveInside(repo.root, 'src/../../outside/secret.txt'), /outside/);
    await refused(resolveInside(repo.root, 'a/b/../../../x'), /outside/);
  });

  test('absolute paths, also ones pointing into the checkout', async (t) => {
    const repo = await makeRepo(t, { 'a.txt': 'a' });
    await refused(resolveInside(repo.root, '/etc/passwd'), /is absolute/);
    await refused(resolveInside(repo.root, '/a.txt'), /is absolute/);
    await refused(resolveInside(repo.root, path.join(repo.root, 'a.txt')), /is absolute/);
    await refused(resolveInside(repo.root, 'C:/Windows/win.ini'), /is absolute/);
  });

  test('backslashes, NUL bytes and empty paths', async (t) => {
    const repo = await makeRepo(t);
    await refused(resolveInside(repo.root, '..\\outside\\secret.txt'), /backslash/);
    await refused(resolveInside(repo.root, 'a.txt\0.png'), /NUL byte/);
    await refused(resolveInside(repo.root, ''), /empty/);
    await refused(resolveInside(repo.root, '   '), /empty/);
  });

  test('.git and everything under it, however spelled', async (t) => {
    const repo = await makeRepo(t);
    for (const p of [
      '.git',
      '.git/',
      '.git/config',
      './.git/config',
      '.GIT/config',
      '.Git/HEAD',
      '.git./config',
      'src/../.git/config',
      'sub/.git/hooks/pre-commit',
      'git~1/config',
      '.g\u200cit/config',
    ]) {
      await refused(
        resolveInside(repo.root, p),
        /is inside \.git\/, which the tools may not touch/,
      );
    }
  });

  test('a symlink to a file outside the checkout', async (t) => {
    const repo = await makeRepo(t);
    await fs.symlink(repo.sentinel, path.join(repo.root, 'leak.txt'));
    await refused(
      resolveInside(repo.root, 'leak.txt'),
      /goes through symlink 'leak.txt', which points outside the repository/,
    );
  });

  test('a relative symlink climbing out of the checkout', async (t) => {
    const repo = await makeRepo(t);
    await fs.mkdir(path.join(repo.root, 'docs'));
    await fs.symlink('../../outside/secret.txt', path.join(repo.root, 'docs', 'leak.md'));
    await refused(resolveInside(repo.root, 'docs/leak.md'), /points outside/);
  });

  test('a symlinked folder pointing outside, for existing and new files under it', async (t) => {
    const repo = await makeRepo(t);
    await fs.symlink(repo.outside, path.join(repo.root, 'ext'));
    await refused(
      resolveInside(repo.root, 'ext/secret.txt'),
      /symlink 'ext', which points outside/,
    );
    await refused(resolveInside(repo.root, 'ext/new.txt'), /points outside/);
    await refused(resolveInside(repo.root, 'ext/new/deeper.txt'), /points outside/);
    await refused(resolveInside(repo.root, 'ext'), /points outside/);
  });

  test('a dangling symlink, which a write would follow to wherever it points', async (t) => {
    const repo = await makeRepo(t);
    await fs.symlink(path.join(repo.outside, 'planted.txt'), path.join(repo.root, 'dangling'));
    await refused(resolveInside(repo.root, 'dangling'), /whose target does not exist/);
  });

  test('a symlink loop', async (t) => {
    const repo = await makeRepo(t);
    await fs.symlink('loop-b', path.join(repo.root, 'loop-a'));
    await fs.symlink('loop-a', path.join(repo.root, 'loop-b'));
    await refused(resolveInside(repo.root, 'loop-a/x'), /symlink 'loop-a'/);
  });

  test('a symlink inside the checkout that leads into .git', async (t) => {
    const repo = await makeRepo(t);
    await fs.symlink('.git', path.join(repo.root, 'meta'));
    await fs.symlink('.git/config', path.join(repo.root, 'cfg'));
    await refused(resolveInside(repo.root, 'meta/config'), /\.git/);
    await refused(resolveInside(repo.root, 'meta/hooks/pre-commit'), /\.git/);
    await refused(resolveInside(repo.root, 'cfg'), /\.git/);
  });
});

test('isGitDirName recognises the aliases of .git and nothing else', () => {
  for (const name of ['.git', '.GIT', '.git.', '.git ', 'GIT~1', '\ufeff.git']) {
    assert.equal(isGitDirName(name), true, name);
  }
  for (const name of ['git', '.github', '.gitignore', '.git2', 'x.git', '.gitkeep']) {
    assert.equal(isGitDirName(name), false, name);
  }
});
