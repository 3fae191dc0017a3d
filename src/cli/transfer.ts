// `errand export` and `errand import`: every project, API key (hashes only), webhook endpoint,
// job, turn (with its transcript) and event as one JSON Lines file, written from one snapshot
// while serve may be running, and loaded whole or not at all into an empty database. This is how
// a user moves from the embedded mode to their own PostgreSQL, and how they back Errand up.
import { scryptSync } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { type FileHandle, mkdtemp, open, readFile, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pipeline } from 'node:stream/promises';
import { sql, type Transaction } from 'kysely';
import pg from 'pg';
import type { Config } from '../config.ts';
import { type DatabaseHandle, type Db, openDatabase } from '../db/database.ts';
import { embeddedLayout } from '../db/embedded/server.ts';
import { loadMigrations, migrate } from '../db/migrate.ts';
import type { Database } from '../db/schema.ts';
import { requeuePendingDeliveries } from '../events/webhooks/outbox.ts';
import { requeueOpenTurns } from '../jobs/lifecycle.ts';
import { createLogger, type Logger } from '../log.ts';
import { TurnQueue } from '../queue/queue.ts';
import { open as openSealed } from '../secrets/box.ts';
import { secretKeyPath } from '../secrets/key-file.ts';
import { CliError } from './client.ts';
import { errandVersion } from './usage.ts';

export const EXPORT_FORMAT = 'errand-export';
/** The file format this Errand writes, and the newest it reads. */
export const EXPORT_VERSION = 1;

type TableName = keyof Database;

interface TableSpec {
  name: TableName;
  /** The order rows are written in: the primary key, so two exports of one state are equal. */
  order: string;
  noun: readonly [one: string, many: string];
}

/**
 * The tables of an export, parents before children, as they are written and loaded. Left out:
 * dashboard sessions (browsers sign in again), rate-limit counters and idempotency keys (both
 * short-lived), the migrations table (the importing side runs its own) and pg-boss's schema
 * (open turns and pending deliveries are queued afresh on import).
 */
const TABLES: readonly TableSpec[] = [
  { name: 'projects', order: 'id', noun: ['project', 'projects'] },
  { name: 'api_keys', order: 'id', noun: ['API key', 'API keys'] },
  { name: 'webhooks', order: 'id', noun: ['webhook endpoint', 'webhook endpoints'] },
  { name: 'jobs', order: 'id', noun: ['job', 'jobs'] },
  { name: 'turns', order: 'job_id, seq', noun: ['turn', 'turns'] },
  { name: 'events', order: 'seq', noun: ['event', 'events'] },
  {
    name: 'webhook_deliveries',
    order: 'id',
    noun: ['webhook delivery', 'webhook deliveries'],
  },
  {
    name: 'webhook_attempts',
    order: 'delivery_id, attempt',
    noun: ['webhook delivery attempt', 'webhook delivery attempts'],
  },
];
const TABLE_NAMES: ReadonlySet<string> = new Set(TABLES.map((t) => t.name));

export type RowCounts = Partial<Record<TableName, number>>;

export interface ExportHeader {
  format: typeof EXPORT_FORMAT;
  version: number;
  exportedAt: string;
  errandVersion: string;
  /** The highest migration applied to the exported database. */
  migration: number;
  /** Which secret key sealed the file's forge credentials and webhook secrets; null: none set. */
  secretKeyFingerprint: string | null;
}

/** Rows fetched per round trip of the export's cursor: memory stays bounded by this. */
const FETCH_ROWS = 1000;
/** Rows and bytes of JSON per INSERT of the import. */
const BATCH_ROWS = 500;
const BATCH_BYTES = 8 * 1024 * 1024;
/** The export's writes are gathered into chunks of about this size. */
const WRITE_CHUNK = 1024 * 1024;
/** Sealed values kept from the file to try the importing side's key on. */
const MAX_SEALED_SAMPLES = 20;
/** A statement of the import may take long (a large batch of transcripts on a slow disk). */
const IMPORT_STATEMENT_MS = 60 * 60_000;

/**
 * A short, stable name of a secret key, so two Errands can tell whether they hold the same key
 * without either showing it. Derived with scrypt, as the box's own key is, so the fingerprint
 * gives a guesser of a weak ERRAND_SECRET_KEY no faster test than the sealed values beside it.
 */
