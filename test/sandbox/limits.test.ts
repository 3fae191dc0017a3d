// The sandbox's limits and clean-up with real bubblewrap: nothing of a command survives its
// run (normal end, timeout, abort), a fork bomb, a 10 GB write and processes that together
// take more memory than the run's bound are stopped (a run beside it, within its own, goes on),
// a command that ignores SIGTERM dies at its timeout, and output over the cap keeps its head and
// tail. Also as an ordinary user (nobody),
// where RLIMIT_NPROC is what bounds processes and a non-root sandbox filters its own network.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  access,
  chmod,
  copyFile,
  mkdir,
  readdir,
  readFile,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { execute, type Ready } from '../../src/sandbox/execute.ts';
import { probe } from '../../src/sandbox/probe.ts';
import type { SandboxResult, SandboxRun } from '../../src/sandbox/types.ts';
import { makeTempDir, removeDir } from '../support/git.ts';
import {
  childrenRunning,
  heldCommand,
  hostProcesses,
  readableByOthers,
  run,
  sandbox,
  skip,
  skipNetwork,
  TEST_LIMITS,
} from './support.ts';

const execFileP = promisify(execFile);

/** The cgroups (controllers → path) of `pid` that are a run's own. */
async function runGroups(pid: number): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const line of (await readFile(`/proc/${pid}/cgroup`, 'utf8').catch(() => '')).split('\n')) {
    const match = /^\d+:([^:]*):(.*\/errand-sandbox-[0-9a-f-]+)$/.exec(line);
    if (match) out.set(match[1] ?? '', match[2] ?? '');
  }
  return out;
}

/** The directory of the run's group that holds `controller` (v1 or v2), if it exists. */
async function groupDir(groups: Map<string, string>, controller: string): Promise<string | null> {
  for (const [controllers, path] of groups) {
    const dirs =
      controllers === ''
        ? ['/sys/fs/cgroup', '/sys/fs/cgroup/unified'].map((d) => join(d, path))
        : controllers.split(',').includes(controller)
          ? [join('/sys/fs/cgroup', controller, path)]
          : [];
    for (const dir of dirs) {
      const files = await readdir(dir).catch(() => []);
      if (files.some((f) => f.startsWith(`${controller}.`))) return dir;
    }
  }
  return null;
}

let root: string;
let checkout: string;
before(async () => {
  if (skip) return;
  root = await makeTempDir('sandbox-limits');
  checkout = join(root, 'checkout');
  await mkdir(join(checkout, '.git'), { recursive: true });
});
after(async () => {
  if (root) await removeDir(root);
});

/** A sleep whose command line is unique to one test, to find it on the host. */
const marker = () =>
  `${1000 + Math.floor(Math.random() * 1000)}.${randomBytes(3).readUIntBE(0, 3)}`;

