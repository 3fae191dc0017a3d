// The search of the commits about to be pushed for a secret, on real git clones (the job's
// clone borrows the mirror's objects, as in a turn): a value in a new file, a binary file, a big
// file at any offset, a file name, a commit message or a commit a later one undid is found; a
// value already in the base, or nowhere, is not; neither argv of any git holds a value.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  git,
  makeOrigin,
  makeTempDir,
  removeDir,
  testConfig,
  writeFiles,
} from '../../test/support/git.ts';
import { secretForms } from '../secrets/scrub.ts';
import { prepareCheckout } from './checkout.ts';
import { commitAll } from './commit.ts';
import { secretInNewObjects } from './secret-scan.ts';

const TOKEN = `npm_${randomBytes(12).toString('hex')}`;
const LICENSE = `lic-${randomBytes(9).toString('base64url')}`;
const secrets = [
  { name: 'NPM_TOKEN', forms: secretForms(TOKEN).map((f) => Buffer.from(f)) },
  { name: 'LICENSE_KEY', forms: secretForms(LICENSE).map((f) => Buffer.from(f)) },
];

let root: string;
before(async () => {
  root = await makeTempDir('secret-scan');
});
after(() => removeDir(root));

let counter = 0;
async function checkout(files: Record<string, string> = { 'README.md': '# demo\n' }) {
  const dir = join(root, `t${++counter}`);
  await mkdir(dir);
  const origin = await makeOrigin(dir, files);
  const cfg = testConfig(join(dir, 'ws'));
  const co = await prepareCheckout(cfg, {
    projectId: 'p',
    jobId: 'j',
    repository: origin.url,
    ref: 'main',
    branch: 'errand/j',
  });
  const scan = async (head: string) =>
    secretInNewObjects(cfg, { dir: co.dir, base: co.headCommit, head, secrets });
  const commit = async (message = 'change') => {
    const sha = await commitAll(cfg, { dir: co.dir, message });
    assert.ok(sha, 'nothing was committed');
    return sha;
  };
  return { cfg, co, scan, commit };
}

test('a value in a new text file is found, by name; a commit without one is not', async () => {
  const { co, scan, commit } = await checkout();
  await writeFiles(co.dir, { 'notes.md': 'nothing to see\n' });
  assert.equal(await scan(await commit()), undefined);
  await writeFiles(co.dir, { 'src/.npmrc': `//registry.example/:_authToken=${LICENSE}\n` });
  assert.equal(await scan(await commit()), 'LICENSE_KEY');
});

test('a value in a binary file, and its base64 in a file, are found', async () => {
  const a = await checkout();
  await writeFile(
    join(a.co.dir, 'blob.bin'),
    Buffer.concat([randomBytes(1000), Buffer.from([0]), Buffer.from(TOKEN), randomBytes(77)]),
  );
  assert.equal(await a.scan(await a.commit()), 'NPM_TOKEN');
  const b = await checkout();
  const encoded = Buffer.concat([randomBytes(2), Buffer.from(TOKEN), randomBytes(3)]);
  await writeFiles(b.co.dir, { 'config.b64': `${encoded.toString('base64')}\n` });
  assert.equal(await b.scan(await b.commit()), 'NPM_TOKEN');
});

test('a value at any offset of a file of several megabytes is found', async () => {
  for (const offset of [3 * 1024 * 1024 + 1, 65_536 - 5, 2]) {
    const { co, scan, commit } = await checkout();
    const big = randomBytes(6 * 1024 * 1024);
    Buffer.from(TOKEN).copy(big, offset);
    await writeFile(join(co.dir, 'big.dat'), big);
    assert.equal(await scan(await commit()), 'NPM_TOKEN', `at offset ${offset}`);
  }
});

test('a value in a file name or in the commit message is found', async () => {
  const a = await checkout();
  await writeFiles(a.co.dir, { [`keys/${TOKEN}.txt`]: 'x\n' });
  assert.equal(await a.scan(await a.commit()), 'NPM_TOKEN');
  const b = await checkout();
  await writeFiles(b.co.dir, { 'a.txt': 'a\n' });
  assert.equal(await b.scan(await b.commit(`Add a\n\nwith ${LICENSE}`)), 'LICENSE_KEY');
});

test('a value a later commit removed is still found: the history would publish it', async () => {
  const { co, scan, commit } = await checkout();
  await writeFiles(co.dir, { 'leak.txt': `${TOKEN}\n` });
  await commit();
  await rm(join(co.dir, 'leak.txt'));
  await writeFiles(co.dir, { 'other.txt': 'fine\n' });
  assert.equal(await scan(await commit()), 'NPM_TOKEN');
});

test('a value already in the base is not this push’s: not found; empty files are read', async () => {
  const { co, scan, commit, cfg } = await checkout({ 'old.txt': `${TOKEN}\n` });
  await writeFiles(co.dir, { 'empty.txt': '', 'new.txt': 'new\n' });
  assert.equal(await scan(await commit()), undefined);
  // No git of the scan had a value on its command line.
  const argv = cfg.spawns.map((s) => s.args.join(' ')).join('\n');
  assert.match(argv, /cat-file --batch/);
  assert.ok(!argv.includes(TOKEN) && !argv.includes(LICENSE));
  assert.equal(git(co.dir, 'cat-file', '-p', 'HEAD:old.txt'), TOKEN);
});
