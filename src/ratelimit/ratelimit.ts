// Per-project request limits, counted in the database so that every API process shares them.
// Fixed windows aligned to the epoch; the count is taken inside the caller's transaction, so
// a request that fails later (or is refused) leaves the count as it was.
import { sql, type Transaction } from 'kysely';
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
  readonly state: RateLimitState;
  constructor(operation: LimitedOperation, state: RateLimitState) {
    super(
      'rate_limited',
      `rate limit of ${state.limit} ${operation === 'create' ? 'job creations' : 'follow-up messages'} per ${state.windowSeconds} s for this project reached; retry in ${state.resetSeconds} s`,
    );
    this.state = state;
  }
}

export interface RateLimitPolicy {
  limit: number;
  windowSeconds: number;
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
  if (policy.limit === 0) return undefined;
  const windowMs = policy.windowSeconds * 1000;
  const start = Math.floor(now.getTime() / windowMs) * windowMs;
  const resetSeconds = Math.max(1, Math.ceil((start + windowMs - now.getTime()) / 1000));
  const row = await trx
    .insertInto('rate_limits')
    .values({ project_id: projectId, operation, window_start: new Date(start), count: 1 })
    .onConflict((oc) =>
      oc
        .columns(['project_id', 'operation', 'window_start'])
        .doUpdateSet({ count: sql`rate_limits.count + 1` })
        .where('rate_limits.count', '<', policy.limit),
    )
    .returning('count')
    .executeTakeFirst();
  const base = { limit: policy.limit, resetSeconds, windowSeconds: policy.windowSeconds };
  if (!row) throw new RateLimitedError(operation, { ...base, remaining: 0 });
  return { ...base, remaining: Math.max(0, policy.limit - row.count) };
}

/** Removes counters of windows that ended long ago. */
export async function pruneCounters(db: Db, olderThanSeconds: number): Promise<void> {
  await db
    .deleteFrom('rate_limits')
    .where('window_start', '<', new Date(Date.now() - olderThanSeconds * 1000))
    .execute();
}
