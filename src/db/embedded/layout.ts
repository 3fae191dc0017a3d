// Where the embedded PostgreSQL keeps what it has in the data directory, what it is given, how a
// client reaches it, and the errors of its start. The cluster, its socket's directory and its
// password are this user's alone: files are written whole (fsync, rename) and directories are
// checked to be private before they are used.
import { createHash } from 'node:crypto';
import { lstat, mkdir, open, readFile, rename, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readLockOwner } from '../../lock.ts';
import type { Logger } from '../../log.ts';

export const EMBEDDED_USER = 'errand';
export const EMBEDDED_DATABASE = 'errand';
/** Only names the socket file (`.s.PGSQL.5432`): no TCP port is opened. */
export const PORT = 5432;
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

/** Writes a file that only this user may read, whole or not at all. */
export async function writePrivate(file: string, text: string): Promise<void> {
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
export async function syncDirectory(dir: string): Promise<void> {
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
export async function privateDirectory(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const info = await lstat(dir);
  const uid = process.getuid?.();
  if (!info.isDirectory() || (uid !== undefined && info.uid !== uid) || (info.mode & 0o077) !== 0)
    throw new EmbeddedStartError(
      `${dir} must be a directory of this user's that only it may enter (mode 0700); it is not, so the embedded database does not start. Remove it, or fix its owner and mode`,
    );
}

export async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
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
