// Per-project request limits, counted in the database so that every API process shares them.
// Fixed windows aligned to the epoch; the count is taken inside the caller's transaction, so
// a request that fails later (or is refused) leaves the count as it was.
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import { AppError } from '../errors.ts';

export type LimitedOperation = 'create' | 'message';

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Seconds until the current window ends. */
  resetSeconds: number;
  windowSeconds: number;
}

export class RateLimitedError extends AppError {
  readonly operation: LimitedOperation;
  readonly state: RateLimitState;
  constructor(operation: LimitedOperation, state: RateLimitState) {
    super(
      'rate_limited',
      `rate limit of ${state.limit} ${operation === 'create' ? 'job creations' : 'follow-up messages'} per ${state.windowSeconds} s for this project reached; retry in ${state.resetSeconds} s`,
    );
    this.operation = operation;
    this.state = state;
  }
}

export interface RateLimitPolicy {
  limit: number;
  windowSeconds: number;
}

/** The fixed window `now` falls in, and what a count in it tells the caller. */
function windowAt(policy: RateLimitPolicy, now: Date) {
  const windowMs = policy.windowSeconds * 1000;
  const start = Math.floor(now.getTime() / windowMs) * windowMs;
  const resetSeconds = Math.max(1, Math.ceil((start + windowMs - now.getTime()) / 1000));
  return {
    start: new Date(start),
    base: { limit: policy.limit, resetSeconds, windowSeconds: policy.windowSeconds },
  };
}

/**
 * Counts one use of `operation` for `projectId`; throws RateLimitedError when the window's
 * limit is used up. A limit of 0 means unlimited.
 */
export async function consume(
  trx: Transaction<Database>,
  projectId: string,
  operation: LimitedOperation,
  policy: RateLimitPolicy,
  now: Date = new Date(),
): Promise<RateLimitState | undefined> {
  return (await consumeAll(trx, [[projectId, 1]], operation, policy, now))?.get(projectId);
}

/**
 * Counts `uses` of `operation` by each project at once, in one statement, and answers each
 * project's state after its uses; undefined when the limit is 0 (unlimited). When one project's
 * uses would pass its limit, throws RateLimitedError: the caller's transaction then fails, and
 * with it every count this made.
 */
async function consumeAll(
  trx: Transaction<Database>,
  uses: readonly (readonly [projectId: string, uses: number])[],
  operation: LimitedOperation,
  policy: RateLimitPolicy,
  now: Date = new Date(),
): Promise<Map<string, RateLimitState> | undefined> {
  const count = countUses(uses, operation, policy, now);
  if (!count.statement) return undefined;
  const { rows } = await count.statement.execute(trx);
  if (rows.length < count.projects) throw count.refusal();
  return new Map(rows.map((row) => [row.project_id, count.stateAt(row.count)]));
}

/** The count of some uses as one statement, and how to read its answer (countUses). */
export interface UseCount {
  /**
   * `INSERT … RETURNING project_id, count`: one row per project whose uses fit in its window,
   * with the project's count after them; nothing is counted for a project whose would not.
   * Undefined when the limit is 0 (unlimited): nothing to count.
   */
  statement: RawBuilder<{ project_id: string; count: number }> | undefined;
  /** How many rows the statement answers when every project's uses fit. */
  projects: number;
  /** A project's state once its count is `count`. */
  stateAt(count: number): RateLimitState;
  /** The error for uses that did not all fit. */
  refusal(): RateLimitedError;
}

/**
 * The count of `uses` of `operation` by each project, as a statement the caller runs in its
 * transaction, alone (consumeAll) or in a WITH clause of its own statement (a job's create
 * writes the job in the statement that counts it). The projects must be in one order in every
 * transaction (by id): two transactions that count the same projects then lock their counters
 * in the same order, and neither waits for the other in a deadlock.
 */
export function countUses(
  uses: readonly (readonly [projectId: string, uses: number])[],
  operation: LimitedOperation,
  policy: RateLimitPolicy,
  now: Date = new Date(),
): UseCount {
  const { start, base } = windowAt(policy, now);
  const stateAt = (count: number) => ({ ...base, remaining: Math.max(0, policy.limit - count) });
  const refusal = () => new RateLimitedError(operation, { ...base, remaining: 0 });
  if (policy.limit === 0) return { statement: undefined, projects: 0, stateAt, refusal };
  const statement = sql<{ project_id: string; count: number }>`
    INSERT INTO rate_limits (project_id, operation, window_start, count)
    SELECT u.project_id, ${operation}, ${start}, u.uses
    FROM unnest(${uses.map(([projectId]) => projectId)}::text[], ${uses.map(([, n]) => n)}::integer[])
      AS u(project_id, uses)
    WHERE u.uses <= ${policy.limit}
    ON CONFLICT (project_id, operation, window_start)
      DO UPDATE SET count = rate_limits.count + EXCLUDED.count
      WHERE rate_limits.count + EXCLUDED.count <= ${policy.limit}
    RETURNING project_id, count`;
  return { statement, projects: uses.length, stateAt, refusal };
}

/**
 * Removes the counters of windows that ended a whole window ago or more (none can count again).
 * The processes that run workers call it periodically (service.ts).
 */
export async function pruneCounters(db: Db, windowSeconds: number): Promise<void> {
  await db
    .deleteFrom('rate_limits')
    .where('window_start', '<', new Date(Date.now() - windowSeconds * 2 * 1000))
    .execute();
}
