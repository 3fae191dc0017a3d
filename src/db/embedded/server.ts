// The embedded PostgreSQL of `serve`: a real PostgreSQL cluster in the data directory, with
// fsync on, started and supervised by this process. It listens on no TCP port, only on a Unix
// socket in a directory that only Errand's user can enter, and Errand signs in with a password
// kept 0600 beside the cluster, as a role that owns its database and is not a superuser. One
// process at a time runs it (the data directory's lock); a server left behind by a process that
// was killed is found and stopped at the next start, and one that stops by itself is restarted.
import { mkdir, readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { acquireFileLock, type HeldLock, readLockOwner } from '../../lock.ts';
import type { Logger } from '../../log.ts';
import { clusterMajor, explained, initCluster, serverSettings, stopLeftover } from './cluster.ts';
import {
  DatabaseLockedError,
  EMBEDDED_DATABASE,
  EMBEDDED_USER,
  type EmbeddedConnection,
  type EmbeddedLayout,
  type EmbeddedOptions,
  EmbeddedStartError,
  embeddedLayout,
  exists,
  PORT,
  privateDirectory,
} from './layout.ts';
import { findPrograms, type PostgresPrograms } from './platform.ts';
import {
  running,
  type ServerProcess,
  spawnServer,
  stoppedMessage,
  stopServer,
  waitReady,
} from './process.ts';

export {
  DatabaseLockedError,
  type EmbeddedConnection,
  type EmbeddedOptions,
  EmbeddedStartError,
  embeddedLayout,
  runningConnection,
} from './layout.ts';

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
      else await stopLeftover(layout, opts.log);
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
