// Where `errand eval from-git` runs a repository's setup and test commands: in the bubblewrap
// sandbox (src/sandbox/: no network, only the worktree writable, bounded in time and memory)
// when this machine has it; unconfined, with the user's rights and network, only when the user
// said so with --unsandboxed.
import { spawn } from 'node:child_process';
import { DEFAULT_LIMITS } from '../../projects/limits.ts';
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
  /** Runs `command` with `sh -c` in `dir`, the only place it may write (when confined). */
  run(dir: string, command: string): Promise<CommandResult>;
}

/** The characters of output kept from an unconfined run: its end. */
const KEEP = 30_000;

/** The sandbox, or with `unconfinedAllowed` plain `sh -c` when the sandbox is unavailable. */
export async function commandRunner(
  unconfinedAllowed: boolean,
  env: NodeJS.ProcessEnv,
): Promise<CommandRunner> {
  const status = await sandboxStatus();
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
    async run(dir, command) {
      const result = await runSandboxed({
        checkout: dir,
        cwd: dir,
        command,
        limits: DEFAULT_LIMITS,
        network: 'none',
        signal: new AbortController().signal,
      });
      return { exitCode: result.exitCode, timedOut: result.timedOut, output: result.output };
    },
  };
}

function unconfinedRunner(env: NodeJS.ProcessEnv): CommandRunner {
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
