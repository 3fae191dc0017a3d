// Runs a repository's command (the model's, or a project's setup command) confined by
// bubblewrap: its own namespaces, the system read-only, only the job's checkout writable, no
// service environment or data, bounded in time, CPU, memory, processes and file size, and
// nothing of it left running afterwards. Where bubblewrap cannot run, nothing runs at all.
import { spawn } from 'node:child_process';
import { access, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULT_LIMITS, type SandboxLimits } from '../projects/limits.ts';
import { bwrapArgs, InvalidRunError, SANDBOX_PATH } from './args.ts';
import { CappedOutput } from './output.ts';
import { descendants, pidsCgroupRoot, RunCgroup, signalAll } from './processes.ts';

export type SandboxStatus =
  | {
      available: true;
      bwrap: string;
      version: string;
      /**
       * How the process limit is enforced: a pids cgroup, RLIMIT_NPROC (a normal user), or
       * not at all (root without a writable pids cgroup: RLIMIT_NPROC does not bind root).
       */
      processLimit: 'cgroup' | 'rlimit' | 'none';
    }
  | { available: false; reason: string; howToFix: string };

export interface SandboxRun {
  /** The job's checkout (absolute): the only writable place; its .git read-only. */
  checkout: string;
  /** Where the command starts: the checkout or a directory inside it (absolute, already checked). */
  cwd: string;
  /** Run as `sh -c <command>`, in the checkout mounted at /workspace. */
  command: string;
  limits: SandboxLimits;
  /** false: no network at all (a new network namespace, loopback only). */
  network: boolean;
  /** Aborting (job archived, turn ended) kills everything at once. */
  signal: AbortSignal;
  /** Characters kept (default 30_000): head and tail, with a note of what was cut. */
  outputCap?: number;
}

export interface SandboxResult {
  /** The command's exit status (128 + n when a signal n ended it); null when killed here. */
  exitCode: number | null;
  /** The signal this side ended the sandbox with after a timeout or abort, if it came to that. */
  signal: string | null;
  timedOut: boolean;
  aborted: boolean;
  /** stdout and stderr interleaved in arrival order, capped. */
  output: string;
  outputTruncated: boolean;
  durationMs: number;
}

/** The sandbox itself could not run (a command's own failure is a result, never this). */
class SandboxError extends Error {
  override name = 'SandboxError';
}

const DEFAULT_OUTPUT_CAP = 30_000;
/** Between SIGTERM and SIGKILL after a timeout: time for a command to clean up. */
const TERM_GRACE_MS = 2_000;
const INFO_FD = 3;
const STARTED_FD = 4;
/** bwrap's own messages (before the command starts) are short; more is not kept. */
const DIAGNOSTICS_CAP = 4_000;

const HOW_TO_INSTALL =
  'install the bubblewrap package (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)';
const HOW_TO_PROC =
  'in a container, let bubblewrap mount its own /proc: podman or docker run ' +
  "--security-opt systempaths=unconfined; Kubernetes: the container's securityContext " +
  'procMount: Unmasked, in a pod with hostUsers: false (docs/deploy.md)';
const HOW_TO_USERNS =
  'enable unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1 (Debian), ' +
  'sysctl kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 24.04+), ' +
  'and user.max_user_namespaces above 0';

interface Ready {
  bwrap: string;
  version: readonly number[];
  prlimit: string;
  cgroupRoot: string | null;
}

let cached: Promise<{ status: SandboxStatus; ready: Ready | null }> | undefined;

/** Checks once per process (cached): bwrap on PATH, and a trivial confined run works. */
export async function sandboxStatus(): Promise<SandboxStatus> {
  cached ??= probe(undefined);
  return (await cached).status;
}

/**
 * The same check, uncached, finding bwrap on `searchPath` instead of this process's PATH
 * (tests; a PATH without bwrap must report it unavailable).
 */
export async function checkSandbox(searchPath?: string): Promise<SandboxStatus> {
  return (await probe(searchPath)).status;
}

export async function runSandboxed(run: SandboxRun): Promise<SandboxResult> {
  cached ??= probe(undefined);
  const { status, ready } = await cached;
  if (!status.available || ready === null) {
    throw new SandboxError(
      status.available ? 'sandbox unavailable' : `sandbox unavailable: ${status.reason}`,
    );
  }
  return execute(ready, run);
}

