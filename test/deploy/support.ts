// What the deploy tests share: podman with this machine's settings, Errand's image built as CI
// builds it (deploy/ci/build-image.sh: one build for all the files, behind a lock, on podman's
// layer cache), the PostgreSQL image made from Debian's package, and a job run through a
// container's API against the scripted model and a git server, all on loopback.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  type FakeLlm,
  type RecordedRequest,
  reply,
  startFakeLlm,
  toolCalls,
} from '../support/fake-llm.ts';
import {
  type GitHttpServer,
  git,
  makeServedRepo,
  makeTempDir,
  removeDir,
  startGitHttpServer,
} from '../support/git.ts';
import { http, waitFor } from '../support/service.ts';

export const ROOT = path.resolve(new URL('../../', import.meta.url).pathname);

/** Podman's settings for these machines (runc, cgroupfs, no default ulimits), unless given. */
const env: NodeJS.ProcessEnv = {
  ...process.env,
  CONTAINERS_CONF: process.env.CONTAINERS_CONF ?? path.join(ROOT, 'deploy/ci/containers.conf'),
};

const execFileAsync = promisify(execFile);

/** Runs a command to its end; a non-zero exit rejects with what it printed. */
export async function run(
  file: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<string> {
  try {
    const { stdout } = await execFileAsync(file, args, {
      env: opts.env ?? env,
      cwd: ROOT,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      timeout: opts.timeoutMs ?? 120_000,
    });
    return stdout.trim();
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `${file} ${args.join(' ')} failed: ${e.message}\n${(e.stderr ?? '').slice(-4000)}`,
    );
  }
}

export const podman = (...args: string[]): Promise<string> => run('podman', args);

