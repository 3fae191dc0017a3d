// Where a machine's workspaces live under `<data-dir>/workspaces`: a bare mirror per project
// in `mirrors/`, a clone per job in `jobs/`, and the names of what is being made or deleted
// beside them. Every module that finds a clone or a mirror on disk asks here.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { WorkspaceConfig } from './types.ts';

/** A clone being made; renamed to the job's path when complete. */
export const STAGING_PREFIX = '.staging-';
/** A clone or mirror being deleted; renamed out of the way first, so a crash leaves no half. */
export const TRASH_PREFIX = '.trash-';
/** In a mirror: touched by every turn that uses it (least-recently-used eviction). */
export const MIRROR_USED_STAMP = 'errand-used';

export function mirrorDir(cfg: WorkspaceConfig, projectId: string): string {
  return join(cfg.rootDir, 'mirrors', `${projectId}.git`);
}

export function jobDir(cfg: WorkspaceConfig, jobId: string): string {
  return join(cfg.rootDir, 'jobs', jobId);
}

/** What separates a job's id from an attempt's number in the attempt's workspace id. */
const ATTEMPT_SEPARATOR = '.attempt-';

/**
 * The workspace id of attempt `n` of a best-of-N turn (docs/eval.md): its clone, its engine
 * state and its lock are its own, beside the job's, and go with the job (retention.ts).
 */
export function attemptWorkspaceId(jobId: string, n: number): string {
  return `${jobId}${ATTEMPT_SEPARATOR}${n}`;
}

/** The job a workspace id belongs to: the job's own, or the job of an attempt's. */
export function workspaceJob(workspaceId: string): string {
  const at = workspaceId.lastIndexOf(ATTEMPT_SEPARATOR);
  return at > 0 && /^\d+$/.test(workspaceId.slice(at + ATTEMPT_SEPARATOR.length))
    ? workspaceId.slice(0, at)
    : workspaceId;
}

/**
 * A job's engine state (an engine's HOME: its configuration and sessions), beside the job's
 * clone, kept across turns so that a follow-up resumes the engine's session.
 */
export function engineStateDir(cfg: WorkspaceConfig, jobId: string): string {
  return join(cfg.rootDir, 'engine-state', jobId);
}

export async function exists(path: string): Promise<boolean> {
  return (await stat(path).catch(() => null)) !== null;
}
