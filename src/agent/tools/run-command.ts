// run_command: the agent runs one of the repository's commands (its tests, linters, build)
// with `sh -c` in the job's checkout, confined by the sandbox (src/sandbox/): no network but the
// hosts of the project's allowlist where it has one, only the checkout writable, the project's
// limits. It is built per turn and offered only where the
// project allows commands and the sandbox works; nothing here ever runs a command unconfined.

import { stat } from 'node:fs/promises';
import { type Tool, tool } from 'ai';
import { z } from 'zod';
import type { Emit } from '../../events/catalog.ts';
import type { SandboxLimits } from '../../projects/limits.ts';
import { type CommandsNetwork, NETWORK_PRESETS } from '../../projects/network.ts';
import { runNetwork, runSandboxed } from '../../sandbox/sandbox.ts';
import type { SandboxResult } from '../../sandbox/types.ts';
import { type ScrubSecret, scrubSecrets } from '../../secrets/scrub.ts';
import { oneLine } from '../../text.ts';
import { quote, realRootOf, resolvePath, ToolError } from './paths.ts';
import type { ToolArgs } from './tool.ts';
import type { ToolResult } from './tool-run.ts';

export const RUN_COMMAND = 'run_command';

/** Characters of output the model reads: the head and the tail, with a note of what was cut. */
export const COMMAND_OUTPUT_CAP = 30_000;
/** Characters of the output's end kept in command.finished and setup.finished events. */
export const EVENT_OUTPUT_TAIL = 500;
/** A command line longer than this is refused: it is a script to write into a file instead. */
const COMMAND_MAX_CHARS = 16_000;

export interface RunCommandOptions {
  /** The job's checkout. */
  root: string;
  /** The project's limits; timeoutSeconds is also the longest timeout the model may ask for. */
  limits: SandboxLimits;
  /** The turn's signal: the job archived or the turn ended kills the command. */
  signal: AbortSignal;
  /** Records command.started and command.finished; the caller scrubs secrets out of events. */
  emit: Emit;
  /** Values never shown to the model, should a command's output hold one. */
  secrets: readonly ScrubSecret[];
  /** The project's secrets for the agent's commands (exposure "commands"), in their environment. */
  secretEnv?: Readonly<Record<string, string>>;
  /** What commands may reach (default: nothing); each refusal is a `network.denied` event. */
  network?: CommandsNetwork | undefined;
}

const inputSchema = z.object({
  command: z
    .string()
    .describe(
      "A shell command line, run with 'sh -c', e.g. 'npm test' or 'make lint 2>&1 | tail -50'.",
    ),
  cwd: z
    .string()
    .optional()
    .describe("Folder to run in, relative to the repository root (default: the root), e.g. 'web'."),
  timeoutSeconds: z
    .number()
    .int()
    .positive()
    .optional()
    .describe("Stop the command after this many seconds (default and most: the project's limit)."),
});

export type RunCommandInput = z.output<typeof inputSchema>;

function runCommandDescription(
  limits: SandboxLimits,
  network: CommandsNetwork | undefined,
): string {
  return (
    "Run a shell command in the repository (sh -c, in the repository root unless 'cwd' is " +
    'given) and get its exit code and output (stdout and stderr together). Use it to run the ' +
    `repository's tests, linters, type checks and builds. It runs in a sandbox: ${networkWords(network)}, ` +
    'only the repository is writable (and not its .git folder), nothing outside it is visible, ' +
    `and each command is stopped after ${limits.timeoutSeconds} s. Files it writes in the ` +
    'repository are committed like your own edits, so clean up anything you do not mean to ' +
    `commit. Output over ${COMMAND_OUTPUT_CAP.toLocaleString('en-US')} characters keeps its ` +
    'start and end; pipe long output through tail or grep.'
  );
}

/**
 * The network, as the model is told it: none, or HTTP and HTTPS to the allowlist's hosts through
 * the proxy the environment names (the patterns as the project gives them, a preset's hosts
 * spelled out), so that it neither tries what cannot work nor takes a refusal for an outage.
 */
function networkWords(network: CommandsNetwork | undefined): string {
  if (network === undefined || network.mode === 'none') return 'no network';
  const hosts = network.allow.flatMap((p) => NETWORK_PRESETS[p.toLowerCase()] ?? [p]);
  return hosts.length === 0
    ? 'no network (an HTTP proxy is set in its environment, but it lets no host through)'
    : `no network but HTTP and HTTPS, through the proxy set in its environment (HTTP_PROXY, HTTPS_PROXY), to these hosts only: ${hosts.join(', ')} (a refused host answers 403)`;
}

export function summarizeRunCommand(args: ToolArgs): string {
  const cwd = args.str('cwd');
  return `${RUN_COMMAND} ${args.str('command') ?? '?'}${cwd && cwd !== '.' ? ` (in ${cwd})` : ''}`;
}

/** The run_command tool for one turn, as the agent loop takes it. */
export function createRunCommandTool(opts: RunCommandOptions): Tool {
  return tool({
    description: runCommandDescription(opts.limits, opts.network),
    inputSchema,
    execute: (input, { abortSignal }): Promise<ToolResult> => {
      const signal = abortSignal ? AbortSignal.any([opts.signal, abortSignal]) : opts.signal;
      return runCommand({ ...opts, signal }, input);
    },
    // A command that ran reads as plain text whatever its exit code (the text says it); only a
    // call refused before anything ran is an error result where the provider can say so.
    toModelOutput: ({ output }) => ({
      type: output.text.startsWith('Error: ') ? 'error-text' : 'text',
      value: output.text,
    }),
  });
}

