// What a confined run is given and what it gives back, and what the sandbox's probe reports:
// shared by the probe, the runner (execute.ts) and the entry points (sandbox.ts), so that
// imports among them run one way.
import type { SandboxLimits } from '../projects/limits.ts';
import type { HostPattern } from '../projects/network.ts';
import type { EgressDenial } from './egress-proxy.ts';

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
       * How the memory limit is enforced for all of a run's processes together: by a memory
       * cgroup of the run's own, or, where none can be made (not root, or no writable memory
       * controller: a container), by watching what its processes hold (every 200 ms; the run is
       * stopped past the bound) with RLIMIT_DATA on each process.
       */
      memoryLimit: 'cgroup' | 'watch';
      /** The user-mode network of network 'open' (pasta), or why there is none. */
      network: NetworkStatus;
    }
  | { available: false; reason: string; howToFix: string };

export type NetworkStatus =
  | { available: true; pasta: string }
  | { available: false; reason: string; howToFix: string };

/**
 * A run's network. 'none': its own loopback only (a new network namespace). 'open': outbound
 * access through a user-mode network (pasta) to public addresses only (egress.ts). An allowlist:
 * its own loopback and the egress proxy (egress-proxy.ts), which lets through HTTP and HTTPS to
 * the hosts `allow` names only, reached at EGRESS_PROXY_PORT with HTTP_PROXY and HTTPS_PROXY set
 * for it; each refusal is told to `onDenied`.
 */
export type SandboxNetwork =
  | 'none'
  | 'open'
  | { allow: readonly HostPattern[]; onDenied: (denial: EgressDenial) => void };

export interface SandboxRun {
  /** The job's checkout (absolute): the only writable place; its .git read-only. */
  checkout: string;
  /** Where the command starts: the checkout or a directory inside it (absolute, already checked). */
  cwd: string;
  /** Run as `sh -c <command>`, in the checkout mounted at /workspace. */
  command: string;
  limits: SandboxLimits;
  /** What the command may reach beyond its own loopback (SandboxNetwork). */
  network: SandboxNetwork;
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
   * model API at http://127.0.0.1:<port> (with network 'none', its only way out).
   */
  modelProxy?: { socketPath: string; port: number };
  /**
   * The MCP bridge of an engine's turn (src/features/mcp-servers/bridge.ts), forwarded as the
   * model proxy is: the engine reaches the remote MCP servers at http://127.0.0.1:<port>/mcp/.
   */
  mcpBridge?: { socketPath: string; port: number };
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
   * The run used all of its memory (limits.memoryMb, for all its processes together): the
   * kernel killed a process of it (a memory cgroup) or the watch of its processes saw them hold
   * more (status.memoryLimit `watch`), and the run was stopped at once. A clear sentence is
   * also appended to `output`.
   */
  memoryExceeded?: { limitMb: number };
  durationMs: number;
}
