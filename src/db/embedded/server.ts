// The embedded PostgreSQL of `serve`: a real PostgreSQL cluster in the data directory, with
// fsync on, started and supervised by this process. It listens on no TCP port, only on a Unix
// socket in a directory that only Errand's user can enter, and Errand signs in with a password
// kept 0600 beside the cluster, as a role that owns its database and is not a superuser. One
// process at a time runs it (the data directory's lock); a server left behind by a process that
// was killed is found and stopped at the next start, and one that stops by itself is restarted.
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { lstat, mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { acquireFileLock, type HeldLock, readLockOwner } from '../../lock.ts';
import type { Logger } from '../../log.ts';
import { findPrograms, type PostgresPrograms } from './platform.ts';

export const EMBEDDED_USER = 'errand';
export const EMBEDDED_DATABASE = 'errand';
/** Only names the socket file (`.s.PGSQL.5432`): no TCP port is opened. */
const PORT = 5432;
/** Linux's limit on a Unix socket's path (sun_path less its final NUL). */
const MAX_SOCKET_PATH = 107;

/** Where the embedded database keeps what it has. */
export interface EmbeddedLayout {
  /** `<data-dir>/postgres`, 0700. */
  root: string;
  /** The cluster (PGDATA), made by initdb. */
  cluster: string;
  /** The directory of the server's socket, 0700. */
  socketDir: string;
  /** The password of Errand's role, 0600. */
  passwordFile: string;
  /** Held by the one process that runs the server. */
  lockFile: string;
  /** Where PGlite, Errand's earlier embedded database, kept its data. */
  legacyPglite: string;
}

/** How a client of the embedded server connects: node-postgres's connection settings. */
export interface EmbeddedConnection {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

/** Another Errand process runs the embedded database of this data directory. */
export class DatabaseLockedError extends Error {
  override name = 'DatabaseLockedError';
}

/** The embedded database cannot start: the message says why and what to do. */
export class EmbeddedStartError extends Error {
  override name = 'EmbeddedStartError';
}

export function embeddedLayout(dataDir: string): EmbeddedLayout {
  const root = path.join(dataDir, 'postgres');
  const own = path.join(root, 'run');
  // A long data directory path would not fit a socket's; a private directory in the system's
  // temporary directory, named after the data directory, takes its place.
  const socketDir =
    `${own}/.s.PGSQL.${PORT}`.length <= MAX_SOCKET_PATH
      ? own
      : path.join(
          tmpdir(),
          `errand-pg-${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}`,
        );
  return {
    root,
    cluster: path.join(root, 'data'),
    socketDir,
    passwordFile: path.join(root, 'password'),
    lockFile: path.join(dataDir, 'errand.lock'),
    legacyPglite: path.join(dataDir, 'pgdata'),
  };
}

export interface EmbeddedOptions {
  dataDir: string;
  log: Logger;
  /** Server settings on top of Errand's own (tests raise max_connections). */
  settings?: Readonly<Record<string, string>>;
  /** How long a start may take, crash recovery included. */
  startTimeoutMs?: number;
  /** How long a fast shutdown may take before the server is stopped at once. */
  stopTimeoutMs?: number;
  /**
   * Whether Errand's role may create databases: only the tests' server, which makes a database
   * per service. Applies when the cluster is made.
   */
  createdb?: boolean;
}

/**
 * The server's settings. Durability is PostgreSQL's default, written out so that no edit of
 * postgresql.conf can weaken it. Memory is sized for one machine's service: a small buffer pool
 * (reads past it come from the page cache) and synchronous I/O instead of I/O worker processes.
 */
function serverSettings(layout: EmbeddedLayout, extra: Readonly<Record<string, string>>) {
  return {
    listen_addresses: '',
    unix_socket_directories: `"${layout.socketDir.replaceAll('"', '""')}"`,
    unix_socket_permissions: '0700',
    port: String(PORT),
    fsync: 'on',
    synchronous_commit: 'on',
    full_page_writes: 'on',
    wal_sync_method: 'fdatasync',
    shared_buffers: '32MB',
    io_method: 'sync',
    max_connections: '100',
    huge_pages: 'off',
    jit: 'off',
    timezone: 'UTC',
    log_timezone: 'UTC',
    log_line_prefix: '%m [%p] ',
    log_checkpoints: 'off',
    cluster_name: 'errand',
    ...extra,
  };
}

function alive(pid: number): boolean {
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

/** Writes a file that only this user may read, whole or not at all. */
async function writePrivate(file: string, text: string): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  const handle = await open(temporary, 'w', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temporary, file);
  await syncDirectory(path.dirname(file));
}

/** Makes a rename or a new file in `dir` survive a crash of the machine. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Makes `dir` (0700) or checks the one there: a directory, not a link, this user's, that no one
 * else may enter. Whoever could enter the socket's directory could reach the server.
 */
async function privateDirectory(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const info = await lstat(dir);
  const uid = process.getuid?.();
  if (!info.isDirectory() || (uid !== undefined && info.uid !== uid) || (info.mode & 0o077) !== 0)
    throw new EmbeddedStartError(
      `${dir} must be a directory of this user's that only it may enter (mode 0700); it is not, so the embedded database does not start. Remove it, or fix its owner and mode`,
    );
}

/** A running server process and the last lines it wrote (for the error when it stops). */
interface ServerProcess {
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

function spawnServer(
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

function running(server: ServerProcess): boolean {
  return !server.ended;
}

function stoppedMessage(server: ServerProcess): string {
  const { exitCode, signalCode } = server.child;
  const how = signalCode ? `was stopped by ${signalCode}` : `exited with code ${exitCode}`;
  const said = server.lines.filter((line) => line.trim() !== '').slice(-8);
  return `the embedded PostgreSQL ${how}${said.length ? `; it said:\n  ${said.join('\n  ')}` : ''}`;
}

/** Waits until the server accepts `connection`, or fails when it stops or takes too long. */
async function waitReady(
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
async function stopServer(server: ServerProcess, fastMs: number): Promise<void> {
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
async function waitGone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

/**
 * A server still running on the cluster, left by an Errand process that was killed where the
 * server could not be told (no setpriv): it is ours (its command line names this cluster), and
 * since this process holds the data directory's lock, no live process uses it. It is stopped,
 * as `serve` would have stopped it. A postmaster.pid naming a process that is not this cluster's
 * server (its pid reused after a reboot) is stale and removed, or PostgreSQL would refuse to
 * start.
 */
async function stopLeftover(cluster: string, log: Logger): Promise<void> {
  const pidFile = path.join(cluster, 'postmaster.pid');
  const text = await readFile(pidFile, 'utf8').catch(() => undefined);
  const pid = Number(text?.split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return;
  let args: string[];
  try {
    args = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
  } catch (err) {
    throw new EmbeddedStartError(
      `${pidFile} names process ${pid}, which this user cannot inspect (${(err as Error).message}); if no PostgreSQL runs on ${cluster}, remove that file`,
    );
  }
  const flag = args.indexOf('-D');
  if (flag < 0 || args[flag + 1] !== cluster) {
    log.warn({ pid }, 'removing a stale postmaster.pid: its process is not this cluster’s server');
    await rm(pidFile, { force: true });
    return;
  }
  log.warn(
    { pid },
    'stopping the embedded PostgreSQL left running by an Errand process that ended',
  );
  for (const [signal, ms] of [
    ['SIGINT', 30_000],
    ['SIGQUIT', 5_000],
    ['SIGKILL', 5_000],
  ] as const) {
    try {
      process.kill(pid, signal);
    } catch {
      return;
    }
    if (await waitGone(pid, ms)) return;
  }
}

/** The cluster's PostgreSQL major version, or undefined when there is no cluster yet. */
async function clusterMajor(cluster: string): Promise<number | undefined> {
  const text = await readFile(path.join(cluster, 'PG_VERSION'), 'utf8').catch(() => undefined);
  return text === undefined ? undefined : Number.parseInt(text, 10);
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

/** Runs a program to its end; its output is in the error when it fails. */
async function runProgram(
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

/**
 * A start that failed as root because the user namespace was refused (a container's seccomp
 * profile, a kernel setting): the error says what Errand tried and what to do instead.
 */
function explained(err: unknown, programs: PostgresPrograms): unknown {
  const user = programs.mappedUser;
  if (!user || !(err instanceof Error) || !/\bunshare\b/.test(err.message)) return err;
  return new EmbeddedStartError(
    `PostgreSQL does not run as root, so Errand runs it in a user namespace as ${user.name}, and this system refused one (${err.message
      .split('\n')
      .find((line) => /unshare/.test(line))
      ?.trim()}). Run Errand as a user other than root, allow unprivileged user namespaces, or set DATABASE_URL to a PostgreSQL server`,
  );
}

export class EmbeddedPostgres {
  readonly connection: EmbeddedConnection;
  readonly #programs: PostgresPrograms;
  readonly #layout: EmbeddedLayout;
  readonly #settings: Readonly<Record<string, string>>;
  readonly #lock: HeldLock;
  readonly #log: Logger;
  readonly #startTimeoutMs: number;
  readonly #stopTimeoutMs: number;
  #server: ServerProcess;
  #stopping = false;
  #restart: NodeJS.Timeout | undefined;
  #restarting: Promise<void> = Promise.resolve();

  private constructor(
    init: {
      connection: EmbeddedConnection;
      programs: PostgresPrograms;
      layout: EmbeddedLayout;
      settings: Readonly<Record<string, string>>;
      lock: HeldLock;
      server: ServerProcess;
    },
    opts: EmbeddedOptions,
  ) {
    this.connection = init.connection;
    this.#programs = init.programs;
    this.#layout = init.layout;
    this.#settings = init.settings;
    this.#lock = init.lock;
    this.#server = init.server;
    this.#log = opts.log;
    this.#startTimeoutMs = opts.startTimeoutMs ?? 120_000;
    this.#stopTimeoutMs = opts.stopTimeoutMs ?? 30_000;
    this.#supervise(init.server);
  }

  /** The server's process id while it runs. */
  get pid(): number | undefined {
    return running(this.#server) ? this.#server.child.pid : undefined;
  }

  /**
   * Takes the data directory, makes the cluster when there is none, stops a server left running
   * by a killed process, and starts the server. Throws DatabaseLockedError when another process
   * runs it.
   */
  static async start(opts: EmbeddedOptions): Promise<EmbeddedPostgres> {
    const layout = embeddedLayout(opts.dataDir);
    await mkdir(opts.dataDir, { recursive: true, mode: 0o700 });
    const lock = await takeLock(layout, opts.dataDir);
    try {
      if (await exists(path.join(layout.legacyPglite, 'PG_VERSION')))
        throw new EmbeddedStartError(
          `${layout.legacyPglite} holds a database of an earlier Errand, made with PGlite, which this version no longer runs (PGlite cannot make its writes durable) and cannot read. Nothing was changed or deleted. To start afresh, move that directory out of ${opts.dataDir} or use another --data-dir; its projects and jobs stay readable by the Errand version that made them`,
        );
      await privateDirectory(layout.root);
      await privateDirectory(layout.socketDir);
      const programs = await findPrograms(path.join(layout.root, 'lib'));
      const settings = serverSettings(layout, opts.settings ?? {});
      const major = await clusterMajor(layout.cluster);
      if (major === undefined)
        await initCluster(programs, layout, settings, opts).catch((err: unknown) => {
          throw explained(err, programs);
        });
      else if (major !== programs.major)
        throw new EmbeddedStartError(
          `the embedded database in ${layout.cluster} was made by PostgreSQL ${major}, and this Errand runs PostgreSQL ${programs.major}: export it with the Errand version that made it (errand export FILE), then import it here (errand import FILE) into a new data directory`,
        );
      else await stopLeftover(layout.cluster, opts.log);
      const password = (await readFile(layout.passwordFile, 'utf8').catch(() => '')).trim();
      if (!password)
        throw new EmbeddedStartError(
          `${layout.passwordFile} is missing or empty: Errand cannot sign in to its embedded database in ${layout.cluster}`,
        );
      const connection = {
        host: layout.socketDir,
        port: PORT,
        user: EMBEDDED_USER,
        password,
        database: EMBEDDED_DATABASE,
      };
      const server = spawnServer(programs, layout, layout.cluster, settings, opts.log);
      try {
        await waitReady(server, connection, opts.startTimeoutMs ?? 120_000, opts.log);
      } catch (err) {
        await stopServer(server, 5_000);
        throw explained(err, programs);
      }
      if (!programs.diesWithParent)
        opts.log.warn(
          "util-linux's setpriv is not installed: if this process is killed, the embedded PostgreSQL keeps running until Errand's next start stops it",
        );
      return new EmbeddedPostgres({ connection, programs, layout, settings, lock, server }, opts);
    } catch (err) {
      await lock.release();
      throw err;
    }
  }

  /** Restarts the server whenever it stops by itself, waiting longer after each quick failure. */
  #supervise(server: ServerProcess, failures = 0): void {
    const startedAt = Date.now();
    void server.exited.then(() => {
      if (this.#stopping || server !== this.#server) return;
      // A server that ran for a while before it stopped starts again at once.
      const count = Date.now() - startedAt > 60_000 ? 0 : failures;
      const delay = Math.min(30_000, 500 * 2 ** count);
      this.#log.error(
        { retryInMs: delay },
        `${stoppedMessage(server)}; starting it again (requests fail with 503 meanwhile)`,
      );
      this.#restart = setTimeout(() => {
        this.#restarting = this.#startAgain(count + 1);
      }, delay);
    });
  }

  async #startAgain(failures: number): Promise<void> {
    if (this.#stopping) return;
    const server = spawnServer(
      this.#programs,
      this.#layout,
      this.#layout.cluster,
      this.#settings,
      this.#log,
    );
    this.#server = server;
    this.#supervise(server, failures);
    try {
      await waitReady(server, this.connection, this.#startTimeoutMs, this.#log);
      this.#log.info('the embedded PostgreSQL runs again');
    } catch (err) {
      // The server's exit schedules the next try (waitReady stops a server that hangs).
      this.#log.error({ err }, 'the embedded PostgreSQL did not start again');
    }
  }

  /** Stops the server (fast shutdown, bounded) and lets go of the data directory. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    clearTimeout(this.#restart);
    await this.#restarting;
    await stopServer(this.#server, this.#stopTimeoutMs);
    await this.#lock.release();
  }
}

async function takeLock(layout: EmbeddedLayout, dataDir: string): Promise<HeldLock> {
  // The owner's death (pid, boot and start time) frees the lock, not its silence: a live
  // process that stalls keeps its server.
  const lock = await acquireFileLock(layout.lockFile, { staleMs: 7 * 86_400_000 }, false);
  if (lock) return lock;
  const owner = await readLockOwner(layout.lockFile);
  const holder =
    owner === null
      ? 'a process that is starting'
      : owner.pid === process.pid && owner.host === hostname()
        ? 'this process'
        : `process ${owner.pid} on ${owner.host}`;
  throw new DatabaseLockedError(
    `the data directory ${dataDir} is in use by another Errand process (locked by ${holder}); stop it first, or use a different --data-dir. With several processes, use PostgreSQL (DATABASE_URL).`,
  );
}

/**
 * Makes the cluster in a directory of its own and moves it into place once it is complete, so
 * that a start cut short leaves nothing half made: initdb (checksums on), then, on a server of
 * its own, Errand's role (not a superuser) and database. The superuser's password is random and
 * kept nowhere: nothing of Errand's needs it.
 */
async function initCluster(
  programs: PostgresPrograms,
  layout: EmbeddedLayout,
  settings: Readonly<Record<string, string>>,
  opts: EmbeddedOptions,
): Promise<void> {
  const staging = `${layout.cluster}.new`;
  await rm(staging, { recursive: true, force: true });
  const password = randomBytes(24).toString('base64url');
  const superPassword = randomBytes(24).toString('base64url');
  await writePrivate(layout.passwordFile, `${password}\n`);
  // initdb reads the superuser's password from a file: one only this user may read, for the
  // moment initdb runs, and never on a command line.
  const superPasswordFile = path.join(layout.root, 'initdb.password');
  await writePrivate(superPasswordFile, `${superPassword}\n`);
  try {
    await runProgram(
      'initdb',
      programs.command(
        programs.initdb,
        [
          '-D',
          staging,
          '--username=postgres',
          `--pwfile=${superPasswordFile}`,
          '--auth=scram-sha-256',
          '--encoding=UTF8',
          '--locale=C',
          '--no-instructions',
        ],
        'SIGKILL',
      ),
      programs.env,
    );
  } finally {
    await rm(superPasswordFile, { force: true });
  }
  const server = spawnServer(programs, layout, staging, settings, opts.log);
  try {
    const connection = {
      host: layout.socketDir,
      port: PORT,
      user: 'postgres',
      password: superPassword,
      database: 'postgres',
    };
    await waitReady(server, connection, opts.startTimeoutMs ?? 120_000, opts.log);
    const client = new pg.Client(connection);
    await client.connect();
    try {
      await client.query(
        `CREATE ROLE ${EMBEDDED_USER} LOGIN ${opts.createdb ? 'CREATEDB ' : ''}PASSWORD ${client.escapeLiteral(password)}`,
      );
      await client.query(`CREATE DATABASE ${EMBEDDED_DATABASE} OWNER ${EMBEDDED_USER}`);
    } finally {
      await client.end();
    }
  } finally {
    await stopServer(server, opts.stopTimeoutMs ?? 30_000);
  }
  await rename(staging, layout.cluster);
  await syncDirectory(layout.root);
  opts.log.info({ cluster: layout.cluster }, 'created the embedded PostgreSQL database');
}

/**
 * How a client reaches the embedded server that another Errand process runs on `dataDir`
 * (errand export while serve runs), or undefined when none runs there.
 */
export async function runningConnection(dataDir: string): Promise<EmbeddedConnection | undefined> {
  const layout = embeddedLayout(dataDir);
  const owner = await readLockOwner(layout.lockFile);
  if (!owner || !(await exists(path.join(layout.socketDir, `.s.PGSQL.${PORT}`)))) return undefined;
  const password = (await readFile(layout.passwordFile, 'utf8').catch(() => '')).trim();
  if (!password) return undefined;
  return {
    host: layout.socketDir,
    port: PORT,
    user: EMBEDDED_USER,
    password,
    database: EMBEDDED_DATABASE,
  };
}
