// Runs `errand serve` as a real child process, for restart and locking tests.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;

export interface ServeProcess {
  child: ChildProcess;
  url: string;
  adminKey: string;
  stderr: () => string;
  /** Sends the signal and resolves with the exit code once the process is gone. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function runErrand(args: string[], env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [MAIN, ...args], {
    // These tests are about the embedded database: a DATABASE_URL of the test run (CI sets
    // one) must not send the service to PostgreSQL.
    env: { ...process.env, DATABASE_URL: '', ERRAND_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** A finished process: its exit code and everything it wrote. */
export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Collects a child's output as it comes; `done` resolves with all of it once it has closed. */
export function captureOutput(child: ChildProcess): {
  done: Promise<Run>;
  stdout: () => string;
  stderr: () => string;
} {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const done = new Promise<Run>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr })),
  );
  return { done, stdout: () => stdout, stderr: () => stderr };
}

/**
 * Runs `errand ARGS` as a user runs it against a running service and resolves once it has
 * exited: the environment holds only PATH, the service's URL and its data directory (where the
 * CLI finds the admin key), then `env`; the working directory is the data directory. `input`,
 * when given, is its stdin, which then ends.
 */
export function runCli(
  svc: { url: string; database: { dataDir: string } },
  args: string[],
  env: Record<string, string> = {},
  input?: string,
): Promise<Run> {
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: {
      PATH: process.env.PATH ?? '',
      ERRAND_URL: svc.url,
      ERRAND_DATA_DIR: svc.database.dataDir,
      ...env,
    },
    cwd: svc.database.dataDir,
  });
  const done = captureOutput(child).done;
  if (input !== undefined) child.stdin?.end(input);
  return done;
}

/** Starts `errand worker` and resolves once it has said it started. */
export async function startWorkerProcess(env: Record<string, string>): Promise<ChildProcess> {
  const child = runErrand(['worker'], { ...env, ERRAND_LOG_LEVEL: 'info' });
  let err = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString();
      if (err.includes('"errand started"')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`worker exited early with ${code}: ${err}`)));
  });
  return child;
}

export function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

const started = new Set<ChildProcess>();

/** Kills every serve process a test started and did not stop (after a failed assertion). */
export function killStrays(): void {
  for (const child of started)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  started.clear();
}

export async function startServe(
  dataDir: string,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<ServeProcess> {
  const child = runErrand(['serve', '--port', '0', '--data-dir', dataDir, ...args], env);
  started.add(child);
  let out = '';
  let err = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`serve did not start in 60 s: ${err}`)),
      60_000,
    );
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /errand listening on (\S+)/.exec(out);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code} before listening: ${err}`));
    });
  });
  const adminKey = (await readFile(path.join(dataDir, 'admin.key'), 'utf8')).trim();
  return {
    child,
    url,
    adminKey,
    stderr: () => err,
    async stop(signal = 'SIGTERM') {
      const done = exited(child);
      child.kill(signal);
      return done;
    },
  };
}