export function keyFingerprint(secretKey: string): string {
  return scryptSync(secretKey, 'errand export key fingerprint v1', 8).toString('hex');
}

/** `1 project, 2 API keys, …`: the rows of each table, for the summaries. */
export function describeRows(counts: RowCounts): string {
  return TABLES.map((t) => {
    const n = counts[t.name] ?? 0;
    return `${n} ${n === 1 ? t.noun[0] : t.noun[1]}`;
  }).join(', ');
}

/** The embedded mode's key file, when there is one (it is made by serve, never here). */
async function keyFileSecret(dataDir: string): Promise<string | undefined> {
  const key = (await readFile(secretKeyPath(dataDir), 'utf8').catch(() => '')).trim();
  return key || undefined;
}

// ---------------------------------------------------------------------------------------------
// Export

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

export interface ExportOptions {
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
export async function exportDatabase(
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

// ---------------------------------------------------------------------------------------------
// Import

/** What the first reading of a file found: it is whole, and what it asks of the database. */
export interface CheckedFile {
  header: ExportHeader;
  counts: RowCounts;
  /** Sealed values of the file (forge credentials, webhook secrets), to try a key on. */
  sealed: string[];
  /** Whether turns or webhook deliveries are to be queued again. */
  requeue: boolean;
}

interface RowLine {
  table: TableName;
  row: Record<string, unknown>;
  /** The row's JSON exactly as written, so numbers in jsonb columns keep every digit. */
  text: string;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** One line of the file as a row, or an error saying where the file is wrong. */
function rowLine(line: string, file: string, lineNo: number): RowLine {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    throw new CliError(
      `${file} is damaged: line ${lineNo} is not JSON (a file cut short, or edited): nothing was imported`,
    );
  }
  if (!isObject(parsed) || typeof parsed.table !== 'string' || !isObject(parsed.row))
    throw new CliError(`${file} is damaged: line ${lineNo} is not a row: nothing was imported`);
  if (!TABLE_NAMES.has(parsed.table))
    throw new CliError(
      `${file} has rows of a table this Errand does not know (${parsed.table}, line ${lineNo}): nothing was imported`,
    );
  const table = parsed.table as TableName;
  const prefix = `{"table":${JSON.stringify(table)},"row":`;
  const exact = Object.keys(parsed).length === 2 && line.startsWith(prefix) && line.endsWith('}');
  return {
    table,
    row: parsed.row,
    text: exact ? line.slice(prefix.length, -1) : JSON.stringify(parsed.row),
  };
}

function lines(file: string): AsyncIterable<string> {
  return createInterface({ input: createReadStream(file), crlfDelay: Number.POSITIVE_INFINITY });
}

/**
 * Reads the whole file once before the database is touched: a header this Errand can read, the
 * rows, and the end line with the counts of a file that was written to its end. `name` is the
 * file as messages call it.
 */
export async function checkExportFile(file: string, name = file): Promise<CheckedFile> {
  const newest = Math.max(0, ...(await loadMigrations()).map((m) => m.id));
  let header: ExportHeader | undefined;
  let end: RowCounts | undefined;
  const counts: RowCounts = {};
  const sealed: string[] = [];
  let requeue = false;
  let lineNo = 0;
  try {
    for await (const line of lines(file)) {
      lineNo += 1;
      if (line === '') continue;
      if (!header) {
        header = parseHeader(line, name, newest);
        continue;
      }
      if (end)
        throw new CliError(
          `${name} is damaged: line ${lineNo} follows its end line: nothing was imported`,
        );
      if (line.startsWith('{"end"')) {
        end = parseEnd(line, name, lineNo);
        continue;
      }
      const { table, row } = rowLine(line, name, lineNo);
      counts[table] = (counts[table] ?? 0) + 1;
      for (const column of ['forge_secret', 'secret', 'previous_secret']) {
        const value = row[column];
        if (typeof value === 'string' && (table === 'projects' || table === 'webhooks'))
          if (sealed.length < MAX_SEALED_SAMPLES) sealed.push(value);
      }
      if (table === 'turns' && (row.state === 'queued' || row.state === 'running')) requeue = true;
      if (table === 'webhook_deliveries' && row.state === 'pending') requeue = true;
    }
  } catch (err) {
    if (err instanceof CliError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw new CliError(
      `cannot read ${name}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : err instanceof Error ? err.message : String(err)}`,
    );
  }
  if (!header) throw new CliError(`${name} is empty: it is not an Errand export`);
  if (!end)
    throw new CliError(
      `${name} is incomplete: it ends before its end line (a copy cut short, or an export that did not finish): nothing was imported`,
    );
  for (const table of TABLES) {
    const want = end[table.name] ?? 0;
    const have = counts[table.name] ?? 0;
    if (want !== have)
      throw new CliError(
        `${name} is damaged: its end line counts ${want} ${table.noun[1]}, the file holds ${have}: nothing was imported`,
      );
  }
  return { header, counts, sealed, requeue };
}

function parseHeader(line: string, file: string, newestMigration: number): ExportHeader {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    parsed = undefined;
  }
  if (!isObject(parsed) || parsed.format !== EXPORT_FORMAT)
    throw new CliError(
      `${file} is not an Errand export (its first line is not an ${EXPORT_FORMAT} header)`,
    );
  const { version, migration } = parsed;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1)
    throw new CliError(`${file} has an export header without a valid version`);
  const by = typeof parsed.errandVersion === 'string' ? ` by Errand ${parsed.errandVersion}` : '';
  if (version > EXPORT_VERSION)
    throw new CliError(
      `${file} was written${by} in export format ${version}, and this Errand (${errandVersion()}) reads format ${EXPORT_VERSION} and older: import it with an Errand at least as new as the one that exported it`,
    );
  if (typeof migration !== 'number' || !Number.isInteger(migration) || migration < 0)
    throw new CliError(`${file} has an export header without a valid migration`);
  if (migration > newestMigration)
    throw new CliError(
      `${file} was exported${by} from a database at migration ${migration}, newer than this Errand (${errandVersion()}) knows (${newestMigration}): import it with an Errand at least as new as the one that exported it`,
    );
  const fingerprint = parsed.secretKeyFingerprint;
  return {
    format: EXPORT_FORMAT,
    version,
    exportedAt: typeof parsed.exportedAt === 'string' ? parsed.exportedAt : '',
    errandVersion: typeof parsed.errandVersion === 'string' ? parsed.errandVersion : '',
    migration,
    secretKeyFingerprint: typeof fingerprint === 'string' ? fingerprint : null,
  };
}

function parseEnd(line: string, file: string, lineNo: number): RowCounts {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    parsed = undefined;
  }
  if (!isObject(parsed) || parsed.end !== true || !isObject(parsed.rows))
    throw new CliError(
      `${file} is damaged: line ${lineNo} is not an end line: nothing was imported`,
    );
  const counts: RowCounts = {};
  for (const [table, n] of Object.entries(parsed.rows)) {
    if (!TABLE_NAMES.has(table))
      throw new CliError(
        `${file} has rows of a table this Errand does not know (${table}): nothing was imported`,
      );
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0)
      throw new CliError(`${file} is damaged: its end line's counts are not numbers`);
    counts[table as TableName] = n;
  }
  return counts;
}

