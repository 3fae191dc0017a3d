// The coding CLIs a project may run instead of Errand's loop: each one's npm package, the version
// Errand is tested with, and where it is once `errand engine install` has put it in
// `<engines dir>/<name>/<version>/`. An engine directory appears by one rename after its
// executable has answered `--version`, so a half-done install is never seen as installed, and
// installs at once into one directory (several processes, a volume shared by many) are safe.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import type { Config } from '../config.ts';
import type { EngineInstalls, InstallableEngine } from '../projects/engine.ts';

export type { InstallableEngine };

interface CatalogEntry {
  /** The npm package, from the npm registry. */
  package: string;
  /** The version installed, and the one the engine's tests run: changed only together. */
  version: string;
  /**
   * Where the native executable may be under node_modules on this machine, best first. The
   * packages pick a platform package in install scripts that Errand never runs (npm is told
   * --ignore-scripts); the first candidate whose `--version` answers is the one used.
   */
  executables(platform: Platform): string[];
}

/** The machine an engine runs on: only Linux has the sandbox engines run in. */
interface Platform {
  arch: 'x64' | 'arm64';
}

export const CATALOG: Readonly<Record<InstallableEngine, CatalogEntry>> = {
  'claude-code': {
    package: '@anthropic-ai/claude-code',
    version: '2.1.332',
    // One native binary per platform package (glibc and musl builds).
    executables: ({ arch }) => [
      `@anthropic-ai/claude-code-linux-${arch}/claude`,
      `@anthropic-ai/claude-code-linux-${arch}-musl/claude`,
    ],
  },
  codex: {
    package: '@openai/codex',
    version: '0.169.0',
    // The package's bin/codex.js only finds and execs this (a static musl build).
    executables: ({ arch }) => {
      const triple = arch === 'x64' ? 'x86_64-unknown-linux-musl' : 'aarch64-unknown-linux-musl';
      return [`@openai/codex-linux-${arch}/vendor/${triple}/bin/codex`];
    },
  },
  opencode: {
    package: 'opencode-ai',
    version: '1.18.33',
    // The "baseline" builds are for x64 processors without AVX2, where the others cannot start.
    executables: ({ arch }) =>
      arch === 'x64'
        ? [
            'opencode-linux-x64/bin/opencode',
            'opencode-linux-x64-baseline/bin/opencode',
            'opencode-linux-x64-musl/bin/opencode',
            'opencode-linux-x64-baseline-musl/bin/opencode',
          ]
        : ['opencode-linux-arm64/bin/opencode', 'opencode-linux-arm64-musl/bin/opencode'],
  },
};

export const INSTALLABLE_ENGINES = Object.keys(CATALOG) as InstallableEngine[];

/** An engine present on this machine. */
export interface InstalledEngine {
  name: InstallableEngine;
  version: string;
  /** The install directory, which a sandbox mounts read-only. */
  dir: string;
  /** The absolute path of the executable to run. */
  bin: string;
}

/** What `engine list` shows of one engine. */
export interface EngineStatus {
  name: InstallableEngine;
  package: string;
  version: string;
  installed: boolean;
  /** Where it is, or would be once installed. */
  dir: string;
}

/** The manifest an install writes last, inside the directory that is then renamed into place. */
const MANIFEST = 'errand-engine.json';

export class EngineInstallError extends Error {
  override name = 'EngineInstallError';
}

/** Where an engine's pinned version lives, installed or not. */
function engineDir(config: Pick<Config, 'enginesDir'>, name: InstallableEngine): string {
  return path.join(config.enginesDir, name, CATALOG[name].version);
}

