// The environments table (migration 0023): one row per snapshot a worker keeps. The row is the
// snapshot's existence as the rest of Errand sees it (the admin API lists and deletes rows): a
// worker restores only a snapshot whose row is there, and drops the files of one whose row is
// gone. This module owns the table's writes from the workers' side.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';

/** What a kept snapshot records about itself. */
export interface SnapshotFacts {
  projectId: string;
  key: string;
  worker: string;
  bytes: number;
  files: number;
  buildMs: number;
  baseCommit: string;
}

/** Records a snapshot just kept (again: a rebuild of the same key replaces its facts). */
export async function recordSnapshot(db: Db, facts: SnapshotFacts): Promise<void> {
  await db
    .insertInto('environments')
    .values({
      project_id: facts.projectId,
      key: facts.key,
      worker: facts.worker,
      size_bytes: facts.bytes,
      files: facts.files,
      build_ms: facts.buildMs,
      base_commit: facts.baseCommit,
    })
    .onConflict((oc) =>
      oc.columns(['project_id', 'key', 'worker']).doUpdateSet({
        size_bytes: facts.bytes,
        files: facts.files,
        build_ms: facts.buildMs,
        base_commit: facts.baseCommit,
        created_at: sql`now()`,
        last_used_at: sql`now()`,
      }),
    )
    .execute();
}

/**
 * Marks a snapshot used now, for the least-recently-used eviction; false when its row is gone
 * (dropped by an admin, or evicted by another process on this worker): not to be restored.
 */
export async function touchSnapshot(
  db: Db,
  snapshot: { projectId: string; key: string; worker: string },
): Promise<boolean> {
  const touched = await db
    .updateTable('environments')
    .set({ last_used_at: sql`now()` })
    .where('project_id', '=', snapshot.projectId)
    .where('key', '=', snapshot.key)
    .where('worker', '=', snapshot.worker)
    .executeTakeFirst();
  return touched.numUpdatedRows > 0n;
}

/** Whether this worker's row of the snapshot is there. */
export async function snapshotRecorded(
  db: Db,
  snapshot: { projectId: string; key: string; worker: string },
): Promise<boolean> {
  const row = await db
    .selectFrom('environments')
    .select('key')
    .where('project_id', '=', snapshot.projectId)
    .where('key', '=', snapshot.key)
    .where('worker', '=', snapshot.worker)
    .executeTakeFirst();
  return row !== undefined;
}

/** This worker's rows: each snapshot's project, key and when it was last used (ms). */
export async function workerSnapshots(
  db: Db,
  worker: string,
): Promise<Array<{ projectId: string; key: string; lastUsedMs: number }>> {
  const rows = await db
    .selectFrom('environments')
    .select(['project_id', 'key', 'last_used_at'])
    .where('worker', '=', worker)
    .execute();
  return rows.map((r) => ({
    projectId: r.project_id,
    key: r.key,
    lastUsedMs: new Date(r.last_used_at).getTime(),
  }));
}

/** Deletes this worker's row of an evicted snapshot. */
export async function forgetSnapshot(
  db: Db,
  snapshot: { projectId: string; key: string; worker: string },
): Promise<void> {
  await db
    .deleteFrom('environments')
    .where('project_id', '=', snapshot.projectId)
    .where('key', '=', snapshot.key)
    .where('worker', '=', snapshot.worker)
    .execute();
}
