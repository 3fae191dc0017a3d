// One confined run: the bubblewrap command line started (inside the run's control groups where
// there are some), its output kept, its network attached and filtered, its checkout measured,
// and the whole of it ended on a timeout, an abort, an OOM kill or a checkout grown past its
// bound.
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { Readable, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SandboxLimits } from '../projects/limits.ts';
import {
  bwrapArgs,
  type ForwarderRoute,
  InvalidRunError,
  SANDBOX_PATH,
  secretScript,
} from './args.ts';
import { type CgroupPlaces, RunCgroup } from './cgroup.ts';
import { inheritedDescriptors, withInheritedClosed } from './descriptors.ts';
import { diskUsage, MeasureError } from './disk.ts';
import { startEgressProxy } from './egress-proxy.ts';
import { FORWARDER_SOURCE } from './forwarder.ts';
import {
  attachNetwork,
  type NetworkTools,
  runEgressRuleset,
  sandboxResolvConf,
} from './network.ts';
import { CappedOutput, LineSplitter } from './output.ts';
import { descendants, signalAll } from './processes.ts';
import type { NetworkStatus, SandboxResult, SandboxRun } from './types.ts';

/** The sandbox itself could not run (a command's own failure is a result, never this). */
export class SandboxError extends Error {
  override name = 'SandboxError';
}

const DEFAULT_OUTPUT_CAP = 30_000;
/** Between SIGTERM and SIGKILL after a timeout: time for a command to clean up. */
const TERM_GRACE_MS = 2_000;
const INFO_FD = 3;
const STARTED_FD = 4;
const BLOCK_FD = 5;
const RESOLV_CONF_FD = 6;
const EGRESS_FD = 7;
const MB = 1024 * 1024;
/** The shortest pause between two measurements of the checkout while a command runs. */
const DISK_CHECK_MS = 2_000;
/** bwrap's own messages (before the command starts) are short; more is not kept. */
const DIAGNOSTICS_CAP = 4_000;
/** Between two looks at the run's OOM kills: one small file read. */
const OOM_CHECK_MS = 200;

export interface Ready {
  bwrap: string;
  version: readonly number[];
  prlimit: string;
  /** Where each run's control groups are made, per controller (none where there is no place). */
  cgroups: CgroupPlaces;
  /** The user-mode network: its tools where it works (runs with network 'open'). */
  network: { tools: NetworkTools | null; status: NetworkStatus };
}

/** Where a run with an allowlist reaches the egress proxy: http://127.0.0.1:<port>. */
const EGRESS_PROXY_PORT = 3128;

/**
 * One run; with an allowlist, its egress proxy started first and closed once the run is over,
 * every tunnel through it cut then.
 */
export async function execute(ready: Ready, run: SandboxRun): Promise<SandboxResult> {
  if (typeof run.network !== 'object') return confined(ready, run, undefined);
  checkLimits(run.limits);
  const { allow, onDenied } = run.network;
  const proxy = await startEgressProxy({ allow, onDenied });
  try {
    return await confined(ready, run, {
      name: 'egress',
      socketPath: proxy.socketPath,
      port: EGRESS_PROXY_PORT,
    });
  } finally {
    await proxy.close();
  }
}

/**
 * What a command with an allowlist is given to find the egress proxy: the variables curl, git,
 * npm, pip, cargo, Go and most HTTP clients read (curl reads only the lower-case http_proxy),
 * Yarn's own, and NO_PROXY for the sandbox's own loopback, where an engine's model proxy is.
 */
function proxyEnv(port: number): Record<string, string> {
  const url = `http://127.0.0.1:${port}`;
  const local = 'localhost,127.0.0.1,::1';
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    YARN_HTTP_PROXY: url,
    YARN_HTTPS_PROXY: url,
    NO_PROXY: local,
    no_proxy: local,
  };
}

