// Runs a repository's command (the model's, or a project's setup command) confined by
// bubblewrap: its own namespaces, the system read-only, only the job's checkout writable, no
// service environment or data, bounded in time, CPU, memory, processes and file size, and
// nothing of it left running afterwards. Where bubblewrap cannot run, nothing runs at all.
import type { EventData } from '../events/catalog.ts';
import { parseAllowList } from '../projects/network.ts';
import { execute, type Ready, SandboxError } from './execute.ts';
import { probe } from './probe.ts';
import type { SandboxNetwork, SandboxResult, SandboxRun, SandboxStatus } from './types.ts';

/** A run's network under a project's policy, and the refusals it told. */
export interface RunNetwork {
  network: SandboxNetwork;
  /** Waits for the `network.denied` events of the run; throws the first that failed. */
  settled(): Promise<void>;
}

/**
 * The network of one run under a project's policy mode ('none', 'open', or 'allowlist' with the
 * project's patterns). Each refusal of the run's egress proxy is emitted as it happens, as a
 * `network.denied` event naming the host, the port and why (the proxy tells each host and port
 * once a run).
 */
export function runNetwork(
  mode: 'none' | 'open' | 'allowlist',
  allow: readonly string[],
  emit: (type: 'network.denied', data: EventData<'network.denied'>) => Promise<void>,
): RunNetwork {
  if (mode !== 'allowlist') return { network: mode, settled: async () => {} };
  const patterns = parseAllowList(allow);
  // The project service takes no pattern the parser refuses: one stored otherwise is a bug.
  if ('error' in patterns)
    throw new SandboxError(`the network allowlist is not valid: ${patterns.error}`);
  const pending: Promise<void>[] = [];
  let failed: { error: unknown } | undefined;
  return {
    network: {
      allow: patterns,
      onDenied: (denial) => {
        // Caught at once (an emit may fail while the run goes on) and thrown by settled().
        pending.push(
          emit('network.denied', { ...denial }).catch((error: unknown) => {
            failed ??= { error };
          }),
        );
      },
    },
    async settled() {
      await Promise.all(pending);
      if (failed) throw failed.error;
    },
  };
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
