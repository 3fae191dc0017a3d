// The embedded PostgreSQL's processes: the server started as Errand starts it (its own process
// group, a parent-death signal, the last lines it said kept for the error when it stops), waited
// for until it accepts connections, and stopped within bounds; and the programs run to their end.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import pg from 'pg';
import type { Logger } from '../../log.ts';
import { type EmbeddedConnection, type EmbeddedLayout, EmbeddedStartError } from './layout.ts';
import type { PostgresPrograms } from './platform.ts';

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits for `event`, at most `ms`; the timer goes with it, so it holds no process open. */
async function within(event: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([event, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** A running server process and the last lines it wrote (for the error when it stops). */
export interface ServerProcess {
  child: ChildProcess;
  exited: Promise<void>;
  /** Set once it exited, or could not be started at all. */
  ended: boolean;
  lines: string[];
}

const KEPT_LINES = 30;

/** What the server says of the connections Errand itself opens and closes, while it starts or stops. */
const EXPECTED_FATAL =
  /FATAL: {2}(the database system is (starting up|shutting down|not yet accepting connections)|terminating connection due to administrator command)/;

/** PostgreSQL's own severities, and the log level each of its lines is written at. */
function levelOf(line: string): 'error' | 'warn' | 'debug' {
  if (EXPECTED_FATAL.test(line)) return 'debug';
  if (/\b(PANIC|FATAL):/.test(line)) return 'error';
  if (/\b(ERROR|WARNING):/.test(line)) return 'warn';
  return 'debug';
}

export function spawnServer(
  programs: PostgresPrograms,
  layout: EmbeddedLayout,
  cluster: string,
  settings: Readonly<Record<string, string>>,
  log: Logger,
): ServerProcess {
  const args = [
    '-D',
    cluster,
    ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
  ];
  const [command = programs.postgres, ...rest] = programs.command(
    programs.postgres,
    args,
    'SIGINT',
  );
  // A process group of its own: a Ctrl-C in the terminal stops `serve`, which then stops the
  // server after its own last writes, instead of reaching the server first.
  const child = spawn(command, rest, {
    cwd: layout.root,
    env: programs.env,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const lines: string[] = [];
  if (child.stderr)
    createInterface({ input: child.stderr }).on('line', (line) => {
      lines.push(line);
      if (lines.length > KEPT_LINES) lines.shift();
      log[levelOf(line)]({ postgres: line }, 'embedded PostgreSQL');
    });
  const server: ServerProcess = { child, exited: Promise.resolve(), ended: false, lines };
  server.exited = new Promise<void>((resolve) => {
    const end = () => {
      server.ended = true;
      resolve();
    };
    child.once('exit', end);
    // A spawn that fails (the program missing) emits 'error' instead, and never 'exit'.
    child.once('error', (err) => {
      lines.push(err.message);
      end();
    });
  });
  return server;
}

export function running(server: ServerProcess): boolean {
  return !server.ended;
}

export function stoppedMessage(server: ServerProcess): string {
  const { exitCode, signalCode } = server.child;
  const how = signalCode ? `was stopped by ${signalCode}` : `exited with code ${exitCode}`;
  const said = server.lines.filter((line) => line.trim() !== '').slice(-8);
  return `the embedded PostgreSQL ${how}${said.length ? `; it said:\n  ${said.join('\n  ')}` : ''}`;
}

/** Waits until the server accepts `connection`, or fails when it stops or takes too long. */
export async function waitReady(
  server: ServerProcess,
  connection: EmbeddedConnection,
  timeoutMs: number,
  log: Logger,
): Promise<void> {
  const started = Date.now();
  let said = started;
  for (let attempt = 0; ; attempt++) {
    if (!running(server)) throw new EmbeddedStartError(stoppedMessage(server));
    const client = new pg.Client({ ...connection, connectionTimeoutMillis: 5_000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => {});
      const elapsed = Date.now() - started;
      if (elapsed > timeoutMs) {
        server.child.kill('SIGQUIT');
        throw new EmbeddedStartError(
          `the embedded PostgreSQL did not accept connections within ${Math.round(timeoutMs / 1000)} s (${(err as Error).message})`,
        );
      }
      if (Date.now() - said > 10_000) {
        said = Date.now();
        log.info({ seconds: Math.round(elapsed / 1000) }, 'waiting for the embedded PostgreSQL');
      }
    }
    await within(server.exited, Math.min(250, 10 * 2 ** attempt));
  }
}

/** Stops a server: fast shutdown, then immediate, then SIGKILL, each bounded. */
export async function stopServer(server: ServerProcess, fastMs: number): Promise<void> {
  for (const [signal, ms] of [
    ['SIGINT', fastMs],
    ['SIGQUIT', 5_000],
    ['SIGKILL', 5_000],
  ] as const) {
    if (!running(server)) return;
    server.child.kill(signal);
    await within(server.exited, ms);
  }
}

/** Waits for a process that is not our child to end, bounded. */
export async function waitGone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

/** Runs a program to its end; its output is in the error when it fails. */
export async function runProgram(
  name: string,
  argv: string[],
  env: Record<string, string>,
): Promise<void> {
  const [command, ...args] = argv;
  if (!command) throw new Error('no program to run');
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0)
    throw new EmbeddedStartError(`${name} failed (exit ${code}): ${output.trim().slice(-2000)}`);
}
