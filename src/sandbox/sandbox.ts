// Runs a repository's command (the model's, or a project's setup command) confined by
// bubblewrap: its own namespaces, the system read-only, only the job's checkout writable, no
// service environment or data, bounded in time, CPU, memory, processes and file size, and
// nothing of it left running afterwards. Where bubblewrap cannot run, nothing runs at all.
import type { SandboxLimits } from '../projects/limits.ts';
import { execute, type Ready, SandboxError } from './execute.ts';
import { probe } from './probe.ts';

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
      /**
       * How the memory limit is enforced: a memory cgroup for all of a run's processes together,
       * or RLIMIT_DATA per process only (no memory cgroup could be made: not root, or no
       * writable memory controller).
       */
      memoryLimit: 'cgroup' | 'rlimit';
      /** The user-mode network setup commands get with `network` (pasta), or why there is none. */
      network: NetworkStatus;
    }
  | { available: false; reason: string; howToFix: string };

export type NetworkStatus =
  | { available: true; pasta: string }
  | { available: false; reason: string; howToFix: string };

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
   * through a user-mode network (pasta) to public addresses only (egress.ts).
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
  /**
   * Secrets for the command's environment (a project's, by exposure), over the sandbox's own
   * variables but never over the sandbox's PATH, HOME, LANG, TERM, TMPDIR or `env` (an engine's
   * own win). On no command line and in no file: the sandbox's wrapper reads them from a pipe
   * just before the command starts, so bwrap's argv and environment hold none of them.
   */
  secretEnv?: Readonly<Record<string, string>>;
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
   * The checkout grew past its bound (limits.diskMb, measured while the command runs and at its
   * end): the run was stopped, or the command had ended over it. A clear sentence is also
   * appended to `output`.
   */
  diskExceeded?: { grownMb: number; limitMb: number };
  /**
   * The run used all of its memory (limits.memoryMb, for all its processes together) and the
   * kernel killed a process of it: the rest was stopped at once. A clear sentence is also
   * appended to `output`. Only where a memory cgroup bounds the run (status.memoryLimit).
   */
  memoryExceeded?: { limitMb: number };
  durationMs: number;
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
