// The project's own commands that make its environment: the setup command, and the maintenance
// command after a restore. Both run in the sandbox with the setup's network and the secrets
// given to setup, and with the project's package cache as HOME (the tools' own caches: ~/.npm,
// ~/.cache/pip, ~/.cargo), which the agent's commands and engines never get.
import type { SetupRun } from '../agent/prompt.ts';
import { outputTail } from '../agent/tools/run-command.ts';
import type { ProjectRow } from '../db/schema.ts';
import type { Emit } from '../events/catalog.ts';
import { TurnFailedError } from '../jobs/runner.ts';
import type { SandboxLimits } from '../projects/limits.ts';
import { projectNetwork } from '../projects/network.ts';
import type { TurnSecret } from '../projects/secrets.ts';
import { runNetwork, runSandboxed, sandboxStatus } from '../sandbox/sandbox.ts';

export interface CommandRun {
  project: ProjectRow;
  secrets: readonly TurnSecret[];
  /** The checkout the command runs in. */
  dir: string;
  limits: SandboxLimits;
  emit: Emit;
  signal: AbortSignal;
}

/** The environment of secrets the setup and maintenance commands run with (both exposures). */
function setupSecretEnv(secrets: readonly TurnSecret[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const s of secrets) env[s.name] = s.value;
  return env;
}

/**
 * Runs the setup (`phase` 'setup') or maintenance command, telling `<phase>.started` and
 * `<phase>.finished`. Fails the turn when the setup needs a network this worker cannot give.
 */
export async function runEnvironmentCommand(
  phase: 'setup' | 'maintenance',
  command: string,
  run: CommandRun,
  home: string,
): Promise<SetupRun & { durationMs: number }> {
  const { setup: network, allow } = projectNetwork(run.project);
  const status = await sandboxStatus();
  if (network === 'open' && status.available && !status.network.available) {
    // Run without it, the setup would fail in ways that hide the cause.
    throw new TurnFailedError(
      `the ${phase} command needs the network, which this worker cannot give it: ${status.network.reason} (${status.network.howToFix})`,
    );
  }
  await run.emit(`${phase}.started`, { command, network });
  const egress = runNetwork(network, allow, run.emit);
  const result = await runSandboxed({
    checkout: run.dir,
    cwd: run.dir,
    command,
    limits: run.limits,
    network: egress.network,
    signal: run.signal,
    secretEnv: setupSecretEnv(run.secrets),
    home,
  });
  await egress.settled();
  run.signal.throwIfAborted();
  const tail = outputTail(result.output);
  await run.emit(`${phase}.finished`, {
    command,
    exitCode: result.exitCode,
    ...(result.signal ? { signal: result.signal } : {}),
    durationMs: result.durationMs,
    timedOut: result.timedOut,
    outputTail: tail,
  });
  return {
    command,
    exitCode: result.exitCode,
    timedOut: result.timedOut,
    outputTail: tail,
    durationMs: result.durationMs,
  };
}
