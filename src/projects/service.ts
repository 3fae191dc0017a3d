// Projects: a repository, the ref jobs start from, and an optional default model.
import { sql } from 'kysely';
import type { AppContext } from '../context.ts';
import type { ProjectRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { isId, newId } from '../ids.ts';
import {
  checkRepository,
  isValidModelId,
  isValidRef,
  localRepositoryExists,
} from './repository.ts';

export interface ProjectInput {
  name: string;
  repository: string;
  ref?: string | undefined;
  model?: string | null | undefined;
}

export interface ProjectRecord {
  id: string;
  name: string;
  repository: string;
  ref: string;
  model: string | null;
  createdAt: string;
  updatedAt: string;
}

export function toProjectRecord(row: ProjectRow): ProjectRecord {
  return {
    id: row.id,
    name: row.name,
    repository: row.repository,
    ref: row.ref,
    model: row.model,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

function field(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new AppError('bad_request', `"${name}" must be a string`);
  return value;
}

/** Validates a create request body; throws a 400 naming the first problem. */
export async function parseProjectInput(ctx: AppContext, body: unknown): Promise<ProjectInput> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('bad_request', 'request body must be a JSON object');
  }
  const b = body as Record<string, unknown>;
  const name = field(b, 'name')?.trim();
  if (!name || name.length > 200)
    throw new AppError('bad_request', '"name" must be 1 to 200 characters');
  const repository = field(b, 'repository');
  if (!repository) throw new AppError('bad_request', '"repository" is required');
  const check = checkRepository(repository, ctx.config.allowLocalRepos);
  if (!check.ok) throw new AppError('bad_request', `invalid "repository": ${check.reason}`);
  if (check.localPath !== undefined && !(await localRepositoryExists(check.localPath))) {
    throw new AppError('bad_request', `invalid "repository": no directory at ${check.localPath}`);
  }
  const ref = field(b, 'ref') ?? 'main';
  if (!isValidRef(ref))
    throw new AppError('bad_request', `invalid "ref": '${ref}' is not a valid git ref name`);
  const model = field(b, 'model');
  if (model !== undefined && !isValidModelId(model)) {
    throw new AppError(
      'bad_request',
      '"model" must look like provider:model, e.g. anthropic:claude-sonnet-4-5',
    );
  }
  return { name, repository: check.localPath ?? repository, ref, model: model ?? null };
}

export async function createProject(ctx: AppContext, input: ProjectInput): Promise<ProjectRow> {
  return ctx.db
    .insertInto('projects')
    .values({
      id: newId('prj'),
      name: input.name,
      repository: input.repository,
      ref: input.ref ?? 'main',
      model: input.model ?? null,
      updated_at: sql`now()`,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listProjects(ctx: AppContext): Promise<ProjectRow[]> {
  return ctx.db
    .selectFrom('projects')
    .selectAll()
    .orderBy('created_at', 'asc')
    .orderBy('id')
    .execute();
}

export async function findProject(
  ctx: AppContext,
  projectId: string,
): Promise<ProjectRow | undefined> {
  if (!isId('prj', projectId)) return undefined;
  return ctx.db.selectFrom('projects').selectAll().where('id', '=', projectId).executeTakeFirst();
}

export async function getProject(ctx: AppContext, projectId: string): Promise<ProjectRow> {
  const project = await findProject(ctx, projectId);
  if (!project) throw new AppError('not_found', `project ${projectId} not found`);
  return project;
}
