// Opens Errand's database: the embedded PGlite in the data directory by default, or the
// PostgreSQL server of DATABASE_URL. Both are PostgreSQL, so one Kysely schema, one set of
// migrations and one pg-boss queue serve both.
import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import {
  Kysely,
  type PostgresCursor,
  PostgresDialect,
  type PostgresPool,
  type PostgresPoolClient,
  type PostgresQueryResult,
} from 'kysely';
import pg from 'pg';
import { acquireFileLock, readLockOwner } from '../lock.ts';
import { PgliteDialect } from './pglite-dialect.ts';
import { CountingPGlite, PglitePreparedStatements, type RunOptions } from './pglite-prepared.ts';
import type { Database } from './schema.ts';

export type Db = Kysely<Database>;

/** Runs SQL scripts and parameterised statements inside one transaction. */
export interface ScriptRunner {
  exec(script: string): Promise<void>;
  query<R>(text: string, params?: unknown[]): Promise<R[]>;
}

export interface DatabaseHandle {
  kind: 'pglite' | 'postgres';
  db: Db;
  /** The embedded instance, when kind is 'pglite' (pg-boss runs on it through its adapter). */
  pglite: PGlite | undefined;
  /** Where the PostgreSQL server is, when kind is 'postgres'. */
  connectionString: string | undefined;
  /**
   * Runs one statement as a named prepared statement (PostgreSQL parses and plans it once per
   * connection): for the hottest queries. On PGlite too, prepared once per instance.
   */
  prepared<R>(name: string, text: string, values: unknown[], options?: RunOptions): Promise<R[]>;
  /**
   * Where every write goes through this process (the embedded database): how many statements so
   * far may have changed the database (all but the prepared ones run with `readOnly`). While it
   * stands still, the database has not changed, and a read's answer still holds. Undefined on
   * PostgreSQL, which other processes write to.
   */
  changes: (() => number) | undefined;
  /** Runs `fn` in one transaction (used by migrations, which need multi-statement scripts). */
  transaction<T>(fn: (run: ScriptRunner) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface OpenOptions {
  dataDir: string;
  databaseUrl: string | undefined;
  /** Upper bound of PostgreSQL connections this process opens for its own queries. */
  poolSize?: number;
  /** PostgreSQL: bounds on getting a connection and on one statement (see Config.database). */
  timeouts?: { connectMs: number; statementMs: number };
}

/** Used where no bounds are given (tools and tests); the service passes its settings. */
export const DEFAULT_TIMEOUTS = { connectMs: 5_000, statementMs: 10_000 };

export class DatabaseLockedError extends Error {
  override name = 'DatabaseLockedError';
}

/**
 * PGlite's shared buffers live in its WebAssembly memory, which never shrinks: at PostgreSQL's
 * default of 128 MB, a busy service ends up holding all of it. Reads past the buffers are
 * served from the operating system's page cache, so a smaller pool costs little here
 * (README, Benchmarks: the idle memory and GET figures were measured with this setting).
 */
const PGLITE_SETTINGS = ['shared_buffers=32MB'];

export async function openDatabase(opts: OpenOptions): Promise<DatabaseHandle> {
  if (opts.databaseUrl)
    return openPostgres(opts.databaseUrl, opts.poolSize ?? 20, opts.timeouts ?? DEFAULT_TIMEOUTS);
  return openPglite(opts.dataDir);
}

async function openPglite(dataDir: string): Promise<DatabaseHandle> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  // Two processes on one PGlite directory corrupt it: the lock is taken before PGlite opens.
  const lockFile = path.join(dataDir, 'errand.lock');
  // A PGlite query may hold the event loop for a while: the heartbeat is allowed to lag far
  // longer than a workspace lock's before another process may take the directory over.
  const lock = await acquireFileLock(lockFile, { staleMs: 10 * 60_000 }, false);
  if (!lock) {
    const owner = await readLockOwner(lockFile);
    const holder =
      owner === null
        ? 'a process that is starting'
        : owner.pid === process.pid && owner.host === hostname()
          ? 'this process'
          : `process ${owner.pid} on ${owner.host}`;
    throw new DatabaseLockedError(
      `the data directory ${dataDir} is in use by another Errand process (locked by ${holder}); ` +
        'stop it first, or use a different --data-dir. With several processes, use PostgreSQL (DATABASE_URL).',
    );
  }
  let pglite: CountingPGlite;
  try {
    pglite = new CountingPGlite(path.join(dataDir, 'pgdata'), {
      startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS.flatMap((s) => ['-c', s])],
    });
    await pglite.waitReady;
  } catch (err) {
    await lock.release();
    throw err;
  }
  const db = new Kysely<Database>({ dialect: new PgliteDialect(pglite) });
  const statements = new PglitePreparedStatements(pglite);
  return {
    kind: 'pglite',
    db,
    pglite,
    connectionString: undefined,
    prepared: <R>(name: string, text: string, values: unknown[], options?: RunOptions) =>
      statements.run<R>(name, text, values, options),
    changes: () => pglite.changes,
    transaction: (fn) =>
      pglite.transaction((tx) =>
        fn({
          exec: async (script) => {
            await tx.exec(script);
          },
          query: async <R>(text: string, params: unknown[] = []) =>
            (await tx.query<R>(text, params)).rows,
        }),
      ),
    async close() {
      await db.destroy();
      await pglite.close();
      await lock.release();
    },
  };
}

