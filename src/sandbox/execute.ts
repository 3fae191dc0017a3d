// One confined run: the bubblewrap command line started (inside the run's control groups where
// there are some), its output kept, its network attached and filtered, its checkout measured,
// and the whole of it ended on a timeout, an abort, an OOM kill or a checkout grown past its
// bound.
import { type ChildProcess, spawn } from 'node:child_process';
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
import { descendants, signalAll, unreclaimableResident } from './processes.ts';
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
/**
 * Between two looks at the run's memory: its OOM kills (one small file read), or, without a
 * memory group of its own, what its processes hold (a read of /proc per process).
 */
const MEMORY_CHECK_MS = 200;

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

/** How a run is confined, worked out from the run alone before anything starts. */
interface Shape {
  /** network 'open': the user-mode network, its egress filter, and a block until it is up. */
  open: boolean;
  /** The egress filter loaded inside the sandbox rather than from outside (not root). */
  filterInside: boolean;
  ruleset: string;
  /** stdout and stderr kept apart (onStdoutLine). */
  separate: boolean;
  cap: number;
}

function shapeOf(ready: Ready, run: SandboxRun): Shape {
  checkLimits(run.limits);
  const network = ready.network;
  const open = run.network === 'open';
  if (open && network.tools === null) {
    const why = network.status.available
      ? 'unavailable'
      : `${network.status.reason} (${network.status.howToFix})`;
    throw new SandboxError(`the user-mode network for setup commands is unavailable: ${why}`);
  }
  return {
    open,
    // Root loads the egress filter from outside; another user's sandbox owns its network
    // namespace (one user namespace), and loads it inside before the command.
    filterInside: open && !isRoot(),
    ruleset: open ? runEgressRuleset() : '',
    separate: run.onStdoutLine !== undefined,
    cap: run.outputCap ?? DEFAULT_OUTPUT_CAP,
  };
}

/** bwrap's command line for the run, and the secrets its wrapper reads from a descriptor. */
interface Command {
  args: string[];
  secrets: string;
  secretsFd: number;
  /** The forwarder's routes into the sandbox (the model proxy, the MCP bridge, the egress proxy). */
  routes: ForwarderRoute[];
}

