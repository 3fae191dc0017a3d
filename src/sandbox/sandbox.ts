// Runs a repository's command (the model's, or a project's setup command) confined by
// bubblewrap: its own namespaces, the system read-only, only the job's checkout writable, no
// service environment or data, bounded in time, CPU, memory, processes and file size, and
// nothing of it left running afterwards. Where bubblewrap cannot run, nothing runs at all.
import { spawn } from 'node:child_process';
import { access, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULT_LIMITS, type SandboxLimits } from '../projects/limits.ts';
import { bwrapArgs, InvalidRunError, SANDBOX_PATH } from './args.ts';
import { diskUsage, MeasureError } from './disk.ts';
import { FORWARDER_SOURCE } from './forwarder.ts';
import { attachNetwork, HOW_TO_INSTALL_PASTA, type NetworkTools } from './network.ts';
import { CappedOutput, LineSplitter } from './output.ts';
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
      /** The user-mode network setup commands get with `network` (pasta), or why there is none. */
      network: NetworkStatus;
    }
  | { available: false; reason: string; howToFix: string };

type NetworkStatus =
  | { available: true; pasta: string }
  | { available: false; reason: string; howToFix: string };

/** How much a run may grow its checkout (and HOME) by, unless it says otherwise. */
const DEFAULT_CHECKOUT_GROWTH_MB = 4096;

export interface SandboxRun {
  /** The job's checkout (absolute): the only writable place; its .git read-only. */
  checkout: string;
  /** Where the command starts: the checkout or a directory inside it (absolute, already checked). */
  cwd: string;
  /** Run as `sh -c <command>`, in the checkout mounted at /workspace. */
  command: string;
  limits: SandboxLimits;
  /**
   * false: no network at all (a new network namespace, loopback only). true: outbound access
   * through a user-mode network (pasta) that does not reach the host's loopback.
   */
  network: boolean;
  /** Aborting (job archived, turn ended) kills everything at once. */
  signal: AbortSignal;
  /** Characters kept (default 30_000): head and tail, with a note of what was cut. */
  outputCap?: number;
  /**
   * More environment for the command, over the sandbox's own (PATH, HOME, LANG, TERM, TMPDIR).
   * Never a secret: an engine's key stays in the model proxy.
   */
  env?: Readonly<Record<string, string>>;
  /** Host paths (absolute: a directory or a file) mounted read-only at the same path inside. */
  readOnlyBinds?: readonly string[];
  /**
   * A host directory mounted writable as HOME (an engine's state kept across turns); without
   * it HOME is an empty directory in the sandbox's size-limited /tmp.
   */
  home?: string;
  /**
   * The model proxy (startModelProxy): its socket is mounted into the sandbox and a forwarder
   * inside listens on 127.0.0.1:`port` before the command starts, so the command reaches the
   * model API at http://127.0.0.1:<port> with no other way out (set network: false).
   */
  modelProxy?: { socketPath: string; port: number };
  /** Written to the command's stdin, which is then closed (default: stdin is /dev/null). */
  stdin?: string;
  /**
   * Each line of stdout as it arrives (without its newline; a last line without one too).
   * With it, stdout and stderr are kept apart: `output` holds stdout, `stderr` the rest.
   */
  onStdoutLine?: (line: string) => void;
  /**
   * How much the checkout may grow during the run, in MB (default DEFAULT_CHECKOUT_GROWTH_MB).
   * Measured while the command runs and at its end: over it, everything is killed and the
   * result says `diskExceeded`.
   */
  checkoutGrowthMb?: number;
}

