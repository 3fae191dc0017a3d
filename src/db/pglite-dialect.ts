// A Kysely dialect over one embedded PGlite instance. PGlite has a single connection, so a
// Kysely transaction is run inside `pglite.transaction()`: that holds PGlite's own mutex, which
// every other `query()` (ours and pg-boss's) waits on, so nothing interleaves with it.
import type { PGlite, Transaction as PgliteTransaction } from '@electric-sql/pglite';
import {
  type CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryCompiler,
  type QueryResult,
} from 'kysely';

type Queryable = Pick<PGlite, 'query'> | Pick<PgliteTransaction, 'query'>;

class PgliteConnection implements DatabaseConnection {
  readonly #pglite: PGlite;
  #tx: PgliteTransaction | undefined;
  #finish: ((commit: boolean) => void) | undefined;
  #done: Promise<unknown> | undefined;

  constructor(pglite: PGlite) {
    this.#pglite = pglite;
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const target: Queryable = this.#tx ?? this.#pglite;
    const result = await target.query<R>(compiled.sql, [...compiled.parameters]);
    const affected = result.affectedRows;
    return {
      rows: result.rows,
      ...(affected !== undefined ? { numAffectedRows: BigInt(affected) } : {}),
    };
  }

  // biome-ignore lint/correctness/useYield: streaming is not offered on PGlite.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported on PGlite');
  }

  begin(): Promise<void> {
    return new Promise((started, failed) => {
      this.#done = this.#pglite
        .transaction(
          (tx) =>
            new Promise<void>((settle) => {
              this.#tx = tx;
              this.#finish = (commit) => {
                this.#tx = undefined;
                this.#finish = undefined;
                if (commit) settle();
                else settle(tx.rollback());
              };
              started();
            }),
        )
        .catch((err: unknown) => {
          failed(err);
          throw err;
        });
    });
  }

  async end(commit: boolean): Promise<void> {
    const done = this.#done;
    this.#done = undefined;
    this.#finish?.(commit);
    await done;
  }
}

class PgliteDriver implements Driver {
  readonly #pglite: PGlite;
  constructor(pglite: PGlite) {
    this.#pglite = pglite;
  }
  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return new PgliteConnection(this.#pglite);
  }
  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as PgliteConnection).begin();
  }
  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as PgliteConnection).end(true);
  }
  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as PgliteConnection).end(false);
  }
  async releaseConnection(): Promise<void> {}
  async destroy(): Promise<void> {}
}

export class PgliteDialect implements Dialect {
  readonly #pglite: PGlite;
  constructor(pglite: PGlite) {
    this.#pglite = pglite;
  }
  createDriver(): Driver {
    return new PgliteDriver(this.#pglite);
  }
  createQueryCompiler(): QueryCompiler {
    return new PostgresQueryCompiler();
  }
  createAdapter(): DialectAdapter {
    return new PostgresAdapter();
  }
  createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }
}