/**
 * Refuses a file whose sealed values would not open here: they open only with the key they were
 * sealed with, and a service that cannot open them cannot sign webhooks or reach the forge.
 * `where` says how this side's key is set, for the message.
 */
export function checkSecretKey(
  file: string,
  checked: CheckedFile,
  secretKey: string | undefined,
  where: string,
): void {
  if (checked.sealed.length === 0) return;
  const source = checked.header.secretKeyFingerprint;
  const hint = `set ERRAND_SECRET_KEY to the secret key of the Errand that exported it (the contents of the secret.key file in its data directory, or its ERRAND_SECRET_KEY)${where}`;
  if (!secretKey)
    throw new CliError(
      `${file} holds sealed secrets (forge credentials or webhook signing secrets), which open only with the key they were sealed with, and no secret key is set here: ${hint}. Nothing was imported`,
    );
  // Opening is the proof; the header's fingerprint only names the key that is needed. One value
  // that opens is enough: a database whose key was changed may hold older ones that never do.
  if (!checked.sealed.some((value) => opens(secretKey, value)))
    throw new CliError(
      `${file} holds sealed secrets (forge credentials or webhook signing secrets) that the secret key here (fingerprint ${keyFingerprint(secretKey)}) cannot open; they were sealed with ${source ? `the key of fingerprint ${source}` : 'another key'}: ${hint}. Nothing was imported`,
    );
}

function opens(secretKey: string, sealed: string): boolean {
  try {
    openSealed(secretKey, sealed);
    return true;
  } catch {
    return false;
  }
}

