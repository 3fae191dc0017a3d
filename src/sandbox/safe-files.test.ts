// The safe file operations against what a sandboxed process can plant where the service reads
// and writes: a link to a host file, a FIFO, a second name (hard link) of a host file, a link
// in place of a directory. The host file stays as it was, nothing waits on the FIFO.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  link,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { makeDirectory, readRegularFile, replaceFile, UnsafeFileError } from './safe-files.ts';

const HOST_CONTENT = 'the host secret, not to be touched\n';

let root: string;
/** A file of the host's, outside the planted place. */
let hostFile: string;
/** The place a sandbox could write. */
let place: string;

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'errand-safe-files-'));
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});
beforeEach(async () => {
  const dir = await mkdtemp(join(root, 'case-'));
  hostFile = join(dir, 'secret.key');
  await writeFile(hostFile, HOST_CONTENT);
  place = join(dir, 'home');
  await mkdir(place);
});

const mkfifo = (path: string) => execFileSync('mkfifo', [path]);
const refused = (pattern: RegExp) => (err: unknown) =>
  err instanceof UnsafeFileError && pattern.test(err.message);

describe('readRegularFile', () => {
  it('reads a regular file, and says undefined where nothing is', async () => {
    await writeFile(join(place, 'record.json'), '{"a":1}');
    assert.equal(
      (await readRegularFile(join(place, 'record.json'), { maxBytes: 100 }))?.toString(),
      '{"a":1}',
    );
    assert.equal(await readRegularFile(join(place, 'absent.json'), { maxBytes: 100 }), undefined);
  });

  it('refuses a symbolic link, even to a regular file', async () => {
    await symlink(hostFile, join(place, 'record.json'));
    await assert.rejects(
      readRegularFile(join(place, 'record.json'), { maxBytes: 100 }),
      refused(/symbolic link/),
    );
  });

  it('refuses a FIFO at once, with no writer on its other end', async () => {
    mkfifo(join(place, 'record.json'));
    await assert.rejects(
      readRegularFile(join(place, 'record.json'), { maxBytes: 100 }),
      refused(/not a regular file/),
    );
  });

  it('refuses a second name of a host file (a hard link)', async () => {
    await link(hostFile, join(place, 'record.json'));
    await assert.rejects(
      readRegularFile(join(place, 'record.json'), { maxBytes: 100 }),
      refused(/2 names/),
    );
  });

  it('refuses a directory and a file over its bound', async () => {
    await mkdir(join(place, 'dir'));
    await assert.rejects(
      readRegularFile(join(place, 'dir'), { maxBytes: 100 }),
      refused(/not a regular file/),
    );
    await writeFile(join(place, 'big'), 'x'.repeat(101));
    await assert.rejects(
      readRegularFile(join(place, 'big'), { maxBytes: 100 }),
      refused(/larger than 100 bytes/),
    );
  });
});

describe('replaceFile', () => {
  const assertHostUnchanged = async () => {
    assert.equal(await readFile(hostFile, 'utf8'), HOST_CONTENT);
    assert.equal((await stat(hostFile)).nlink, 1);
  };
  const assertReplaced = async (path: string, content: string) => {
    const info = await lstat(path);
    assert.ok(info.isFile(), 'not a regular file now');
    assert.equal(info.nlink, 1);
    assert.equal(info.mode & 0o777, 0o600);
    assert.equal(await readFile(path, 'utf8'), content);
    // No temporary file is left beside it.
    assert.deepEqual(
      (await readdir(place)).filter((name) => name.endsWith('.tmp')),
      [],
    );
  };

  it('writes a new file', async () => {
    await replaceFile(join(place, 'record.json'), 'new');
    await assertReplaced(join(place, 'record.json'), 'new');
  });

  it('replaces a symbolic link to a host file instead of writing through it', async () => {
    await symlink(hostFile, join(place, 'record.json'));
    await replaceFile(join(place, 'record.json'), 'new');
    await assertHostUnchanged();
    await assertReplaced(join(place, 'record.json'), 'new');
  });

  it('replaces a dangling symbolic link instead of creating its target', async () => {
    const target = join(root, 'created-through-a-link');
    await symlink(target, join(place, 'record.json'));
    await replaceFile(join(place, 'record.json'), 'new');
    assert.equal(await stat(target).catch(() => null), null, 'the target was created');
    await assertReplaced(join(place, 'record.json'), 'new');
  });

  it('replaces a FIFO without waiting for a reader', async () => {
    mkfifo(join(place, 'record.json'));
    await replaceFile(join(place, 'record.json'), 'new');
    await assertReplaced(join(place, 'record.json'), 'new');
  });

  it('replaces a second name of a host file (a hard link) without changing the host file', async () => {
    await link(hostFile, join(place, 'record.json'));
    await replaceFile(join(place, 'record.json'), 'new');
    await assertHostUnchanged();
    await assertReplaced(join(place, 'record.json'), 'new');
  });

  it('refuses a directory that is a link', async () => {
    const linked = join(place, 'linked');
    await symlink(root, linked);
    await assert.rejects(
      replaceFile(join(linked, 'record.json'), 'new'),
      refused(/not a directory/),
    );
    assert.equal(await stat(join(root, 'record.json')).catch(() => null), null);
  });
});

describe('makeDirectory', () => {
  it('makes a missing directory and keeps an existing one with what it holds', async () => {
    await makeDirectory(join(place, 'made'));
    assert.ok((await lstat(join(place, 'made'))).isDirectory());
    await writeFile(join(place, 'made', 'kept'), 'x');
    await makeDirectory(join(place, 'made'));
    assert.equal(await readFile(join(place, 'made', 'kept'), 'utf8'), 'x');
  });

  it('replaces a link to a host directory, which keeps what it holds', async () => {
    await symlink(root, join(place, 'made'));
    await makeDirectory(join(place, 'made'));
    const info = await lstat(join(place, 'made'));
    assert.ok(info.isDirectory() && !info.isSymbolicLink());
    assert.deepEqual(await readdir(join(place, 'made')), []);
    await assert.doesNotReject(stat(hostFile));
  });

  it('replaces a FIFO and a second name of a host file', async () => {
    mkfifo(join(place, 'fifo'));
    await makeDirectory(join(place, 'fifo'));
    assert.ok((await lstat(join(place, 'fifo'))).isDirectory());
    await link(hostFile, join(place, 'linked'));
    await makeDirectory(join(place, 'linked'));
    assert.ok((await lstat(join(place, 'linked'))).isDirectory());
    assert.equal(await readFile(hostFile, 'utf8'), HOST_CONTENT);
  });
});
