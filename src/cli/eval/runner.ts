// Where `errand eval from-git` runs a repository's setup and test commands: in the bubblewrap
// sandbox (src/sandbox/: no network, only the worktree writable, bounded in time and memory)
// when this machine has it; unconfined, with the user's rights and network (but not the
// variables that look like secrets), only when the user said so with --unsandboxed.
import { spawn } from 'node:child_process';
import { DEFAULT_LIMITS } from '../../projects/limits.ts';
import { SandboxError } from '../../sandbox/execute.ts';
import { runSandboxed, sandboxStatus } from '../../sandbox/sandbox.ts';
import { CliError } from '../errors.ts';

export interface CommandResult {
  /** null: killed (timed out). */
  exitCode: number | null;
  timedOut: boolean;
  /** stdout and stderr, the end of them kept. */
  output: string;
}

export interface CommandRunner {
  /** Whether the commands run in the sandbox. */
  readonly confined: boolean;
  /**
   * Runs `command` with `sh -c` in `dir`, the only place it may write (when confined); with
   * `network`, it may reach public addresses (a setup that installs dependencies).
   */
  run(dir: string, command: string, network?: boolean): Promise<CommandResult>;
}

/** The characters of output kept from an unconfined run: its end. */
const KEEP = 30_000;

/**
 * The sandbox, or with `unconfinedAllowed` plain `sh -c` when the sandbox is unavailable.
 * `networkWanted`: some command will ask for the network, which the sandbox must then be able
 * to give.
 */
export async function commandRunner(
  unconfinedAllowed: boolean,
  networkWanted: boolean,
  env: NodeJS.ProcessEnv,
): Promise<CommandRunner> {
  const status = await sandboxStatus();
  if (status.available && networkWanted && !status.network.available)
    throw new CliError(
      `the sandbox cannot give the setup command the network here: ${status.network.reason} (${status.network.howToFix})`,
    );
  if (status.available) return sandboxRunner();
  if (!unconfinedAllowed)
    throw new CliError(
      `the bubblewrap sandbox is not available here (${status.reason}; ${status.howToFix}), so the setup and test commands would run unconfined, with your rights and your network: pass --unsandboxed to allow that`,
    );
  return unconfinedRunner(env);
}

function sandboxRunner(): CommandRunner {
  return {
    confined: true,
    async run(dir, command, network = false) {
      const result = await runSandboxed({
        checkout: dir,
        cwd: dir,
        command,
        limits: DEFAULT_LIMITS,
        network: network ? 'open' : 'none',
        signal: new AbortController().signal,
      }).catch((err: unknown) => {
        if (err instanceof SandboxError) throw new CliError(`the sandbox failed: ${err.message}`);
        throw err;
      });
      return { exitCode: result.exitCode, timedOut: result.timedOut, output: result.output };
    },
  };
}

/** Variables an unconfined command does not get: Errand's own, and what looks like a secret. */
const WITHHELD = /^ERRAND_|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL/i;

function unconfinedRunner(all: NodeJS.ProcessEnv): CommandRunner {
  const env = Object.fromEntries(Object.entries(all).filter(([name]) => !WITHHELD.test(name)));
  return {
    confined: false,
    run(dir, command) {
      return new Promise((resolve, reject) => {
        const child = spawn('sh', ['-c', command], {
          cwd: dir,
          env,
          detached: true,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let output = '';
        const keep = (chunk: Buffer) => {
          output = (output + chunk.toString('utf8')).slice(-KEEP);
        };
        child.stdout.on('data', keep);
        child.stderr.on('data', keep);
        let timedOut = false;
        const timer = setTimeout(() => {
          timedOut = true;
          if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
        }, DEFAULT_LIMITS.timeoutSeconds * 1000);
        child.on('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
        child.on('close', (code) => {
          clearTimeout(timer);
          resolve({ exitCode: timedOut ? null : code, timedOut, output });
        });
      });
    },
  };
}
