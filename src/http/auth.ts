// Authentication and project access for every /v2 route. Runs at onRequest, before the body
// is read, so an unauthenticated caller learns nothing about the body's validity.
import type { FastifyRequest } from 'fastify';
import type { AppContext } from '../context.ts';
import type { ProjectRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { isId } from '../ids.ts';
import type { JobView } from '../jobs/record.ts';
import type { KeyChecker, Principal } from '../keys/service.ts';
import { findProject } from '../projects/service.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
    project: ProjectRow | null;
  }
}

export function requireAdmin(keys: KeyChecker) {
  return async (request: FastifyRequest): Promise<void> => {
    const principal = await keys.check(request.headers.authorization);
    if (principal.projectId !== null) {
      throw new AppError('forbidden', 'this route needs an admin key; this is a project key');
    }
    request.principal = principal;
  };
}

/** Checks the key and that it may act on the `projectId` path parameter; loads the project. */
export function requireProject(ctx: AppContext, keys: KeyChecker) {
  return async (request: FastifyRequest<{ Params: { projectId: string } }>): Promise<void> => {
    const principal = await keys.check(request.headers.authorization);
    const { projectId } = request.params;
    if (principal.projectId !== null && principal.projectId !== projectId) {
      throw new AppError('forbidden', `this API key is not valid for project ${projectId}`);
    }
    const project = await findProject(ctx, projectId);
    if (!project) throw new AppError('not_found', `project ${projectId} not found`);
    request.principal = principal;
    request.project = project;
  };
}

interface KeyAndJobRow extends Omit<JobView, 'id' | 'project_id'> {
  key_id: string;
  key_project: string | null;
  key_revoked_at: Date | null;
  project_exists: boolean | null;
  job_id: string | null;
}

const READ_JOB_SQL = `
  SELECT k.id AS key_id, k.project_id AS key_project, k.revoked_at AS key_revoked_at,
    (SELECT true FROM projects p WHERE p.id = $1) AS project_exists,
    j.id AS job_id, j.status, j.repository, j.ref, j.branch, j.model, j.pr_link, j.pr_number,
    j.error, j.turn_count, j.created_at, j.updated_at, j.archived_at
  FROM api_keys k
  LEFT JOIN jobs j ON j.id = $2 AND j.project_id = $1
  WHERE k.hash = $3`;

/**
 * The polling hot path in one round trip: the key, the project's existence and the job are
 * read by a single query, with the same answers, in the same order of precedence, as
 * requireProject followed by getJob (401, 403, 404 project, 404 job).
 */
export async function readJobAuthorized(
  ctx: AppContext,
  keys: KeyChecker,
  header: string | undefined,
  projectId: string,
  jobId: string,
): Promise<JobView> {
  const hash = keys.hashOf(header);
  const validJob = isId('job', jobId) ? jobId : '';
  const [row] = await ctx.prepared<KeyAndJobRow>('errand_read_job', READ_JOB_SQL, [
    projectId,
    validJob,
    hash,
  ]);
  const principal = keys.principalOf(
    row
      ? { id: row.key_id, project_id: row.key_project, revoked_at: row.key_revoked_at }
      : undefined,
  );
  if (principal.projectId !== null && principal.projectId !== projectId) {
    throw new AppError('forbidden', `this API key is not valid for project ${projectId}`);
  }
  if (!row?.project_exists) throw new AppError('not_found', `project ${projectId} not found`);
  if (!row.job_id) throw new AppError('not_found', `job ${jobId} not found in this project`);
  const { key_id, key_project, key_revoked_at, project_exists, job_id, ...job } = row;
  return { ...job, id: job_id, project_id: projectId };
}