async function probe(
  searchPath: string | undefined,
): Promise<{ status: SandboxStatus; ready: Ready | null }> {
  const unavailable = (reason: string, howToFix: string) => ({
    status: { available: false as const, reason, howToFix },
    ready: null,
  });
  // The shell's own lookup: this module never reads the environment itself.
  const found = await capture(
    '/bin/sh',
    ['-c', 'command -v bwrap'],
    searchPath === undefined ? undefined : { PATH: searchPath },
  );
  const bwrap = found.stdout.trim();
  if (found.code !== 0 || !bwrap.startsWith('/')) {
    return unavailable('bwrap not found on PATH', HOW_TO_INSTALL);
  }
  const versionOut = await capture(bwrap, ['--version'], { PATH: SANDBOX_PATH });
  const version = /(\d+)\.(\d+)\.(\d+)/.exec(versionOut.stdout);
  if (versionOut.code !== 0 || version === null) {
    return unavailable(`${bwrap} --version failed`, HOW_TO_INSTALL);
  }
  const prlimit = await firstExecutable(['/usr/bin/prlimit', '/bin/prlimit']);
  if (prlimit === null) {
    return unavailable('prlimit not found', 'install util-linux (it provides prlimit)');
  }
  const ready: Ready = {
    bwrap,
    version: version.slice(1).map(Number),
    prlimit,
    cgroupRoot: await pidsCgroupRoot(),
  };
  const dir = await mkdtemp(join(tmpdir(), 'errand-sandbox-probe-'));
  try {
    await mkdir(join(dir, '.git'));
    const result = await execute(ready, {
      checkout: dir,
      cwd: dir,
      command: 'echo confined',
      limits: { ...DEFAULT_LIMITS, timeoutSeconds: 30 },
      network: false,
      signal: new AbortController().signal,
    });
    if (result.exitCode !== 0 || result.output.trim() !== 'confined') {
      return unavailable(`a trivial confined run failed: ${result.output.trim()}`, HOW_TO_USERNS);
    }
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const proc = /Can't mount proc/i.test(message);
    const userns = /namespace|uid map|Operation not permitted|Permission denied/i.test(message);
    return unavailable(
      `a trivial confined run failed: ${message}`,
      proc ? HOW_TO_PROC : userns ? HOW_TO_USERNS : HOW_TO_INSTALL,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const processLimit = ready.cgroupRoot !== null ? 'cgroup' : isRoot() ? 'none' : 'rlimit';
  return {
    status: { available: true, bwrap, version: version[0], processLimit },
    ready,
  };
}

async function execute(ready: Ready, run: SandboxRun): Promise<SandboxResult> {
  const started = performance.now();
  checkLimits(run.limits);
  const output = new CappedOutput(run.outputCap ?? DEFAULT_OUTPUT_CAP);
  if (run.signal.aborted) {
    return {
      exitCode: null,
      signal: null,
      timedOut: false,
      aborted: true,
      output: '',
      outputTruncated: false,
      durationMs: 0,
    };
  }
  let args: string[];
  try {
    args = await bwrapArgs({
      checkout: run.checkout,
      cwd: run.cwd,
      command: run.command,
      limits: run.limits,
      network: run.network,
      version: ready.version,
      prlimit: ready.prlimit,
      infoFd: INFO_FD,
      startedFd: STARTED_FD,
    });
  } catch (err) {
    if (err instanceof InvalidRunError) throw new SandboxError(err.message);
    throw err;
  }
  // The pids cgroup is joined by a host shell that then becomes bwrap, so not one fork of the
  // command happens outside it. Plus two tasks for bwrap itself and its init.
  const cgroup =
    ready.cgroupRoot === null
      ? null
      : await RunCgroup.create(ready.cgroupRoot, run.limits.processes + 2).catch(() => null);
  const [file, argv] =
    cgroup === null
      ? [ready.bwrap, args]
      : [
          '/bin/sh',
          [
            '-c',
            'echo $$ > "$1" && shift && exec "$@"',
            'sh',
            cgroup.procsFile,
            ready.bwrap,
            ...args,
          ],
        ];

  try {
    // Only a PATH: bwrap's own environment (readable in /proc by the host's user) holds nothing
    // of the service's, and --clearenv gives the command none of it either.
    const child = spawn(file, argv, {
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
      env: { PATH: SANDBOX_PATH },
      // Not the service's directory: the cgroup's host shell would export it as PWD.
      cwd: '/',
    });
    const [, stdout, stderr, info, startedPipe] = child.stdio as unknown as [
      null,
      Readable,
      Readable,
      Readable,
      Readable,
    ];
    const diagnostics = new CappedOutput(DIAGNOSTICS_CAP);
    stdout.on('data', (chunk: Buffer) => output.write(chunk));
    stderr.on('data', (chunk: Buffer) => diagnostics.write(chunk));
    let infoText = '';
    info.on('data', (chunk: Buffer) => {
      if (infoText.length < 64_000) infoText += chunk.toString('utf8');
    });
    let commandStarted = false;
    startedPipe.on('data', () => {
      commandStarted = true;
    });

    let timedOut = false;
    let aborted = false;
    let killedWith: NodeJS.Signals | null = null;
    let exited = false;
    const sandboxInit = (): number | null => {
      const match = /"child-pid"\s*:\s*(\d+)/.exec(infoText);
      return match ? Number(match[1]) : null;
    };
    const killAll = async () => {
      killedWith = 'SIGKILL';
      // The init's death tears down its PID namespace: the kernel kills every process in it.
      const init = sandboxInit();
      if (init !== null) signalAll([init], 'SIGKILL');
      if (child.pid !== undefined) signalAll([child.pid], 'SIGKILL');
      if (cgroup) signalAll(await cgroup.pids(), 'SIGKILL');
    };
    let graceTimer: NodeJS.Timeout | undefined;
    const terminate = async () => {
      const init = sandboxInit();
      const pids = init === null ? [] : await descendants(init);
      if (cgroup) pids.push(...(await cgroup.pids()));
      if (exited) return;
      signalAll(
        pids.filter((p) => p !== init && p !== child.pid),
        'SIGTERM',
      );
      graceTimer = setTimeout(() => void killAll(), TERM_GRACE_MS);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      void terminate();
    }, run.limits.timeoutSeconds * 1000);
    const onAbort = () => {
      // During a timeout's grace too: an abort does not wait.
      if (!timedOut) aborted = true;
      void killAll();
    };
    run.signal.addEventListener('abort', onAbort, { once: true });

    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>(
      (resolve, reject) => {
        child.once('error', reject);
        child.once('close', (c, s) => resolve([c, s]));
      },
    ).finally(() => {
      exited = true;
      clearTimeout(timer);
      clearTimeout(graceTimer);
      run.signal.removeEventListener('abort', onAbort);
    });

    // After a kill the init may still be reaping its namespace (its descriptors already
    // closed): the run is over only once it is gone, and with it every process it held.
    const init = sandboxInit();
    if (init !== null) await gone(init);

    if (!commandStarted && !timedOut && !aborted) {
      const why = diagnostics.finish().text.trim() || `bwrap exited with ${code ?? signal}`;
      throw new SandboxError(`sandbox failed to start: ${why}`);
    }
    const text = output.finish();
    const killed = killedWith !== null;
    return {
      exitCode: killed ? null : code,
      signal: killed ? killedWith : signal,
      timedOut,
      aborted,
      output: text.text,
      outputTruncated: text.truncated,
      durationMs: Math.round(performance.now() - started),
    };
  } finally {
    await cgroup?.remove();
  }
}

/**
 * Waits (a bounded while) until the sandbox's init has exited. A PID namespace's init becomes
 * a zombie only after every other process in it is gone, so a zombie counts as gone too.
 */
async function gone(pid: number): Promise<void> {
  for (let attempt = 0; attempt < 500; attempt++) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
    const state = stat?.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (stat === null || stat === undefined || state === 'Z' || state === 'X') return;
    await sleep(10);
  }
}

function checkLimits(limits: SandboxLimits): void {
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isInteger(value) || value < 1) {
      throw new SandboxError(`limit ${name} must be a whole number of at least 1`);
    }
  }
}

function isRoot(): boolean {
  return process.getuid?.() === 0;
}

async function firstExecutable(paths: readonly string[]): Promise<string | null> {
  for (const path of paths) {
    if (
      await access(path, 1 /* X_OK */).then(
        () => true,
        () => false,
      )
    ) {
      return path;
    }
  }
  return null;
}

/** A short helper program's exit code and output (bounded: these print a line). */
function capture(
  file: string,
  args: readonly string[],
  env: Record<string, string> | undefined,
): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, {
      stdio: ['ignore', 'pipe', 'ignore'],
      ...(env === undefined ? {} : { env }),
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      if (stdout.length < 4_000) stdout += chunk.toString('utf8');
    });
    child.once('error', () => resolve({ code: null, stdout: '' }));
    child.once('close', (code) => resolve({ code, stdout }));
  });
}
