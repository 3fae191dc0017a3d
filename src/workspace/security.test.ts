// Hostile-input tests: each one also runs the attack with plain git as a control, so a
// passing test means Errand stopped it, not that the attack never worked.

import assert from 'node:assert/strict';
import { chmod, mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { inspect } from 'node:util';
import {
  filesContaining,
  git,
  gitAsync,
  makeOrigin,
  makeTempDir,
  processesContaining,
  removeDir,
  startGitHttpServer,
  testConfig,
  writeFiles,
} from '../../test/support/git.ts';
import type { GitAuth } from '../repository/auth.ts';
import { prepareCheckout } from './checkout.ts';
import { changedFiles, commitAll, diffAgainst } from './commit.ts';
import { GitError } from './errors.ts';
import { runGit } from './git.ts';
import { mirrorDir } from './layout.ts';
import { pushBranch } from './push.ts';
import type { PrepareInput, WorkspaceConfig } from './types.ts';

let root: string;
before(async () => {
  root = await makeTempDir('security');
});
after(() => removeDir(root));

let counter = 0;
async function freshDir(): Promise<string> {
  const dir = join(root, `t${++counter}`);
  await mkdir(dir);
  return dir;
}

async function script(path: string, body: string): Promise<string> {
  await writeFile(path, `#!/bin/sh\n${body}\n`);
  await chmod(path, 0o755);
  return path;
}

const HOOKS = [
  'post-checkout',
  'pre-commit',
  'prepare-commit-msg',
  'commit-msg',
  'post-commit',
  'pre-push',
  'reference-transaction',
  'post-index-change',
  'pre-auto-gc',
  'post-rewrite',
];

function refused(pattern: RegExp) {
  return (err: unknown) => {
    assert.ok(err instanceof GitError, String(err));
    assert.equal(err.code, 'invalid_input');
    assert.equal(err.transient, false);
    assert.match(err.message, pattern);
    return true;
  };
}

describe('repository hooks and fsmonitor never run', () => {
  test('hooks in .git/hooks, a core.hooksPath and core.fsmonitor in the clone config, mirror hooks', async () => {
    const dir = await freshDir();
    const origin = await makeOrigin(dir);
    const cfg = testConfig(join(dir, 'ws'));
    const input = {
      projectId: 'p',
      jobId: 'j',
      repository: origin.url,
      ref: 'main',
      branch: 'errand/j',
    };
    const co = await prepareCheckout(cfg, input);
    const markers = join(dir, 'markers');
    const planted = join(dir, 'planted-hooks');
    await mkdir(markers);
    await mkdir(planted);
    for (const hook of HOOKS) {
      await script(join(co.dir, '.git/hooks', hook), `touch ${markers}/local-${hook}`);
      await script(join(planted, hook), `touch ${markers}/path-${hook}`);
      await script(join(mirrorDir(cfg, 'p'), 'hooks', hook), `touch ${markers}/mirror-${hook}`);
    }
    git(co.dir, 'config', 'core.hooksPath', planted);
    git(
      co.dir,
      'config',
      'core.fsmonitor',
      await script(join(dir, 'fsmonitor'), `touch ${markers}/fsmonitor`),
    );

    await writeFiles(co.dir, { 'turn.txt': 'agent output\n' });
    assert.equal((await changedFiles(cfg, { dir: co.dir })).length, 1);
    await commitAll(cfg, { dir: co.dir, message: 'turn' });
    await pushBranch(cfg, { dir: co.dir, repository: origin.url, branch: 'errand/j' });
    await diffAgainst(cfg, { dir: co.dir, base: co.baseCommit });
    await writeFiles(co.dir, { 'leftover.txt': 'x' });
    await prepareCheckout(cfg, input); // follow-up: fetch, checkout, clean
    assert.deepEqual(await readdir(markers), []);

    // Control: plain git in the same clone runs them.
    await writeFiles(co.dir, { 'control.txt': 'x' });
    git(co.dir, 'add', 'control.txt');
    git(co.dir, 'commit', '--quiet', '-m', 'control');
    const ran = await readdir(markers);
    assert.ok(ran.includes('path-pre-commit'), `control hooks did not run: ${ran.join(', ')}`);
    assert.ok(ran.includes('fsmonitor'), `control fsmonitor did not run: ${ran.join(', ')}`);
  });
});

describe('repository URLs that run commands', () => {
  test('ext:: is refused by validation, and by git itself when validation is bypassed', async () => {
    const dir = await freshDir();
    const origin = await makeOrigin(dir);
    const cfg = testConfig(join(dir, 'ws'));
    const marker = join(dir, 'ext-ran');
    const url = `ext::sh -c touch% ${marker}`;
    const input = (repository: string): PrepareInput => ({
      projectId: 'p',
      jobId: 'j',
      repository,
      ref: 'main',
      branch: 'errand/j',
    });
    await assert.rejects(prepareCheckout(cfg, input(url)), refused(/whitespace|remote helper/));
    await assert.rejects(prepareCheckout(cfg, input('ext::sh')), refused(/remote helper/));
    await assert.rejects(
      pushBranch(cfg, { dir, repository: url, branch: 'errand/j' }),
      refused(/whitespace|remote helper/),
    );
    await assert.rejects(
      runGit(cfg, ['ls-remote', '--', url]),
      refused(/transport 'ext' not allowed/),
    );
    assert.deepEqual(await readdir(dir).then((f) => f.filter((n) => n === 'ext-ran')), []);

    // Control: git with ext allowed runs the command.
    try {
      git(dir, '-c', 'protocol.ext.allow=always', 'ls-remote', url);
    } catch {
      // the fake transport never speaks git; the side effect is what counts
    }
    assert.ok((await readdir(dir)).includes('ext-ran'), 'control: ext:: should run commands');
    void origin;
  });

  test('an option as repository URL (--upload-pack=...) is refused and never parsed as one', async () => {
    const dir = await freshDir();
    const origin = await makeOrigin(dir);
    const cfg = testConfig(join(dir, 'ws'));
    const payload = await script(join(dir, 'payload'), `touch ${dir}/upload-pack-ran; exit 1`);
    const url = `--upload-pack=${payload}`;
    await assert.rejects(
      prepareCheckout(cfg, {
        projectId: 'p',
        jobId: 'j',
        repository: url,
        ref: 'main',
        branch: 'errand/j',
      }),
      refused(/must not start with "-"/),
    );
    // Past validation, `--` still keeps it a path (which git then refuses as strange).
    await assert.rejects(runGit(cfg, ['ls-remote', '--', url], { cwd: dir }), (err) => {
      return err instanceof GitError && /strange pathname|not found/.test(err.message);
    });
    assert.ok(!(await readdir(dir)).includes('upload-pack-ran'));

    // Control: without `--` git takes it as an option and runs the payload.
    try {
      git(dir, 'ls-remote', url, origin.bare);
    } catch {
      // the payload exits 1
    }
    assert.ok((await readdir(dir)).includes('upload-pack-ran'), 'control: payload should run');
  });

  test('local repositories (file://, paths) are refused unless allowLocalRepos', async () => {
    const dir = await freshDir();
    const origin = await makeOrigin(dir);
    const strict = testConfig(join(dir, 'ws'), { allowLocalRepos: false });
    for (const repository of [origin.url, origin.bare, `${origin.bare}/`, './origin.git']) {
      await assert.rejects(
        prepareCheckout(strict, {
          projectId: 'p',
          jobId: 'j',
          repository,
          ref: 'main',
          branch: 'errand/j',
        }),
        refused(/local repositories are disabled/),
      );
    }
    await assert.rejects(
      runGit(strict, ['ls-remote', '--', origin.url]),
      refused(/transport 'file' not allowed/),
    );
    await assert.rejects(
      runGit(strict, ['ls-remote', '--', origin.bare]),
      refused(/transport 'file' not allowed/),
    );
    // Control: the same repository is fine where local repositories are enabled.
    const local = testConfig(join(dir, 'ws-local'), { allowLocalRepos: true });
    await runGit(local, ['ls-remote', '--', origin.url]);
  });
});

describe('credentials over an authenticated HTTP remote', () => {
  const token = `errand-test-token-${process.pid}-${Date.now()}`;
  const authorization = `Bearer ${token}`;

  async function authServer(dir: string) {
    const served = join(dir, 'served');
    await mkdir(join(served, 'acme'), { recursive: true });
    const origin = await makeOrigin(join(served, 'acme'), undefined, 'app.git');
    const procHits: string[] = [];
    const server = await startGitHttpServer({
      projectRoot: served,
      authorization,
      // The client's git processes are alive and waiting while this runs: a token in
      // any command line would show here.
      intercept: async () => {
        procHits.push(...(await processesContaining(token)));
        return false;
      },
    });
    return { origin, server, procHits, repository: `${server.url}/acme/app.git` };
  }

  function input(repository: string, auth?: GitAuth): PrepareInput {
    return { projectId: 'p', jobId: 'j', repository, ref: 'main', branch: 'errand/j', auth };
  }

  test('fetch and push work, and the token is in no file, argv, process list or URL', async () => {
    const dir = await freshDir();
    const { origin, server, procHits, repository } = await authServer(dir);
    try {
      const cfg = testConfig(join(dir, 'ws'));
      const auth = { urlPrefix: `${server.url}/acme/`, header: `Authorization: ${authorization}` };
      const co = await prepareCheckout(cfg, input(repository, auth));
      await writeFiles(co.dir, { 'secret-safe.txt': 'x\n' });
      const sha = await commitAll(cfg, { dir: co.dir, message: 'turn' });
      await pushBranch(cfg, { dir: co.dir, repository, branch: 'errand/j', auth });
      assert.equal(origin.head('errand/j'), sha);
      await prepareCheckout(cfg, input(repository, auth)); // follow-up fetch

      assert.ok(server.requests.length >= 4);
      assert.ok(server.requests.every((r) => r.authorization === authorization));
      assert.deepEqual(procHits, []);
      assert.deepEqual(await filesContaining(cfg.rootDir, token), []);
      for (const spawn of cfg.spawns) {
        assert.ok(!spawn.args.some((a) => a.includes(token)), `token in argv: ${spawn.args}`);
      }
      const networked = cfg.spawns.filter(
        (s) => s.args.includes('fetch') || s.args.includes('push'),
      );
      assert.ok(networked.length >= 3);
      for (const spawn of networked) assert.ok(spawn.envKeys.includes('GIT_CONFIG_VALUE_0'));
      // Local-only calls never carry the credentials at all.
      const local = cfg.spawns.filter((s) => s.args.includes('commit') || s.args.includes('clone'));
      for (const spawn of local) assert.ok(!spawn.envKeys.includes('GIT_CONFIG_VALUE_0'));
    } finally {
      await server.close();
    }
  });

  test('a rejected token gives a GitError that does not contain it', async () => {
    const dir = await freshDir();
    const { server, repository } = await authServer(dir);
    try {
      const cfg = testConfig(join(dir, 'ws'));
      const good = { urlPrefix: `${server.url}/acme/`, header: `Authorization: ${authorization}` };
      const co = await prepareCheckout(cfg, input(repository, good));
      await writeFiles(co.dir, { 'a.txt': 'a\n' });
      await commitAll(cfg, { dir: co.dir, message: 'turn' });

      const wrongToken = `wrong-${token}-zz`;
      const wrong = {
        urlPrefix: `${server.url}/acme/`,
        header: `Authorization: Bearer ${wrongToken}`,
      };
      const failures = [
        () => pushBranch(cfg, { dir: co.dir, repository, branch: 'errand/j', auth: wrong }),
        () => prepareCheckout(cfg, { ...input(repository, wrong), projectId: 'p2' }),
        () => prepareCheckout(cfg, { ...input(repository), projectId: 'p3' }),
      ];
      for (const failure of failures) {
        await assert.rejects(failure(), (err) => {
          assert.ok(err instanceof GitError, String(err));
          assert.equal(err.code, 'auth');
          assert.equal(err.transient, false);
          assert.ok(err.message.includes(repository), err.message);
          for (const text of [
            err.message,
            err.stderr,
            err.stack ?? '',
            inspect(err),
            JSON.stringify(err),
          ]) {
            assert.ok(!text.includes(wrongToken) && !text.includes(token), text);
          }
          return true;
        });
      }
    } finally {
      await server.close();
    }
  });

  test('the header goes only to URLs under its prefix, even when config rewrites the URL', async () => {
    const dir = await freshDir();
    const { server, repository } = await authServer(dir);
    const elsewhereRoot = join(dir, 'elsewhere');
    await mkdir(join(elsewhereRoot, 'acme'), { recursive: true });
    await makeOrigin(join(elsewhereRoot, 'acme'), undefined, 'app.git');
    const elsewhere = await startGitHttpServer({ projectRoot: elsewhereRoot });
    try {
      const cfg = testConfig(join(dir, 'ws'));
      // Scoped to another path on the same server: not sent.
      const otherPath = {
        urlPrefix: `${server.url}/other/`,
        header: `Authorization: ${authorization}`,
      };
      await assert.rejects(prepareCheckout(cfg, input(repository, otherPath)), { code: 'auth' });
      assert.ok(server.requests.every((r) => r.authorization === undefined));

      // A clone whose config redirects the remote to another server (url.insteadOf).
      const auth = { urlPrefix: `${server.url}/acme/`, header: `Authorization: ${authorization}` };
      const co = await prepareCheckout(cfg, { ...input(repository, auth), projectId: 'q' });
      git(co.dir, 'config', `url.${elsewhere.url}/.insteadOf`, `${server.url}/`);
      await writeFiles(co.dir, { 'a.txt': 'a\n' });
      await commitAll(cfg, { dir: co.dir, message: 'turn' });
      await pushBranch(cfg, { dir: co.dir, repository, branch: 'errand/j', auth }).catch(() => {});
      assert.ok(elsewhere.requests.length > 0, 'control: insteadOf should redirect the push');
      assert.ok(elsewhere.requests.every((r) => r.authorization === undefined));
    } finally {
      await server.close();
      await elsewhere.close();
    }
  });

  test('HTTP redirects are not followed (and so never carry the header elsewhere)', async () => {
    const dir = await freshDir();
    const targetRoot = join(dir, 'target');
    await mkdir(join(targetRoot, 'acme'), { recursive: true });
    await makeOrigin(join(targetRoot, 'acme'), undefined, 'app.git');
    const target = await startGitHttpServer({ projectRoot: targetRoot });
    const redirector = await startGitHttpServer({
      projectRoot: targetRoot,
      intercept: (req, res) => {
        res.writeHead(302, { Location: `${target.url}${req.url ?? '/'}` });
        res.end();
        return true;
      },
    });
    try {
      const cfg: WorkspaceConfig = testConfig(join(dir, 'ws'));
      const auth = { urlPrefix: `${redirector.url}/`, header: `Authorization: ${authorization}` };
      await assert.rejects(
        prepareCheckout(cfg, input(`${redirector.url}/acme/app.git`, auth)),
        (err) => err instanceof GitError && err.transient === false,
      );
      assert.ok(redirector.requests.length > 0);
      assert.deepEqual(target.requests, []);
      // Control: git that follows redirects reaches the target.
      await gitAsync(
        dir,
        '-c',
        'http.followRedirects=true',
        'ls-remote',
        `${redirector.url}/acme/app.git`,
      );
      assert.ok(target.requests.length > 0);
    } finally {
      await redirector.close();
      await target.close();
    }
  });
});
