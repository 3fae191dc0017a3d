// The audit log's one writer and its reader: every change of state, and the refused attempts
// the API sees, is one append-only row of audit_log (migration 0027). A change made in a
// transaction writes its row in that transaction, so the row exists if and only if the change
// does; the rows are handed to the JSON-lines stream (stream.ts) once they are committed.
import { sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.ts';
import type { Actor, AuditLogRow, Database } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import type { AuditAction, AuditRecord } from '../records/audit.ts';

/** Who made the request a row records, and from where. */
export interface Who {
  actor: Actor | null;
  /** The request's address as Fastify gives it (request.ip); null for no request. */
  address: string | null;
  requestId: string | null;
}

/** Where the rows are written and who wrote them. */
export interface AuditContext {
  db: Db | Transaction<Database>;
  who: Who;
}

/** What the committed rows are handed to: the JSON-lines stream, or nothing when it is off. */
export interface AuditSink {
  written(rows: readonly AuditRecord[]): void;
}

/**
 * What a row says. `details` holds names, ids, counts and which fields changed: never a key, a
 * token, a secret's value, a cookie or a client secret (the caller passes only what it names).
 */
export interface AuditEntry {
  action: AuditAction;
  target: { kind: string; id: string } | null;
  /** A refusal's error code; absent for a change that happened. */
  refused?: string | undefined;
  details?: Record<string, string | number | boolean | null | readonly string[]> | undefined;
}

const COLUMNS = [
  'seq',
  'at',
  'actor',
  'address',
  'action',
  'target_kind',
  'target_id',
  'outcome',
  'error_code',
  'request_id',
  'details',
] as const;

/** Writes one row with the caller's database or transaction; answers it as the API shows it. */
export async function audit(ctx: AuditContext, entry: AuditEntry): Promise<AuditRecord> {
  const [row] = await auditAll(ctx.db, [{ who: ctx.who, entry }]);
  if (!row) throw new Error('the audit row was not written');
  return row;
}

/** Writes rows in one statement (the creates of jobs write theirs in their own statement). */
async function auditAll(
  db: Db | Transaction<Database>,
  rows: readonly { who: Who; entry: AuditEntry }[],
): Promise<AuditRecord[]> {
  if (rows.length === 0) return [];
  const written = await db
    .insertInto('audit_log')
    .values(
      rows.map(({ who, entry }) => ({
        actor: who.actor ? JSON.stringify(who.actor) : null,
        address: who.address,
        action: entry.action,
        target_kind: entry.target?.kind ?? null,
        target_id: entry.target?.id ?? null,
        outcome: entry.refused === undefined ? ('success' as const) : ('refused' as const),
        error_code: entry.refused ?? null,
        request_id: who.requestId,
        details: JSON.stringify(entry.details ?? {}),
      })),
    )
    .returning(COLUMNS)
    .execute();
  // RETURNING gives no order; the seqs were drawn in the rows' order.
  return written.sort((a, b) => Number(BigInt(a.seq) - BigInt(b.seq))).map(toAuditRecord);
}

function toAuditRecord(row: AuditLogRow): AuditRecord {
  return {
    id: String(row.seq),
    at: row.at.toISOString(),
    actor: row.actor,
    address: row.address,
    action: row.action as AuditRecord['action'],
    target:
      row.target_kind !== null && row.target_id !== null
        ? { kind: row.target_kind, id: row.target_id }
        : null,
    outcome: row.outcome,
    errorCode: row.error_code,
    requestId: row.request_id,
    details: row.details,
  };
}

export interface AuditFilter {
  limit: number;
  cursor?: string | undefined;
  /** An actor's ref (src/records/actor.ts's actorRef): a user's or key's id, `<forge>:<login>`. */
  actor?: string | undefined;
  action?: AuditAction | undefined;
  /** A target's id. */
  target?: string | undefined;
  since?: Date | undefined;
  until?: Date | undefined;
}

export interface AuditPage {
  entries: AuditRecord[];
  nextCursor: string | null;
}

// A cursor is the last row's seq: the next page is the rows written before it.
function decodeCursor(value: string): string {
  const seq = Buffer.from(value, 'base64url').toString('utf8');
  if (!/^[1-9][0-9]{0,18}$/.test(seq))
    throw new AppError('bad_request', '"cursor" is not a cursor this API returned');
  return seq;
}

/** The log's rows, newest first, a page at a time. */
export async function listAudit(db: Db, filter: AuditFilter): Promise<AuditPage> {
  let query = db
    .selectFrom('audit_log')
    .select(COLUMNS)
    .orderBy('seq', 'desc')
    .limit(filter.limit + 1);
  if (filter.actor !== undefined)
    query = query.where(sql<string>`actor_ref(actor)`, '=', filter.actor);
  if (filter.action !== undefined) query = query.where('action', '=', filter.action);
  if (filter.target !== undefined) query = query.where('target_id', '=', filter.target);
  if (filter.since !== undefined) query = query.where('at', '>=', filter.since);
  if (filter.until !== undefined) query = query.where('at', '<', filter.until);
  if (filter.cursor !== undefined) query = query.where('seq', '<', decodeCursor(filter.cursor));
  const rows = await query.execute();
  const entries = rows.slice(0, filter.limit).map(toAuditRecord);
  const last = entries.at(-1);
  return {
    entries,
    nextCursor:
      rows.length > filter.limit && last ? Buffer.from(last.id).toString('base64url') : null,
  };
}

/** A request's principal, as far as the log names it (src/keys/service.ts's Principal). */
type Named = { kind: 'key'; keyId: string } | { kind: 'user'; userId: string };

/** The actor a principal is: a user or an API key, by id. */
function actorOf(principal: Named): Actor {
  return principal.kind === 'key'
    ? { kind: 'key', id: principal.keyId }
    : { kind: 'user', id: principal.userId };
}

/**
 * Who made a request: its principal (null before one is known) and its address and id as
 * Fastify gives them (request.ip honours the server's trustProxy setting when it has one).
 */
export function whoOf(request: { ip: string; id: string }, principal: Named | null): Who {
  return {
    actor: principal ? actorOf(principal) : null,
    address: request.ip,
    requestId: request.id,
  };
}

/** What writing a row outside the job core needs: the database and the stream. */
export interface Auditing {
  db: Db;
  audit: AuditSink;
}

/**
 * Runs a change and writes its row in one transaction, so the row exists if and only if the
 * change does; the row is streamed once committed. `change` gets the transaction as its
 * database.
 */
export async function auditedChange<T>(
  ctx: Auditing,
  who: Who,
  change: (db: Transaction<Database>) => Promise<{ result: T; entry: AuditEntry }>,
): Promise<T> {
  let row: AuditRecord | undefined;
  const result = await ctx.db.transaction().execute(async (trx) => {
    const done = await change(trx);
    row = await audit({ db: trx, who }, done.entry);
    return done.result;
  });
  if (row) ctx.audit.written([row]);
  return result;
}

/**
 * Writes the row of a change that ran in a transaction of its own (a secret's, a webhook's, a
 * queued build's), after it committed, or of a refused attempt; and streams it.
 */
export async function auditAfter(ctx: Auditing, who: Who, entry: AuditEntry): Promise<void> {
  ctx.audit.written([await audit({ db: ctx.db, who }, entry)]);
}
