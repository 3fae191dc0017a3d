// Who created a job, and the rule that reads it: a project's member archives only the jobs they
// created (a maintainer, an admin or a project key archives any job of the project).
import type { JobRow, ProjectRole } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { hasRole, mayArchive, roleOn } from '../keys/access.ts';
import type { Principal } from '../keys/service.ts';
import type { JobsContext } from './context.ts';
import { getJob } from './service.ts';

/**
 * The user who created the job (jobs.created_by), or undefined when a key, a forge user or
 * nobody on record (jobs older than migration 0027) did: then no member is its creator, and
 * only a maintainer may archive it.
 */
function createdByUser(job: Pick<JobRow, 'created_by'>): string | undefined {
  return job.created_by?.kind === 'user' ? job.created_by.id : undefined;
}

/**
 * Refuses (403 maintainer_required) a member who archives a job they did not create. Read
 * before the archive, in its own query: the rule is about the job, which the route's access
 * rule (member) cannot see.
 */
export async function requireMayArchive(
  ctx: JobsContext,
  principal: Principal,
  projectId: string,
  jobId: string,
): Promise<void> {
  if (principal.kind === 'key' || hasRole(principal, projectId, 'maintainer')) return;
  const job = await getJob(ctx, projectId, jobId);
  if (mayArchive(principal, projectId, createdByUser(job))) return;
  const held: ProjectRole | 'admin' | undefined = roleOn(principal, projectId);
  throw new AppError(
    'maintainer_required',
    `a ${held ?? 'user without a role'} archives only the jobs they created; archiving job ${jobId} needs the maintainer role on project ${projectId}`,
  );
}
