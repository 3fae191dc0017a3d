// The answers to people without write access who ask Errand on the forge, limited per project:
// one per issue or pull request (remembered REFUSAL_MEMORY_DAYS), and at most
// REFUSALS_PER_HOUR in any hour, so that someone mentioning the handle in thread after thread
// cannot make Errand post comment after comment under the operator's token. What is not said is
// still recorded (records.ts) and shown on the dashboard. The only writer of forge_refusals.
import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';

/** The most answers to people without write access a project gives in any hour. */
export const REFUSALS_PER_HOUR = 5;
/**
 * How long a thread remembers that someone without write access was told so: long enough that
 * a conversation does not hear it twice, short enough that someone who asks again a month
 * later (perhaps forgetting, perhaps given access meanwhile and still refused) is told why.
 */
const REFUSAL_MEMORY_DAYS = 30;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/**
 * `claimed`: the caller answers now (and gives the claim back if the forge failed for a while);
 * `told`: this thread was answered within REFUSAL_MEMORY_DAYS; `limited`: the project gave its
 * REFUSALS_PER_HOUR answers in the hour before `at`.
 */
export type RefusalClaim = 'claimed' | 'told' | 'limited';

/** The transaction-scoped advisory lock of a project's refusals: 64 bits of a hash of its id. */
function lockId(projectId: string): string {
  return createHash('sha256')
    .update(`errand forge refusals\0${projectId}`)
    .digest()
    .readBigInt64BE(0)
    .toString();
}

/**
 * Takes the right to answer `thread` (forge, kind and number) of `projectId` at `at`, unless it
 * was answered already or the project's hourly answers are given. Concurrent claims of one
 * project are taken one at a time, so the limit holds across workers.
 */
export async function claimRefusal(
  db: Db,
  projectId: string,
  thread: string,
  at: Date,
): Promise<RefusalClaim> {
  return db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(${lockId(projectId)}::bigint)`.execute(trx);
    const told = await trx
      .selectFrom('forge_refusals')
      .select('at')
      .where('project_id', '=', projectId)
      .where('thread', '=', thread)
      .where('at', '>', new Date(at.getTime() - REFUSAL_MEMORY_DAYS * DAY_MS))
      .executeTakeFirst();
    if (told) return 'told';
    const { given } = await trx
      .selectFrom('forge_refusals')
      .select((eb) => eb.fn.countAll<string>().as('given'))
      .where('project_id', '=', projectId)
      .where('at', '>', new Date(at.getTime() - HOUR_MS))
      .executeTakeFirstOrThrow();
    if (Number(given) >= REFUSALS_PER_HOUR) return 'limited';
    await trx
      .insertInto('forge_refusals')
      .values({ project_id: projectId, thread, at })
      .onConflict((oc) => oc.columns(['project_id', 'thread']).doUpdateSet({ at }))
      .execute();
    return 'claimed';
  });
}

/** Gives back a claim whose answer the forge did not take, so that a retry may answer. */
export async function releaseRefusal(db: Db, projectId: string, thread: string): Promise<void> {
  await db
    .deleteFrom('forge_refusals')
    .where('project_id', '=', projectId)
    .where('thread', '=', thread)
    .execute();
}

/**
 * Forgets the threads told of missing write access more than REFUSAL_MEMORY_DAYS ago; returns
 * how many. The processes that run workers call it periodically (service.ts).
 */
export async function forgetRefusals(ctx: { db: Db }): Promise<number> {
  const result = await ctx.db
    .deleteFrom('forge_refusals')
    .where('at', '<', sql<Date>`now() - make_interval(days => ${REFUSAL_MEMORY_DAYS})`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