async function openPostgres(
  connectionString: string,
  poolSize: number,
  timeouts: { connectMs: number; statementMs: number },
): Promise<DatabaseHandle> {
  const pool = new pg.Pool({
    connectionString,
    max: poolSize,
    application_name: 'errand',
    // Without it, a server that does not answer a connect (a host down, SYNs unanswered) holds
    // every slot of the pool for the kernel's two minutes of retries, and the process answers
    // nothing even after the database is back.
    connectionTimeoutMillis: timeouts.connectMs,
    // The server cancels a statement that runs too long (migrations lift it for their own
    // transaction); the client gives up a little later on a connection whose peer went silent.
    statement_timeout: timeouts.statementMs,
    query_timeout: timeouts.statementMs + 5_000,
    keepAlive: true,
  });
  // An idle client that loses its server emits 'error' on the pool; without a listener that
  // would crash the process instead of letting the next query reconnect.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: closingSilent(pool) }) });
  return {
    kind: 'postgres',
    db,
    pglite: undefined,
    connectionString,
    prepared: async <R>(name: string, text: string, values: unknown[]) =>
      (await pool.query({ name, text, values })).rows as R[],
    changes: undefined,
    async transaction(fn) {
      const client = await pool.connect();
      let broken: Error | undefined;
      const onError = (err: Error) => {
        broken ??= err;
      };
      client.on('error', onError);
      try {
        await client.query('BEGIN');
        // Only migrations run here, and a migration may take as long as it needs.
        await client.query('SET LOCAL statement_timeout = 0');
        const result = await fn({
          exec: async (script) => {
            await client.query(script);
          },
          query: async <R>(text: string, params: unknown[] = []) =>
            (await client.query(text, params)).rows as R[],
        });
        await client.query('COMMIT');
        return result;
      } catch (err) {
        // A connection that cannot even roll back is closed, not handed to the next caller.
        await client.query('ROLLBACK').catch((rollbackError: Error) => {
          broken ??= rollbackError;
        });
        throw err;
      } finally {
        client.removeListener('error', onError);
        client.release(broken);
      }
    },
    async close() {
      await db.destroy();
    },
  };
}

/**
 * The pool as Kysely sees it, with two repairs of pg-pool's checkout:
 * - pg-pool takes its idle 'error' listener off a client while it is checked out, so a
 *   connection that drops mid-query (a database restart) emits 'error' with nothing listening,
 *   which ends the process. A checked-out client here always has a listener; the query in
 *   flight fails on its own, and the client is closed when released.
 * - A connection whose query timed out on the client side (the server went silent: a host that
 *   died without a reset) is closed when released instead of going back to the pool, where
 *   every later query would queue behind the one that never returns.
 * (`pool.query`, used for prepared statements, does both itself.)
 */
function closingSilent(pool: pg.Pool): PostgresPool {
  return {
    options: pool.options,
    end: () => pool.end(),
    connect: async () => new GuardedClient(await pool.connect()),
  };
}

/** A checked-out client that cannot crash the process and is discarded when it went bad. */
class GuardedClient implements PostgresPoolClient {
  readonly #client: pg.PoolClient;
  #broken: Error | undefined;
  readonly #onError = (err: Error) => {
    this.#broken ??= err;
  };

  constructor(client: pg.PoolClient) {
    this.#client = client;
    client.on('error', this.#onError);
  }

  query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(
    sqlOrCursor: string | PostgresCursor<R>,
    parameters: ReadonlyArray<unknown> = [],
  ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    // Kysely passes a cursor only when it streams, which Errand never asks it to.
    if (typeof sqlOrCursor !== 'string') throw new Error('streaming queries are not supported');
    return this.#client.query(sqlOrCursor, [...parameters]).then(
      (result) => result as unknown as PostgresQueryResult<R>,
      (err: unknown) => {
        if (err instanceof Error && err.message === 'Query read timeout') this.#broken ??= err;
        throw err;
      },
    );
  }

  release(): void {
    this.#client.removeListener('error', this.#onError);
    // With an error, pg-pool closes the connection instead of keeping it.
    this.#client.release(this.#broken);
  }
}
