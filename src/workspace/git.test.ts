import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  git,
  makeTempDir,
  processesContaining,
  removeDir,
  testConfig,
} from '../../test/support/git.ts';
import { gitInheritedEnv } from '../config.ts';
import { GitError } from './errors.ts';
import { gitArgv, gitEnv, runGit } from './git.ts';

let root: string;
before(async () => {
  root = await makeTempDir('git');
});
after(() => removeDir(root));

function pairs(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length - 1; i++) if (argv[i] === '-c') out.push(argv[i + 1] ?? '');
  return out;
}

test('every git call carries the hardening config before its own arguments', async () => {
  const cfg = testConfig(root, { allowLocalRepos: false });
  await runGit(cfg, ['version']);
  const args = cfg.spawns[0]?.args ?? [];
  assert.equal(args[0], 'git');
  assert.equal(args.at(-1), 'version');
  const config = pairs(args);
  for (const required of [
    'core.hooksPath=/dev/null',
    'core.fsmonitor=false',
    'protocol.allow=never',
    'protocol.https.allow=always',
    'protocol.ssh.allow=always',
    'http.followRedirects=false',
    'credential.helper=',
  ]) {
    assert.ok(config.includes(required), `missing -c ${required}`);
  }
  assert.ok(!config.includes('protocol.file.allow=always'));
  assert.ok(!config.includes('protocol.http.allow=always'));
  // protocol.allow=never comes before the allowances, which must not be overridden later.
  assert.ok(config.indexOf('protocol.allow=never') < config.indexOf('protocol.https.allow=always'));
});

test('file and loopback http transports are allowed only with allowLocalRepos (or for own paths)', () => {
  const strict = testConfig(root, { allowLocalRepos: false });
  const local = testConfig(root, { allowLocalRepos: true });
  assert.ok(!pairs(gitArgv(strict, ['fetch'])).includes('protocol.file.allow=always'));
  assert.ok(
    pairs(gitArgv(strict, ['clone'], { allowFile: true })).includes('protocol.file.allow=always'),
  );
  assert.ok(
    !pairs(gitArgv(strict, ['clone'], { allowFile: true })).includes('protocol.http.allow=always'),
  );
  assert.ok(pairs(gitArgv(local, ['fetch'])).includes('protocol.file.allow=always'));
  assert.ok(pairs(gitArgv(local, ['fetch'])).includes('protocol.http.allow=always'));
});

test('the environment is sealed: fixed prompts, config sources and ssh command', () => {
  const cfg = testConfig(root);
  const env = gitEnv(cfg);
  assert.equal(env.GIT_TERMINAL_PROMPT, '0');
  assert.equal(env.GIT_CONFIG_NOSYSTEM, '1');
  assert.equal(env.GIT_CONFIG_GLOBAL, '/dev/null');
  assert.equal(env.GIT_ASKPASS, '');
  assert.equal(env.SSH_ASKPASS, '');
  assert.equal(env.HOME, join(root, 'home'));
  assert.match(env.GIT_SSH_COMMAND ?? '', /^ssh -o BatchMode=yes\b/);
  assert.equal(env.GIT_CONFIG_COUNT, undefined);
});

test("git inherits only the config's variables, never this process's environment", () => {
  const saved = process.env.TZ;
  process.env.TZ = 'Process/Zone';
  try {
    const env = gitEnv(testConfig(root, { inheritedEnv: { PATH: '/opt/git/bin', TZ: 'UTC' } }));
    assert.equal(env.PATH, '/opt/git/bin');
    assert.equal(env.TZ, 'UTC');
    assert.equal(env.TMPDIR, undefined);
    assert.equal(gitEnv(testConfig(root, { inheritedEnv: {} })).TZ, undefined);
  } finally {
    if (saved === undefined) delete process.env.TZ;
    else process.env.TZ = saved;
  }
  // What the config reads: the four variables git needs and nothing else.
  assert.deepEqual(
    gitInheritedEnv({
      PATH: '/bin',
      TZ: 'UTC',
      GIT_DIR: '/x',
      GIT_SSH_COMMAND: 'evil',
      HOME: '/h',
    }),
    { PATH: '/bin', TZ: 'UTC' },
  );
});