async function commandOf(
  ready: Ready,
  run: SandboxRun,
  egress: ForwarderRoute | undefined,
  { open, filterInside, separate }: Shape,
): Promise<Command> {
  const network = ready.network;
  const routes: ForwarderRoute[] = [
    ...(run.modelProxy ? [{ name: 'model', ...run.modelProxy }] : []),
    ...(run.mcpBridge ? [{ name: 'mcp', ...run.mcpBridge }] : []),
    ...(egress ? [egress] : []),
  ];
  // The next descriptor after the network's and the filter's, when there are secrets.
  const secretsFd = BLOCK_FD + (open ? 2 : 0) + (filterInside ? 1 : 0);
  try {
    const secrets = run.secretEnv ? secretScript(run.secretEnv, run.env ?? {}) : '';
    const args = await bwrapArgs({
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
    return { args, secrets, secretsFd, routes };
  } catch (err) {
    if (err instanceof InvalidRunError) throw new SandboxError(err.message);
    throw err;
  }
}

/**
 * A host shell that then becomes bwrap: it makes the run the first choice of any OOM killer
 * that looks beyond the run's own group (the host's, or a bound on Errand's group), before
 * Errand, and joins the run's groups, so not one fork of the command happens outside them.
 */
function hostArgv(bwrap: string, args: readonly string[], cgroup: RunCgroup | null): string[] {
  const procsFiles = cgroup?.procsFiles ?? [];
  return [
    '-c',
    'echo 1000 > /proc/self/oom_score_adj || exit 125; n=$1; shift; ' +
      'while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"',
    'sh',
    String(procsFiles.length),
    ...procsFiles,
    bwrap,
    ...args,
  ];
}

async function confined(
  ready: Ready,
  run: SandboxRun,
  egress: ForwarderRoute | undefined,
): Promise<SandboxResult> {
  const started = performance.now();
  const shape = shapeOf(ready, run);
  if (run.signal.aborted) {
    return {
      exitCode: null,
      signal: null,
      timedOut: false,
      aborted: true,
      output: '',
      outputTruncated: false,
      ...(shape.separate ? { stderr: '' } : {}),
      durationMs: 0,
    };
  }
  const command = await commandOf(ready, run, egress, shape);
  const grown = run.home === undefined ? [run.checkout] : [run.checkout, run.home];
  const baseline = await diskUsage(grown).catch((err: unknown) => {
    throw new SandboxError(
      `the checkout could not be measured before the run: ${err instanceof Error ? err.message : String(err)}`,
    );
  });
  // Where the probe found a place for them, a run never goes without its groups. Tasks: plus
  // two for bwrap itself and its init, and one for the forwarder.
  const cgroup = await RunCgroup.create(ready.cgroups, {
    tasks: run.limits.processes + 2 + (command.routes.length > 0 ? 1 : 0),
    memoryBytes: run.limits.memoryMb * MB,
  }).catch((err: unknown) => {
    throw new SandboxError(
      `the run's control group could not be made: ${err instanceof Error ? err.message : String(err)}`,
    );
  });
  const resolvConf = shape.open ? await sandboxResolvConf() : '';
  const inherited = await inheritedDescriptors();
  const watch = new RunWatch(ready.network.tools, run, shape, cgroup, grown, baseline);
  try {
    const child = spawnSandbox(ready.bwrap, run, shape, command, cgroup, inherited);
    const pipes = pipesOf(child, run, shape, command);
    // bwrap reads the first to its end while it builds the sandbox, nft the second and the
    // wrapper the third before the command; a sandbox that failed first closes them, which is
    // its own error, not this one.
    for (const [pipe, text] of [
      [pipes.resolvConf, resolvConf],
      [pipes.filter, shape.ruleset],
      [pipes.secrets, command.secrets],
    ] as const) {
      pipe?.on('error', () => {});
      pipe?.end(text);
    }
    if (pipes.stdin !== null && run.stdin !== undefined) {
      // A command that never reads its input closes the pipe early: not an error of the run.
      pipes.stdin.on('error', () => {});
      pipes.stdin.end(run.stdin);
    }
    const [code, signal] = await watch.until(child, pipes);
    return await watch.result(code, signal, started);
  } finally {
    await watch.detach();
    await cgroup?.remove();
  }
}

function spawnSandbox(
  bwrap: string,
  run: SandboxRun,
  { open, filterInside }: Shape,
  { args, secrets }: Command,
  cgroup: RunCgroup | null,
  inherited: readonly number[],
): ChildProcess {
  // Only a PATH: bwrap's own environment (readable in /proc by the host's user) holds nothing
  // of the service's, and --clearenv gives the command none of it either.
  return spawn('/bin/sh', hostArgv(bwrap, args, cgroup), {
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
}

/** The sandbox's descriptors, each by what it carries. */
interface Pipes {
  stdin: Writable | null;
  stdout: Readable;
  stderr: Readable;
  /** bwrap's JSON about the sandbox: its init's PID. */
  info: Readable;
  /** Written to once the command starts. */
  started: Readable;
  /** Held until the run's network is up. */
  block: Writable | undefined;
  resolvConf: Writable | undefined;
  secrets: Writable | undefined;
  filter: Writable | undefined;
}

function pipesOf(
  child: ChildProcess,
  run: SandboxRun,
  { open, filterInside }: Shape,
  { secrets, secretsFd }: Command,
): Pipes {
  // By descriptor and by what the run has, never by the list's length: past its own
  // descriptors the list holds /dev/null or nothing for the inherited ones.
  const pipes = child.stdio as unknown as (Readable | Writable | null)[];
  return {
    stdin: run.stdin === undefined ? null : (pipes[0] as Writable | null),
    stdout: pipes[1] as Readable,
    stderr: pipes[2] as Readable,
    info: pipes[INFO_FD] as Readable,
    started: pipes[STARTED_FD] as Readable,
    block: open ? (pipes[BLOCK_FD] as Writable) : undefined,
    resolvConf: open ? (pipes[RESOLV_CONF_FD] as Writable) : undefined,
    secrets: secrets ? (pipes[secretsFd] as Writable) : undefined,
    filter: filterInside ? (pipes[EGRESS_FD] as Writable) : undefined,
  };
}

/**
 * One started run watched to its end: its output kept, its network attached once the sandbox's
 * init is known, and the whole of it stopped on a timeout, an abort, a checkout grown past its
 * bound or an OOM kill; then what it did, as a result.
 */
class RunWatch {
  readonly #tools: NetworkTools | null;
  readonly #run: SandboxRun;
  readonly #shape: Shape;
  readonly #cgroup: RunCgroup | null;
  readonly #grown: readonly string[];
  readonly #baseline: number;
  readonly #output: CappedOutput;
  readonly #diagnostics: CappedOutput;
  readonly #lines: LineSplitter | null;
  readonly #watching = new AbortController();
  #child: ChildProcess | undefined;
  #attached: Promise<{ stop: () => Promise<void> } | null> | undefined;
  #callbackError: unknown;
  #infoText = '';
  #commandStarted = false;
  #networkError: string | null = null;
  #timedOut = false;
  #aborted = false;
  #killedWith: NodeJS.Signals | null = null;
  #exited = false;
  #graceTimer: NodeJS.Timeout | undefined;
  #diskExceeded: { grownMb: number; limitMb: number } | undefined;
  #memoryExceeded: { limitMb: number } | undefined;

  constructor(
    tools: NetworkTools | null,
    run: SandboxRun,
    shape: Shape,
    cgroup: RunCgroup | null,
    grown: readonly string[],
    baseline: number,
  ) {
    this.#tools = tools;
    this.#run = run;
    this.#shape = shape;
    this.#cgroup = cgroup;
    this.#grown = grown;
    this.#baseline = baseline;
    this.#output = new CappedOutput(shape.cap);
    this.#diagnostics = new CappedOutput(shape.separate ? shape.cap : DIAGNOSTICS_CAP);
    this.#lines = shape.separate ? new LineSplitter() : null;
  }

  /** Watches the run until its process has closed (and its init is gone): its code and signal. */
  async until(child: ChildProcess, pipes: Pipes): Promise<[number | null, NodeJS.Signals | null]> {
    this.#child = child;
    pipes.stdout.on('data', (chunk: Buffer) => {
      this.#output.write(chunk);
      if (this.#lines) for (const line of this.#lines.push(chunk)) this.#deliver(line);
    });
    pipes.stderr.on('data', (chunk: Buffer) => this.#diagnostics.write(chunk));
    pipes.info.on('data', (chunk: Buffer) => this.#onInfo(chunk, pipes.block));
    pipes.started.on('data', () => {
      this.#commandStarted = true;
      void this.#watchDisk();
    });
    void this.#watchMemory();
    const run = this.#run;
    const timer = setTimeout(() => {
      this.#timedOut = true;
      void this.#terminate();
    }, run.limits.timeoutSeconds * 1000);
    const onAbort = () => {
      // During a timeout's grace too: an abort does not wait.
      if (!this.#timedOut) this.#aborted = true;
      void this.#killAll();
    };
    run.signal.addEventListener('abort', onAbort, { once: true });

    const closed = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (c, s) => resolve([c, s]));
    }).finally(() => {
      this.#exited = true;
      this.#watching.abort();
      clearTimeout(timer);
      clearTimeout(this.#graceTimer);
      run.signal.removeEventListener('abort', onAbort);
    });

    // After a kill the init may still be reaping its namespace (its descriptors already
    // closed): the run is over only once it is gone, and with it every process it held.
    const init = this.#sandboxInit();
    if (init !== null) await gone(init);
    if (this.#lines) for (const line of this.#lines.end()) this.#deliver(line);
    if (this.#callbackError !== undefined) throw this.#callbackError;
    return closed;
  }

  /** What the run did, once it is over: its bounds checked a last time. */
  async result(
    code: number | null,
    signal: NodeJS.Signals | null,
    started: number,
  ): Promise<SandboxResult> {
    const run = this.#run;
    const cgroup = this.#cgroup;
    if (!this.#commandStarted && !this.#timedOut && !this.#aborted) {
      if (this.#networkError !== null) {
        throw new SandboxError(`the user-mode network failed to start: ${this.#networkError}`);
      }
      const why = this.#diagnostics.finish().text.trim() || `bwrap exited with ${code ?? signal}`;
      throw new SandboxError(`sandbox failed to start: ${why}`);
    }
    // Nothing runs any more: this measurement is exact, and one that fails counts against it.
    if (this.#diskExceeded === undefined && this.#commandStarted) {
      const bytes = await diskUsage(this.#grown).catch((err: unknown) => {
        throw new SandboxError(
          `the checkout could not be measured after the run: ${err instanceof Error ? err.message : String(err)}`,
        );
      });
      this.#diskExceeded = this.#overLimit(bytes);
    }
    if (this.#memoryExceeded === undefined && cgroup !== null && (await cgroup.oomKills()) > 0) {
      this.#memoryExceeded = { limitMb: run.limits.memoryMb };
    }
    const diskExceeded = this.#diskExceeded;
    const memoryExceeded = this.#memoryExceeded;
    const text = this.#output.finish();
    const killed = this.#killedWith !== null;
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
      signal: killed ? this.#killedWith : signal,
      timedOut: this.#timedOut,
      aborted: this.#aborted,
      output: text.text + note,
      outputTruncated: text.truncated,
      ...(this.#shape.separate ? { stderr: this.#diagnostics.finish().text } : {}),
      ...(diskExceeded ? { diskExceeded } : {}),
      ...(memoryExceeded ? { memoryExceeded } : {}),
      durationMs: Math.round(performance.now() - started),
    };
  }

  /** Takes the run's network down, once it has come up (or failed to). */
  async detach(): Promise<void> {
    const net = await this.#attached;
    await net?.stop();
  }

  #deliver(line: string): void {
    if (this.#callbackError !== undefined || this.#run.onStdoutLine === undefined) return;
    try {
      this.#run.onStdoutLine(line);
    } catch (err) {
      this.#callbackError = err;
      void this.#killAll();
    }
  }

  #sandboxInit(): number | null {
    const match = /"child-pid"\s*:\s*(\d+)/.exec(this.#infoText);
    return match ? Number(match[1]) : null;
  }

  #onInfo(chunk: Buffer, blockPipe: Writable | undefined): void {
    if (this.#infoText.length < 64_000) this.#infoText += chunk.toString('utf8');
    const init = this.#sandboxInit();
    if (init === null || blockPipe === undefined || this.#attached !== undefined) return;
    const tools = this.#tools;
    if (tools === null) return;
    // The sandbox waits on the block descriptor until its network is up.
    this.#attached = attachNetwork(
      tools,
      init,
      this.#shape.filterInside ? null : this.#shape.ruleset,
    ).then(
      (net) => {
        blockPipe.on('error', () => {});
        blockPipe.end('1');
        return net;
      },
      (err: unknown) => {
        this.#networkError = err instanceof Error ? err.message : String(err);
        void this.#killAll();
        return null;
      },
    );
  }

  async #killAll(): Promise<void> {
    this.#killedWith = 'SIGKILL';
    // The init's death tears down its PID namespace: the kernel kills every process in it.
    const init = this.#sandboxInit();
    if (init !== null) signalAll([init], 'SIGKILL');
    if (this.#child?.pid !== undefined) signalAll([this.#child.pid], 'SIGKILL');
    if (this.#cgroup) signalAll(await this.#cgroup.pids(), 'SIGKILL');
  }

  async #terminate(): Promise<void> {
    const init = this.#sandboxInit();
    const pids = init === null ? [] : await descendants(init);
    if (this.#cgroup) pids.push(...(await this.#cgroup.pids()));
    if (this.#exited) return;
    signalAll(
      pids.filter((p) => p !== init && p !== this.#child?.pid),
      'SIGTERM',
    );
    this.#graceTimer = setTimeout(() => void this.#killAll(), TERM_GRACE_MS);
  }

  #overLimit(bytes: number): { grownMb: number; limitMb: number } | undefined {
    const grownMb = Math.ceil(Math.max(0, bytes - this.#baseline) / MB);
    const limitMb = this.#run.limits.diskMb;
    return grownMb > limitMb ? { grownMb, limitMb } : undefined;
  }

  // While the command runs: measured now and then (never more than a fifth of the time spent
  // measuring), and stopped at once past the bound. A walk that trips over a file the command
  // is just removing still counts what it saw.
  async #watchDisk(): Promise<void> {
    let pause = DISK_CHECK_MS;
    while (!this.#exited) {
      try {
        await sleep(pause, undefined, { signal: this.#watching.signal });
      } catch {
        return;
      }
      const before = performance.now();
      const bytes = await diskUsage(this.#grown).catch((err: unknown) =>
        err instanceof MeasureError ? err.partial : null,
      );
      if (this.#exited) return;
      const over = bytes === null ? undefined : this.#overLimit(bytes);
      if (over) {
        this.#diskExceeded = over;
        await this.#killAll();
        return;
      }
      pause = Math.max(DISK_CHECK_MS, 5 * (performance.now() - before));
    }
  }

  // With a memory group of its own, the kernel kills one process of a run out of memory (v1;
  // all of them in v2): the whole run is stopped at once, rather than left to go on without
  // it. Without one (a container, a worker that is not root), what the run's processes hold
  // together is looked at instead, and the run stopped past its bound: a bound a fast
  // allocation can outrun between two looks, which RLIMIT_DATA still caps per process.
  async #watchMemory(): Promise<void> {
    const cgroup = this.#cgroup;
    const over = cgroup?.bindsMemory
      ? async () => (await cgroup.oomKills()) > 0
      : async () => {
          const init = this.#sandboxInit();
          if (init === null) return false;
          const held = await unreclaimableResident(await descendants(init));
          return held > this.#run.limits.memoryMb * MB;
        };
    while (!this.#exited) {
      try {
        await sleep(MEMORY_CHECK_MS, undefined, { signal: this.#watching.signal });
      } catch {
        return;
      }
      if ((await over()) && !this.#exited) {
        this.#memoryExceeded = { limitMb: this.#run.limits.memoryMb };
        await this.#killAll();
        return;
      }
    }
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
