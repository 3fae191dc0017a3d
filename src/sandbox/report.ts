// The line a process that runs turns logs at start about the sandbox: where it cannot run, why
// and how to enable it, since the agent then works without its run_command tool; and a second
// one where setup commands cannot have their network (pasta missing or not working).
import type { Logger } from '../log.ts';
import type { SandboxStatus } from './sandbox.ts';

export function reportSandboxStatus(log: Logger, status: SandboxStatus): void {
  if (!status.available) {
    log.warn(
      { reason: status.reason, howToFix: status.howToFix },
      'sandbox unavailable: the agent runs without its run_command tool',
    );
  } else if (status.processLimit === 'none') {
    log.warn(
      { bwrap: status.bwrap, version: status.version, processLimit: status.processLimit },
      'sandbox available, but as root without a writable pids cgroup the process limit is not enforced',
    );
  } else {
    log.info(
      { bwrap: status.bwrap, version: status.version, processLimit: status.processLimit },
      'sandbox available',
    );
  }
  if (status.available && !status.network.available) {
    log.warn(
      { reason: status.network.reason, howToFix: status.network.howToFix },
      'setup network unavailable: setup commands of projects with setupNetwork fail',
    );
  }
}