test('git ignores the caller environment: GIT_DIR, GIT_CONFIG_PARAMETERS, HOME, XDG config', async () => {
  const saved = { ...process.env };
  const fakeHome = join(root, 'fake-home');
  git(root, 'init', '--quiet', fakeHome);
  await writeFile(join(fakeHome, '.gitconfig'), '[evil]\n\thome = 1\n');
  const repo = join(root, 'env-repo');
  git(root, 'init', '--quiet', repo);
  try {
    process.env.HOME = fakeHome;
    process.env.XDG_CONFIG_HOME = fakeHome;
    process.env.GIT_DIR = join(fakeHome, '.git');
    process.env.GIT_CONFIG_PARAMETERS = "'evil.params'='1'";
    process.env.GIT_CONFIG_COUNT = '1';
    process.env.GIT_CONFIG_KEY_0 = 'evil.count';
    process.env.GIT_CONFIG_VALUE_0 = '1';
    process.env.GIT_ALLOW_PROTOCOL = 'ext:file';
    process.env.GIT_SSH_COMMAND = 'touch /tmp/pwned';
    const cfg = testConfig(root);
    const list = await runGit(cfg, ['config', '--list'], { cwd: repo });
    assert.doesNotMatch(list.stdout, /evil/);
    assert.match(list.stdout, /core\.hookspath=\/dev\/null/);
    const gitDir = await runGit(cfg, ['rev-parse', '--absolute-git-dir'], { cwd: repo });
    assert.equal(gitDir.stdout.trim(), join(repo, '.git'));
    const keys = cfg.spawns.flatMap((s) => s.envKeys);
    for (const leaked of ['GIT_DIR', 'GIT_CONFIG_PARAMETERS', 'GIT_ALLOW_PROTOCOL']) {
      assert.ok(!keys.includes(leaked), `${leaked} reached git`);
    }
    assert.equal(gitEnv(cfg).GIT_SSH_COMMAND?.includes('touch'), false);
  } finally {
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
    Object.assign(process.env, saved);
  }
});

test('credentials reach git as URL-scoped config in the environment, not in argv', async () => {
  const cfg = testConfig(root);
  const auth = {
    urlPrefix: 'https://git.example.com/acme/',
    header: 'Authorization: Bearer tok-123456',
  };
  const inside = await runGit(
    cfg,
    ['config', '--get-urlmatch', 'http.extraHeader', 'https://git.example.com/acme/app.git'],
    { auth, cwd: root },
  );
  assert.equal(inside.stdout.trim(), 'Authorization: Bearer tok-123456');
  const outside = await runGit(
    cfg,
    ['config', '--get-urlmatch', 'http.extraHeader', 'https://git.example.com/other/app.git'],
    { auth, cwd: root, okCodes: [1] },
  );
  assert.equal(outside.code, 1, 'header must not apply outside its prefix');
  const otherHost = await runGit(
    cfg,
    ['config', '--get-urlmatch', 'http.extraHeader', 'https://evil.example.net/acme/app.git'],
    { auth, cwd: root, okCodes: [1] },
  );
  assert.equal(otherHost.code, 1);
  for (const spawn of cfg.spawns) {
    assert.ok(!spawn.args.join(' ').includes('tok-123456'), 'token in argv');
    assert.ok(spawn.envKeys.includes('GIT_CONFIG_VALUE_0'));
  }
});

test('stdin input and stdout truncation', async () => {
  const cfg = testConfig(root);
  const hashed = await runGit(cfg, ['hash-object', '--stdin'], { input: 'hello\n', cwd: root });
  assert.equal(hashed.stdout.trim(), 'ce013625030ba8dba906f756967f9e9ca394464a');
  const cut = await runGit(cfg, ['version'], { maxStdoutBytes: 5 });
  assert.equal(cut.stdout, 'git v');
  assert.equal(cut.stdoutTruncated, true);
});

test('okCodes turn an exit code into an answer; other codes are GitErrors', async () => {
  const cfg = testConfig(root);
  const repo = join(root, 'codes');
  git(root, 'init', '--quiet', repo);
  const answer = await runGit(cfg, ['rev-parse', '--verify', '--quiet', 'nope'], {
    cwd: repo,
    okCodes: [1],
  });
  assert.equal(answer.code, 1);
  await assert.rejects(runGit(cfg, ['rev-parse', '--verify', 'nope'], { cwd: repo }), (err) => {
    assert.ok(err instanceof GitError);
    assert.equal(err.code, 'failed');
    assert.equal(err.exitCode, 128);
    assert.match(err.message, /^git rev-parse failed: .*Needed a single revision/);
    return true;
  });
});

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

