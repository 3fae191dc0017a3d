// Opens Errand's database: PostgreSQL in both modes, the embedded server this process runs in
// the data directory (db/embedded) by default, or the server of DATABASE_URL. One Kysely schema,
// one set of migrations and one pg-boss queue serve both, over the same driver.
import {
  Kysely,
  type PostgresCursor,
  PostgresDialect,
  type PostgresPool,
  type PostgresPoolClient,
  type PostgresQueryResult,
} from 'kysely';
import pg from 'pg';
import { createLogger, type Logger } from '../log.ts';
import {
  DatabaseLockedError,
  type EmbeddedConnection,
  EmbeddedPostgres,
  runningConnection,
} from './embedded/server.ts';
import { preparedName } from './prepared.ts';
import type { Database } from './schema.ts';

export type Db = Kysely<Database>;

/** Runs SQL scripts and parameterised statements inside one transaction. */
interface ScriptRunner {
  exec(script: string): Promise<void>;
  query<R>(text: string, params?: unknown[]): Promise<R[]>;
}

/** Where the database is, as node-postgres (and so pg-boss) takes it. */
type Connection = { connectionString: string } | EmbeddedConnection;

export interface DatabaseHandle {
  /** The embedded server in the data directory, or the server of DATABASE_URL. */
  kind: 'embedded' | 'postgres';
  db: Db;
  /** How to open other connections to the same database: the queue's, LISTEN, export. */
  connection: Connection;
  /**
   * Runs one statement as a named prepared statement (PostgreSQL parses and plans it once per
   * connection): for the hottest queries.
   */
  prepared<R>(name: string, text: string, values: unknown[]): Promise<R[]>;
  /** Runs `fn` in one transaction (used by migrations, which need multi-statement scripts). */
  transaction<T>(fn: (run: ScriptRunner) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface OpenOptions {
  dataDir: string;
  databaseUrl: string | undefined;
  /** Upper bound of PostgreSQL connections this process opens for its own queries. */
  poolSize?: number;
  /** Bounds on getting a connection and on one statement (see Config.database). */
  timeouts?: { connectMs: number; statementMs: number };
  /** Where the embedded server's messages go (default: warnings and errors to stderr). */
  log?: Logger;
  /**
   * When another Errand process runs the embedded server of `dataDir`, connect to it instead of
   * refusing (the commands that may run beside `serve`: export, migrate).
   */
  shareRunning?: boolean;
}

/** Used where no bounds are given (tools and tests); the service passes its settings. */
const DEFAULT_TIMEOUTS = { connectMs: 5_000, statementMs: 10_000 };

export { DatabaseLockedError };

export async function openDatabase(opts: OpenOptions): Promise<DatabaseHandle> {
  const poolSize = opts.poolSize ?? 20;
  const timeouts = opts.timeouts ?? DEFAULT_TIMEOUTS;
  if (opts.databaseUrl)
    return openPostgres('postgres', { connectionString: opts.databaseUrl }, poolSize, timeouts);
  let server: EmbeddedPostgres | undefined;
  let connection: EmbeddedConnection | undefined;
  try {
    server = await EmbeddedPostgres.start({
      dataDir: opts.dataDir,
      log: opts.log ?? createLogger('warn'),
    });
    connection = server.connection;
  } catch (err) {
    if (!(err instanceof DatabaseLockedError && opts.shareRunning)) throw err;
    connection = await runningConnection(opts.dataDir);
    if (!connection) throw err;
  }
  const handle = openPostgres('embedded', connection, poolSize, timeouts);
  return {
    ...handle,
    async close() {
      await handle.close();
      await server?.stop();
    },
  };
}

function openPostgres(
  kind: DatabaseHandle['kind'],
  connection: Connection,
  poolSize: number,
  timeouts: { connectMs: number; statementMs: number },
): DatabaseHandle {
  const pool = new pg.Pool({
    ...connection,
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
    kind,
    db,
    connection,
    prepared: async <R>(name: string, text: string, values: unknown[]) =>
      (await pool.query({ name, text, values })).rows as R[],
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
 * (`pool.query`, used for prepared statements, does both itself.) A statement whose text
 * starts with a prepared marker (prepared.ts) runs as a named prepared statement.
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
    const text = sqlOrCursor;
    const values = [...parameters];
    const name = preparedName(text);
    const pending = name
      ? this.#client.query({ name, text, values })
      : this.#client.query(text, values);
    return pending.then(
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
