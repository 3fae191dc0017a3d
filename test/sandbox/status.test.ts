// Whether the sandbox can run, and the start-up lines that say so: bwrap missing from PATH
// makes it unavailable with the reason and the fix, and `errand serve` logs that once; pasta or
// nft missing leaves setup commands without network; no memory cgroup is said too. The metric
// errand_sandbox_available says it with the reason (errand_sandbox_run_bounds whether each run
// gets control groups of its own), and ERRAND_REQUIRE_SANDBOX=true makes a worker without the
// sandbox refuse to start.
import assert from 'node:assert/strict';
import { mkdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { createLogger } from '../../src/log.ts';
import { reportSandboxStatus } from '../../src/sandbox/report.ts';
import { checkSandbox } from '../../src/sandbox/sandbox.ts';
import type { SandboxStatus } from '../../src/sandbox/types.ts';
import { makeTempDir, removeDir } from '../support/git.ts';
import { captureOutput, killStrays, runErrand, startServe } from '../support/process.ts';
import { sandbox, skip } from './support.ts';

const METRICS_TOKEN = 'sandbox-status-metrics-token';

/** The service's metrics, as Prometheus scrapes them. */
async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`, {
    headers: { authorization: `Bearer ${METRICS_TOKEN}` },
  });
  assert.equal(res.status, 200);
  return res.text();
}

let root: string;
before(async () => {
  root = await makeTempDir('sandbox-status');
});
after(async () => {
  killStrays();
  await removeDir(root);
});

function logLines(fn: (log: ReturnType<typeof createLogger>) => void): Record<string, unknown>[] {
  let text = '';
  const out = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  fn(createLogger('info', out));
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('sandbox status', () => {
  test('bwrap absent from PATH: unavailable, saying why and how to install it', async () => {
    const status = await checkSandbox(join(root, 'no-such-dir'));
    assert.deepEqual(status, {
      available: false,
      reason: 'bwrap not found on PATH',
      howToFix:
        'install the bubblewrap package (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)',
    });
  });

  test('bwrap found on the given PATH: available after a confined run', { skip }, async () => {
    assert.ok(sandbox.available);
    const bin = join(root, 'bin');
    await mkdir(bin);
    await symlink(sandbox.bwrap, join(bin, 'bwrap'));
    const status = await checkSandbox(bin);
    assert.ok(status.available);
    assert.equal(status.bwrap, join(bin, 'bwrap'));
    assert.match(status.version, /^\d+\.\d+\.\d+$/);
    // The sandbox works without pasta; only setup commands' network is missing, and says so.
    assert.deepEqual(status.network, {
      available: false,
      reason: 'pasta not found on PATH',
      howToFix:
        'install the passt package, which provides pasta (Debian/Ubuntu: apt-get install passt; Fedora: dnf install passt)',
    });
  });

  test('nft absent: setup commands get no network at all, never an unfiltered one', {
    skip,
  }, async () => {
    assert.ok(sandbox.available);
    const bin = join(root, 'bin-without-nft');
    await mkdir(bin);
    await symlink(sandbox.bwrap, join(bin, 'bwrap'));
    await symlink(
      sandbox.network.available ? sandbox.network.pasta : '/usr/bin/pasta',
      join(bin, 'pasta'),
    );
    const status = await checkSandbox(bin);
    assert.ok(status.available);
    assert.deepEqual(status.network, {
      available: false,
      reason: 'nft not found on PATH',
      howToFix:
        'install the nftables package, which provides nft (Debian/Ubuntu: apt-get install nftables; Fedora: dnf install nftables)',
    });
  });

  test('the start-up line: a warning with the reason and the fix, or the version', () => {
    const unavailable: SandboxStatus = {
      available: false,
      reason: 'bwrap not found on PATH',
      howToFix: 'install the bubblewrap package',
    };
    const [warn, ...rest] = logLines((log) => reportSandboxStatus(log, unavailable));
    assert.deepEqual(rest, []);
    assert.equal(warn?.level, 40);
    assert.equal(warn?.msg, 'sandbox unavailable: the agent runs without its run_command tool');
    assert.equal(warn?.reason, 'bwrap not found on PATH');
    assert.equal(warn?.howToFix, 'install the bubblewrap package');

    const available: SandboxStatus = {
      available: true,
      bwrap: '/usr/bin/bwrap',
      version: '0.8.0',
      processLimit: 'rlimit',
      memoryLimit: 'cgroup',
      network: { available: true, pasta: '/usr/bin/pasta' },
    };
    const [info, ...more] = logLines((log) => reportSandboxStatus(log, available));
    assert.deepEqual(more, []);
    assert.equal(info?.level, 30);
    assert.equal(info?.msg, 'sandbox available');
    assert.equal(info?.version, '0.8.0');

    const withoutNetwork: SandboxStatus = {
      ...available,
      network: { available: false, reason: 'pasta not found on PATH', howToFix: 'install passt' },
    };
    const [first, second, ...others] = logLines((log) => reportSandboxStatus(log, withoutNetwork));
    assert.deepEqual(others, []);
    assert.equal(first?.msg, 'sandbox available');
    assert.equal(second?.level, 40);
    assert.equal(
      second?.msg,
      'setup network unavailable: setup commands of projects whose network.setup is open fail',
    );
    assert.equal(second?.reason, 'pasta not found on PATH');
    assert.equal(second?.howToFix, 'install passt');

    const watched: SandboxStatus = { ...available, memoryLimit: 'watch' };
    const [line, memory, ...rest2] = logLines((log) => reportSandboxStatus(log, watched));
    assert.deepEqual(rest2, []);
    assert.equal(line?.msg, 'sandbox available');
    assert.equal(memory?.level, 40);
    assert.equal(
      memory?.msg,
      "sandbox without a memory cgroup: a run's memory is watched, every 200 ms, and a fast allocation can outrun the watch",
    );
    assert.equal(memory?.memoryLimit, 'watch');
    assert.match(String(memory?.howToFix), /as root where the memory controller is writable/);
  });

  test('errand serve without bwrap on PATH logs the one line at start', async () => {
    const server = await startServe(join(root, 'data'), [], {
      ERRAND_LOG_LEVEL: 'info',
      PATH: join(root, 'no-such-dir'),
      ERRAND_METRICS_TOKEN: METRICS_TOKEN,
    });
    try {
      const lines = server
        .stderr()
        .split('\n')
        // Lines about the sandbox, not lines that name a path with "sandbox" in it.
        .filter((l) => l.includes('"msg":"sandbox'));
      assert.equal(lines.length, 1, server.stderr());
      const line = JSON.parse(lines[0] ?? '{}') as Record<string, unknown>;
      assert.equal(line.msg, 'sandbox unavailable: the agent runs without its run_command tool');
      assert.equal(line.reason, 'bwrap not found on PATH');
      assert.match(String(line.howToFix), /apt-get install bubblewrap/);
      // And in the metrics, with the reason.
      const metrics = await scrape(server.url);
      assert.match(metrics, /^errand_sandbox_available\{reason="bwrap not found on PATH"\} 0$/m);
      assert.match(metrics, /^errand_sandbox_run_bounds\{controller="memory"\} 0$/m);
    } finally {
      await server.stop();
    }
  });

  test('ERRAND_REQUIRE_SANDBOX=true: a worker without the sandbox refuses to start, saying why', async () => {
    const child = runErrand(['serve', '--port', '0', '--data-dir', join(root, 'strict')], {
      PATH: join(root, 'no-such-dir'),
      ERRAND_REQUIRE_SANDBOX: 'true',
    });
    const run = await captureOutput(child).done;
    assert.equal(run.code, 1, run.stderr);
    assert.match(
      run.stderr,
      /errand: the sandbox does not work here: bwrap not found on PATH; install the bubblewrap package .*ERRAND_REQUIRE_SANDBOX=true keeps a worker from running without it/,
    );
    assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
    assert.doesNotMatch(run.stdout, /errand listening/);
  });

  test('with the sandbox working, the metric says 1, and whether runs get control groups', {
    skip,
  }, async () => {
    assert.ok(sandbox.available);
    const server = await startServe(join(root, 'data-ok'), [], {
      ERRAND_REQUIRE_SANDBOX: 'true',
      ERRAND_METRICS_TOKEN: METRICS_TOKEN,
    });
    try {
      const metrics = await scrape(server.url);
      assert.match(metrics, /^errand_sandbox_available\{reason=""\} 1$/m);
      // As this process found them: 1 where a run gets its own group for the controller.
      const memory = sandbox.memoryLimit === 'cgroup' ? 1 : 0;
      const pids = sandbox.processLimit === 'cgroup' ? 1 : 0;
      assert.match(
        metrics,
        new RegExp(`^errand_sandbox_run_bounds\\{controller="memory"\\} ${memory}$`, 'm'),
      );
      assert.match(
        metrics,
        new RegExp(`^errand_sandbox_run_bounds\\{controller="pids"\\} ${pids}$`, 'm'),
      );
    } finally {
      await server.stop();
    }
  });
});