/**
 * Runs one call. A command that fails, times out or is refused is a result for the model;
 * a cancelled turn throws, as the file tools do.
 */
export async function runCommand(
  opts: RunCommandOptions,
  input: RunCommandInput,
): Promise<ToolResult> {
  const { signal } = opts;
  signal.throwIfAborted();
  let cwd: { root: string; real: string; display: string };
  try {
    cwd = await commandDir(opts.root, input);
  } catch (err) {
    if (!(err instanceof ToolError)) throw err;
    return { ok: false, title: err.message, text: `Error: ${err.message}` };
  }
  const max = opts.limits.timeoutSeconds;
  const asked = input.timeoutSeconds;
  const timeoutSeconds = asked === undefined ? max : Math.min(asked, max);

  await opts.emit('command.started', { command: input.command, cwd: cwd.display });
  const egress = runNetwork(opts.network?.mode ?? 'none', opts.network?.allow ?? [], opts.emit);
  const result = await runSandboxed({
    // Both real paths: the sandbox places the folder by its path relative to the checkout.
    checkout: cwd.root,
    cwd: cwd.real,
    command: input.command,
    limits: { ...opts.limits, timeoutSeconds },
    network: egress.network,
    signal,
    outputCap: COMMAND_OUTPUT_CAP,
    ...(opts.secretEnv ? { secretEnv: opts.secretEnv } : {}),
  });
  await egress.settled();
  await opts.emit('command.finished', {
    command: input.command,
    exitCode: result.exitCode,
    ...(result.signal ? { signal: result.signal } : {}),
    durationMs: result.durationMs,
    timedOut: result.timedOut,
    outputTail: outputTail(result.output),
  });
  // The turn was cancelled: nothing is left to tell the model.
  if (result.aborted || signal.aborted) signal.throwIfAborted();

  const ok =
    result.exitCode === 0 &&
    !result.timedOut &&
    result.diskExceeded === undefined &&
    result.memoryExceeded === undefined;
  const status = describeExit(result, timeoutSeconds);
  const notes: string[] = [];
  if (asked !== undefined && asked > max) {
    notes.push(`(timeoutSeconds ${asked} is over the project's limit; ${max} s was used)`);
  }
  const output = result.output === '' ? '(no output)' : result.output;
  const text = scrubSecrets(
    `$ ${input.command}${cwd.display === '.' ? '' : `   (in ${cwd.display})`}\n${status}\n${notes.map((n) => `${n}\n`).join('')}\n${output}`,
    opts.secrets,
  );
  return { ok, title: `${oneLine(input.command, 80)}: ${status}`, text };
}

/** The command's folder, by the file tools' rules: inside the checkout, never under .git/. */
async function commandDir(
  root: string,
  input: RunCommandInput,
): Promise<{ root: string; real: string; display: string }> {
  if (typeof input.command !== 'string' || input.command.trim() === '') {
    throw new ToolError('command is empty');
  }
  if (input.command.includes('\0')) throw new ToolError('command contains a NUL byte');
  if (input.command.length > COMMAND_MAX_CHARS) {
    throw new ToolError(
      `command is ${input.command.length} characters; at most ${COMMAND_MAX_CHARS} are accepted (write a script file and run it)`,
    );
  }
  const target = await resolvePath(root, input.cwd ?? '.');
  const found = await stat(target.real).catch(() => undefined);
  if (found === undefined) throw new ToolError(`folder ${quote(target.display)} does not exist`);
  if (!found.isDirectory()) throw new ToolError(`${quote(target.display)} is not a folder`);
  return { root: await realRootOf(root), real: target.real, display: target.display };
}

function describeExit(result: SandboxResult, timeoutSeconds: number): string {
  const took = formatDuration(result.durationMs);
  if (result.timedOut) {
    return `Timed out: stopped after its time limit of ${timeoutSeconds} s (every process it started was killed).`;
  }
  const disk = result.diskExceeded;
  if (disk && result.exitCode === null) {
    return `Stopped: it grew the repository by ${disk.grownMb} MB, over the limit of ${disk.limitMb} MB (${took}).`;
  }
  if (disk) {
    return `Exit code: ${result.exitCode} (${took}), but it grew the repository by ${disk.grownMb} MB, over the limit of ${disk.limitMb} MB.`;
  }
  const memory = result.memoryExceeded;
  if (memory && result.exitCode === null) {
    return `Stopped: it ran out of its ${memory.limitMb} MB of memory, all its processes together (${took}).`;
  }
  if (memory) {
    return `Exit code: ${result.exitCode} (${took}), but it ran out of its ${memory.limitMb} MB of memory, all its processes together, and one of them was killed.`;
  }
  if (result.exitCode !== null) return `Exit code: ${result.exitCode} (${took})`;
  return `Killed by signal ${result.signal ?? 'unknown'} (${took}); a limit on CPU time, memory, processes or file size may have stopped it.`;
}

/** The end of a command's output for an event: at most EVENT_OUTPUT_TAIL characters. */
export function outputTail(output: string): string {
  return output.length <= EVENT_OUTPUT_TAIL ? output : `…${output.slice(-EVENT_OUTPUT_TAIL + 1)}`;
}

function formatDuration(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}
