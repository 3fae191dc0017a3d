// What the pull request watch (src/features/pr-watch/) records of a job, through the job core
// as every change of a job: the job's `pr` as the forge last described it, the events of what
// the watch saw and did, and the audit row of a merge, in one transaction. The events go to
// the job's log, its stream and its webhooks as any transition's.
import { type AuditEntry, audit, type Who } from '../audit/audit.ts';
import type { StoredPr } from '../db/schema.ts';
import type { EventData } from '../events/catalog.ts';
import type { JobsContext } from './context.ts';
import { inTransition, lockJob } from './transaction.ts';
import type { Transition } from './transitions.ts';

/** The events the watch records. */
type PullRequestEventType =
  | 'checks.failed'
  | 'autofix.queued'
  | 'pr.conflicted'
  | 'pr.merged'
  | 'pr.closed'
  | 'pr.watch_paused';

/** An event of the watch, with the turn it concerns (a turn it queued). */
export type PullRequestEvent = {
  [T in PullRequestEventType]: { type: T; data: EventData<T>; turn?: number };
}[PullRequestEventType];

/**
 * Records the job's `pr`, the events, and `audited` (a merge, by `who`); nothing but the
 * record when the job is gone.
 */
export async function recordPullRequest(
  ctx: Pick<JobsContext, 'db' | 'transitions' | 'audit'>,
  jobId: string,
  pr: StoredPr,
  events: readonly PullRequestEvent[],
  audited?: { who: Who; entry: AuditEntry },
): Promise<void> {
  const row = await inTransition(ctx, async ({ trx, recordAll }) => {
    const status = await lockJob(trx, jobId);
    if (status === undefined) return undefined;
    await trx
      .updateTable('jobs')
      .set({ pr: JSON.stringify(pr) })
      .where('id', '=', jobId)
      .execute();
    await recordAll(
      events.map(
        (event) =>
          // Each event's data is its type's (PullRequestEvent pairs them); the union of the
          // pairs is what Transition is, which TypeScript does not see through the map.
          ({
            type: event.type,
            jobId,
            turn: event.turn ?? null,
            status,
            data: event.data,
          }) as Transition,
      ),
    );
    return audited ? audit({ db: trx, who: audited.who }, audited.entry) : undefined;
  });
  if (row) ctx.audit.written([row]);
}
