// deploy/compose.yaml run with podman-compose, as one machine runs Errand on PostgreSQL: its
// own PostgreSQL container (in CI an image made with mmdebstrap from Debian's postgresql
// package, chosen by ERRAND_POSTGRES_IMAGE) with an env file of its own, the migrations once,
// the engines step, the API with the first admin key from ERRAND_ADMIN_KEY, and workers under
// the shipped seccomp profile, every container on the host's network with loopback ports
// (compose.host-network.yaml: one worker per metrics port, so the second is `run` with its
// own). A worker's health check passes on its own port with nothing else there; the engine the
// engines step found in the shared volume is seen by both workers; a job whose model runs a
// command in a worker's sandbox completes.
//
// The engines volume is a directory seeded with Codex from CI's engines cache (ERRAND_ENGINES_DIR,
// .ci/run), given to the image's user and bind-mounted through ERRAND_ENGINES_VOLUME: the step's
// `errand engine install` finds Codex installed there and downloads nothing. What this shows is
// the step, the one volume and the workers' and API's use of it; a fresh install from npm (400
// MB) is src/engines/catalog.test.ts's, as are installs at once into one directory.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { CATALOG } from '../../src/engines/catalog.ts';
import { mintKey } from '../../src/keys/format.ts';
import { http, waitFor } from '../support/service.ts';
import {
  BUILD_TIMEOUT_MS,
  buildImage,
  composeEnv,
  composeSkip,
  containerLogs,
  freePort,
  type JobFixture,
  podman,
  postgresImage,
  ROOT,
  run,
  runJobWithCommand,
  seconds,
  startJobFixture,
  untilReady,
} from './support.ts';

const enginesCache = process.env.ERRAND_ENGINES_DIR;
const skip =
  composeSkip() ||
  (enginesCache === undefined
    ? 'ERRAND_ENGINES_DIR is not set: the engines volume is the cache of installed engines (.ci/run sets it)'
    : false);
if (skip) process.stdout.write(`# compose tests skipped: ${skip}\n`);

/** The worker service as compose.yaml writes it. */
async function workerService(): Promise<{
  healthcheck: { test: string[] };
  security_opt: string[];
  command: string[];
}> {
  const compose = parse(await readFile(path.join(ROOT, 'deploy/compose.yaml'), 'utf8'), {
    merge: true,
  }) as { services: { worker: Awaited<ReturnType<typeof workerService>> } };
  return compose.services.worker;
}

/** The worker's health check as compose.yaml writes it: the shell command after CMD-SHELL. */
async function workerHealthCommand(): Promise<string> {
  const [kind, command] = (await workerService()).healthcheck.test;
  assert.equal(kind, 'CMD-SHELL');
  return command ?? '';
}