test('network failures are transient GitErrors naming the action', async () => {
  const server = createServer();
  const url = await listen(server);
  await close(server); // nothing listens on that port now
  const cfg = testConfig(root);
  await assert.rejects(
    runGit(cfg, ['ls-remote', '--', `${url}/x.git`], { action: `ls-remote of ${url}/x.git` }),
    (err) => {
      assert.ok(err instanceof GitError);
      assert.equal(err.code, 'network');
      assert.equal(err.transient, true);
      assert.match(err.message, new RegExp(`^ls-remote of ${url}/x\\.git failed: the network`));
      return true;
    },
  );
});

test('HTTP 5xx is transient, 404 and 401 are not', async () => {
  const statuses = new Map([
    ['/503.git', 503],
    ['/404.git', 404],
    ['/401.git', 401],
  ]);
  const server = createServer((req, res) => {
    const status = statuses.get(req.url?.split('/info/')[0] ?? '') ?? 500;
    res.writeHead(status, status === 401 ? { 'WWW-Authenticate': 'Basic realm="x"' } : {});
    res.end('no\n');
  });
  const url = await listen(server);
  const cfg = testConfig(root);
  try {
    const expected = [
      ['/503.git', 'server', true],
      ['/404.git', 'not_found', false],
      ['/401.git', 'auth', false],
    ] as const;
    for (const [path, code, transient] of expected) {
      await assert.rejects(runGit(cfg, ['ls-remote', '--', `${url}${path}`]), (err) => {
        assert.ok(err instanceof GitError, String(err));
        assert.equal(err.code, code, `${path}: ${err.message}`);
        assert.equal(err.transient, transient);
        return true;
      });
    }
  } finally {
    await close(server);
  }
});

test('an aborted signal kills git and its helpers and rejects with an AbortError', async () => {
  let arrived = () => {};
  const requestArrived = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  // Accepts the request and never answers: git-remote-http waits forever.
  const server = createServer(() => arrived());
  const url = await listen(server);
  const marker = `${url}/hang-${process.pid}.git`;
  const cfg = testConfig(root);
  const controller = new AbortController();
  try {
    const running = runGit(cfg, ['ls-remote', '--', marker], { signal: controller.signal });
    await requestArrived;
    assert.ok((await processesContaining(marker)).length > 0, 'git should be running');
    const started = Date.now();
    controller.abort(new Error('turn cancelled'));
    await assert.rejects(running, (err: Error) => {
      assert.equal(err.name, 'AbortError');
      assert.match(err.message, /aborted/);
      assert.equal((err.cause as Error).message, 'turn cancelled');
      return true;
    });
    assert.ok(Date.now() - started < 1500, 'SIGTERM should be enough for git');
    assert.deepEqual(await processesContaining(marker), [], 'no git process may survive');
  } finally {
    await close(server);
  }
});

test('a child that ignores SIGTERM is killed with SIGKILL after the grace period', async () => {
  // A grace period shorter than the default 2 s: the test waits it out in real time.
  const cfg = testConfig(root, { killGraceMs: 300 });
  const controller = new AbortController();
  // Short enough that a regression does not leave sleepers behind for long.
  const marker = `8.${process.pid}`;
  const running = runGit(cfg, ['-c', `alias.hang=!trap '' TERM; sleep ${marker}`, 'hang'], {
    cwd: root,
    signal: controller.signal,
  });
  // Wait for the sleep itself: once it runs, the shell has set its trap. Under load that
  // can take a while, and aborting earlier would test nothing.
  const sleeping = async () =>
    (await processesContaining(marker)).some((cmd) => cmd.startsWith('sleep '));
  for (let i = 0; i < 500 && !(await sleeping()); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.ok(await sleeping(), 'the hanging git alias never started');
  const started = Date.now();
  controller.abort();
  await assert.rejects(running, { name: 'AbortError' });
  const elapsed = Date.now() - started;
  assert.ok(elapsed >= 290 && elapsed < 5000, `took ${elapsed} ms`);
  assert.deepEqual(await processesContaining(`sleep ${marker}`), []);
});

test('an already aborted signal rejects without spawning git', async () => {
  const cfg = testConfig(root);
  await assert.rejects(runGit(cfg, ['version'], { signal: AbortSignal.abort() }), {
    name: 'AbortError',
  });
  assert.equal(cfg.spawns.length, 0);
});