async function confined(
  ready: Ready,
  run: SandboxRun,
  egress: ForwarderRoute | undefined,
): Promise<SandboxResult> {
  const started = performance.now();
  checkLimits(run.limits);
  const network = ready.network;
  const open = run.network === 'open';
  if (open && network.tools === null) {
    const why = network.status.available
      ? 'unavailable'
      : `${network.status.reason} (${network.status.howToFix})`;
    throw new SandboxError(`the user-mode network for setup commands is unavailable: ${why}`);
  }
  // Root loads the egress filter from outside; another user's sandbox owns its network
  // namespace (one user namespace), and loads it inside before the command.
  const filterInside = open && !isRoot();
  const ruleset = open ? runEgressRuleset() : '';
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
  const routes: ForwarderRoute[] = [
    ...(run.modelProxy ? [{ name: 'model', ...run.modelProxy }] : []),
    ...(egress ? [egress] : []),
  ];
  let args: string[];
  let secrets = '';
  // The next descriptor after the network's and the filter's, when there are secrets.
  const secretsFd = BLOCK_FD + (open ? 2 : 0) + (filterInside ? 1 : 0);
  try {
    secrets = run.secretEnv ? secretScript(run.secretEnv, run.env ?? {}) : '';
    args = await bwrapArgs({
      checkout: run.checkout,
      cwd: run.cwd,
      command: run.command,
      limits: run.limits,
      version: ready.version,
      prlimit: ready.prlimit,
      infoFd: INFO_FD,
      startedFd: STARTED_FD,
      ...(open
        ? { blockFd: BLOCK_FD, resolvConfFd: RESOLV_CONF_FD, flatUserns: filterInside }
        : {}),
      ...(filterInside && network.tools
        ? { egress: { fd: EGRESS_FD, nft: network.tools.nft, setpriv: network.tools.setpriv } }
        : {}),
      scratchBytes: run.limits.fileSizeMb * MB,
      ...(run.env || egress
        ? { env: { ...run.env, ...(egress ? proxyEnv(egress.port) : {}) } }
        : {}),
      ...(run.readOnlyBinds ? { readOnlyBinds: run.readOnlyBinds } : {}),
      ...(run.home !== undefined ? { home: run.home } : {}),
      ...(routes.length > 0
        ? { forwarder: { node: process.execPath, source: FORWARDER_SOURCE, routes } }
        : {}),
      separateStderr: separate,
      ...(secrets ? { secretsFd } : {}),
    });
  } catch (err) {
    if (err instanceof InvalidRunError) throw new SandboxError(err.message);
    throw err;
  }
  const grown = run.home === undefined ? [run.checkout] : [run.checkout, run.home];
  const baseline = await diskUsage(grown).catch((err: unknown) => {
    throw new SandboxError(
      `the checkout could not be measured before the run: ${err instanceof Error ? err.message : String(err)}`,
    );
  });
  // Where the probe found a place for them, a run never goes without its groups. Tasks: plus
  // two for bwrap itself and its init, and one for the forwarder.
  const cgroup = await RunCgroup.create(ready.cgroups, {
    tasks: run.limits.processes + 2 + (routes.length > 0 ? 1 : 0),
    memoryBytes: run.limits.memoryMb * MB,
  }).catch((err: unknown) => {
    throw new SandboxError(
      `the run's control group could not be made: ${err instanceof Error ? err.message : String(err)}`,
    );
  });
  // A host shell that then becomes bwrap: it makes the run the first choice of any OOM killer
  // that looks beyond the run's own group (the host's, or a bound on Errand's group), before
  // Errand, and joins the run's groups, so not one fork of the command happens outside them.
  const procsFiles = cgroup?.procsFiles ?? [];
  const file = '/bin/sh';
  const argv = [
    '-c',
    'echo 1000 > /proc/self/oom_score_adj || exit 125; n=$1; shift; ' +
      'while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"',
    'sh',
    String(procsFiles.length),
    ...procsFiles,
    ready.bwrap,
    ...args,
  ];

  const resolvConf = open ? await sandboxResolvConf() : '';
  const inherited = await inheritedDescriptors();
  let attached: Promise<{ stop: () => Promise<void> } | null> | undefined;
  try {
    // Only a PATH: bwrap's own environment (readable in /proc by the host's user) holds nothing
    // of the service's, and --clearenv gives the command none of it either.
    const child = spawn(file, argv, {
      stdio: withInheritedClosed(
        [
          run.stdin === undefined ? 'ignore' : 'pipe',
          'pipe',
          'pipe',
          'pipe',
          'pipe',
          ...(open ? (['pipe', 'pipe'] as const) : []),
          ...(filterInside ? (['pipe'] as const) : []),
          ...(secrets ? (['pipe'] as const) : []),
        ],
        inherited,
      ),
      env: { PATH: SANDBOX_PATH },
      // Not the service's directory: the host shell would export it as PWD.
      cwd: '/',
    });
    // By descriptor and by what the run has, never by the list's length: past its own
    // descriptors the list holds /dev/null or nothing for the inherited ones.
    const pipes = child.stdio as unknown as (Readable | Writable | null)[];
    const stdin = pipes[0] as Writable | null;
    const stdout = pipes[1] as Readable;
    const stderr = pipes[2] as Readable;
    const info = pipes[INFO_FD] as Readable;
    const startedPipe = pipes[STARTED_FD] as Readable;
    const blockPipe = open ? (pipes[BLOCK_FD] as Writable) : undefined;
    const resolvPipe = open ? (pipes[RESOLV_CONF_FD] as Writable) : undefined;
    const secretsPipe = secrets ? (pipes[secretsFd] as Writable) : undefined;
    const filterPipe = filterInside ? (pipes[EGRESS_FD] as Writable) : undefined;
    // bwrap reads the first to its end while it builds the sandbox, nft the second and the
    // wrapper the third before the command; a sandbox that failed first closes them, which is
    // its own error, not this one.
    for (const [pipe, text] of [
      [resolvPipe, resolvConf],
      [filterPipe, ruleset],
      [secretsPipe, secrets],
    ] as const) {
      pipe?.on('error', () => {});
      pipe?.end(text);
    }
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
    let memoryExceeded: { limitMb: number } | undefined;
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
      attached = attachNetwork(tools, init, filterInside ? null : ruleset).then(
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
      const limitMb = run.limits.diskMb;
      return grownMb > limitMb ? { grownMb, limitMb } : undefined;
    };
    // While the command runs: measured now and then (never more than a fifth of the time spent
    // measuring), and stopped at once past the bound. A walk that trips over a file the command
    // is just removing still counts what it saw.
    const watching = new AbortController();
    const watchDisk = async () => {
      let pause = DISK_CHECK_MS;
      while (!exited) {
        try {
          await sleep(pause, undefined, { signal: watching.signal });
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
    // The kernel kills one process of a run out of memory (v1; all of them in v2): the whole
    // run is stopped at once, rather than left to go on without it.
    const watchMemory = async () => {
      while (!exited && cgroup?.bindsMemory) {
        try {
          await sleep(OOM_CHECK_MS, undefined, { signal: watching.signal });
        } catch {
          return;
        }
        if ((await cgroup.oomKills()) > 0 && !exited) {
          memoryExceeded = { limitMb: run.limits.memoryMb };
          await killAll();
          return;
        }
      }
    };
    void watchMemory();
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
      watching.abort();
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
    if (memoryExceeded === undefined && cgroup !== null && (await cgroup.oomKills()) > 0) {
      memoryExceeded = { limitMb: run.limits.memoryMb };
    }
    const text = output.finish();
    const killed = killedWith !== null;
    const stopped = killed ? '; the command was stopped' : '';
    const note =
      (diskExceeded === undefined
        ? ''
        : `\n[errand: the checkout grew by ${diskExceeded.grownMb} MB, over the limit of ${diskExceeded.limitMb} MB${stopped}]\n`) +
      (memoryExceeded === undefined
        ? ''
        : `\n[errand: the command ran out of its ${memoryExceeded.limitMb} MB of memory; ${killed ? 'it was stopped' : 'the kernel killed a process of it'}]\n`);
    return {
      exitCode: killed ? null : code,
      signal: killed ? killedWith : signal,
      timedOut,
      aborted,
      output: text.text + note,
      outputTruncated: text.truncated,
      ...(separate ? { stderr: diagnostics.finish().text } : {}),
      ...(diskExceeded ? { diskExceeded } : {}),
      ...(memoryExceeded ? { memoryExceeded } : {}),
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

export function isRoot(): boolean {
  return process.getuid?.() === 0;
}