/** What a container printed, stdout and stderr (Errand's JSON log lines) together. */
export async function containerLogs(name: string): Promise<string> {
  const { stdout, stderr } = await execFileAsync('podman', ['logs', name], {
    env,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return `${stdout}${stderr}`;
}

/** The environment of podman-compose: podman's settings and the compose file's variables. */
export function composeEnv(vars: Record<string, string>): NodeJS.ProcessEnv {
  return { ...env, ...vars };
}

function onPath(tool: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;
}

/** Why the container tests cannot run here, or false. */
export function containersSkip(extraTools: string[] = []): string | false {
  if (process.platform !== 'linux' || process.getuid?.() !== 0)
    return 'needs root on Linux (podman as root, mmdebstrap in root mode); CI runs as root';
  const absent = ['podman', 'runc', 'mmdebstrap', 'flock', ...extraTools].filter(
    (tool) => !onPath(tool),
  );
  if (absent.length > 0)
    return `${absent.join(', ')} not installed (Debian: apt-get install podman runc mmdebstrap podman-compose; .ci/run installs them)`;
  return false;
}

/** Why the compose test cannot run here: podman-compose 1.0.6 or newer is needed too. */
export function composeSkip(): string | false {
  const skip = containersSkip(['podman-compose']);
  if (skip) return skip;
  const out = spawnSync('podman-compose', ['version'], { encoding: 'utf8', env });
  const version = /podman-compose version:? (\d+)\.(\d+)\.(\d+)/.exec(out.stdout ?? '');
  const [major, minor, patch] = (version?.slice(1) ?? ['0', '0', '0']).map(Number);
  const atLeast = (major ?? 0) * 1e6 + (minor ?? 0) * 1e3 + (patch ?? 0) >= 1_000_006;
  if (!atLeast)
    return `podman-compose ${version?.slice(1).join('.') ?? '(unknown version)'} is older than 1.0.6, which network_mode: host needs (Debian 12: bookworm-backports; .ci/run installs it)`;
  return false;
}

/** A build of the image can take minutes the first time (base, apt, npm ci); then seconds. */
export const BUILD_TIMEOUT_MS = 20 * 60_000;

/** Builds (or finds in the cache) Errand's image; returns its name and the time it took. */
export async function buildImage(): Promise<{ image: string; ms: number }> {
  const started = performance.now();
  const out = await run(path.join(ROOT, 'deploy/ci/build-image.sh'), [], {
    timeoutMs: BUILD_TIMEOUT_MS,
  });
  return { image: out.split('\n').at(-1) ?? '', ms: performance.now() - started };
}

/** Builds (or finds in the cache) the image's API-only target `api`; its name and the time it took. */
export async function buildApiImage(): Promise<{ image: string; ms: number }> {
  const started = performance.now();
  const out = await run(
    path.join(ROOT, 'deploy/ci/build-image.sh'),
    ['localhost/errand-api:ci', 'api'],
    { timeoutMs: BUILD_TIMEOUT_MS },
  );
  return { image: out.split('\n').at(-1) ?? '', ms: performance.now() - started };
}

/** The shipped seccomp profile (the runtime default plus what the sandbox needs). */
export const SECCOMP_PROFILE = path.join(ROOT, 'deploy/security/seccomp-errand.json');

/** What a container that runs turns needs for the sandbox, with no capabilities at all. */
export const SANDBOX_OPTIONS: readonly string[] = [
  `--security-opt=seccomp=${SECCOMP_PROFILE}`,
  // The sandbox mounts its own /proc; setup commands' network (pasta) needs a tap device.
  '--security-opt=systempaths=unconfined',
  '--device=/dev/net/tun',
  '--cap-drop=ALL',
];

/** The PostgreSQL image made with mmdebstrap from Debian's postgresql package. */
export async function postgresImage(): Promise<string> {
  const out = await run(path.join(ROOT, 'deploy/base/build.sh'), ['postgres'], {
    timeoutMs: BUILD_TIMEOUT_MS,
  });
  return out.split('\n').at(-1) ?? '';
}

/**
 * A PostgreSQL server of its own in a container (`name`) of the image postgresImage makes, on
 * the host's network listening on loopback only: what a container reaches over TCP whatever
 * server the tests run on (the embedded one of `npm test` listens on a Unix socket that a
 * container cannot open). Resolves with the URL of its database `errand` once it answers.
 */
export async function startPostgresContainer(name: string): Promise<{ databaseUrl: string }> {
  const image = await postgresImage();
  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  await podman(
    'run',
    '--detach',
    `--name=${name}`,
    '--network=host',
    `--env=POSTGRES_PASSWORD=${password}`,
    '--env=POSTGRES_USER=errand',
    `--env=PGPORT=${port}`,
    image,
    'postgres',
    '-c',
    'listen_addresses=127.0.0.1',
  );
  await waitFor(`PostgreSQL in ${name} to accept connections`, async () => {
    const ready = await podman(
      'exec',
      name,
      'pg_isready',
      '--host=127.0.0.1',
      `--port=${port}`,
      '--username=errand',
    ).then(
      () => true,
      () => undefined,
    );
    return ready;
  });
  return { databaseUrl: `postgres://errand:${password}@127.0.0.1:${port}/errand` };
}

/** A TCP port nothing listens on at this moment, on loopback. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  assert.ok(address !== null && typeof address === 'object');
  return address.port;
}

/** Waits until `base`/readyz answers 200; resolves with the milliseconds it took. */
export async function untilReady(base: string, timeoutMs = 120_000): Promise<number> {
  const started = performance.now();
  await waitFor(
    `${base}/readyz to answer 200`,
    async () => {
      const res = await fetch(`${base}/readyz`).catch(() => undefined);
      return res?.status === 200 ? true : undefined;
    },
    timeoutMs,
  );
  return performance.now() - started;
}

const OPENAI_KEY = 'sk-test-deploy-4f1e9a7c2b';

/** The scripted model and a git server with one repository, on loopback. */
export interface JobFixture {
  llm: FakeLlm;
  /** The model's settings for an Errand process. */
  modelEnv: Record<string, string>;
  /** The repository's URL on the git server (plain http to loopback). */
  repository: string;
  /** The bare repository behind it. */
  bare: string;
  close(): Promise<void>;
}

export async function startJobFixture(): Promise<JobFixture> {
  const dir = await makeTempDir('deploy');
  const bare = await makeServedRepo(path.join(dir, 'served'), dir);
  const server: GitHttpServer = await startGitHttpServer({
    projectRoot: path.join(dir, 'served'),
  });
  const llm = await startFakeLlm({ apiKey: OPENAI_KEY, models: ['gpt-test'] });
  return {
    llm,
    modelEnv: {
      OPENAI_API_KEY: OPENAI_KEY,
      OPENAI_BASE_URL: `${llm.url}/v1`,
      ERRAND_MODEL: 'openai:gpt-test',
      ERRAND_TURN_RETRIES: '0',
    },
    repository: `${server.url}/acme/app.git`,
    bare,
    async close() {
      await llm.close();
      await server.close();
      await removeDir(dir);
    },
  };
}

type Event = { type: string; data: Record<string, unknown> };

/** The last tool result of a recorded OpenAI request. */
function lastToolResult(request: RecordedRequest | undefined): string {
  const body = request?.body as { messages?: Array<{ role: string; content: unknown }> };
  const results = (body?.messages ?? []).filter((m) => m.role === 'tool');
  const content = results.at(-1)?.content;
  return typeof content === 'string' ? content : JSON.stringify(content);
}

/**
 * Through the API at `base`: a project on the fixture's repository and a job whose model runs
 * a command in the sandbox that writes a file, then ends. Checks that the job completed, the
 * command's output reached the model, and its file is on the job's branch; returns the job.
 */
export async function runJobWithCommand(
  base: string,
  adminKey: string,
  fixture: JobFixture,
  label: string,
): Promise<{ projectId: string; jobId: string }> {
  const request = (method: string, route: string, body?: Record<string, unknown>) =>
    http(base, method, route, { key: adminKey, ...(body ? { body } : {}) });
  const project = await request('POST', '/v2/admin/projects', {
    name: label,
    repository: fixture.repository,
    ref: 'main',
  });
  assert.equal(project.status, 201, project.text);
  const projectId = String(project.json.id);

  const command = `echo "ran in $(pwd)" && echo ${label} > sandboxed.txt`;
  fixture.llm.script(
    toolCalls([{ name: 'run_command', input: { command } }]),
    reply(`Add sandboxed.txt\n\nMade by a command in the sandbox (${label}).`),
  );
  const created = await request('POST', `/v2/agent/${projectId}/job`, {
    prompt: 'Write sandboxed.txt with a command',
  });
  assert.equal(created.status, 201, created.text);
  const jobId = String(created.json.id);
  const job = await waitFor(
    `job ${jobId} to complete`,
    async () => {
      const res = await request('GET', `/v2/agent/${projectId}/job/${jobId}`);
      if (res.json.status === 'active') return undefined;
      return res.json;
    },
    120_000,
  );
  assert.equal(job.status, 'completed', `job ended ${job.status}: ${job.error}`);
  fixture.llm.assertDone();

  // The model was offered run_command, and the command's output came back to it.
  assert.match(lastToolResult(fixture.llm.requests[1]), /Exit code: 0[\s\S]*ran in \/workspace/);
  const events = (await request('GET', `/v2/agent/${projectId}/job/${jobId}/events`)).json
    .events as unknown as Event[];
  const finished = events.filter((e) => e.type === 'command.finished');
  assert.deepEqual(
    finished.map((e) => [e.data.command, e.data.exitCode]),
    [[command, 0]],
  );
  assert.equal(events.filter((e) => e.type === 'sandbox.unavailable').length, 0);
  // What the command wrote was committed and pushed to the job's branch.
  assert.equal(git(fixture.bare, 'show', `errand/${jobId}:sandboxed.txt`), label);
  fixture.llm.reset();
  return { projectId, jobId };
}

/** The image's size in bytes, as podman counts it (all its layers, uncompressed). */
export async function imageSize(image: string): Promise<number> {
  return Number(await podman('image', 'inspect', '--format', '{{.Size}}', image));
}

export const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
export const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
