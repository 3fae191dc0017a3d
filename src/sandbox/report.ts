// The line a process that runs turns logs at start about the sandbox: where it cannot run, why
// and how to enable it, since the agent then works without its run_command tool; and more where
// a run's memory is watched rather than bound by a memory cgroup, or where setup commands cannot
// have an open network (pasta or nft missing or not working); and the value of
// errand_sandbox_run_bounds.
import type { Logger } from '../log.ts';
import type { SandboxStatus } from './types.ts';

const HOW_TO_MEMORY_CGROUP =
  'run the worker as root where the memory controller is writable (cgroup v1 at ' +
  "/sys/fs/cgroup/memory, or v2 with memory in the subtree_control of the worker's cgroup's parent); " +
  'in a container, where it is not, what a run takes before the watch stops it is charged to the ' +
  'container: size its memory limit for ERRAND_CONCURRENCY runs at once (docs/deploy.md#memory)';

/**
 * 1 where each run gets a control group of its own for `controller` (errand_sandbox_run_bounds),
 * else 0: no sandbox, or a bound by watching (memory), per process (RLIMIT_NPROC) or none.
 */
export function runBound(status: SandboxStatus, controller: 'memory' | 'pids'): 0 | 1 {
  if (!status.available) return 0;
  const how = controller === 'memory' ? status.memoryLimit : status.processLimit;
  return how === 'cgroup' ? 1 : 0;
}

export function reportSandboxStatus(log: Logger, status: SandboxStatus): void {
  if (!status.available) {
    log.warn(
      { reason: status.reason, howToFix: status.howToFix },
      'sandbox unavailable: the agent runs without its run_command tool',
    );
  } else if (status.processLimit === 'none') {
    log.warn(
      {
        bwrap: status.bwrap,
        version: status.version,
        processLimit: status.processLimit,
        memoryLimit: status.memoryLimit,
      },
      'sandbox available, but as root without a writable pids cgroup the process limit is not enforced',
    );
  } else {
    log.info(
      {
        bwrap: status.bwrap,
        version: status.version,
        processLimit: status.processLimit,
        memoryLimit: status.memoryLimit,
      },
      'sandbox available',
    );
  }
  if (status.available && status.memoryLimit !== 'cgroup') {
    log.warn(
      { memoryLimit: status.memoryLimit, howToFix: HOW_TO_MEMORY_CGROUP },
      "sandbox without a memory cgroup: a run's memory is watched, every 200 ms, and a fast allocation can outrun the watch",
    );
  }
  if (status.available && !status.network.available) {
    log.warn(
      { reason: status.network.reason, howToFix: status.network.howToFix },
      'setup network unavailable: setup commands of projects whose network.setup is open fail',
    );
  }
}
