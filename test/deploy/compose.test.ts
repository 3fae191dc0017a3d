// deploy/compose.yaml run with podman-compose, as one machine runs Errand on PostgreSQL: its
// own PostgreSQL container (in CI an image made with mmdebstrap from Debian's postgresql
// package, chosen by ERRAND_POSTGRES_IMAGE), the migrations once, the API and two workers,
// every container on the host's network with loopback ports (compose.host-network.yaml).
// A job whose model runs a command in a worker's sandbox completes.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { waitFor } from '../support/service.ts';
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
  run,
  runJobWithCommand,
  seconds,
  startJobFixture,
  untilReady,
} from './support.ts';

const skip = composeSkip();
if (skip) process.stdout.write(`# compose tests skipped: ${skip}\n`);

describe('the compose file', { skip }, () => {
  const project = `errand-test-${process.pid}`;
  let fixture: JobFixture;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let apiPort: number;

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

  before(
    async () => {
      const [{ image }, postgres] = await Promise.all([buildImage(), postgresImage()]);
      fixture = await startJobFixture();
      dir = await mkdtemp(path.join(tmpdir(), 'errand-compose-'));
      apiPort = await freePort();
      const postgresPort = await freePort();
      // The env file the compose file reads: the database, the public URL, the secret key,
      // the model; a repository over plain http on loopback needs local repositories allowed.
      const password = `pw-${process.pid}-compose`;
      const envFile = path.join(dir, 'errand.env');
      const settings: Record<string, string> = {
        POSTGRES_PASSWORD: password,
        DATABASE_URL: `postgres://errand:${password}@127.0.0.1:${postgresPort}/errand`,
        ERRAND_PUBLIC_URL: `http://127.0.0.1:${apiPort}`,
        ERRAND_SECRET_KEY: 'compose-test-secret-key-0123456789',
        ERRAND_ALLOW_LOCAL_REPOS: 'true',
        ...fixture.modelEnv,
      };
      await writeFile(
        envFile,
        Object.entries(settings)
          .map(([k, v]) => `${k}=${v}\n`)
          .join(''),
        { mode: 0o600 },
      );
      env = composeEnv({
        ERRAND_IMAGE: image,
        ERRAND_POSTGRES_IMAGE: postgres,
        ERRAND_ENV_FILE: envFile,
        ERRAND_WORKERS: '2',
        ERRAND_PORT: String(apiPort),
        ERRAND_POSTGRES_PORT: String(postgresPort),
      });
    },
    { timeout: BUILD_TIMEOUT_MS },
  );
  after(async () => {
    if (env) {
      // `down --volumes` removes the compose file's volumes; the anonymous ones (the image's
      // /var/lib/errand of the workers and the migration) go after it.
      const anonymous: string[] = [];
      for (const name of (await containers().catch(() => new Map())).keys()) {
        const mounts = await podman(
          'inspect',
          '--format={{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}',
          name,
        ).catch(() => '');
        anonymous.push(...mounts.split(' ').filter((v) => v && !v.startsWith(`${project}_`)));
      }
      await compose('down', '--volumes').catch(() => {});
      for (const volume of anonymous)
        await podman('volume', 'rm', '--force', volume).catch(() => {});
    }
    await fixture?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('PostgreSQL, the migrations once, the API and two workers: a job with a command in the sandbox completes', async (t) => {
    const started = performance.now();
    await compose('up', '--detach');
    const base = `http://127.0.0.1:${apiPort}`;
    await untilReady(base);
    const readyMs = performance.now() - started;

    const all = await containers();
    const workers = [...all.keys()].filter((n) => n.startsWith(`${project}_worker_`)).sort();
    assert.deepEqual(workers, [`${project}_worker_1`, `${project}_worker_2`]);
    assert.ok(all.get(`${project}_postgres_1`)?.running, 'postgres runs');
    assert.ok(all.get(`${project}_api_1`)?.running, 'the API runs');
    // The one-shot migration ran and ended well.
    await waitFor('the migrations to end', async () => {
      const migrate = (await containers()).get(`${project}_migrate_1`);
      return migrate && !migrate.running ? migrate : undefined;
    });
    assert.equal((await containers()).get(`${project}_migrate_1`)?.exitCode, 0);
    assert.match(await containerLogs(`${project}_migrate_1`), /applied 0001_init/);
    for (const worker of workers) {
      const log = await waitFor(`${worker} to start`, async () => {
        const text = await containerLogs(worker);
        return text.includes('"msg":"errand started"') ? text : undefined;
      });
      assert.match(log, /"msg":"sandbox available"/, log);
      assert.match(log, /"database":"postgres"/);
    }
    const apiLog = await containerLogs(`${project}_api_1`);
    assert.match(apiLog, /"database":"postgres","worker":false/);

    const adminKey = await podman('exec', `${project}_api_1`, 'cat', '/var/lib/errand/admin.key');
    await runJobWithCommand(base, adminKey, fixture, 'compose');
    // A worker ran it: the API runs no turns.
    const turnLogs = await Promise.all(workers.map((w) => containerLogs(w)));
    assert.equal(turnLogs.filter((l) => l.includes('"msg":"turn ended"')).length, 1);
    assert.ok(!apiLog.includes('"msg":"turn ended"'));
    t.diagnostic(`up to ready ${seconds(readyMs)}`);
  });
});
