// Authentication and project access for every /v2 route. Runs at onRequest, before the body
// is read, so an unauthenticated caller learns nothing about the body's validity.
import type { FastifyRequest } from 'fastify';
import type { AppContext } from '../context.ts';
import type { ProjectRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
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
