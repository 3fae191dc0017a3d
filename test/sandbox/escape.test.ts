// Escape attempts from a real bubblewrap sandbox, each failing and leaving the host untouched:
// a real data directory beside the job's real clone (admin key, database files, the mirror,
// another job's clone), secrets in this process's environment, a loopback TCP server, writes
// outside the checkout and into its .git.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { createConnection, createServer, type Server } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { prepareCheckout } from '../../src/workspace/checkout.ts';
import { git, makeOrigin, makeTempDir, removeDir, testConfig } from '../support/git.ts';
import { childrenRunning, heldCommand, run, skip, skipNetwork } from './support.ts';

// Secrets this process holds, as the service would: none may reach the sandbox.
const ENV_SECRET = `env-secret-${randomBytes(12).toString('hex')}`;
const MODEL_KEY = `sk-ant-${randomBytes(16).toString('hex')}`;
process.env.ERRAND_SANDBOX_TEST_SECRET = ENV_SECRET;
process.env.ANTHROPIC_API_KEY = MODEL_KEY;
const FILE_SECRET = `file-secret-${randomBytes(12).toString('hex')}`;

let root: string;
let dataDir: string;
let checkout: string;
let otherClone: string;
let mirror: string;

const exists = async (path: string) => (await stat(path).catch(() => null)) !== null;

before(async () => {
  if (skip) return;
  root = await makeTempDir('sandbox-escape');
  dataDir = join(root, 'data');
  await mkdir(join(dataDir, 'pgdata', 'base', '1'), { recursive: true });
  await writeFile(join(dataDir, 'admin.key'), `${FILE_SECRET}\n`, { mode: 0o600 });
  await writeFile(join(dataDir, 'pgdata', 'PG_VERSION'), '17\n');
  await writeFile(join(dataDir, 'pgdata', 'base', '1', '1259'), `row ${FILE_SECRET}`);
  const origin = await makeOrigin(root, { 'README.md': 'hello\n', 'test.sh': 'echo tests pass\n' });
  const cfg = testConfig(join(dataDir, 'workspaces'));
  const input = (jobId: string) => ({
    projectId: 'proj',
    jobId,
    repository: origin.url,
    ref: 'main',
    branch: `errand/${jobId}`,
  });
  checkout = (await prepareCheckout(cfg, input('job1'))).dir;
  otherClone = (await prepareCheckout(cfg, input('job2'))).dir;
  await writeFile(join(otherClone, 'secret.txt'), FILE_SECRET);
  mirror = join(dataDir, 'workspaces', 'mirrors', 'proj.git');
  assert.ok(await exists(join(mirror, 'objects')));
});
after(async () => {
  if (root) await removeDir(root);
});

/** Asserts no output line carries any secret this test planted. */
function assertNoSecret(output: string) {
  for (const secret of [ENV_SECRET, MODEL_KEY, FILE_SECRET]) {
    assert.ok(!output.includes(secret), `a secret reached the sandbox:\n${output}`);
  }
}

