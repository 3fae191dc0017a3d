import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  makeOrigin,
  makeTempDir,
  removeDir,
  testConfig,
  writeFiles,
} from '../../test/support/git.ts';
import { prepareCheckout } from './checkout.ts';
import { commitAll } from './commit.ts';
import { GitError } from './errors.ts';
import { pushBranch } from './push.ts';

let root: string;
before(async () => {
  root = await makeTempDir('push');
});
after(() => removeDir(root));

let counter = 0;
async function setup() {
  const dir = join(root, `t${++counter}`);
  await mkdir(dir);
  const origin = await makeOrigin(dir);
  const cfg = testConfig(join(dir, 'ws'));
  const co = await prepareCheckout(cfg, {
    projectId: 'p',
    jobId: 'j',
    repository: origin.url,
    ref: 'main',
    branch: 'errand/j',
  });
  const push = (repository = origin.url) =>
    pushBranch(cfg, { dir: co.dir, repository, branch: 'errand/j' });
  return { dir, origin, cfg, co, push };
}

test('pushes the work branch, and pushing the same commit again is a no-op', async () => {
  const { origin, cfg, co, push } = await setup();
  await writeFiles(co.dir, { 'a.txt': 'a\n' });
  const first = await commitAll(cfg, { dir: co.dir, message: 'one' });
  await push();
  assert.equal(origin.head('errand/j'), first);
  await push();
  assert.equal(origin.head('errand/j'), first);
  await writeFiles(co.dir, { 'b.txt': 'b\n' });
  const second = await commitAll(cfg, { dir: co.dir, message: 'two' });
  await push();
  assert.equal(origin.head('errand/j'), second);
  assert.equal(origin.head('main'), co.baseCommit, 'main is never touched');

  const pushes = cfg.spawns.filter((s) => s.args.includes('push')).map((s) => s.args);
  for (const args of pushes) {
    assert.ok(args.includes('--no-verify'));
    assert.ok(!args.some((a) => a === '--force' || a === '-f' || a.startsWith('--force-')));
    assert.deepEqual(args.slice(-3), ['--', origin.url, 'HEAD:refs/heads/errand/j']);
  }
});

test('a remote branch with commits we lack is a non-transient conflict and is not overwritten', async () => {
  const { origin, cfg, co, push } = await setup();
  await writeFiles(co.dir, { 'a.txt': 'a\n' });
  await commitAll(cfg, { dir: co.dir, message: 'ours' });
  await push();
  const theirs = await origin.commit({ 'theirs.txt': 'x\n' }, 'theirs', 'errand/j');
  await writeFiles(co.dir, { 'b.txt': 'b\n' });
  await commitAll(cfg, { dir: co.dir, message: 'ours again' });
  await assert.rejects(push(), (err) => {
    assert.ok(err instanceof GitError);
    assert.equal(err.code, 'diverged');
    assert.equal(err.transient, false);
    assert.match(err.message, new RegExp(`push of errand/j to ${origin.url} was refused`));
    assert.match(err.message, /nothing was overwritten/);
    return true;
  });
  assert.equal(origin.head('errand/j'), theirs);
});

test('a missing repository is a permanent error naming it', async () => {
  const { dir, push } = await setup();
  const missing = `file://${join(dir, 'missing.git')}`;
  await assert.rejects(push(missing), (err) => {
    assert.ok(err instanceof GitError);
    assert.equal(err.code, 'not_found');
    assert.equal(err.transient, false);
    assert.match(err.message, new RegExp(`^push of errand/j to ${missing} failed`));
    return true;
  });
});

test('network and server failures are transient', async () => {
  const { push } = await setup();
  const down = createServer();
  await new Promise<void>((resolve) => down.listen(0, '127.0.0.1', resolve));
  const downUrl = `http://127.0.0.1:${(down.address() as AddressInfo).port}/r.git`;
  await new Promise<void>((resolve) => down.close(() => resolve()));
  await assert.rejects(push(downUrl), (err) => {
    assert.ok(err instanceof GitError);
    assert.equal(err.code, 'network');
    assert.equal(err.transient, true);
    return true;
  });

  const broken = createServer((_req, res) => {
    res.writeHead(502);
    res.end('bad gateway');
  });
  await new Promise<void>((resolve) => broken.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(broken.address() as AddressInfo).port}/r.git`;
    await assert.rejects(push(url), (err) => {
      assert.ok(err instanceof GitError);
      assert.equal(err.code, 'server');
      assert.equal(err.transient, true);
      return true;
    });
  } finally {
    broken.closeAllConnections();
    await new Promise<void>((resolve) => broken.close(() => resolve()));
  }
});

test('refuses a URL or branch that is not allowed before running git', async () => {
  const { cfg, co } = await setup();
  const before = cfg.spawns.length;
  for (const [repository, branch] of [
    ['ext::sh -c id', 'errand/j'],
    ['https://user:pw@example.com/r.git', 'errand/j'],
    ['https://example.com/r.git', '--delete'],
  ] as const) {
    await assert.rejects(pushBranch(cfg, { dir: co.dir, repository, branch }), (err) => {
      return err instanceof GitError && err.code === 'invalid_input';
    });
  }
  assert.ok(!cfg.spawns.slice(before).some((s) => s.args.includes('push')));
});
