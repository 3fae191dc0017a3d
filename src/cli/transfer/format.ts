// The export file's format, shared by export and import: JSON Lines, a header line, one line per
// row ({"table", "row"}) of the tables below in their order, and an end line with the counts.
import { scryptSync } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { Database } from '../../db/schema.ts';
import { secretKeyPath } from '../../secrets/key-file.ts';
import { CliError } from '../errors.ts';

export const EXPORT_FORMAT = 'errand-export';
/** The file format this Errand writes, and the newest it reads. */
export const EXPORT_VERSION = 1;

export type TableName = keyof Database;

interface TableSpec {
  name: TableName;
  /** The order rows are written in: the primary key, so two exports of one state are equal. */
  order: string;
  noun: readonly [one: string, many: string];
}

/**
 * The tables of an export, parents before children, as they are written and loaded. Left out:
 * dashboard sessions (browsers sign in again), rate-limit counters and idempotency keys (all
 * short-lived), the migrations table (the importing side runs its own) and pg-boss's schema
 * (open turns and pending deliveries are queued afresh on import).
 */
export const TABLES: readonly TableSpec[] = [
  { name: 'projects', order: 'id', noun: ['project', 'projects'] },
  // People, their roles and their personal tokens (hashed, as stored): who may do what
  // survives a move; they sign in again, since sessions are left out.
  { name: 'users', order: 'id', noun: ['user', 'users'] },
  {
    name: 'project_roles',
    order: 'project_id, grantee_kind, grantee',
    noun: ['project role', 'project roles'],
  },
  { name: 'user_tokens', order: 'id', noun: ['personal API token', 'personal API tokens'] },
  // Sealed as they are stored: they open only with the exporting side's secret key.
  {
    name: 'project_secrets',
    order: 'project_id, name',
    noun: ['project secret', 'project secrets'],
  },
  { name: 'api_keys', order: 'id', noun: ['API key', 'API keys'] },
  { name: 'webhooks', order: 'id', noun: ['webhook endpoint', 'webhook endpoints'] },
  // A paused schedule stays paused; an active one is given to pg-boss's scheduler again when a
  // worker starts (src/features/schedules/, syncSchedules), since pg-boss's schema is left out.
  { name: 'schedules', order: 'id', noun: ['schedule', 'schedules'] },
  // What each firing made: without them, the dashboard's last firings would lose their jobs.
  {
    name: 'schedule_firings',
    order: 'entry_id',
    noun: ['schedule firing', 'schedule firings'],
  },
  // Eval runs and their results (src/features/eval/), before the jobs that name their run: a
  // run's table and its jobs' tag survive a move. A running run moves on when a worker starts.
  { name: 'eval_runs', order: 'id', noun: ['eval run', 'eval runs'] },
  { name: 'eval_results', order: 'run_id, n', noun: ['eval result', 'eval results'] },
  { name: 'jobs', order: 'id', noun: ['job', 'jobs'] },
  { name: 'turns', order: 'job_id, seq', noun: ['turn', 'turns'] },
  // A turn's images (docs/images.md): bytea goes through JSON as PostgreSQL's hex text.
  { name: 'attachments', order: 'job_id, seq, n', noun: ['image', 'images'] },
  { name: 'events', order: 'seq', noun: ['event', 'events'] },
  // What Errand has said on the forge about each turn: without them, an imported turn that
  // ended lately would be answered on the forge a second time.
  { name: 'forge_replies', order: 'job_id, seq, kind', noun: ['forge answer', 'forge answers'] },
  // The pull request watch's memory: without it, an imported job's open pull request would be
  // watched again only once a turn ends, its attempts counted from 0 and its acts repeated.
  { name: 'pr_watches', order: 'job_id', noun: ['pull request watch', 'pull request watches'] },
  // The threads where someone without write access was told so: without them, they would be
  // told again after a move (they are forgotten after 30 days anyway, by the upkeep).
  {
    name: 'forge_refusals',
    order: 'project_id, thread',
    noun: ['forge refusal', 'forge refusals'],
  },
  // The forge's events of the last 30 days by what the forge signed: without them, one sent
  // again after a move would be taken as new (one that started a turn still finds it), and the
  // dashboard would not show what became of them.
  { name: 'forge_events', order: 'project_id, key', noun: ['forge event', 'forge events'] },
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
  // Who did what, kept across a move: the log is append-only, and an import only adds to it.
  { name: 'audit_log', order: 'seq', noun: ['audit log row', 'audit log rows'] },
];
export const TABLE_NAMES: ReadonlySet<string> = new Set(TABLES.map((t) => t.name));

export type RowCounts = Partial<Record<TableName, number>>;

export interface ExportHeader {
  format: typeof EXPORT_FORMAT;
  version: number;
  exportedAt: string;
  errandVersion: string;
  /** The highest migration applied to the exported database. */
  migration: number;
  /**
   * Which secret key sealed the file's forge credentials, webhook secrets and project secrets;
   * null: none set.
   */
  secretKeyFingerprint: string | null;
}

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
export async function keyFileSecret(dataDir: string): Promise<string | undefined> {
  const key = (await readFile(secretKeyPath(dataDir), 'utf8').catch(() => '')).trim();
  return key || undefined;
}

export interface RowLine {
  table: TableName;
  row: Record<string, unknown>;
  /** The row's JSON exactly as written, so numbers in jsonb columns keep every digit. */
  text: string;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** One line of the file as a row, or an error saying where the file is wrong. */
export function rowLine(line: string, file: string, lineNo: number): RowLine {
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

export function lines(file: string): AsyncIterable<string> {
  return createInterface({ input: createReadStream(file), crlfDelay: Number.POSITIVE_INFINITY });
}
