// `errand import FILE`: a file that check.ts accepted, loaded into an empty database in one
// transaction, with the open turns and pending webhook deliveries queued again.
import { mkdtemp, open, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { sql, type Transaction } from 'kysely';
import { audit } from '../../audit/audit.ts';
import type { Config } from '../../config.ts';
import { type DatabaseHandle, type Db, openDatabase } from '../../db/database.ts';
import { migrate } from '../../db/migrate.ts';
import type { Database } from '../../db/schema.ts';
import { requeuePendingDeliveries } from '../../features/webhooks/index.ts';
import { requeueOpenTurns } from '../../jobs/lifecycle.ts';
import { tokenBareReviewLinks } from '../../jobs/review-link.ts';
import { rebuildSpend } from '../../jobs/spend.ts';
import { createLogger, type Logger } from '../../log.ts';
import { TurnQueue } from '../../queue/queue.ts';
import { secretKeyPath } from '../../secrets/key-file.ts';
import { CliError } from '../errors.ts';
import { type CheckedFile, checkExportFile, checkRepositories, checkSecretKey } from './check.ts';
import {
  describeRows,
  keyFileSecret,
  lines,
  type RowCounts,
  type RowLine,
  rowLine,
  TABLES,
  type TableName,
} from './format.ts';

/** Rows and bytes of JSON per INSERT of the import. */
const BATCH_ROWS = 500;
const BATCH_BYTES = 8 * 1024 * 1024;
/** A statement of the import may take long (a large batch of transcripts on a slow disk). */
const IMPORT_STATEMENT_MS = 60 * 60_000;

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

interface ImportOptions {
  /** For the queue that takes open turns and pending deliveries (its retry settings). */
  config: Config;
  log: Logger;
}

interface ImportResult {
  counts: RowCounts;
  /** Turns and webhook deliveries given a new queue entry. */
  requeued: { turns: number; deliveries: number };
}

/**
 * Loads a file that checkExportFile accepted into the empty database of `handle`, in one
 * transaction: after the migrations, every row, the sequences moved past the imported values,
 * and a queue entry for every turn that was queued or running and every pending webhook delivery.
 */
async function importDatabase(
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
      // An export made before review links carried their token brings bare ones.
      await tokenBareReviewLinks(trx);
      // What jobs and projects spent is summed from the turns: an export of an Errand older
      // than those sums has none, and they are the turns' in any case.
      await rebuildSpend(trx);
      // The import itself is a change of state: by whoever ran the command, from no request.
      await audit(
        { db: trx, who: { actor: null, address: null, requestId: null } },
        {
          action: 'import',
          target: null,
          details: { rows: Object.values(counts).reduce((sum, n) => sum + (n ?? 0), 0) },
        },
      );
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
    const { table, row, text } = asStoredNow(rowLine(line, name, lineNo));
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

/**
 * A row of an export of an older Errand as this one stores it: a project's setup_network of
 * before migration 0022, which the import would leave out as a column it no longer has, becomes
 * its network.setup ('open' for true). The row's text is kept as written otherwise.
 */
function asStoredNow(line: RowLine): RowLine {
  const { table, row, text } = line;
  if (table !== 'projects' || !('setup_network' in row) || 'network_setup' in row) return line;
  const setup = row.setup_network === true ? 'open' : 'none';
  return {
    table,
    row: { ...row, network_setup: setup },
    text: `${text.slice(0, -1)},"network_setup":"${setup}"}`,
  };
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

/**
 * `errand import FILE`: into the (empty) database of this configuration. `keepRefusedRepos`
 * imports projects whose repositories this server refuses, instead of refusing the file.
 */
export async function runImport(
  config: Config,
  file: string,
  keepRefusedRepos = false,
): Promise<void> {
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
    const refusedRepos = checkRepositories(name, checked, config.allowLocalRepos, keepRefusedRepos);
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
      if (refusedRepos.length > 0)
        process.stderr.write(
          `imported anyway (--keep-refused-repos), with repositories this server refuses until they are changed. ${refusedRepos.join('. ')}\n`,
        );
    } finally {
      await handle.close();
    }
  } finally {
    await spooled?.remove();
  }
}
