// Opens Errand's database: the embedded PGlite in the data directory by default, or the
// PostgreSQL server of DATABASE_URL. Both are PostgreSQL, so one Kysely schema, one set of
// migrations and one pg-boss queue serve both.
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { acquireDirLock, type DirLock } from './lock.ts';
import { PgliteDialect } from './pglite-dialect.ts';
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
   * connection): for the hottest queries. On PGlite it is a plain query.
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
}

export class DatabaseLockedError extends Error {
  override name = 'DatabaseLockedError';
}

export async function openDatabase(opts: OpenOptions): Promise<DatabaseHandle> {
  if (opts.databaseUrl) return openPostgres(opts.databaseUrl, opts.poolSize ?? 20);
  return openPglite(opts.dataDir);
}

async function openPglite(dataDir: string): Promise<DatabaseHandle> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  // Two processes on one PGlite directory corrupt it: the lock is taken before PGlite opens.
  let lock: DirLock;
  try {
    lock = await acquireDirLock(path.join(dataDir, 'errand.lock'));
  } catch (err) {
    throw new DatabaseLockedError(
      `the data directory ${dataDir} is in use by another Errand process (${err instanceof Error ? err.message : String(err)}); ` +
        'stop it first, or use a different --data-dir. With several processes, use PostgreSQL (DATABASE_URL).',
    );
  }
  let pglite: PGlite;
  try {
    pglite = await PGlite.create(path.join(dataDir, 'pgdata'));
  } catch (err) {
    await lock.release();
    throw err;
  }
  const db = new Kysely<Database>({ dialect: new PgliteDialect(pglite) });
  return {
    kind: 'pglite',
    db,
    pglite,
    connectionString: undefined,
    prepared: async <R>(_name: string, text: string, values: unknown[]) =>
      (await pglite.query<R>(text, values)).rows,
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

async function openPostgres(connectionString: string, poolSize: number): Promise<DatabaseHandle> {
  const pool = new pg.Pool({ connectionString, max: poolSize, application_name: 'errand' });
  // An idle client that loses its server emits 'error' on the pool; without a listener that
  // would crash the process instead of letting the next query reconnect.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    kind: 'postgres',
    db,
    pglite: undefined,
    connectionString,
    prepared: async <R>(name: string, text: string, values: unknown[]) =>
      (await pool.query({ name, text, values })).rows as R[],
    async transaction(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
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
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    async close() {
      await db.destroy();
    },
  };
}
