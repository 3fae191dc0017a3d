// A project's environments as the admin API and the dashboard show them: one row per snapshot a
// worker keeps (src/environments/ builds, restores and bounds them). Dropping one is deleting its
// row: the worker that keeps it deletes its files and never restores it again.
import type { Db } from '../db/database.ts';
import type { EnvironmentRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { isId } from '../ids.ts';
import type { EnvironmentRecord } from '../records/environment.ts';

/** A snapshot's row as the admin API shows it (src/records/environment.ts). */
export function toEnvironmentRecord(row: EnvironmentRow): EnvironmentRecord {
  return {
    key: row.key,
    worker: row.worker,
    // bigint as the driver gives it; a snapshot is far below 2^53 bytes.
    sizeBytes: Number(row.size_bytes),
    files: row.files,
    buildMs: row.build_ms,
    baseCommit: row.base_commit,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: row.last_used_at.toISOString(),
  };
}

interface EnvironmentsContext {
  db: Db;
}

async function checkProject(ctx: EnvironmentsContext, projectId: string): Promise<void> {
  const row = isId('prj', projectId)
    ? await ctx.db
        .selectFrom('projects')
        .select('id')
        .where('id', '=', projectId)
        .executeTakeFirst()
    : undefined;
  if (!row) throw new AppError('not_found', `project ${projectId} not found`);
}

/** The project's environments on every worker, the one used last first. */
export async function listEnvironments(
  ctx: EnvironmentsContext,
  projectId: string,
): Promise<EnvironmentRecord[]> {
  await checkProject(ctx, projectId);
  const rows = await ctx.db
    .selectFrom('environments')
    .selectAll()
    .where('project_id', '=', projectId)
    .orderBy('last_used_at', 'desc')
    .orderBy('created_at', 'desc')
    .orderBy('key')
    .orderBy('worker')
    .execute();
  return rows.map(toEnvironmentRecord);
}

/**
 * Drops the project's environments: every one, or those of `key` on every worker (404 when
 * there are none). Returns how many were dropped.
 */
export async function deleteEnvironments(
  ctx: EnvironmentsContext,
  projectId: string,
  key?: string,
): Promise<number> {
  await checkProject(ctx, projectId);
  let query = ctx.db.deleteFrom('environments').where('project_id', '=', projectId);
  if (key !== undefined) query = query.where('key', '=', key);
  const deleted = Number((await query.executeTakeFirst()).numDeletedRows);
  if (key !== undefined && deleted === 0)
    throw new AppError('not_found', `project ${projectId} has no environment ${key}`);
  return deleted;
}