describe('the compose file', { skip }, () => {
  const project = `errand-test-${process.pid}`;
  const adminKey = mintKey();
  let fixture: JobFixture;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let apiPort: number;
  let metricsPorts: [number, number];
  let image: string;
  let envFile: string;
  let engines: string;
  const worker1 = `${project}_worker_1`;
  const worker2 = `${project}_worker_2`;

  const compose = (...args: string[]) =>
    run(
      'podman-compose',
      [
        `--project-name=${project}`,
        '--file=deploy/compose.yaml',
        '--file=deploy/compose.host-network.yaml',
        ...args,
      ],
      { env, timeoutMs: 180_000 },
    );
  /** The project's containers, by name, with their state. */
  async function containers(): Promise<Map<string, { running: boolean; exitCode: number }>> {
    const out = await podman(
      'ps',
      '--all',
      `--filter=label=io.podman.compose.project=${project}`,
      '--format=json',
    );
    const list = JSON.parse(out || '[]') as Array<{
      Names: string[];
      State: string;
      ExitCode: number;
    }>;
    return new Map(
      list.map((c) => [c.Names[0] ?? '', { running: c.State === 'running', exitCode: c.ExitCode }]),
    );
  }
  /** Waits for a one-shot service's container to end; returns its exit code. */
  const ended = async (name: string) =>
    (
      await waitFor(
        `${name} to end`,
        async () => {
          const c = (await containers()).get(name);
          return c && !c.running ? c : undefined;
        },
        120_000,
      )
    ).exitCode;
  const started = (worker: string) =>
    waitFor(
      `${worker} to start`,
      async () => {
        const text = await containerLogs(worker);
        return text.includes('"msg":"errand started"') ? text : undefined;
      },
      120_000,
    );

  before(
    async () => {
      const [built, postgres] = await Promise.all([buildImage(), postgresImage()]);
      image = built.image;
      fixture = await startJobFixture();
      dir = await mkdtemp(path.join(tmpdir(), 'errand-compose-'));
      apiPort = await freePort();
      metricsPorts = [await freePort(), await freePort()];
      const postgresPort = await freePort();
      // A copy (the cache's files stay root's): the image's user owns the engines volume.
      engines = path.join(dir, 'engines');
      await run('mkdir', [engines]);
      await run('cp', ['-a', path.join(enginesCache ?? '', 'codex'), engines], {
        timeoutMs: 300_000,
      });
      await run('chown', ['-R', '10001:10001', engines]);
      // Errand's env file: the database, the public URL, the secret key, the first admin key,
      // the engines, the model; a repository over plain http on loopback needs local
      // repositories allowed. PostgreSQL's: its password only.
      const password = `pw-${process.pid}-compose`;
      envFile = path.join(dir, 'errand.env');
      const postgresEnvFile = path.join(dir, 'errand-postgres.env');
      const settings: Record<string, string> = {
        DATABASE_URL: `postgres://errand:${password}@127.0.0.1:${postgresPort}/errand`,
        ERRAND_PUBLIC_URL: `http://127.0.0.1:${apiPort}`,
        ERRAND_SECRET_KEY: 'compose-test-secret-key-0123456789',
        ERRAND_ADMIN_KEY: adminKey,
        ERRAND_ENGINES: 'codex',
        ERRAND_ALLOW_LOCAL_REPOS: 'true',
        ...fixture.modelEnv,
      };
      const lines = (vars: Record<string, string>) =>
        Object.entries(vars)
          .map(([k, v]) => `${k}=${v}\n`)
          .join('');
      await writeFile(envFile, lines(settings), { mode: 0o600 });
      await writeFile(postgresEnvFile, lines({ POSTGRES_PASSWORD: password }), { mode: 0o600 });
      env = composeEnv({
        ERRAND_IMAGE: image,
        ERRAND_POSTGRES_IMAGE: postgres,
        ERRAND_ENV_FILE: envFile,
        ERRAND_POSTGRES_ENV_FILE: postgresEnvFile,
        ERRAND_ENGINES_VOLUME: engines,
        ERRAND_PORT: String(apiPort),
        ERRAND_POSTGRES_PORT: String(postgresPort),
        ERRAND_WORKER_METRICS_PORT: String(metricsPorts[0]),
      });
    },
    { timeout: BUILD_TIMEOUT_MS },
  );
  after(async () => {
    if (env) {
      // `down --volumes` removes the compose file's volumes; the anonymous ones (the image's
      // /var/lib/errand of the workers and the one-shot steps) go after it, and the second
      // worker, which `run` made, with them.
      const anonymous: string[] = [];
      for (const name of (await containers().catch(() => new Map())).keys()) {
        const mounts = await podman(
          'inspect',
          '--format={{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}',
          name,
        ).catch(() => '');
        anonymous.push(...mounts.split(' ').filter((v) => v && !v.startsWith(`${project}_`)));
      }
      await podman('rm', '--force', '--time=5', worker2).catch(() => '');
      await compose('down', '--volumes').catch(() => {});
      for (const volume of anonymous)
        await podman('volume', 'rm', '--force', volume).catch(() => {});
    }
    await fixture?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('PostgreSQL, the migrations and the engines once, the API and a healthy worker on its own port', async (t) => {
    const startedAt = performance.now();
    await compose('up', '--detach');
    const base = `http://127.0.0.1:${apiPort}`;
    await untilReady(base);
    const readyMs = performance.now() - startedAt;

    const all = await containers();
    assert.deepEqual(
      [...all.keys()].filter((n) => n.startsWith(`${project}_worker_`)),
      [worker1],
    );
    assert.ok(all.get(`${project}_postgres_1`)?.running, 'postgres runs');
    assert.ok(all.get(`${project}_api_1`)?.running, 'the API runs');
    // The one-shot steps ran and ended well.
    assert.equal(await ended(`${project}_migrate_1`), 0);
    assert.match(await containerLogs(`${project}_migrate_1`), /applied 0001_init/);
    assert.equal(await ended(`${project}_engines_1`), 0);
    const codexDir = `/var/lib/errand-engines/codex/${CATALOG.codex.version}`;
    assert.match(
      await containerLogs(`${project}_engines_1`),
      new RegExp(`^codex ${CATALOG.codex.version}: ${codexDir}/`, 'm'),
    );

    // PostgreSQL's container has its password and none of Errand's settings or secrets.
    const postgresEnv = (
      await podman(
        'inspect',
        '--format={{range .Config.Env}}{{println .}}{{end}}',
        `${project}_postgres_1`,
      )
    ).split('\n');
    assert.ok(postgresEnv.some((v) => v.startsWith('POSTGRES_PASSWORD=')));
    for (const name of ['OPENAI_API_KEY', 'ERRAND_SECRET_KEY', 'ERRAND_ADMIN_KEY', 'DATABASE_URL'])
      assert.ok(!postgresEnv.some((v) => v.startsWith(`${name}=`)), `postgres has ${name}`);

    const log = await started(worker1);
    assert.match(log, /"msg":"sandbox available"/, log);
    assert.match(log, /"database":"postgres"/);
    assert.ok(
      log.includes(`"metrics":"http://127.0.0.1:${metricsPorts[0]}/metrics"`),
      `the worker's listener is not on its port: ${log}`,
    );
    // Its health check, run by podman as the compose file defines it, passes: it asks the
    // worker's own port, where no other process of the project listens.
    await podman('healthcheck', 'run', worker1);
    assert.equal(await podman('inspect', '--format={{.State.Health.Status}}', worker1), 'healthy');
    const res = await fetch(`http://127.0.0.1:${metricsPorts[0]}/healthz`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { ok: true });
    // The same check against a port nothing listens on fails: it is not a check that passes
    // whatever the worker does.
    const closed = await freePort();
    await assert.rejects(
      podman(
        'exec',
        `--env=ERRAND_METRICS_PORT=${closed}`,
        worker1,
        'sh',
        '-c',
        await workerHealthCommand(),
      ),
    );
    await podman('healthcheck', 'run', `${project}_api_1`);

    // The first admin key is the operator's: it opens the admin API, and it was neither
    // printed nor written to the API's volume.
    const keys = await http(base, 'GET', '/v2/admin/keys', { key: adminKey });
    assert.equal(keys.status, 200, keys.text);
    const apiLog = await containerLogs(`${project}_api_1`);
    assert.ok(!apiLog.includes(adminKey.slice(7)), 'the admin key reached the log');
    await assert.rejects(
      podman('exec', `${project}_api_1`, 'test', '-e', '/var/lib/errand/admin.key'),
    );
    assert.match(apiLog, /"database":"postgres","worker":false/);
    t.diagnostic(`up to ready ${seconds(readyMs)}`);
  });

  test('a second worker with its own port: both see the engine of the shared volume; a job completes', async () => {
    // `podman-compose run worker` would make it, but podman 4.3 cannot start a container that
    // requires the exited one-shot steps (--requires): so podman runs it as compose.yaml and
    // the host-network variant describe the worker, with a metrics port of its own.
    const service = await workerService();
    await podman(
      'run',
      '--detach',
      `--name=${worker2}`,
      `--label=io.podman.compose.project=${project}`,
      '--network=host',
      ...service.security_opt.map((o) => `--security-opt=${o.replace('=./', `=${ROOT}/deploy/`)}`),
      '--device=/dev/net/tun',
      `--env-file=${envFile}`,
      '--env=ERRAND_ENGINES_DIR=/var/lib/errand-engines',
      '--env=ERRAND_METRICS_HOST=127.0.0.1',
      `--env=ERRAND_METRICS_PORT=${metricsPorts[1]}`,
      `--volume=${engines}:/var/lib/errand-engines:ro`,
      `--health-cmd=${await workerHealthCommand()}`,
      image,
      ...service.command,
    );
    await started(worker2);
    await podman('healthcheck', 'run', worker2);
    const codexDir = `/var/lib/errand-engines/codex/${CATALOG.codex.version}`;
    for (const worker of [worker1, worker2]) {
      const list = JSON.parse(
        await podman('exec', worker, 'errand', 'engine', 'list', '--json'),
      ) as Array<{ name: string; installed: boolean; dir: string }>;
      const codex = list.find((e) => e.name === 'codex');
      assert.deepEqual([codex?.installed, codex?.dir], [true, codexDir], worker);
      // Mounted read-only: a job's code cannot change the engine the next job runs.
      await assert.rejects(podman('exec', worker, 'touch', `${codexDir}/written-by-a-worker`));
    }

    const base = `http://127.0.0.1:${apiPort}`;
    // The API, which mounts the same volume, accepts a project on the engine.
    const onCodex = await http(base, 'POST', '/v2/admin/projects', {
      key: adminKey,
      body: { name: 'on codex', repository: fixture.repository, ref: 'main', engine: 'codex' },
    });
    assert.equal(onCodex.status, 201, onCodex.text);

    await runJobWithCommand(base, adminKey, fixture, 'compose');
    // A worker ran it: the API runs no turns.
    const turnLogs = await Promise.all([worker1, worker2].map((w) => containerLogs(w)));
    assert.equal(turnLogs.filter((l) => l.includes('"msg":"turn ended"')).length, 1);
    assert.ok(!(await containerLogs(`${project}_api_1`)).includes('"msg":"turn ended"'));
  });
});