export interface SandboxResult {
  /** The command's exit status (128 + n when a signal n ended it); null when killed here. */
  exitCode: number | null;
  /** The signal this side ended the sandbox with after a timeout or abort, if it came to that. */
  signal: string | null;
  timedOut: boolean;
  aborted: boolean;
  /** stdout and stderr interleaved in arrival order, capped (stdout only with onStdoutLine). */
  output: string;
  outputTruncated: boolean;
  /** The command's stderr, capped, when kept apart (onStdoutLine); otherwise absent. */
  stderr?: string;
  /**
   * The checkout grew past its bound (checkoutGrowthMb): the run was stopped, or the command
   * had ended over it. A clear sentence is also appended to `output`.
   */
  diskExceeded?: { grownMb: number; limitMb: number };
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
const BLOCK_FD = 5;
const MB = 1024 * 1024;
/** The shortest pause between two measurements of the checkout while a command runs. */
const DISK_CHECK_MS = 2_000;
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
  /** The user-mode network: its tools where it works (setup commands with `network`). */
  network: { tools: NetworkTools | null; status: NetworkStatus };
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
  const bwrap = await lookUp('bwrap', searchPath);
  if (bwrap === null) return unavailable('bwrap not found on PATH', HOW_TO_INSTALL);
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
    network: {
      status: { available: false, reason: 'not checked yet', howToFix: HOW_TO_INSTALL_PASTA },
      tools: null,
    },
  };
  const trial = await trialRun(ready, false);
  if (trial !== null) {
    // A run that started and failed points at the namespaces; one that could not start says.
    const { message, started } = trial;
    const proc = /Can't mount proc/i.test(message);
    const userns = /namespace|uid map|Operation not permitted|Permission denied/i.test(message);
    return unavailable(
      `a trivial confined run failed: ${message}`,
      started ? HOW_TO_USERNS : proc ? HOW_TO_PROC : userns ? HOW_TO_USERNS : HOW_TO_INSTALL,
    );
  }
  ready.network = await probeNetwork(ready, searchPath);
  const processLimit = ready.cgroupRoot !== null ? 'cgroup' : isRoot() ? 'none' : 'rlimit';
  return {
    status: {
      available: true,
      bwrap,
      version: version[0],
      processLimit,
      network: ready.network.status,
    },
    ready,
  };
}

/** pasta on the same PATH as bwrap, proven by a trivial run on the user-mode network. */
async function probeNetwork(
  ready: Ready,
  searchPath: string | undefined,
): Promise<Ready['network']> {
  const pasta = await lookUp('pasta', searchPath);
  if (pasta === null) {
    return {
      status: {
        available: false,
        reason: 'pasta not found on PATH',
        howToFix: HOW_TO_INSTALL_PASTA,
      },
      tools: null,
    };
  }
  const tools = { pasta, setpriv: await firstExecutable(['/usr/bin/setpriv', '/bin/setpriv']) };
  const failed = await trialRun(
    { ...ready, network: { status: { available: true, pasta }, tools } },
    true,
  );
  if (failed !== null) {
    return {
      status: {
        available: false,
        reason: `a trivial run on the user-mode network failed: ${failed.message}`,
        howToFix: HOW_TO_INSTALL_PASTA,
      },
      tools: null,
    };
  }
  return { status: { available: true, pasta }, tools };
}