/** The engine's pinned version if it is installed here, else undefined. */
export async function installedEngine(
  config: Pick<Config, 'enginesDir'>,
  name: InstallableEngine,
): Promise<InstalledEngine | undefined> {
  const dir = engineDir(config, name);
  let text: string;
  try {
    text = await readFile(path.join(dir, MANIFEST), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const manifest = parseManifest(text);
  if (manifest === undefined || manifest.name !== name) {
    throw new EngineInstallError(
      `${path.join(dir, MANIFEST)} is not an engine manifest of ${name}: delete ${dir} and run \`errand engine install ${name}\``,
    );
  }
  return { name, version: CATALOG[name].version, dir, bin: path.join(dir, manifest.bin) };
}

function parseManifest(text: string): { name: string; bin: string } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { name, bin } = value as Record<string, unknown>;
  if (typeof name !== 'string' || typeof bin !== 'string') return undefined;
  // The executable is inside the install directory, never elsewhere.
  if (path.isAbsolute(bin) || path.normalize(bin).startsWith('..')) return undefined;
  return { name, bin };
}

/** Every installable engine, with its pinned version and whether it is installed here. */
export async function listEngines(config: Pick<Config, 'enginesDir'>): Promise<EngineStatus[]> {
  return Promise.all(
    INSTALLABLE_ENGINES.map(async (name) => ({
      name,
      package: CATALOG[name].package,
      version: CATALOG[name].version,
      installed: (await installedEngine(config, name)) !== undefined,
      dir: engineDir(config, name),
    })),
  );
}

export interface InstallOptions {
  /** Progress for a person: npm's output and what is being checked. */
  log: (line: string) => void;
  /**
   * What npm installs instead of the catalog's package (tests: a tarball of their own): the
   * argument to `npm install`, the version `--version` must report, and the candidates.
   */
  spec?: { from: string; version: string; executables: string[] };
}

/**
 * Installs the engine's pinned version with npm unless it is installed already (then returns
 * it without touching anything). Two installs at once both succeed with the same directory.
 */
export async function installEngine(
  config: Pick<Config, 'enginesDir'>,
  name: InstallableEngine,
  options: InstallOptions,
): Promise<InstalledEngine> {
  const present = await installedEngine(config, name);
  if (present !== undefined) return present;
  const entry = CATALOG[name];
  const spec = options.spec ?? {
    from: `${entry.package}@${entry.version}`,
    version: entry.version,
    executables: entry.executables(platform()),
  };
  const dir = engineDir(config, name);
  await mkdir(path.dirname(dir), { recursive: true });
  await removeAbandoned(path.dirname(dir));
  // Beside the final directory, so that the rename stays on one file system.
  const staging = await mkdtemp(path.join(path.dirname(dir), `${STAGING}${entry.version}-`));
  try {
    options.log(`installing ${spec.from} with npm`);
    await npmInstall(staging, spec.from, options.log);
    const bin = await firstWorking(staging, spec.executables, spec.version, options.log);
    await writeFile(path.join(staging, MANIFEST), `${JSON.stringify({ name, bin }, null, 2)}\n`);
    try {
      await rename(staging, dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Another install finished first: its directory is as good as this one.
      if (code !== 'EEXIST' && code !== 'ENOTEMPTY') throw err;
      await rm(staging, { recursive: true, force: true });
    }
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    throw err;
  }
  const installed = await installedEngine(config, name);
  if (installed === undefined) throw new EngineInstallError(`${dir} vanished after its install`);
  return installed;
}

/** The prefix of an install's directory until it is renamed into place. */
const STAGING = '.install-';
/** npm's bound, and so an install's: a staging directory older than twice it was abandoned. */
const NPM_TIMEOUT_MS = 30 * 60_000;

/** Removes what installs killed midway left (a process killed has no `finally`). */
async function removeAbandoned(parent: string): Promise<void> {
  for (const entry of await readdir(parent)) {
    if (!entry.startsWith(STAGING)) continue;
    const staging = path.join(parent, entry);
    let mtimeMs: number;
    try {
      ({ mtimeMs } = await stat(staging));
    } catch (err) {
      // Another process's install, renamed into place or removed since the listing.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    if (Date.now() - mtimeMs > 2 * NPM_TIMEOUT_MS)
      await rm(staging, { recursive: true, force: true });
  }
}

function platform(): Platform {
  const arch = process.arch;
  if (process.platform !== 'linux' || (arch !== 'x64' && arch !== 'arm64')) {
    throw new EngineInstallError(
      `engines run on Linux x64 or arm64 only (in the bubblewrap sandbox); this is ${process.platform} ${arch}`,
    );
  }
  return { arch };
}

/**
 * npm's CLI: Errand's own dependency (so `errand engine install` works where Node came without
 * npm, as in the container image), run with the node that runs Errand.
 */
function npmCommand(): { command: string; args: string[] } {
  const manifest = createRequire(import.meta.url).resolve('npm/package.json');
  return {
    command: process.execPath,
    args: [path.join(path.dirname(manifest), 'bin', 'npm-cli.js')],
  };
}

async function npmInstall(prefix: string, spec: string, log: (line: string) => void) {
  const npm = npmCommand();
  const args = [
    ...npm.args,
    'install',
    '--prefix',
    prefix,
    '--no-save',
    '--no-audit',
    '--no-fund',
    '--no-package-lock',
    // The packages' install scripts would pick a platform binary, or download one; the
    // catalog picks it instead, so nothing but the registry's tarballs is ever used.
    '--ignore-scripts',
    '--omit=dev',
    spec,
  ];
  const result = await run(npm.command, args, { cwd: prefix, timeoutMs: NPM_TIMEOUT_MS }, log);
  if (result.code !== 0) {
    throw new EngineInstallError(
      `npm install ${spec} failed (${result.signal ?? `exit code ${result.code}`}): ${lastLines(result.output)}`,
    );
  }
}

/** The first candidate executable (relative to the install directory) that reports `version`. */
async function firstWorking(
  dir: string,
  candidates: readonly string[],
  version: string,
  log: (line: string) => void,
): Promise<string> {
  const tried: string[] = [];
  for (const candidate of candidates) {
    const relative = path.join('node_modules', candidate);
    const bin = path.join(dir, relative);
    if (!existsSync(bin)) continue;
    const result = await withScratchHome((env) =>
      run(bin, ['--version'], { cwd: dir, env, timeoutMs: 60_000 }, () => {}),
    );
    const answer = result.output.trim();
    if (result.code === 0 && answer.includes(version)) {
      log(`${relative} --version: ${answer}`);
      return relative;
    }
    tried.push(
      `${relative} (${result.signal ?? `exit code ${result.code}`}: ${lastLines(answer)})`,
    );
  }
  throw new EngineInstallError(
    tried.length === 0
      ? `npm installed none of the executables for this machine: ${candidates.join(', ')}`
      : `no executable of this version runs here: ${tried.join('; ')}`,
  );
}

/**
 * Runs `fn` with an environment whose home and XDG directories are a scratch directory, removed
 * after: an engine's first start writes its state there, not in the installing user's home.
 */
async function withScratchHome<T>(fn: (env: NodeJS.ProcessEnv) => Promise<T>): Promise<T> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'errand-engine-home-'));
  try {
    return await fn({
      PATH: '/usr/local/bin:/usr/bin:/bin',
      HOME: home,
      XDG_CONFIG_HOME: path.join(home, 'config'),
      XDG_CACHE_HOME: path.join(home, 'cache'),
      XDG_DATA_HOME: path.join(home, 'data'),
      XDG_STATE_HOME: path.join(home, 'state'),
    });
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** stdout and stderr, interleaved as they came. */
  output: string;
}

function run(
  command: string,
  args: readonly string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs: number },
  log: (line: string) => void,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      ...(options.env === undefined ? {} : { env: options.env }),
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: options.timeoutMs,
      killSignal: 'SIGKILL',
    });
    let output = '';
    let pending = '';
    const take = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      output += text;
      pending += text;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) if (line.trim() !== '') log(line);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (pending.trim() !== '') log(pending);
      resolve({ code, signal, output });
    });
  });
}

function lastLines(text: string): string {
  const lines = text.trim().split('\n').slice(-5).join('\n');
  return lines === '' ? 'no output' : lines;
}

/**
 * The installs as the project service asks about them (src/projects/engine.ts). A damaged
 * install is none: installing it again says what to do about it.
 */
export function engineInstalls(config: Pick<Config, 'enginesDir'>): EngineInstalls {
  return {
    installed: async (name) => {
      try {
        return (await installedEngine(config, name)) !== undefined;
      } catch (err) {
        if (err instanceof EngineInstallError) return false;
        throw err;
      }
    },
  };
}
