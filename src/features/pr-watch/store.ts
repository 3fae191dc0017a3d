// The pull request watch's rows (pr_watches, migration 0029): which jobs' pull requests are
// followed, what the watch did for which head, and when each is looked at next. A row is made
// or woken in the transaction of the turn's end that opened or updated the pull request (the
// transition hook), woken by the forge's webhooks (nudge), and taken by one process at a time
// for a look (claimDue), which gives it back with the next look's time (release).
import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import type { ForgeSignal } from '../../forges/events.ts';
import type { RecordedEvent, TransitionHook } from '../../jobs/transitions.ts';
import type { WatchMemory } from './decide.ts';

/** How long a look may take before another process may take the row again. */
const LEASE_SECONDS = 300;

export interface ClaimedWatch extends WatchMemory {
  jobId: string;
  claimedAt: Date;
}

/** Takes up to `limit` watches that are due and no other process holds. */
export async function claimDue(db: Db, limit: number): Promise<ClaimedWatch[]> {
  const rows = await db
    .updateTable('pr_watches')
    .set({
      claimed_at: sql`now()`,
      claimed_until: sql`now() + make_interval(secs => ${LEASE_SECONDS})`,
    })
    .where(
      'job_id',
      'in',
      db
        .selectFrom('pr_watches')
        .select('job_id')
        .where('state', '<>', 'ended')
        .where('next_at', '<=', sql<Date>`now()`)
        .where((eb) =>
          eb.or([eb('claimed_until', 'is', null), eb('claimed_until', '<', sql<Date>`now()`)]),
        )
        .orderBy('next_at')
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .returningAll()
    .execute();
  return rows.map((row) => ({
    jobId: row.job_id,
    claimedAt: row.claimed_at ?? new Date(),
    state: row.state,
    reason: row.reason,
    autofixes: row.autofixes,
    failedSha: row.failed_sha,
    unmergeableSha: row.unmergeable_sha,
    conflictSha: row.conflict_sha,
    mergeSha: row.merge_sha,
  }));
}

/** What a look changes of the watch's memory. */
export type WatchChange = Partial<WatchMemory>;

/**
 * Gives a claimed watch back with what the look changed; it is looked at again after
 * `afterSeconds`, or at once when a nudge came during the look.
 */
export async function release(
  db: Db,
  watch: ClaimedWatch,
  change: WatchChange,
  afterSeconds: number,
): Promise<void> {
  await db
    .updateTable('pr_watches')
    .set({
      ...(change.state !== undefined ? { state: change.state } : {}),
      ...(change.reason !== undefined ? { reason: change.reason } : {}),
      ...(change.autofixes !== undefined ? { autofixes: change.autofixes } : {}),
      ...(change.failedSha !== undefined ? { failed_sha: change.failedSha } : {}),
      ...(change.unmergeableSha !== undefined ? { unmergeable_sha: change.unmergeableSha } : {}),
      ...(change.conflictSha !== undefined ? { conflict_sha: change.conflictSha } : {}),
      ...(change.mergeSha !== undefined ? { merge_sha: change.mergeSha } : {}),
      claimed_until: null,
      observed_at: sql`now()`,
      next_at: sql`CASE WHEN nudged_at > ${watch.claimedAt} THEN now() ELSE now() + make_interval(secs => ${afterSeconds}) END`,
    })
    .where('job_id', '=', watch.jobId)
    .execute();
}

/** Saves a change at once, while the watch is still held (before a turn is queued). */
export async function saveNow(db: Db, jobId: string, change: WatchChange): Promise<void> {
  await db
    .updateTable('pr_watches')
    .set({
      ...(change.autofixes !== undefined ? { autofixes: change.autofixes } : {}),
      ...(change.conflictSha !== undefined ? { conflict_sha: change.conflictSha } : {}),
    })
    .where('job_id', '=', jobId)
    .execute();
}

/**
 * Wakes the watches of the project's jobs a forge signal names (by pull request, head branch or
 * head commit): each is looked at as soon as a process is free. Returns their jobs.
 */
export async function nudge(db: Db, projectId: string, signal: ForgeSignal): Promise<string[]> {
  const { numbers, branches, sha } = signal;
  if (numbers.length === 0 && branches.length === 0 && sha === null) return [];
  const jobs = await db
    .selectFrom('jobs')
    .select('id')
    .where('project_id', '=', projectId)
    .where((eb) =>
      eb.or([
        ...(numbers.length > 0 ? [eb('pr_number', 'in', numbers)] : []),
        ...(branches.length > 0 ? [eb('branch', 'in', branches)] : []),
        ...(sha !== null ? [eb(sql<string>`pr->>'headSha'`, '=', sha)] : []),
      ]),
    )
    .execute();
  return wake(
    db,
    jobs.map((job) => job.id),
    // A pull request closed and opened again is watched again.
    signal.kind === 'pull-request',
  );
}

/** Wakes the watches of the project's jobs whose base is `branch` (it moved). */
export async function nudgeBase(db: Db, projectId: string, branch: string): Promise<string[]> {
  const jobs = await db
    .selectFrom('jobs')
    .select('id')
    .where('project_id', '=', projectId)
    .where('ref', 'in', [branch, `refs/heads/${branch}`])
    .where('pr_number', 'is not', null)
    .execute();
  return wake(
    db,
    jobs.map((job) => job.id),
  );
}

/**
 * Makes the watches of these jobs due now, unless they ended; returns those it woke. With
 * `closed`, a watch that ended because its pull request was closed watches again: the look that
 * follows ends it again, saying nothing, if it is still closed.
 */
async function wake(db: Db, jobIds: readonly string[], closed = false): Promise<string[]> {
  if (jobIds.length === 0) return [];
  const rows = await db
    .updateTable('pr_watches')
    .set({
      nudged_at: sql`now()`,
      next_at: sql`now()`,
      ...(closed
        ? {
            state: sql`CASE WHEN state = 'ended' THEN 'watching' ELSE state END`,
            reason: sql`CASE WHEN state = 'ended' THEN NULL ELSE reason END`,
          }
        : {}),
    })
    .where('job_id', 'in', jobIds)
    .where((eb) =>
      eb.or([eb('state', '<>', 'ended'), ...(closed ? [eb('reason', '=', CLOSED_REASON)] : [])]),
    )
    .returning('job_id')
    .execute();
  return rows.map((row) => row.job_id);
}

/** Why a watch ended whose pull request was closed without being merged. */
export const CLOSED_REASON = 'the pull request was closed';

/**
 * The watch as a hook of the job core's transitions: a turn's end makes the job's watch (once
 * the job has a pull request) or wakes it, in the turn's own transaction, so no pull request a
 * turn opened goes unwatched. A turn someone asked for (no purpose) starts the watch afresh: it
 * acts again and its attempts count from 0. An archive ends it.
 */
export function watchHook(): TransitionHook {
  return {
    wants: () => false,
    run: async (trx, events) => {
      for (const event of events) await onEvent(trx, event);
    },
  };
}

async function onEvent(trx: Transaction<Database>, event: RecordedEvent): Promise<void> {
  if (event.type === 'job.archived') {
    await trx
      .updateTable('pr_watches')
      .set({ state: 'ended', reason: 'the job was archived' })
      .where('job_id', '=', event.jobId)
      .execute();
    return;
  }
  if ((event.type !== 'turn.finished' && event.type !== 'turn.failed') || event.turn === null)
    return;
  const turn = await trx
    .selectFrom('turns')
    .innerJoin('jobs', 'jobs.id', 'turns.job_id')
    .select(['turns.purpose', 'jobs.pr_number', 'jobs.status'])
    .where('turns.job_id', '=', event.jobId)
    .where('turns.seq', '=', event.turn)
    .executeTakeFirst();
  if (!turn || turn.pr_number === null || turn.status === 'archived') return;
  const asked = turn.purpose === null;
  await trx
    .insertInto('pr_watches')
    .values({ job_id: event.jobId })
    .onConflict((oc) =>
      oc.column('job_id').doUpdateSet({
        nudged_at: sql`now()`,
        next_at: sql`now()`,
        ...(asked
          ? {
              // Also an ended watch: the turn may have opened a new pull request. One still
              // merged or closed is ended again at the first look, without a second event.
              state: 'watching' as const,
              reason: null,
              autofixes: 0,
            }
          : {}),
      }),
    )
    .execute();
}