/** A trivial confined run: null when it worked, else what went wrong and whether it started. */
async function trialRun(
  ready: Ready,
  network: boolean,
): Promise<{ message: string; started: boolean } | null> {
  const dir = await mkdtemp(join(tmpdir(), 'errand-sandbox-probe-'));
  try {
    await mkdir(join(dir, '.git'));
    const result = await execute(ready, {
      checkout: dir,
      cwd: dir,
      command: 'echo confined',
      limits: { ...DEFAULT_LIMITS, timeoutSeconds: 30 },
      network,
      signal: new AbortController().signal,
    });
    if (result.exitCode !== 0 || result.output.trim() !== 'confined') {
      return { message: result.output.trim() || `exit code ${result.exitCode}`, started: true };
    }
    return null;
  } catch (err) {
    return { message: err instanceof Error ? err.message : String(err), started: false };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Where the shell's own lookup finds `name` (this module never reads the environment itself). */
async function lookUp(name: string, searchPath: string | undefined): Promise<string | null> {
  const found = await capture(
    '/bin/sh',
    ['-c', `command -v ${name}`],
    searchPath === undefined ? undefined : { PATH: searchPath },
  );
  const path = found.stdout.trim();
  return found.code === 0 && path.startsWith('/') ? path : null;
}

function checkRunOptions(run: SandboxRun): void {
  const growth = run.checkoutGrowthMb;
  if (growth !== undefined && (!Number.isInteger(growth) || growth < 1)) {
    throw new SandboxError('checkoutGrowthMb must be a whole number of at least 1');
  }
}

async function execute(ready: Ready, run: SandboxRun): Promise<SandboxResult> {
  const started = performance.now();
  checkLimits(run.limits);
  checkRunOptions(run);
  const network = ready.network;
  if (run.network && network.tools === null) {
    const why = network.status.available
      ? 'unavailable'
      : `${network.status.reason} (${network.status.howToFix})`;
    throw new SandboxError(`the user-mode network for setup commands is unavailable: ${why}`);
  }
  const separate = run.onStdoutLine !== undefined;
  const cap = run.outputCap ?? DEFAULT_OUTPUT_CAP;
  const output = new CappedOutput(cap);
  if (run.signal.aborted) {
    return {
      exitCode: null,
      signal: null,
      timedOut: false,
      aborted: true,
      output: '',
      outputTruncated: false,
      ...(separate ? { stderr: '' } : {}),
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
      version: ready.version,
      prlimit: ready.prlimit,
      infoFd: INFO_FD,
      startedFd: STARTED_FD,
      ...(run.network ? { blockFd: BLOCK_FD, flatUserns: !isRoot() } : {}),
      scratchBytes: run.limits.fileSizeMb * MB,
      ...(run.env ? { env: run.env } : {}),
      ...(run.readOnlyBinds ? { readOnlyBinds: run.readOnlyBinds } : {}),
      ...(run.home !== undefined ? { home: run.home } : {}),
      ...(run.modelProxy
        ? {
            forwarder: {
              ...run.modelProxy,
              node: process.execPath,
              source: FORWARDER_SOURCE,
            },
          }
        : {}),
      separateStderr: separate,
    });
  } catch (err) {
    if (err instanceof InvalidRunError) throw new SandboxError(err.message);
    throw err;
  }
  const grown = run.home === undefined ? [run.checkout] : [run.checkout, run.home];
  const growthLimitMb = run.checkoutGrowthMb ?? DEFAULT_CHECKOUT_GROWTH_MB;
  const baseline = await diskUsage(grown).catch((err: unknown) => {
    throw new SandboxError(
      `the checkout could not be measured before the run: ${err instanceof Error ? err.message : String(err)}`,
    );
  });
  // The pids cgroup is joined by a host shell that then becomes bwrap, so not one fork of the
  // command happens outside it. Plus two tasks for bwrap itself and its init, and one for the
  // forwarder.
  const cgroup =
    ready.cgroupRoot === null
      ? null
      : await RunCgroup.create(
          ready.cgroupRoot,
          run.limits.processes + 2 + (run.modelProxy ? 1 : 0),
        ).catch(() => null);
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

  let attached: Promise<{ stop: () => Promise<void> } | null> | undefined;
  try {
    // Only a PATH: bwrap's own environment (readable in /proc by the host's user) holds nothing
    // of the service's, and --clearenv gives the command none of it either.
    const child = spawn(file, argv, {
      stdio: [
        run.stdin === undefined ? 'ignore' : 'pipe',
        'pipe',
        'pipe',
        'pipe',
        'pipe',
        ...(run.network ? (['pipe'] as const) : []),
      ],
      env: { PATH: SANDBOX_PATH },
      // Not the service's directory: the cgroup's host shell would export it as PWD.
      cwd: '/',
    });
    const [stdin, stdout, stderr, info, startedPipe, blockPipe] = child.stdio as unknown as [
      Writable | null,
      Readable,
      Readable,
      Readable,
      Readable,
      Writable | undefined,
    ];
    if (stdin !== null && run.stdin !== undefined) {
      // A command that never reads its input closes the pipe early: not an error of the run.
      stdin.on('error', () => {});
      stdin.end(run.stdin);
    }
    const diagnostics = new CappedOutput(separate ? cap : DIAGNOSTICS_CAP);
    let callbackError: unknown;
    const lines = separate ? new LineSplitter() : null;
    const deliver = (line: string) => {
      if (callbackError !== undefined || run.onStdoutLine === undefined) return;
      try {
        run.onStdoutLine(line);
      } catch (err) {
        callbackError = err;
        void killAll();
      }
    };
    stdout.on('data', (chunk: Buffer) => {
      output.write(chunk);
      if (lines) for (const line of lines.push(chunk)) deliver(line);
    });
    stderr.on('data', (chunk: Buffer) => diagnostics.write(chunk));
    let infoText = '';
    let commandStarted = false;
    let networkError: string | null = null;
    let timedOut = false;
    let aborted = false;
    let killedWith: NodeJS.Signals | null = null;
    let exited = false;
    let diskExceeded: { grownMb: number; limitMb: number } | undefined;
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
    info.on('data', (chunk: Buffer) => {
      if (infoText.length < 64_000) infoText += chunk.toString('utf8');
      const init = sandboxInit();
      if (init === null || blockPipe === undefined || attached !== undefined) return;
      const tools = network.tools;
      if (tools === null) return;
      // The sandbox waits on the block descriptor until its network is up.
      attached = attachNetwork(tools, init).then(
        (net) => {
          blockPipe.on('error', () => {});
          blockPipe.end('1');
          return net;
        },
        (err: unknown) => {
          networkError = err instanceof Error ? err.message : String(err);
          void killAll();
          return null;
        },
      );
    });
    startedPipe.on('data', () => {
      commandStarted = true;
      void watchDisk();
    });

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
    const overLimit = (bytes: number) => {
      const grownMb = Math.ceil(Math.max(0, bytes - baseline) / MB);
      return grownMb > growthLimitMb ? { grownMb, limitMb: growthLimitMb } : undefined;
    };
    // While the command runs: measured now and then (never more than a fifth of the time spent
    // measuring), and stopped at once past the bound. A walk that trips over a file the command
    // is just removing still counts what it saw.
    const diskWatch = new AbortController();
    const watchDisk = async () => {
      let pause = DISK_CHECK_MS;
      while (!exited) {
        try {
          await sleep(pause, undefined, { signal: diskWatch.signal });
        } catch {
          return;
        }
        const before = performance.now();
        const bytes = await diskUsage(grown).catch((err: unknown) =>
          err instanceof MeasureError ? err.partial : null,
        );
        if (exited) return;
        const over = bytes === null ? undefined : overLimit(bytes);
        if (over) {
          diskExceeded = over;
          await killAll();
          return;
        }
        pause = Math.max(DISK_CHECK_MS, 5 * (performance.now() - before));
      }
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
      diskWatch.abort();
      clearTimeout(timer);
      clearTimeout(graceTimer);
      run.signal.removeEventListener('abort', onAbort);
    });

    // After a kill the init may still be reaping its namespace (its descriptors already
    // closed): the run is over only once it is gone, and with it every process it held.
    const init = sandboxInit();
    if (init !== null) await gone(init);
    if (lines) for (const line of lines.end()) deliver(line);
    if (callbackError !== undefined) throw callbackError;

    if (!commandStarted && !timedOut && !aborted) {
      if (networkError !== null) {
        throw new SandboxError(`the user-mode network failed to start: ${networkError}`);
      }
      const why = diagnostics.finish().text.trim() || `bwrap exited with ${code ?? signal}`;
      throw new SandboxError(`sandbox failed to start: ${why}`);
    }
    // Nothing runs any more: this measurement is exact, and one that fails counts against it.
    if (diskExceeded === undefined && commandStarted) {
      const bytes = await diskUsage(grown).catch((err: unknown) => {
        throw new SandboxError(
          `the checkout could not be measured after the run: ${err instanceof Error ? err.message : String(err)}`,
        );
      });
      diskExceeded = overLimit(bytes);
    }
    const text = output.finish();
    const killed = killedWith !== null;
    const note =
      diskExceeded === undefined
        ? ''
        : `\n[errand: the checkout grew by ${diskExceeded.grownMb} MB, over the limit of ${diskExceeded.limitMb} MB${killed ? '; the command was stopped' : ''}]\n`;
    return {
      exitCode: killed ? null : code,
      signal: killed ? killedWith : signal,
      timedOut,
      aborted,
      output: text.text + note,
      outputTruncated: text.truncated,
      ...(separate ? { stderr: diagnostics.finish().text } : {}),
      ...(diskExceeded ? { diskExceeded } : {}),
      durationMs: Math.round(performance.now() - started),
    };
  } finally {
    const net = await attached;
    await net?.stop();
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
