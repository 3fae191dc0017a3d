// The embedded PostgreSQL's cluster: the settings it runs with, how it is made the first time
// (whole or not at all), the server a killed process left running on it, and why a start as
// root failed when the system refused a user namespace.
import { randomBytes } from 'node:crypto';
import { readFile, rename, rm } from 'node:fs/promises';
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
 * A server still running on the cluster, left by an Errand process that was killed where the
 * server could not be told (no setpriv): it is ours (its command line names this cluster), and
 * since this process holds the data directory's lock, no live process uses it. It is stopped,
 * as `serve` would have stopped it. A postmaster.pid naming a process that is not this cluster's
 * server (its pid reused after a reboot) is stale and removed, or PostgreSQL would refuse to
 * start.
 */
export async function stopLeftover(cluster: string, log: Logger): Promise<void> {
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