describe('nothing survives the run', { skip }, () => {
  test('a background `sleep 1000 &` is gone when the command ends', async () => {
    const seconds = marker();
    const r = await run(checkout, `sleep ${seconds} & setsid sleep ${seconds} & echo started`);
    assert.equal(r.exitCode, 0);
    assert.equal(r.output, 'started\n');
    assert.deepEqual(await hostProcesses('sleep', seconds), []);
  });

  test('a command that ignores SIGTERM is killed at its timeout, with all it started', async () => {
    const seconds = marker();
    const started = Date.now();
    const r = await run(
      checkout,
      `trap '' TERM; sleep ${seconds} & echo waiting; sleep ${seconds}`,
      {
        limits: { ...TEST_LIMITS, timeoutSeconds: 1 },
      },
    );
    const took = Date.now() - started;
    assert.equal(r.timedOut, true);
    assert.equal(r.aborted, false);
    assert.equal(r.exitCode, null);
    assert.equal(r.signal, 'SIGKILL');
    assert.equal(r.output, 'waiting\n');
    // The timeout, then the grace after SIGTERM, then SIGKILL: well under the sleep.
    assert.ok(took >= 1000 && took < 8000, `took ${took} ms`);
    assert.deepEqual(await hostProcesses('sleep', seconds), []);
  });

  test('a command that stops on SIGTERM ends at its timeout without SIGKILL', async () => {
    const r = await run(checkout, 'trap "echo terminated; exit 7" TERM; sleep 30 & wait', {
      limits: { ...TEST_LIMITS, timeoutSeconds: 1 },
    });
    assert.equal(r.timedOut, true);
    assert.equal(r.signal, null);
    assert.equal(r.exitCode, 7);
    assert.equal(r.output, 'terminated\n');
  });

  test('an abort kills everything at once', async () => {
    const seconds = marker();
    const controller = new AbortController();
    const running = run(checkout, `sleep ${seconds} & sleep ${seconds}`, {
      signal: controller.signal,
    });
    for (let i = 0; i < 200 && (await hostProcesses('sleep', seconds)).length < 2; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const seen = (await hostProcesses('sleep', seconds)).length;
    if (seen !== 2) controller.abort();
    assert.equal(seen, 2);
    const abortedAt = Date.now();
    controller.abort();
    const r = await running;
    assert.ok(Date.now() - abortedAt < 1500, 'no grace on abort');
    assert.equal(r.aborted, true);
    assert.equal(r.timedOut, false);
    assert.equal(r.exitCode, null);
    assert.deepEqual(await hostProcesses('sleep', seconds), []);
  });

  test('an already aborted signal runs nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    const r = await run(checkout, 'echo ran > ran.txt', { signal: controller.signal });
    assert.equal(r.aborted, true);
    assert.equal(await stat(join(checkout, 'ran.txt')).catch(() => null), null);
  });

  test("the run's control groups hold it while it runs, with its bounds, and are removed after", async (t) => {
    if (
      !sandbox.available ||
      sandbox.processLimit !== 'cgroup' ||
      sandbox.memoryLimit !== 'cgroup'
    ) {
      return t.skip('no pids and memory cgroups in use here');
    }
    // Held until the groups are read: the run ends when the test lets it.
    const held = heldCommand(checkout);
    const running = run(checkout, `sleep 30 & ${held.command}`, {
      limits: { ...TEST_LIMITS, processes: 77, memoryMb: 333 },
      onStdoutLine: held.onStdoutLine,
    });
    await Promise.race([held.running, running]);
    // Each controller's group of bwrap, by the hierarchy's line in /proc/<pid>/cgroup.
    let groups: Map<string, string> | undefined;
    for (let i = 0; i < 200 && groups === undefined; i++) {
      for (const pid of await childrenRunning('bwrap')) {
        const found = await runGroups(pid);
        if (found.size > 0) groups = found;
      }
      if (groups === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.ok(groups, 'bwrap ran outside a cgroup');
    const pidsDir = await groupDir(groups, 'pids');
    const memoryDir = await groupDir(groups, 'memory');
    assert.ok(pidsDir && memoryDir, JSON.stringify([...groups]));
    assert.equal((await readFile(join(pidsDir, 'pids.max'), 'utf8')).trim(), String(77 + 2));
    const memoryMax = await readFile(join(memoryDir, 'memory.limit_in_bytes'), 'utf8').catch(() =>
      readFile(join(memoryDir, 'memory.max'), 'utf8'),
    );
    assert.equal(memoryMax.trim(), String(333 * 1024 * 1024));
    // Below this process's own memory group (v1): the host's bound on Errand bounds its runs.
    const own = /^\d+:[^:]*\bmemory\b[^:]*:(.*)$/m.exec(
      await readFile('/proc/self/cgroup', 'utf8'),
    );
    if (own)
      assert.ok(memoryDir.includes(`${own[1]?.replace(/\/$/, '')}/errand-sandbox-`), memoryDir);
    await held.release();
    await running;
    assert.equal(await stat(pidsDir).catch(() => null), null);
    assert.equal(await stat(memoryDir).catch(() => null), null);
  });
});

/**
 * Once the bomb is started the shell never forks again: a fork that fails ends dash, and the
 * count line would never be printed. So the second's wait is started first (a builtin `wait`
 * ends it), the bomb is one fork of the shell, and the count is a glob and a builtin.
 */
const FORK_BOMB =
  'sleep 1 & waiter=$!; (bomb() { bomb | bomb & }; bomb) & wait $waiter; ' +
  'set -- /proc/[0-9]*; echo "alive: $#"';

describe('limits', { skip }, () => {
  test('a fork bomb is stopped by the process limit and the run ends', async () => {
    const started = Date.now();
    const r = await run(checkout, FORK_BOMB, {
      limits: { ...TEST_LIMITS, processes: 64, timeoutSeconds: 20 },
    });
    assert.equal(r.timedOut, false);
    assert.ok(Date.now() - started < 15_000);
    assert.match(r.output, /Cannot fork|Resource temporarily unavailable/);
    const alive = /alive: (\d+)/.exec(r.output);
    assert.ok(alive, r.output.slice(-500));
    assert.ok(Number(alive[1]) <= 65, `${alive[1]} processes in a sandbox bounded to 64`);
    // This machine stays usable: this process can still start one.
    await execFileP('true');
  });

  test('background processes count too: no more than the limit at once', async () => {
    // The inner shell dies at its first failed fork (dash does); its sleeps stay, and the outer
    // shell counts them with a glob, which needs no process of its own.
    const r = await run(
      checkout,
      "sh -c 'i=0; while [ $i -lt 40 ]; do sleep 30 & i=$((i+1)); done' 2>/dev/null; " +
        'set -- /proc/[0-9]*; echo $#',
      { limits: { ...TEST_LIMITS, processes: 10 } },
    );
    // At most the limit, bwrap's init included (one more where a cgroup counts it).
    const count = Number(r.output.trim());
    assert.ok(count >= 6 && count <= 11, r.output);
  });

  test('a 10 GB write stops at the file-size limit', async () => {
    const r = await run(checkout, 'head -c 10G /dev/zero > big; echo "exit $?"', {
      limits: { ...TEST_LIMITS, fileSizeMb: 8 },
    });
    assert.match(r.output, /File size limit exceeded/);
    assert.match(r.output, /exit 153/);
    assert.equal((await stat(join(checkout, 'big'))).size, 8 * 1024 * 1024);
  });

  test("the private /tmp is bounded too (it lives in the host's memory)", async () => {
    const r = await run(
      checkout,
      'for f in a b c d; do head -c 6M /dev/zero > /tmp/$f; done; du -sm /tmp | cut -f1',
      { limits: { ...TEST_LIMITS, fileSizeMb: 8 } },
    );
    assert.match(r.output, /No space left on device/);
    assert.ok(Number(r.output.trim().split('\n').at(-1)) <= 8, r.output);
  });

  test('memory: an allocation over the limit fails, one under it works', async (t) => {
    const r = await run(
      checkout,
      'python3 -c "b = bytearray(300 * 1024 * 1024); print(\'allocated\')" 2>&1 | tail -1',
      { limits: { ...TEST_LIMITS, memoryMb: 64 } },
    );
    if (/python3: not found/.test(r.output)) return t.skip('python3 is not installed');
    assert.match(r.output, /MemoryError/);
    const fits = await run(
      checkout,
      'python3 -c "b = bytearray(16 * 1024 * 1024); print(\'allocated\')"',
      { limits: { ...TEST_LIMITS, memoryMb: 64 } },
    );
    assert.equal(fits.output, 'allocated\n');
  });

  test('memory: processes each under the bound, over it together, are stopped and the run says so; a run beside it and this process go on', async (t) => {
    if (!sandbox.available || sandbox.memoryLimit !== 'cgroup') {
      const why = "no memory cgroup here: the run's memory is watched (the next test)";
      console.log(`# memory-cgroup test skipped: ${why}`);
      return t.skip(why);
    }
    await overrunStoppedBesideGoesOn((command, extra) => run(checkout, command, extra));
  });

  test('memory without a memory cgroup of the run (a container): the watch of its processes stops them over the bound together; a run beside it goes on', async (t) => {
    const { ready } = await probe(undefined);
    if (ready === null) return t.skip(String(skip));
    // As a worker where no memory group can be made: the probe found none.
    const watched: Ready = { ...ready, cgroups: { ...ready.cgroups, memory: null } };
    await overrunStoppedBesideGoesOn((command, extra) =>
      execute(watched, {
        checkout,
        cwd: checkout,
        command,
        network: 'none',
        signal: new AbortController().signal,
        ...extra,
        limits: extra.limits ?? TEST_LIMITS,
      }),
    );
  });

  test('memory without a memory cgroup: shared memory (a memfd mapped shared, which RLIMIT_DATA does not bound) is watched too', async (t) => {
    const { ready } = await probe(undefined);
    if (ready === null) return t.skip(String(skip));
    const watched: Ready = { ...ready, cgroups: { ...ready.cgroups, memory: null } };
    // 96 MB in a memfd, written a megabyte at a time: no private allocation near the bound.
    const attack =
      "import mmap, os, time\nfd = os.memfd_create('hoard')\nos.ftruncate(fd, 96 << 20)\n" +
      "m = mmap.mmap(fd, 96 << 20)\nfor i in range(96): m.write(b'a' * (1 << 20))\n" +
      "print('hoarded', flush=True)\ntime.sleep(15)\nprint('survived')";
    const r = await execute(watched, {
      checkout,
      cwd: checkout,
      command: `python3 -c "${attack}"`,
      network: 'none',
      signal: new AbortController().signal,
      limits: { ...TEST_LIMITS, memoryMb: 64 },
    });
    if (/python3: not found/.test(r.output)) return t.skip('python3 is not installed');
    assert.deepEqual(r.memoryExceeded, { limitMb: 64 }, r.output);
    assert.equal(r.signal, 'SIGKILL');
    assert.doesNotMatch(r.output, /survived/);
  });

  test('the run is the first choice of an OOM killer beyond its own group, before Errand', async () => {
    const own = await readFile('/proc/self/oom_score_adj', 'utf8');
    const r = await run(
      checkout,
      'cat /proc/self/oom_score_adj; echo -1000 2>/dev/null > /proc/self/oom_score_adj; cat /proc/self/oom_score_adj',
    );
    // Lowering it (below 0 at all) takes CAP_SYS_RESOURCE, which the command does not have.
    assert.equal(r.output, '1000\n1000\n');
    assert.equal(await readFile('/proc/self/oom_score_adj', 'utf8'), own);
  });

  test('CPU time: a busy loop is killed at the CPU limit', async () => {
    const started = Date.now();
    const r = await run(checkout, 'while :; do :; done', {
      limits: { ...TEST_LIMITS, cpuSeconds: 1, timeoutSeconds: 30 },
    });
    assert.equal(r.timedOut, false);
    // SIGXCPU (24) ends the shell: the exit status is 128 + 24.
    assert.equal(r.exitCode, 152);
    assert.ok(Date.now() - started < 10_000);
  });
});

describe('output', { skip }, () => {
  test('stdout and stderr interleave in arrival order', async () => {
    const r = await run(checkout, 'echo one; echo two >&2; echo three; echo four >&2; exit 3');
    assert.equal(r.exitCode, 3);
    assert.equal(r.output, 'one\ntwo\nthree\nfour\n');
    assert.equal(r.outputTruncated, false);
  });

  test('over the cap: head and tail kept with a note of what was cut', async () => {
    const r = await run(
      checkout,
      'echo FIRST; i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done; echo LAST',
      { outputCap: 1000 },
    );
    assert.equal(r.outputTruncated, true);
    assert.ok(r.output.startsWith('FIRST\nline 0\nline 1\n'));
    assert.ok(r.output.endsWith('line 19999\nLAST\n'));
    const total =
      'FIRST\n'.length +
      'LAST\n'.length +
      Array.from({ length: 20000 }, (_, i) => `line ${i}\n`.length).reduce((a, b) => a + b, 0);
    const cut = total - 1000;
    assert.ok(r.output.includes(`\n[… ${cut.toLocaleString('en-US')} characters cut …]\n`));
    assert.equal(
      r.output.length,
      1000 + `\n[… ${cut.toLocaleString('en-US')} characters cut …]\n`.length,
    );
  });

  test('a flood of output is read without holding it: 200 MB through a 30,000 cap', async () => {
    const before = process.memoryUsage().rss;
    const r = await run(checkout, 'head -c 200M /dev/zero | tr "\\0" x; echo; echo END');
    assert.equal(r.outputTruncated, true);
    assert.ok(r.output.endsWith('\nEND\n'));
    assert.match(r.output, /\[… 209,685,\d{3} characters cut …\]/);
    assert.ok(process.memoryUsage().rss - before < 100 * 1024 * 1024);
  });
});

describe('as an ordinary user', { skip }, () => {
  // Root is exempt from RLIMIT_NPROC; a developer's machine is not root. Runs the same checks
  // in a child process as nobody, with a copy of this node (its own may sit under /root).
  test('nobody: status, a writable checkout, the process limit, nothing left behind, the setup network', async (t) => {
    if (process.getuid?.() !== 0) return t.skip('needs root to become nobody');
    const setpriv = await access('/usr/bin/setpriv').then(
      () => '/usr/bin/setpriv',
      () => null,
    );
    if (setpriv === null) return t.skip('setpriv not installed');
    const dir = await makeTempDir('sandbox-nobody');
    try {
      const node = join(dir, 'node');
      await copyFile(process.execPath, node);
      await mkdir(join(dir, 'checkout', '.git'), { recursive: true });
      await execFileP('chown', ['-R', '65534:65534', dir]);
      await chmod(dir, 0o755);
      // The clone may sit in a directory nobody cannot enter (/root): in a mount namespace of
      // its own, the child sees the clone at a path of the temporary directory instead.
      const repo = new URL('../..', import.meta.url).pathname;
      const reachable = await readableByOthers(repo);
      if (!reachable) return t.skip(`nobody cannot read this clone's files (${repo})`);
      const view = join(dir, 'errand');
      await mkdir(view);
      const { stdout } = await execFileP(
        'unshare',
        [
          '--mount',
          '--propagation=private',
          'sh',
          '-c',
          'mount --bind "$1" "$2" && shift 2 && exec "$@"',
          'sh',
          repo,
          view,
          setpriv,
          '--reuid=65534',
          '--regid=65534',
          '--clear-groups',
          node,
          join(view, 'test/sandbox/as-user.ts'),
          join(dir, 'checkout'),
        ],
        { env: { PATH: '/usr/bin:/bin', HOME: dir }, cwd: dir, timeout: 120_000 },
      );
      const report = JSON.parse(stdout) as Record<string, unknown>;
      assert.deepEqual(report, {
        // Outbound network with a default route, the host's loopback (PostgreSQL) unreachable;
        // where pasta does not work for root either, not for nobody.
        network: skipNetwork
          ? 'unavailable'
          : '65534\ndefault-route\ndev-null-writable\nown-loopback\nno-capabilities\nflush-refused\nsecret-read\n',
        available: true,
        processLimit: 'rlimit',
        // Not root: no memory cgroup of its own (the start-up line says so); its memory watched.
        memoryLimit: 'watch',
        uid: 'uid=65534',
        wrote: 'written\n',
        forkBombStopped: true,
        forkBombAlive: true,
        leftBehind: [],
        gitConfigRefused: true,
      });
    } finally {
      await removeDir(dir);
    }
  });
});

/**
 * Two runs of a 64 MB bound, through `runIn`: one holds 24 MB (under its bound) while six
 * processes of the other, each under the bound, together are not: the second is stopped and
 * says so, the first ends as it would have, and this process can still start one.
 */
async function overrunStoppedBesideGoesOn(
  runIn: (
    command: string,
    extra: Partial<Omit<SandboxRun, 'checkout' | 'command'>>,
  ) => Promise<SandboxResult>,
): Promise<void> {
  const limits = { ...TEST_LIMITS, memoryMb: 64 };
  // 24 MB each, all held at once: one fits the run's 64 MB (and each process's RLIMIT_DATA),
  // six do not. Each holds its memory until the test lets it go (a file in the checkout).
  const hog = (seconds: string) =>
    `$| = 1; $x = "a" x (24 << 20); print "allocated\\n"; ` +
    `select(undef, undef, undef, 0.05) until -e ".release"; print "alive\\n"; sleep ${seconds}`;
  const hogs = (n: number, seconds: string) =>
    `for i in $(seq ${n}); do perl -e '${hog(seconds)}' & done; wait; echo all-finished`;
  // One run holds its 24 MB (under its bound) while the other overruns its own.
  let allocated = () => {};
  const holding = new Promise<void>((resolve) => {
    allocated = resolve;
  });
  const one = runIn(hogs(1, '0'), {
    limits,
    onStdoutLine: (line) => {
      if (line === 'allocated') allocated();
    },
  });
  const first = await Promise.race([
    holding.then(() => 'allocated'),
    one.then(
      () => 'ended',
      () => 'ended',
    ),
  ]);
  assert.equal(first, 'allocated', 'the run beside it ended before it allocated');
  const seconds = marker();
  const six = await runIn(hogs(6, seconds), { limits });
  assert.deepEqual(six.memoryExceeded, { limitMb: 64 });
  assert.equal(six.exitCode, null);
  assert.equal(six.signal, 'SIGKILL');
  assert.doesNotMatch(six.output, /all-finished/);
  assert.match(
    six.output,
    /\[errand: the command ran out of its 64 MB of memory; it was stopped\]\n$/,
  );
  assert.deepEqual(await hostProcesses('perl', '-e', hog(seconds)), []);
  // The run beside it kept its memory, and ends as it would have.
  await writeFile(join(checkout, '.release'), '');
  const beside = await one;
  await rm(join(checkout, '.release'));
  assert.equal(beside.output, 'allocated\nalive\nall-finished\n');
  assert.equal(beside.memoryExceeded, undefined);
  assert.equal(beside.exitCode, 0);
  // This machine stays usable: this process can still start one.
  await execFileP('true');
}
