// Child processes of the benchmark: started with a bounded wait for their "ready" line,
// stopped with SIGTERM then SIGKILL, and all remembered so that a failure still stops them.
import { type ChildProcess, spawn } from 'node:child_process';

export interface Child {
  name: string;
  proc: ChildProcess;
  /** Everything the child wrote to stderr (the last 64 KiB), for error messages. */
  stderr(): string;
}

const running = new Set<Child>();

export interface StartOptions {
  name: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** A line of stdout that means the child is ready; its first capture group is returned. */
  ready: RegExp;
  timeoutMs: number;
}

/** Starts `node args…` and resolves once stdout matches `ready`. */
export function startChild(opts: StartOptions): Promise<{ child: Child; match: string }> {
  const proc = spawn(process.execPath, opts.args, {
    cwd: opts.cwd,
    env: opts.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  const child: Child = { name: opts.name, proc, stderr: () => err };
  running.add(child);
  proc.once('exit', () => running.delete(child));
  proc.stderr?.setEncoding('utf8');
  proc.stderr?.on('data', (chunk: string) => {
    err = (err + chunk).slice(-65_536);
  });
  return new Promise((resolve, reject) => {
    let out = '';
    let settled = false;
    const finish = (error: Error | undefined, match?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      proc.stdout?.removeListener('data', onData);
      proc.stdout?.resume(); // keep draining so that the child never blocks on a full pipe
      proc.removeListener('exit', onExit);
      if (error) {
        stopChild(child).finally(() => reject(error));
      } else {
        resolve({ child, match: match ?? '' });
      }
    };
    const onData = (chunk: string) => {
      out = (out + chunk).slice(-65_536);
      const m = opts.ready.exec(out);
      if (m) finish(undefined, m[1]);
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
      finish(
        new Error(
          `${opts.name} exited before it was ready (code ${code}, signal ${signal}):\n${err || out}`,
        ),
      );
    const timer = setTimeout(
      () =>
        finish(new Error(`${opts.name} was not ready within ${opts.timeoutMs} ms:\n${err || out}`)),
      opts.timeoutMs,
    );
    proc.stdout?.setEncoding('utf8');
    proc.stdout?.on('data', onData);
    proc.once('exit', onExit);
    proc.once('error', (e) => finish(e));
  });
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the child has exited. */
export function stopChild(child: Child, graceMs = 15_000): Promise<void> {
  const { proc } = child;
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const killer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
    // Bounds the wait even if the exit event never comes (it always should after SIGKILL).
    const giveUp = setTimeout(resolve, graceMs + 5_000);
    proc.once('exit', () => {
      clearTimeout(killer);
      clearTimeout(giveUp);
      resolve();
    });
    proc.kill('SIGTERM');
  });
}

export async function stopAllChildren(): Promise<void> {
  await Promise.all([...running].map((c) => stopChild(c)));
}

/** Last resort on process exit: no waiting is possible there, so SIGKILL what is left. */
export function killAllChildrenNow(): void {
  for (const c of running) c.proc.kill('SIGKILL');
}

/** Runs a command to completion, bounded by `timeoutMs`; rejects on a non-zero exit. */
export function runCommand(
  command: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(command, args, {
      env: opts.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const child: Child = { name: command, proc, stderr: () => stderr };
    running.add(child);
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8');
    proc.stderr.setEncoding('utf8');
    proc.stdout.on('data', (c: string) => {
      stdout = (stdout + c).slice(-1_048_576);
    });
    proc.stderr.on('data', (c: string) => {
      stderr = (stderr + c).slice(-1_048_576);
    });
    const timer = setTimeout(() => proc.kill('SIGKILL'), opts.timeoutMs);
    proc.once('error', (e) => {
      clearTimeout(timer);
      running.delete(child);
      reject(e);
    });
    proc.once('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      if (code === 0) resolve({ stdout, stderr });
      else
        reject(
          new Error(
            `${command} ${args.join(' ')} failed (code ${code}, signal ${signal}):\n${stderr || stdout}`,
          ),
        );
    });
  });
}
