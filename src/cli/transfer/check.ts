// The import's first reading of a file, before the database is touched: it is a whole export
// this Errand can read, and its sealed secrets open with the secret key set here.
import { loadMigrations } from '../../db/migrate.ts';
import { checkRepository } from '../../projects/repository.ts';
import { open as openSealed } from '../../secrets/box.ts';
import { errandVersion } from '../../version.ts';
import { CliError } from '../errors.ts';
import {
  EXPORT_FORMAT,
  EXPORT_VERSION,
  type ExportHeader,
  isObject,
  keyFingerprint,
  lines,
  type RowCounts,
  rowLine,
  TABLE_NAMES,
  TABLES,
  type TableName,
} from './format.ts';

/** Sealed values kept from the file to try the importing side's key on. */
const MAX_SEALED_SAMPLES = 20;
/** The columns of each table that hold values sealed with the secret key. */
const SEALED_COLUMNS: Partial<Record<TableName, readonly string[]>> = {
  projects: ['forge_secret', 'forge_webhook_secret'],
  webhooks: ['secret', 'previous_secret'],
  project_secrets: ['sealed_value'],
};

/** What the first reading of a file found: it is whole, and what it asks of the database. */
export interface CheckedFile {
  header: ExportHeader;
  counts: RowCounts;
  /** Sealed values of the file (forge credentials, webhook and project secrets), to try a key on. */
  sealed: string[];
  /** Whether turns or webhook deliveries are to be queued again. */
  requeue: boolean;
  /** Every project of the file, with the repository its turns fetch from. */
  projects: ExportedProject[];
}

interface ExportedProject {
  id: string;
  name: string;
  repository: string;
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
  const projects: ExportedProject[] = [];
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
      for (const column of SEALED_COLUMNS[table] ?? []) {
        const value = row[column];
        if (typeof value === 'string' && sealed.length < MAX_SEALED_SAMPLES) sealed.push(value);
      }
      if (table === 'projects')
        projects.push({
          id: String(row.id),
          name: String(row.name),
          repository: String(row.repository),
        });
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
  return { header, counts, sealed, requeue, projects };
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
      `${file} holds sealed secrets (forge credentials, webhook signing secrets or project secrets), which open only with the key they were sealed with, and no secret key is set here: ${hint}. Nothing was imported`,
    );
  // Opening is the proof; the header's fingerprint only names the key that is needed. One value
  // that opens is enough: a database whose key was changed may hold older ones that never do.
  if (!checked.sealed.some((value) => opens(secretKey, value)))
    throw new CliError(
      `${file} holds sealed secrets (forge credentials, webhook signing secrets or project secrets) that the secret key here (fingerprint ${keyFingerprint(secretKey)}) cannot open; they were sealed with ${source ? `the key of fingerprint ${source}` : 'another key'}: ${hint}. Nothing was imported`,
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

/** At most this many projects are named in the refusal; the rest are counted. */
const NAMED_PROJECTS = 10;

/**
 * The projects whose repositories this server refuses (a local path where local repositories
 * are off, as on a PostgreSQL server by default): imported, their jobs' next turns would fail.
 * Refused before anything is written, unless `keep` says to import them anyway; then they are
 * returned, for the import to name.
 */
export function checkRepositories(
  file: string,
  checked: CheckedFile,
  allowLocal: boolean,
  keep: boolean,
): string[] {
  const byReason = new Map<string, string[]>();
  for (const project of checked.projects) {
    const check = checkRepository(project.repository, allowLocal);
    if (check.ok) continue;
    const named = byReason.get(check.reason) ?? [];
    named.push(`${project.id} "${project.name}" (${project.repository})`);
    byReason.set(check.reason, named);
  }
  const refused = [...byReason].map(([reason, projects]) => {
    const more =
      projects.length > NAMED_PROJECTS ? `; and ${projects.length - NAMED_PROJECTS} more` : '';
    return `${reason}: ${projects.slice(0, NAMED_PROJECTS).join('; ')}${more}`;
  });
  if (refused.length === 0 || keep) return refused;
  const count = [...byReason.values()].reduce((n, projects) => n + projects.length, 0);
  throw new CliError(
    `${file} holds ${count === 1 ? 'a project whose repository' : `${count} projects whose repositories`} this server refuses, so their jobs' next turns would fail. ${refused.join('. ')}. Allow them with the setting named, for the import and for every Errand process on this database, or import them anyway with --keep-refused-repos and give them another repository afterwards. Nothing was imported`,
  );
}