describe('reading the service', { skip }, () => {
  test('the data directory is not there: no admin key, database files or other clone', async () => {
    const r = await run(
      checkout,
      [
        `cat ${join(dataDir, 'admin.key')}`,
        `cat ${join(dataDir, 'pgdata', 'base', '1', '1259')}`,
        `cat ${join(otherClone, 'secret.txt')}`,
        `ls -a ${dataDir} ${join(dataDir, 'workspaces')} ${join(dataDir, 'workspaces', 'jobs')}`,
        `ls ${mirror}`,
        // Anywhere outside the system and /proc (where this very command line is).
        "find / -path /proc -prune -o -path /usr -prune -o -name 'admin.key' -print",
        'grep -rls file-secret /etc /tmp /workspace /dev 2>/dev/null; echo grep done',
      ].join('; '),
    );
    assertNoSecret(r.output);
    assert.match(r.output, /admin\.key: No such file or directory/);
    assert.match(r.output, /1259: No such file or directory/);
    assert.match(r.output, /secret\.txt: No such file or directory/);
    assert.match(r.output, /jobs': No such file or directory/);
    // Of the mirror only its objects, for the clone's history; nothing else of the data dir.
    assert.match(r.output, /\nobjects\ngrep done\n$/);
  });

  test("the checkout is at /workspace with its history: git reads the mirror's objects", async () => {
    const r = await run(checkout, 'pwd; git log --oneline | wc -l; git show HEAD:README.md');
    assert.equal(r.exitCode, 0, r.output);
    assert.equal(r.output, '/workspace\n1\nhello\n');
  });

  test("the service's environment is not there: env and every /proc/*/environ", async () => {
    const r = await run(
      checkout,
      `env; cat /proc/*/environ | tr '\\0' '\\n'; cat /proc/${process.pid}/environ`,
    );
    assertNoSecret(r.output);
    assert.doesNotMatch(r.output, /ANTHROPIC_API_KEY|ERRAND_/);
    assert.match(r.output, /^PATH=\/usr\/local\/sbin:/m);
    assert.match(r.output, /^HOME=\/tmp\/home$/m);
    assert.match(r.output, /^LANG=C\.UTF-8$/m);
    // A new procfs of the sandbox's PID namespace: this process's pid is not in it.
    assert.match(r.output, new RegExp(`/proc/${process.pid}/environ: No such file`));
  });

  test("bwrap's own command line and environment on the host hold no secret", async () => {
    const held = heldCommand(checkout);
    const running = run(checkout, held.command, { onStdoutLine: held.onStdoutLine });
    await Promise.race([held.running, running]);
    const seen = await childrenRunning('bwrap');
    assert.ok(seen.length > 0, 'bwrap was not seen running');
    for (const pid of seen) {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8');
      const environ = await readFile(`/proc/${pid}/environ`, 'utf8');
      assertNoSecret(cmdline + environ);
      assert.deepEqual(
        environ
          .split('\0')
          .filter((v) => v !== '')
          .map((v) => v.split('=')[0])
          .filter((k) => k !== 'PWD'),
        ['PATH'],
      );
    }
    await held.release();
    assert.equal((await running).exitCode, 0);
  });

  test('a descriptor Errand inherited (open, without close-on-exec) does not reach the command', async () => {
    // A child Errand with a pipe on descriptor 40, as a supervisor may leave one open.
    const stdio: ('ignore' | 'pipe' | 'inherit')[] = ['ignore', 'pipe', 'inherit'];
    while (stdio.length < 40) stdio.push('ignore');
    stdio.push('pipe');
    const child = spawn(
      process.execPath,
      [new URL('./inherited-child.ts', import.meta.url).pathname, checkout],
      { stdio },
    );
    const through: Buffer[] = [];
    const leak = (child.stdio as unknown as Readable[])[40];
    assert.ok(leak);
    leak.on('data', (chunk: Buffer) => through.push(chunk));
    const out: Buffer[] = [];
    child.stdout?.on('data', (chunk: Buffer) => out.push(chunk));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    const output = Buffer.concat(out).toString();
    assert.equal(code, 0, output);
    assert.equal(Buffer.concat(through).toString(), '', 'the command wrote into the pipe');
    // Still a descriptor of the command's (bubblewrap hands it on), but /dev/null, read-only.
    assert.equal(output, '/dev/null\n');
  });

  test('nothing of the host but the system: no /home, /root, /sys, /work, /var, /run', async () => {
    const r = await run(checkout, 'ls -a /');
    // The data dir's first component appears only as the path to the mirror's objects.
    const allowed = new Set(
      ['.', '..', 'bin', 'dev', 'etc', 'lib', 'lib32', 'lib64', 'libx32', 'proc', 'sbin'].concat([
        'tmp',
        'usr',
        'workspace',
        dataDir.split('/')[1] ?? '',
      ]),
    );
    const top = r.output.split('\n').filter((l) => l !== '');
    for (const entry of top) assert.ok(allowed.has(entry), `/${entry} is visible in the sandbox`);
    assert.ok(top.includes('workspace') && top.includes('usr'));
    const etc = await run(checkout, 'ls /etc');
    for (const hidden of ['shadow', 'gshadow', 'ssh', 'sudoers', 'gitconfig', 'npmrc']) {
      assert.ok(!etc.output.split('\n').includes(hidden), `/etc/${hidden} is visible`);
    }
  });
});

describe('the network', { skip }, () => {
  let server: Server;
  let port: number;
  const received: string[] = [];
  let accepted = 0;
  before(async () => {
    if (skip) return;
    server = createServer((socket) => {
      accepted++;
      socket.setEncoding('utf8');
      socket.on('data', (d: string) => received.push(d));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    assert.ok(address !== null && typeof address === 'object');
    port = address.port;
  });
  after(() => server?.close());

  const connect = () =>
    `bash -c 'echo hello-from-sandbox > /dev/tcp/127.0.0.1/${port}' && echo connected`;

  test('off: a loopback TCP server of the host cannot be reached, only the own loopback', async () => {
    const acceptedBefore = accepted;
    const r = await run(checkout, `${connect()}; cat /proc/net/dev | tail -n +3 | cut -d: -f1`);
    assert.doesNotMatch(r.output, /^connected$/m);
    assert.match(r.output, /Connection refused/);
    assert.deepEqual(
      r.output
        .split('\n')
        .filter((l) => /^\s*\w+$/.test(l))
        .map((l) => l.trim()),
      ['lo'],
    );
    // The sentinel: a connection from this process, made after the command ended. The server
    // is handed its connections in the order they were made, so once this one's line is in,
    // one from the sandbox would have been accepted before it.
    const sentinel = createConnection(port, '127.0.0.1', () => sentinel.end('sentinel\n'));
    for (let i = 0; i < 500 && !received.includes('sentinel\n'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(received.includes('sentinel\n'), 'the sentinel never arrived');
    assert.equal(accepted - acceptedBefore, 1, 'a connection came from the sandbox');
    assert.deepEqual(
      received.filter((d) => d !== 'sentinel\n'),
      [],
    );
    received.length = 0;
  });

  // What the setup network reaches beyond the machine (a public address and a name, never the
  // gateway, the LAN or the cloud metadata service) is shown from a network of the test's own
  // (egress.test.ts, resolver.test.ts), so that no test sends a packet off the machine. Here,
  // where nothing leaves it: the sandbox's own loopback is all 127.0.0.1 leads to.
  test("on (setup commands): an interface with a default route; the host's loopback and PostgreSQL are out of reach", {
    skip: skipNetwork,
  }, async () => {
    const acceptedBefore = accepted;
    const r = await run(
      checkout,
      [
        connect(),
        "bash -c 'echo > /dev/tcp/127.0.0.1/5432' && echo postgres-connected",
        'awk \'$2 == "00000000" { print "default-route " $1 }\' /proc/net/route',
      ].join('; '),
      { network: 'open' },
    );
    assert.doesNotMatch(r.output, /^connected$/m, r.output);
    assert.doesNotMatch(r.output, /^postgres-connected$/m, r.output);
    assert.match(r.output, /^default-route (?!lo$)\S+$/m, r.output);
    // PostgreSQL does listen on the host's loopback: unreachable from the sandbox, not absent.
    const pg = createConnection(5432, '127.0.0.1');
    const listening = await new Promise<boolean>((resolve) => {
      pg.once('connect', () => resolve(true));
      pg.once('error', () => resolve(false));
    });
    pg.destroy();
    assert.ok(listening, 'no PostgreSQL on 127.0.0.1:5432 to be unreachable');
    // The sentinel, as above: nothing from the sandbox arrived before this connection.
    const sentinel = createConnection(port, '127.0.0.1', () => sentinel.end('sentinel\n'));
    for (let i = 0; i < 500 && !received.includes('sentinel\n'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(received.includes('sentinel\n'), 'the sentinel never arrived');
    assert.equal(accepted - acceptedBefore, 1, 'a connection came from the sandbox');
    assert.deepEqual(
      received.filter((d) => d !== 'sentinel\n'),
      [],
    );
    received.length = 0;
    // pasta ended with the command.
    assert.deepEqual(await childrenRunning('--no-map-gw'), []);
  });

  test('on, aborted (job archived): the command and pasta are gone at once', {
    skip: skipNetwork,
  }, async () => {
    const stop = new AbortController();
    const r = await run(checkout, 'echo started; exec sleep 987', {
      network: 'open',
      signal: stop.signal,
      onStdoutLine: (line) => {
        if (line === 'started') stop.abort();
      },
    });
    assert.equal(r.aborted, true);
    assert.equal(r.signal, 'SIGKILL');
    assert.deepEqual(await childrenRunning('--no-map-gw'), []);
    assert.deepEqual(await childrenRunning('987'), []);
  });
});

describe('writing outside the checkout', { skip }, () => {
  test('/, /etc, /usr, the data directory and the host home are read-only or absent', async () => {
    const marker = `escape-${randomBytes(4).toString('hex')}`;
    const targets = [
      `/${marker}`,
      `/etc/${marker}`,
      `/usr/${marker}`,
      `/usr/local/bin/${marker}`,
      join(dataDir, marker),
      join(dataDir, 'workspaces', 'jobs', marker),
      join(mirror, 'objects', marker),
      join(homedir(), marker),
    ];
    const r = await run(
      checkout,
      targets.map((t) => `(echo x > ${t}) 2>&1 || mkdir -p ${t} 2>&1`).join('; '),
    );
    for (const target of targets) {
      assert.ok(!(await exists(target)), `${target} was written on the host:\n${r.output}`);
    }
    // The system and the mirror's objects are read-only mounts; the rest is not there at all
    // (under a host /tmp, the data dir's path exists only in the sandbox's private /tmp).
    for (const readOnly of targets.slice(0, 4).concat(join(mirror, 'objects', marker))) {
      assert.ok(
        r.output.includes(`cannot create ${readOnly}: Read-only file system`),
        `${readOnly}:\n${r.output}`,
      );
    }
  });

  test('the checkout is writable, at /workspace and below cwd', async () => {
    await mkdir(join(checkout, 'sub'), { recursive: true });
    const r = await run(checkout, 'pwd; echo made > here.txt; echo ok > /workspace/top.txt', {
      cwd: join(checkout, 'sub'),
    });
    assert.equal(r.output, '/workspace/sub\n');
    assert.equal(await readFile(join(checkout, 'sub', 'here.txt'), 'utf8'), 'made\n');
    assert.equal(await readFile(join(checkout, 'top.txt'), 'utf8'), 'ok\n');
  });

  test('a cwd outside the checkout is refused before anything runs', async () => {
    await assert.rejects(run(checkout, 'true', { cwd: dataDir }), {
      name: 'SandboxError',
      message: 'cwd must be inside the checkout',
    });
  });

  test('.git/config and .git/hooks/* cannot be written, renamed or removed', async () => {
    const gitDir = join(checkout, '.git');
    const configBefore = await readFile(join(gitDir, 'config'), 'utf8');
    const hooksBefore = (await readdir(join(gitDir, 'hooks'))).sort();
    const r = await run(
      checkout,
      [
        'echo "[core] hooksPath = /tmp" >> .git/config',
        'printf "#!/bin/sh\\necho pwned\\n" > .git/hooks/pre-commit',
        'chmod +x .git/hooks/pre-commit',
        'mv .git .git-old',
        'rm -rf .git/hooks',
        'git config core.hooksPath /tmp',
      ].join('; '),
    );
    assert.match(r.output, /Read-only file system/);
    assert.equal(await readFile(join(gitDir, 'config'), 'utf8'), configBefore);
    assert.deepEqual((await readdir(join(gitDir, 'hooks'))).sort(), hooksBefore);
    assert.ok(!(await exists(join(gitDir, 'hooks', 'pre-commit'))));
    assert.doesNotMatch(git(checkout, 'config', '--list'), /hookspath/i);
  });
});
