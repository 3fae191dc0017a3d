// `errand export FILE`: the database written from one REPEATABLE READ snapshot, while serve may
// be running on it, to a file that appears at its name only once complete (or to stdout).
import { type FileHandle, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import type { Config } from '../../config.ts';
import { type DatabaseHandle, openDatabase } from '../../db/database.ts';
import { embeddedLayout } from '../../db/embedded/server.ts';
import { errandVersion } from '../../version.ts';
import { CliError } from '../errors.ts';
import {
  describeRows,
  EXPORT_FORMAT,
  EXPORT_VERSION,
  type ExportHeader,
  keyFileSecret,
  keyFingerprint,
  type RowCounts,
  TABLES,
} from './format.ts';

/** Rows fetched per round trip of the export's cursor: memory stays bounded by this. */
const FETCH_ROWS = 1000;
/** The export's writes are gathered into chunks of about this size. */
const WRITE_CHUNK = 1024 * 1024;

/** Where the export's lines go: FILE (through FILE.partial) or stdout. */
interface Sink {
  write(text: string): Promise<void>;
  /** Makes the file whole at its name; nothing is at the name before. */
  finish(): Promise<void>;
  /** Removes what was written. */
  abort(): Promise<void>;
}

function fileError(file: string, err: unknown): CliError {
  const code = (err as NodeJS.ErrnoException).code;
  const why =
    code === 'ENOENT'
      ? 'its directory does not exist'
      : code === 'EACCES' || code === 'EPERM'
        ? 'permission denied'
        : code === 'EISDIR' || code === 'ENOTEMPTY' || code === 'EEXIST'
          ? 'it is a directory'
          : code === 'ENOSPC'
            ? 'the disk is full'
            : err instanceof Error
              ? err.message
              : String(err);
  return new CliError(`cannot write ${file}: ${why}`);
}

/** Gathers small writes into chunks, so a million rows are not a million system calls. */
class Chunker {
  #parts: string[] = [];
  #size = 0;
  readonly #flush: (chunk: string) => Promise<void>;
  constructor(flush: (chunk: string) => Promise<void>) {
    this.#flush = flush;
  }
  async write(text: string): Promise<void> {
    this.#parts.push(text);
    this.#size += text.length;
    if (this.#size >= WRITE_CHUNK) await this.drain();
  }
  async drain(): Promise<void> {
    if (this.#parts.length === 0) return;
    const chunk = this.#parts.join('');
    this.#parts = [];
    this.#size = 0;
    await this.#flush(chunk);
  }
}

async function fileSink(file: string): Promise<Sink> {
  const partial = `${file}.partial`;
  // A partial file left by an export that was killed is replaced; made afresh, so it gets 0600.
  await rm(partial, { force: true }).catch(() => {});
  let handle: FileHandle;
  try {
    handle = await open(partial, 'wx', 0o600);
  } catch (err) {
    throw fileError(file, err);
  }
  const out = new Chunker(async (chunk) => {
    await handle.write(chunk);
  });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await handle.close();
  };
  return {
    async write(text) {
      try {
        await out.write(text);
      } catch (err) {
        throw fileError(file, err);
      }
    },
    async finish() {
      try {
        await out.drain();
        await handle.sync();
        await close();
        await rename(partial, file);
      } catch (err) {
        throw fileError(file, err);
      }
      // The rename is durable once the directory is.
      const dir = await open(path.dirname(path.resolve(file)), 'r').catch(() => undefined);
      await dir?.sync().catch(() => {});
      await dir?.close();
    },
    async abort() {
      await close().catch(() => {});
      await rm(partial, { force: true }).catch(() => {});
    },
  };
}

function streamSink(stream: NodeJS.WritableStream): Sink {
  const out = new Chunker(
    (chunk) =>
      new Promise<void>((resolve, reject) => {
        stream.write(chunk, (err) => (err ? reject(err) : resolve()));
      }),
  );
  return {
    write: (text) => out.write(text),
    finish: () => out.drain(),
    abort: async () => {},
  };
}

interface ExportOptions {
  /** The key the database's sealed values were sealed with, for the header's fingerprint. */
  secretKey: string | undefined;
  /** Where FILE `-` writes (default: process.stdout). */
  stdout?: NodeJS.WritableStream;
}

/**
 * Writes the database to `file` (`-`: stdout) from one REPEATABLE READ snapshot, reading each
 * table through a cursor, on a connection of its own beside whatever else uses the database.
 * The file appears at its name only once complete. Returns the rows written per table.
 */
async function exportDatabase(
  handle: DatabaseHandle,
  file: string,
  opts: ExportOptions,
): Promise<RowCounts> {
  const client = new pg.Client({ ...handle.connection, application_name: 'errand export' });
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (err) {
    throw new CliError(
      `cannot connect to the database: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  let sink: Sink | undefined;
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    // A large database may take a while to read, and nothing here holds up its writers.
    await client.query('SET LOCAL statement_timeout = 0');
    const state = await client.query<{ migrations: boolean; at: Date }>(
      "SELECT to_regclass('errand_migrations') IS NOT NULL AS migrations, now() AS at",
    );
    if (!state.rows[0]?.migrations)
      throw new CliError(
        'the database holds no Errand data (no migration was ever applied to it): nothing to export',
      );
    const migration = await client.query<{ id: number | null }>(
      'SELECT max(id) AS id FROM errand_migrations',
    );
    const header: ExportHeader = {
      format: EXPORT_FORMAT,
      version: EXPORT_VERSION,
      exportedAt: (state.rows[0].at ?? new Date()).toISOString(),
      errandVersion: errandVersion(),
      migration: migration.rows[0]?.id ?? 0,
      secretKeyFingerprint: opts.secretKey ? keyFingerprint(opts.secretKey) : null,
    };
    sink = file === '-' ? streamSink(opts.stdout ?? process.stdout) : await fileSink(file);
    await sink.write(`${JSON.stringify(header)}\n`);
    const counts: RowCounts = {};
    for (const table of TABLES) {
      // A database of an older Errand may lack a table; it has no rows of it then.
      const present = await client.query<{ present: boolean }>(
        'SELECT to_regclass($1) IS NOT NULL AS present',
        [table.name],
      );
      if (!present.rows[0]?.present) continue;
      let n = 0;
      await client.query(
        `DECLARE export_rows NO SCROLL CURSOR FOR SELECT to_jsonb(t)::text AS row FROM ${table.name} t ORDER BY ${table.order}`,
      );
      for (;;) {
        const batch = await client.query<{ row: string }>(`FETCH ${FETCH_ROWS} FROM export_rows`);
        for (const { row } of batch.rows)
          await sink.write(`{"table":"${table.name}","row":${row}}\n`);
        n += batch.rows.length;
        if (batch.rows.length < FETCH_ROWS) break;
      }
      await client.query('CLOSE export_rows');
      counts[table.name] = n;
    }
    await sink.write(`${JSON.stringify({ end: true, rows: counts })}\n`);
    await client.query('COMMIT');
    await sink.finish();
    return counts;
  } catch (err) {
    await sink?.abort();
    throw err;
  } finally {
    await client.end().catch(() => {});
  }
}

/** `errand export FILE`: the database of this configuration, beside a running serve. */
export async function runExport(config: Config, file: string): Promise<void> {
  if (!config.databaseUrl) {
    // Opening a data directory that has no database would make one: a mistyped --data-dir
    // would export an empty database instead of saying so.
    const cluster = embeddedLayout(config.dataDir).cluster;
    if (!(await stat(path.join(cluster, 'PG_VERSION')).catch(() => undefined)))
      throw new CliError(
        `there is no Errand database in ${path.resolve(config.dataDir)} (give --data-dir, or DATABASE_URL for PostgreSQL)`,
      );
  }
  const handle = await openDatabase({
    dataDir: config.dataDir,
    databaseUrl: config.databaseUrl,
    shareRunning: true,
  });
  try {
    const secretKey =
      config.secretKey ??
      (handle.kind === 'embedded' ? await keyFileSecret(config.dataDir) : undefined);
    const counts = await exportDatabase(handle, file, { secretKey });
    process.stderr.write(`exported ${describeRows(counts)} to ${file === '-' ? 'stdout' : file}\n`);
  } finally {
    await handle.close();
  }
}