/**
 * What the database holds of the exported tables, as `1 API key and 2 projects`, or undefined
 * when it holds none. Counting stops at a thousand rows a table.
 */
async function heldRows(db: Db): Promise<string | undefined> {
  const held: string[] = [];
  for (const table of TABLES) {
    const present = await sql<{ present: boolean }>`
      SELECT to_regclass(${table.name}) IS NOT NULL AS present`.execute(db);
    if (!present.rows[0]?.present) continue;
    const count = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM (SELECT 1 FROM ${sql.table(table.name)} LIMIT 1000) s`.execute(
      db,
    );
    const n = count.rows[0]?.n ?? 0;
    if (n > 0)
      held.push(`${n === 1000 ? '1000 or more' : n} ${n === 1 ? table.noun[0] : table.noun[1]}`);
  }
  if (held.length === 0) return undefined;
  return held.length === 1 ? held[0] : `${held.slice(0, -1).join(', ')} and ${held.at(-1)}`;
}

function notEmpty(held: string): CliError {
  return new CliError(
    `the database already holds ${held}: import needs an empty database (a new PostgreSQL database, or a new --data-dir, on which no Errand has started yet). Nothing was imported`,
  );
}

/** Rows of one table waiting to be inserted together. */
interface Batch {
  table: TableName;
  texts: string[];
  keys: Set<string>;
  bytes: number;
}

export interface ImportOptions {
  /** For the queue that takes open turns and pending deliveries (its retry settings). */
  config: Config;
  log: Logger;
}

export interface ImportResult {
  counts: RowCounts;
  /** Turns and webhook deliveries given a new queue entry. */
  requeued: { turns: number; deliveries: number };
}

/**
 * Loads a file that checkExportFile accepted into the empty database of `handle`, in one
 * transaction: after the migrations, every row, the sequences moved past the imported values,
 * and a queue entry for every turn that was queued or running and every pending webhook delivery.
 */
export async function importDatabase(
  handle: DatabaseHandle,
  file: string,
  checked: CheckedFile,
  opts: ImportOptions,
  name = file,
): Promise<ImportResult> {
  // Before the migrations, so that a database picked by mistake is left exactly as it was.
  const held = await heldRows(handle.db);
  if (held) throw notEmpty(held);
  await migrate(handle);
  const queue = checked.requeue ? await TurnQueue.start(handle, opts.config, opts.log) : undefined;
  try {
    return await handle.db.transaction().execute(async (trx) => {
      // Nothing else writes these tables until the import commits or rolls back: a serve that
      // starts meanwhile finds the imported keys instead of minting a first admin key.
      await sql`LOCK TABLE ${sql.join(TABLES.map((t) => sql.table(t.name)))} IN ACCESS EXCLUSIVE MODE`.execute(
        trx,
      );
      const again = await heldRows(trx);
      if (again) throw notEmpty(again);
      const counts = await loadRows(trx, file, name);
      for (const table of TABLES)
        if ((counts[table.name] ?? 0) !== (checked.counts[table.name] ?? 0))
          throw new CliError(`${name} changed while it was imported: nothing was imported`);
      await moveSequences(trx);
      const requeued = queue ? await requeue(trx, queue) : { turns: 0, deliveries: 0 };
      return { counts, requeued };
    });
  } finally {
    await queue?.stop();
  }
}

/** Inserts the file's rows, a batch at a time; returns the rows per table. */
async function loadRows(
  trx: Transaction<Database>,
  file: string,
  name: string,
): Promise<RowCounts> {
  const columns = new Map<TableName, string[]>();
  const counts: RowCounts = {};
  let batch: Batch | undefined;
  const flush = async () => {
    if (!batch || batch.texts.length === 0) return;
    const { table, texts, keys } = batch;
    let own = columns.get(table);
    if (!own) {
      const result = await sql<{ name: string }>`
        SELECT attname AS name FROM pg_attribute
        WHERE attrelid = ${table}::regclass AND attnum > 0 AND NOT attisdropped
        ORDER BY attnum`.execute(trx);
      own = result.rows.map((r) => r.name);
      columns.set(table, own);
    }
    // A column the file does not have (an export of an older Errand) takes its default.
    const names = own.filter((c) => keys.has(c));
    if (names.length === 0)
      throw new CliError(`${name} has rows of ${table} without any of its columns`);
    const list = sql.join(names.map((c) => sql.id(c)));
    const rows = `[${texts.join(',')}]`;
    await sql`
      INSERT INTO ${sql.table(table)} (${list})
      SELECT ${list} FROM jsonb_populate_recordset(NULL::${sql.table(table)}, ${rows}::jsonb)`.execute(
      trx,
    );
    batch = undefined;
  };
  let first = true;
  let lineNo = 0;
  for await (const line of lines(file)) {
    lineNo += 1;
    if (line === '') continue;
    if (first) {
      first = false;
      continue;
    }
    if (line.startsWith('{"end"')) break;
    const { table, row, text } = rowLine(line, name, lineNo);
    if (
      batch &&
      (batch.table !== table || batch.texts.length >= BATCH_ROWS || batch.bytes >= BATCH_BYTES)
    )
      await flush();
    batch ??= { table, texts: [], keys: new Set(), bytes: 0 };
    batch.texts.push(text);
    batch.bytes += text.length;
    for (const key of Object.keys(row)) batch.keys.add(key);
    counts[table] = (counts[table] ?? 0) + 1;
  }
  await flush();
  return counts;
}

/** Moves every serial column's sequence past the values the import wrote (events.seq). */
async function moveSequences(trx: Transaction<Database>): Promise<void> {
  for (const table of TABLES) {
    const serials = await sql<{ name: string; sequence: string }>`
      SELECT a.attname AS name, pg_get_serial_sequence(${table.name}, a.attname) AS sequence
      FROM pg_attribute a
      WHERE a.attrelid = ${table.name}::regclass AND a.attnum > 0 AND NOT a.attisdropped
        AND pg_get_serial_sequence(${table.name}, a.attname) IS NOT NULL`.execute(trx);
    for (const { name, sequence } of serials.rows) {
      await sql`
        SELECT setval(${sequence}::regclass,
          (SELECT COALESCE(max(${sql.id(name)}), 0) + 1 FROM ${sql.table(table.name)}), false)`.execute(
        trx,
      );
    }
  }
}

/**
 * Gives every imported turn that was queued or running (it runs nowhere now), and every pending
 * webhook delivery, a queue entry, in the import's transaction.
 */
async function requeue(
  trx: Transaction<Database>,
  queue: TurnQueue,
): Promise<{ turns: number; deliveries: number }> {
  return {
    turns: await requeueOpenTurns({ queue }, trx),
    deliveries: await requeuePendingDeliveries({ queue }, trx),
  };
}

async function spoolStdin(): Promise<{ file: string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'errand-import-'));
  const file = path.join(dir, 'stdin.jsonl');
  const handle = await open(file, 'wx', 0o600);
  try {
    await pipeline(process.stdin, handle.createWriteStream());
  } finally {
    await handle.close().catch(() => {});
  }
  return { file, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** `errand import FILE`: into the (empty) database of this configuration. */
export async function runImport(config: Config, file: string): Promise<void> {
  const spooled = file === '-' ? await spoolStdin() : undefined;
  const source = spooled?.file ?? file;
  try {
    const name = file === '-' ? 'the export on stdin' : file;
    const checked = await checkExportFile(source, name);
    const embedded = !config.databaseUrl;
    const secretKey =
      config.secretKey ?? (embedded ? await keyFileSecret(config.dataDir) : undefined);
    checkSecretKey(
      name,
      checked,
      secretKey,
      embedded
        ? `, or copy that file to ${secretKeyPath(path.resolve(config.dataDir))}`
        : ', here and for every Errand process on this database',
    );
    const log = createLogger('warn');
    const handle = await openDatabase({
      dataDir: config.dataDir,
      databaseUrl: config.databaseUrl,
      timeouts: {
        connectMs: config.database.connectTimeoutSeconds * 1000,
        statementMs: IMPORT_STATEMENT_MS,
      },
      log,
    });
    try {
      const result = await importDatabase(handle, source, checked, { config, log }, name);
      const { turns, deliveries } = result.requeued;
      process.stdout.write(
        `imported ${describeRows(result.counts)}${
          turns + deliveries > 0
            ? `; queued again: ${turns} ${turns === 1 ? 'turn' : 'turns'} and ${deliveries} webhook ${deliveries === 1 ? 'delivery' : 'deliveries'}`
            : ''
        }\n`,
      );
    } finally {
      await handle.close();
    }
  } finally {
    await spooled?.remove();
  }
}
