// The embedded PostgreSQL's cluster: the settings it runs with, how it is made the first time
// (whole or not at all), the server a killed process left running on it, and why a start as
// root failed when the system refused a user namespace.
import { randomBytes } from 'node:crypto';
import { readdir, readFile, readlink, realpath, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from '../../log.ts';
import {
  EMBEDDED_DATABASE,
  EMBEDDED_USER,
  type EmbeddedLayout,
  type EmbeddedOptions,
  EmbeddedStartError,
  PORT,
  syncDirectory,
  writePrivate,
} from './layout.ts';
import type { PostgresPrograms } from './platform.ts';
import { alive, runProgram, spawnServer, stopServer, waitGone, waitReady } from './process.ts';

/**
 * The server's settings. Durability is PostgreSQL's default, written out so that no edit of
 * postgresql.conf can weaken it. Memory is sized for one machine's service: a small buffer pool
 * (reads past it come from the page cache) and synchronous I/O instead of I/O worker processes.
 */
export function serverSettings(layout: EmbeddedLayout, extra: Readonly<Record<string, string>>) {
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

/**
 * Whatever a killed Errand left of the cluster's server, made safe to start on. This process
 * holds the data directory's lock, so no live Errand uses the cluster: every process still
 * working in it is a leftover. PostgreSQL's processes (the server and each backend) all work
 * in the cluster's directory, whatever their command lines say, so they are found by that: a
 * server left running (a `serve` killed where setpriv could not tell it) is stopped as `serve`
 * would have stopped it, and backends that outlived a killed server are waited for, then
 * killed: PostgreSQL refuses to start while one still holds the old shared memory.
 *
 * Then the lock files: the data directory's `postmaster.pid` and the socket's
 * `.s.PGSQL.5432.lock` each name the server that wrote them. PostgreSQL starts over a file
 * whose process is dead (and cleans up after it), but refuses one whose pid now names any live
 * process, which after a crash is common: a restarted container's pids start again from 1.
 * With no process of the cluster left, such a file is stale and is removed, as is one that is
 * empty or garbled (a server killed while writing it).
 */
export async function stopLeftover(layout: EmbeddedLayout, log: Logger): Promise<void> {
  const cluster = await realpath(layout.cluster);
  const pidFile = path.join(layout.cluster, 'postmaster.pid');
  const server = await lockPid(pidFile);
  if (typeof server === 'number' && (await clusterProcesses(cluster)).includes(server)) {
    log.warn(
      { pid: server },
      'stopping the embedded PostgreSQL left running by an Errand process that ended',
    );
    await signalUntilGone(
      [server],
      [
        ['SIGINT', 30_000],
        ['SIGQUIT', 5_000],
        ['SIGKILL', 5_000],
      ],
    );
  }
  const orphans = await clusterProcesses(cluster);
  if (orphans.length > 0) {
    log.warn(
      { pids: orphans },
      'waiting for processes of the embedded PostgreSQL that outlived their server',
    );
    // They end by themselves once they see their server gone; SIGKILL is for one that hangs.
    await signalUntilGone(orphans, [
      [undefined, 5_000],
      ['SIGKILL', 5_000],
    ]);
    const still = await clusterProcesses(cluster);
    if (still.length > 0)
      throw new EmbeddedStartError(
        `processes ${still.join(', ')} still work in ${layout.cluster} and did not end when killed: the embedded database does not start while they hold it`,
      );
  }
  for (const file of [pidFile, path.join(layout.socketDir, `.s.PGSQL.${PORT}.lock`)]) {
    const pid = await lockPid(file);
    if (pid === null || (pid !== undefined && alive(pid))) {
      log.warn({ file, pid }, 'removing a stale lock file of the embedded PostgreSQL');
      await rm(file, { force: true });
    }
  }
}

/**
 * The pid a PostgreSQL lock file names (its first line); null for a file that is there but
 * names none, undefined when there is no file.
 */
async function lockPid(file: string): Promise<number | null | undefined> {
  const text = await readFile(file, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const pid = Number(text.split('\n')[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

/** The processes whose working directory is `cluster` (its real path): its server's. */
async function clusterProcesses(cluster: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    // A process of another user (not the server's) cannot be read, and is not one.
    const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => undefined);
    if (cwd === cluster) found.push(pid);
  }
  return found;
}

/** Sends each signal in turn (none: only waits) until every pid is gone, each step bounded. */
async function signalUntilGone(
  pids: readonly number[],
  steps: readonly (readonly [NodeJS.Signals | undefined, number])[],
): Promise<void> {
  for (const [signal, ms] of steps) {
    const left = pids.filter(alive);
    if (left.length === 0) return;
    for (const pid of left) {
      if (signal === undefined) continue;
      try {
        process.kill(pid, signal);
      } catch {
        // Gone meanwhile.
      }
    }
    await Promise.all(left.map((pid) => waitGone(pid, ms)));
  }
}

/** The cluster's PostgreSQL major version, or undefined when there is no cluster yet. */
export async function clusterMajor(cluster: string): Promise<number | undefined> {
  const text = await readFile(path.join(cluster, 'PG_VERSION'), 'utf8').catch(() => undefined);
  return text === undefined ? undefined : Number.parseInt(text, 10);
}

/**
 * A start that failed as root because the user namespace was refused (a container's seccomp
 * profile, a kernel setting): the error says what Errand tried and what to do instead.
 */
export function explained(err: unknown, programs: PostgresPrograms): unknown {
  const user = programs.mappedUser;
  if (!user || !(err instanceof Error) || !/\bunshare\b/.test(err.message)) return err;
  return new EmbeddedStartError(
    `PostgreSQL does not run as root, so Errand runs it in a user namespace as ${user.name}, and this system refused one (${err.message
      .split('\n')
      .find((line) => /unshare/.test(line))
      ?.trim()}). Run Errand as a user other than root, allow unprivileged user namespaces, or set DATABASE_URL to a PostgreSQL server`,
  );
}

/**
 * Makes the cluster in a directory of its own and moves it into place once it is complete, so
 * that a start cut short leaves nothing half made: initdb (checksums on), then, on a server of
 * its own, Errand's role (not a superuser) and database. The superuser's password is random and
 * kept nowhere: nothing of Errand's needs it.
 */
export async function initCluster(
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
