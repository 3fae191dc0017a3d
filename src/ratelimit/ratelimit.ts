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
  if (policy.limit === 0) return undefined;
  const { start, base } = windowAt(policy, now);
  const row = await trx
    .insertInto('rate_limits')
    .values({ project_id: projectId, operation, window_start: start, count: 1 })
    .onConflict((oc) =>
      oc
        .columns(['project_id', 'operation', 'window_start'])
        .doUpdateSet({ count: sql`rate_limits.count + 1` })
        .where('rate_limits.count', '<', policy.limit),
    )
    .returning('count')
    .executeTakeFirst();
  if (!row) throw new RateLimitedError(operation, { ...base, remaining: 0 });
  return { ...base, remaining: Math.max(0, policy.limit - row.count) };
}

/**
 * `consume` as part of a caller's statement, which carries it as a CTE (saving a round trip),
 * for `uses` of `operation` by each project at once: `cte` counts them and returns a row
 * (`project_id`, the new `count`) for each project whose uses all fit in the window, none for
 * one whose limit they would pass, which then counts nothing. `param` gives the caller's
 * placeholder for a value. The caller reads a use's state back with `state`, given the count
 * after that use; for none it throws RateLimitedError, and the caller's statement must then
 * fail, so that nothing it wrote is kept.
 */
export function consumeInStatement(
  uses: readonly (readonly [projectId: string, uses: number])[],
  operation: LimitedOperation,
  policy: RateLimitPolicy,
  param: (value: unknown, type: string) => string,
  now: Date = new Date(),
): { cte: string; state(count: number | null): RateLimitState } {
  const { start, base } = windowAt(policy, now);
  const limit = param(policy.limit, 'integer');
  const cte = `INSERT INTO rate_limits (project_id, operation, window_start, count)
    SELECT u.project_id, ${param(operation, 'text')}, ${param(start, 'timestamptz')}, u.uses
    FROM unnest(${param(
      uses.map(([projectId]) => projectId),
      'text[]',
    )}, ${param(
      uses.map(([, n]) => n),
      'integer[]',
    )}) AS u(project_id, uses)
    WHERE u.uses <= ${limit}
    ON CONFLICT (project_id, operation, window_start)
      DO UPDATE SET count = rate_limits.count + EXCLUDED.count
      WHERE rate_limits.count + EXCLUDED.count <= ${limit}
    RETURNING project_id, count`;
  return {
    cte,
    state(count) {
      if (count === null) throw new RateLimitedError(operation, { ...base, remaining: 0 });
      return { ...base, remaining: Math.max(0, policy.limit - count) };
    },
  };
}

/** Removes counters of windows that ended long ago. */
export async function pruneCounters(db: Db, olderThanSeconds: number): Promise<void> {
  await db
    .deleteFrom('rate_limits')
    .where('window_start', '<', new Date(Date.now() - olderThanSeconds * 1000))
    .execute();
}
