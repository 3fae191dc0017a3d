// The check command of a best-of-N turn (docs/eval.md): run by `sh -c` in the sandbox on an
// attempt's finished checkout, the way the agent's run_command runs a command (the project's
// command limits, its network, its secrets exposed to commands), after the project's
// environment is restored into that checkout. Its exit code judges the attempt; the last lines
// of its output, secrets removed, say why.
import { realpath } from 'node:fs/promises';
import type { ProjectRow } from '../db/schema.ts';
import type { Environments } from '../environments/environments.ts';
import type { Emit } from '../events/catalog.ts';
import { commandsNetwork } from '../projects/network.ts';
import type { TurnSecret } from '../projects/secrets.ts';
import { projectCommandLimits } from '../projects/service.ts';
import { runNetwork, runSandboxed, sandboxStatus } from '../sandbox/sandbox.ts';
import { type ScrubSecret, scrubSecrets } from '../secrets/scrub.ts';
import { secretEnv } from './secrets.ts';

/** Lines of the check's output kept: its end, where a test runner says what failed. */
const TAIL_LINES = 40;
/** Characters of the check's output kept, at most. */
const TAIL_CHARS = 4096;
/** Characters the sandbox keeps of the output (head and tail); only the tail is read. */
const OUTPUT_CAP = 64 * 1024;

/** What the check said of a checkout. */
export interface CheckResult {
  /** Its exit code; null when it was stopped (time, memory, disk). */
  exitCode: number | null;
  /** The last lines of its output, secrets removed. */
  outputTail: string;
  durationMs: number;
}

/** The check could not run at all: the sandbox does not work on this worker. */
export class CheckUnavailableError extends Error {
  override name = 'CheckUnavailableError';
}

export interface CheckRun {
  project: ProjectRow;
  /** The project's secrets, opened: exposed to the command by exposure "commands". */
  projectSecrets: readonly TurnSecret[];
  /** Every value scrubbed from the output (Errand's own, the project's in every form). */
  scrub: readonly ScrubSecret[];
  environments: Environments;
  /** The finished checkout. */
  dir: string;
  /** The commit the checkout's turn started from (recorded with a snapshot made from it). */
  baseCommit: string;
  command: string;
  emit: Emit;
  signal: AbortSignal;
}

/**
 * Runs the check command on the checkout and returns its verdict. Throws
 * CheckUnavailableError where the sandbox does not work: nothing runs unconfined.
 */
export async function runCheck(run: CheckRun): Promise<CheckResult> {
  const { project, signal } = run;
  const status = await sandboxStatus();
  if (!status.available) {
    throw new CheckUnavailableError(
      `the check command cannot run: the sandbox is unavailable here: ${status.reason}; ${status.howToFix}`,
    );
  }
  const limits = projectCommandLimits(project);
  // What the agent's commands had: the environment its setup made, restored (or built) again
  // over the finished tree, since the agent may have changed what it installed.
  await run.environments.prepare({
    project,
    secrets: run.projectSecrets,
    dir: run.dir,
    baseCommit: run.baseCommit,
    limits,
    emit: run.emit,
    signal,
  });
  const checkout = await realpath(run.dir);
  const network = commandsNetwork(project);
  const egress = runNetwork(network.mode, network.allow, run.emit);
  const result = await runSandboxed({
    checkout,
    cwd: checkout,
    command: run.command,
    limits,
    network: egress.network,
    signal,
    outputCap: OUTPUT_CAP,
    secretEnv: secretEnv(run.projectSecrets, 'commands'),
  });
  await egress.settled();
  if (result.aborted || signal.aborted) signal.throwIfAborted();
  const stopped =
    result.timedOut || result.diskExceeded !== undefined || result.memoryExceeded !== undefined;
  const note = result.timedOut ? `\n(stopped after ${limits.timeoutSeconds} s)` : '';
  return {
    exitCode: stopped ? null : result.exitCode,
    outputTail: tail(scrubSecrets(result.output, run.scrub) + note),
    durationMs: Math.round(result.durationMs),
  };
}

/** The last TAIL_LINES lines of `text`, at most TAIL_CHARS characters. */
function tail(text: string): string {
  const lines = text.replace(/\s+$/, '').split('\n');
  const kept = lines.slice(-TAIL_LINES).join('\n');
  return kept.length > TAIL_CHARS ? kept.slice(-TAIL_CHARS) : kept;
}
