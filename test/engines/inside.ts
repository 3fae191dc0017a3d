// What the engine tests share: each engine's model and whether it can run here, and a look
// inside a running engine's sandbox from the host: its processes
// (bwrap in the job's checkout, and everything below it) and the files it can write (its /tmp,
// HOME in it, and the checkout), read through the root of a process in its mount namespace.
import assert from 'node:assert/strict';
import { readdir, readFile, readlink } from 'node:fs/promises';
import path from 'node:path';
import { type InstallableEngine, installedEngine } from '../../src/engines/catalog.ts';
import { descendants } from '../../src/sandbox/processes.ts';
import { checkSandbox } from '../../src/sandbox/sandbox.ts';
import { makeOrigin, type Origin } from '../support/git.ts';
import { startTestService, type TestService } from '../support/service.ts';

/** The sandbox (bwrap) running in `checkout`, and every process below it. */
export async function sandboxProcesses(checkout: string): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const argv = (await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (path.basename(argv[0] ?? '') === 'bwrap' && argv.includes(checkout)) {
      pids.push(Number(name), ...(await descendants(Number(name))));
    }
  }
  return pids;
}

/** Files below `dir` (as a sandboxed process sees its file system), and their contents. */
export async function* filesBelow(dir: string): AsyncGenerator<{ path: string; content: Buffer }> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* filesBelow(full);
    else if (entry.isFile()) {
      const content = await readFile(full).catch(() => null);
      if (content) yield { path: full, content };
    }
  }
}

/**
 * The files the sandbox of `pids` can write (/tmp, HOME in it, and /workspace), through the
 * root of one of its processes in the host's /proc. The engine starts and ends processes of its
 * own meanwhile: one that has ended shows nothing, so the next is tried, until one shows files.
 */
export async function* sandboxFiles(
  pids: readonly number[],
): AsyncGenerator<{ path: string; content: Buffer }> {
  const hostMounts = await readlink('/proc/self/ns/mnt');
  for (const pid of [...pids].reverse()) {
    const mounts = await readlink(`/proc/${pid}/ns/mnt`).catch(() => hostMounts);
    if (mounts === hostMounts) continue;
    let files = 0;
    for (const area of ['tmp', 'workspace']) {
      for await (const file of filesBelow(`/proc/${pid}/root/${area}`)) {
        files++;
        yield file;
      }
    }
    if (files > 0) return;
  }
}

/** Where the engines are installed for the tests. */
export const ENGINES_DIR = process.env.ERRAND_ENGINES_DIR ?? '/var/cache/errand-ci/engines';

/** Each engine's model in the tests: Errand's `provider:model`, the fake's id, the settings. */
export const ENGINE_MODELS: Readonly<
  Record<
    InstallableEngine,
    {
      model: string;
      vendorModel: string;
      /** The service's settings for the provider, pointing at the fake. */
      env: (llmUrl: string, key: string) => Record<string, string>;
    }
  >
> = {
  'claude-code': {
    model: 'anthropic:claude-sonnet-4-5',
    vendorModel: 'claude-sonnet-4-5',
    env: (url, key) => ({ ANTHROPIC_API_KEY: key, ANTHROPIC_BASE_URL: `${url}/v1` }),
  },
  codex: {
    model: 'openai:gpt-5.5',
    vendorModel: 'gpt-5.5',
    env: (url, key) => ({ OPENAI_API_KEY: key, OPENAI_BASE_URL: `${url}/v1` }),
  },
  opencode: {
    model: 'openai:gpt-4.1',
    vendorModel: 'gpt-4.1',
    env: (url, key) => ({ OPENAI_API_KEY: key, OPENAI_BASE_URL: `${url}/v1` }),
  },
};

/**
 * Why the tests of `engine` are skipped (printed as `# <engine> <what> tests skipped: …`), or
 * false: the sandbox does not work here, or the engine is not installed in ENGINES_DIR.
 */
export async function engineSkip(engine: InstallableEngine, what: string): Promise<string | false> {
  const sandbox = await checkSandbox();
  const installed = await installedEngine({ enginesDir: ENGINES_DIR }, engine);
  const skip = !sandbox.available
    ? `bubblewrap does not work here: ${sandbox.reason}`
    : !installed
      ? `${engine} is not installed in ${ENGINES_DIR}: run \`errand engine install ${engine}\` with ERRAND_ENGINES_DIR=${ENGINES_DIR}`
      : false;
  if (skip) process.stdout.write(`# ${engine} ${what} tests skipped: ${skip}\n`);
  return skip;
}

/**
 * A test service whose project runs `engine` on a new origin repository in `tmp`, the engine's
 * model the fake at `llmUrl` (which takes `key`); `env` adds to the service's settings.
 */
export async function startEngineProject(
  engine: InstallableEngine,
  {
    tmp,
    llmUrl,
    key,
    env = {},
  }: { tmp: string; llmUrl: string; key: string; env?: Record<string, string> },
): Promise<{ origin: Origin; svc: TestService; projectId: string }> {
  const models = ENGINE_MODELS[engine];
  const origin = await makeOrigin(tmp);
  const svc = await startTestService({
    env: {
      ...models.env(llmUrl, key),
      ERRAND_MODEL: models.model,
      ERRAND_ENGINES_DIR: ENGINES_DIR,
      ERRAND_TURN_RETRIES: '0',
      ...env,
    },
  });
  const created = await svc.request('POST', '/v2/admin/projects', {
    body: {
      name: engine,
      repository: origin.url,
      model: models.model,
      engine,
      // OpenCode does not start with less.
      commandMemoryMb: 2048,
    },
  });
  assert.equal(created.status, 201, created.text);
  return { origin, svc, projectId: created.json.id as string };
}
