// Errand's image (deploy/Containerfile), built as CI builds it: on a Debian base made with
// mmdebstrap, without a registry. Run with podman in the embedded mode on the host's network
// (a loopback port), it completes a job whose model runs a command in the sandbox, keeps its
// data across a restart, passes its health check, and runs with a read-only root. Without
// `--security-opt systempaths=unconfined` it starts all the same and says why the sandbox is
// unavailable and how to fix it. Prints the image's size and start times (docs/deploy.md).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { waitFor } from '../support/service.ts';
import {
  BUILD_TIMEOUT_MS,
  buildImage,
  containerLogs,
  containersSkip,
  freePort,
  imageSize,
  type JobFixture,
  mib,
  podman,
  runJobWithCommand,
  seconds,
  startJobFixture,
  untilReady,
} from './support.ts';

const skip = containersSkip();
if (skip) process.stdout.write(`# image tests skipped: ${skip}\n`);

describe('the container image', { skip }, () => {
  const prefix = `errand-test-${process.pid}`;
  const containers = new Set<string>();
  const volume = `${prefix}-data`;
  let image: string;
  let fixture: JobFixture;

  before(
    async () => {
      const built = await buildImage();
      image = built.image;
      process.stdout.write(`# image ${image} built (or found) in ${seconds(built.ms)}\n`);
      fixture = await startJobFixture();
    },
    { timeout: BUILD_TIMEOUT_MS },
  );
  after(async () => {
    for (const name of containers) await podman('rm', '--force', '--volumes', name).catch(() => {});
    await podman('volume', 'rm', '--force', volume).catch(() => {});
    await fixture?.close();
  });

  /** Starts the image detached on the host's network; resolves with the API's address. */
  async function start(
    name: string,
    options: string[],
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
      ...Object.entries(fixture.modelEnv).map(([k, v]) => `--env=${k}=${v}`),
      ...options,
      image,
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

  test('the embedded mode on a volume: a job with a command in the sandbox completes; a restart keeps everything', async (t) => {
    const name = `${prefix}-embedded`;
    // The sandbox mounts its own /proc; setup commands' network (pasta) needs a tap device.
    const unconfined = ['--security-opt=systempaths=unconfined', '--device=/dev/net/tun'];
    const volumeOpts = [`--volume=${volume}:/var/lib/errand`, '--read-only'];
    const first = await start(name, [...unconfined, ...volumeOpts]);
    const log = await startedLogs(name);
    assert.match(log, /"msg":"sandbox available"/, log);
    assert.doesNotMatch(log, /setup network unavailable/, log);
    assert.match(log, /"database":"embedded"/);

    // As the image's user, with the data directory on the volume, and the key there too.
    assert.equal(await podman('exec', name, 'id', '-u'), '10001');
    const adminKey = await podman('exec', name, 'cat', '/var/lib/errand/admin.key');
    assert.match(adminKey, /^errand_/);

    const { projectId, jobId } = await runJobWithCommand(first.base, adminKey, fixture, 'image');

    // The image's health check (GET /healthz from inside) passes.
    await podman('healthcheck', 'run', name);

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

  test('without systempaths=unconfined it starts, and says the sandbox is unavailable, why, and what to do', async () => {
    const name = `${prefix}-masked`;
    await start(name, []);
    const line = await waitFor('the sandbox line', async () =>
      (await logs(name)).split('\n').find((l) => l.includes('"msg":"sandbox unavailable')),
    );
    const entry = JSON.parse(line) as { reason: string; howToFix: string; msg: string };
    assert.equal(entry.msg, 'sandbox unavailable: the agent runs without its run_command tool');
    assert.match(entry.reason, /proc/);
    assert.match(entry.howToFix, /--security-opt systempaths=unconfined/);
    assert.match(entry.howToFix, /procMount/);
  });
});
