// Projects: a repository, the ref jobs start from, an optional default model, and where
// pull requests go (the forge and its credentials). Credentials are write-only: stored
// encrypted or named by environment variable, and never returned.
import { sql, type Updateable } from 'kysely';
import type { AppContext } from '../context.ts';
import type { ProjectRow, ProjectsTable } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { FORGE_KINDS, forgeProviders, projectForge } from '../forges/registry.ts';
import { forgeTokenEnvRefusal } from '../forges/token-env.ts';
import type { ForgeCredentials, ForgeKind } from '../forges/types.ts';
import { isId, newId } from '../ids.ts';
import { seal } from '../secrets/box.ts';
import { validateRepositoryUrl } from '../workspace/url.ts';
import {
  checkRepository,
  isValidModelId,
  isValidRef,
  localRepositoryExists,
} from './repository.ts';

export interface ProjectRecord {
  id: string;
  name: string;
  repository: string;
  ref: string;
  model: string | null;
  forge: {
    kind: ForgeKind;
    apiUrl: string | null;
    /** True when the kind was inferred from the repository URL. */
    inferred: boolean;
    /** How credentials are given; never the credentials themselves. */
    credentials: 'none' | 'token-env' | 'stored-token' | 'github-app';
    tokenEnv: string | null;
  };
  draftPullRequests: boolean;
  createdAt: string;
  updatedAt: string;
}

export function toProjectRecord(row: ProjectRow): ProjectRecord {
  const forge = projectForge(row);
  return {
    id: row.id,
    name: row.name,
    repository: row.repository,
    ref: row.ref,
    model: row.model,
    forge: {
      kind: forge.kind,
      apiUrl: forge.apiUrl ?? null,
      inferred: forge.inferred,
      credentials: row.forge_token_env
        ? 'token-env'
        : row.forge_secret
          ? row.forge_secret.startsWith('app:')
            ? 'github-app'
            : 'stored-token'
          : 'none',
      tokenEnv: row.forge_token_env,
    },
    draftPullRequests: row.draft_pull_requests,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

type Body = Record<string, unknown>;
type ProjectChanges = Updateable<ProjectsTable>;

function asBody(body: unknown): Body {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('bad_request', 'request body must be a JSON object');
  }
  return body as Body;
}

/** A string field: undefined when absent, null when explicitly null (to clear it). */
function field(body: Body, name: string): string | null | undefined {
  const value = body[name];
  if (value === undefined || value === null) return value;
  if (typeof value !== 'string') throw new AppError('bad_request', `"${name}" must be a string`);
  return value;
}

const TOKEN_ENV = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/**
 * Validates the fields of a create or update body into column changes. For an update,
 * `current` is the stored project: the checks that span fields run on the merged result.
 */
async function parseFields(
  ctx: AppContext,
  raw: unknown,
  current?: ProjectRow,
): Promise<ProjectChanges> {
  const b = asBody(raw);
  const known = new Set([
    'name',
    'repository',
    'ref',
    'model',
    'forge',
    'forgeUrl',
    'forgeTokenEnv',
    'forgeToken',
    'githubApp',
    'draftPullRequests',
  ]);
  const unknown = Object.keys(b).find((k) => !known.has(k));
  if (unknown) throw new AppError('bad_request', `unknown field "${unknown}"`);
  const changes: ProjectChanges = {};

  const name = field(b, 'name');
  if (name !== undefined || !current) {
    const trimmed = name?.trim();
    if (!trimmed || trimmed.length > 200)
      throw new AppError('bad_request', '"name" must be 1 to 200 characters');
    changes.name = trimmed;
  }
  const repository = field(b, 'repository');
  if (repository !== undefined || !current) {
    if (!repository) throw new AppError('bad_request', '"repository" is required');
    const check = checkRepository(repository, ctx.config.allowLocalRepos);
    if (!check.ok) throw new AppError('bad_request', `invalid "repository": ${check.reason}`);
    if (check.localPath !== undefined && !(await localRepositoryExists(check.localPath))) {
      throw new AppError('bad_request', `invalid "repository": no directory at ${check.localPath}`);
    }
    changes.repository = check.localPath ?? repository;
  }
  const ref = field(b, 'ref');
  if (ref !== undefined || !current) {
    const value = ref ?? 'main';
    if (!isValidRef(value))
      throw new AppError('bad_request', `invalid "ref": '${value}' is not a valid git ref name`);
    changes.ref = value;
  }
  const model = field(b, 'model');
  if (model !== undefined) {
    if (model !== null && !isValidModelId(model)) {
      throw new AppError(
        'bad_request',
        '"model" must look like provider:model, e.g. anthropic:claude-sonnet-4-5',
      );
    }
    changes.model = model;
  }
  const forge = field(b, 'forge');
  if (forge !== undefined) {
    if (forge !== null && !FORGE_KINDS.includes(forge as ForgeKind)) {
      throw new AppError('bad_request', `"forge" must be one of ${FORGE_KINDS.join(', ')}`);
    }
    changes.forge_kind = forge as ForgeKind | null;
  }
  const forgeUrl = field(b, 'forgeUrl');
  if (forgeUrl !== undefined) {
    if (forgeUrl !== null) {
      const check = validateRepositoryUrl(forgeUrl, ctx.config.allowLocalRepos);
      if (!check.ok || (check.kind !== 'https' && check.kind !== 'http')) {
        throw new AppError(
          'bad_request',
          ctx.config.allowLocalRepos
            ? '"forgeUrl" must be the https:// URL of the forge API (or http:// to a loopback host)'
            : '"forgeUrl" must be the https:// URL of the forge API',
        );
      }
    }
    changes.forge_api_url = forgeUrl?.replace(/\/+$/, '') ?? null;
  }
  if (b.draftPullRequests !== undefined) {
    if (typeof b.draftPullRequests !== 'boolean') {
      throw new AppError('bad_request', '"draftPullRequests" must be a boolean');
    }
    changes.draft_pull_requests = b.draftPullRequests;
  }

  const tokenEnv = field(b, 'forgeTokenEnv');
  const token = field(b, 'forgeToken');
  const app = b.githubApp;
  const given = [tokenEnv, token, app].filter((v) => v !== undefined && v !== null).length;
  if (given > 1) {
    throw new AppError(
      'bad_request',
      'give only one of "forgeTokenEnv", "forgeToken" or "githubApp"',
    );
  }
  let credentials: ForgeCredentials | undefined;
  if (typeof tokenEnv === 'string') {
    if (!TOKEN_ENV.test(tokenEnv)) {
      throw new AppError('bad_request', '"forgeTokenEnv" must be an environment variable name');
    }
    const refusal = forgeTokenEnvRefusal(tokenEnv, ctx.config);
    if (refusal) throw new AppError('bad_request', `invalid "forgeTokenEnv": ${refusal}`);
    changes.forge_token_env = tokenEnv;
    changes.forge_secret = null;
  } else if (typeof token === 'string') {
    if (token.length < 8 || token.length > 1024 || /\s/.test(token)) {
      throw new AppError('bad_request', '"forgeToken" must be 8 to 1024 characters without spaces');
    }
    credentials = { token };
  } else if (app !== undefined && app !== null) {
    const a = app as Record<string, unknown>;
    if (
      typeof app !== 'object' ||
      typeof a.appId !== 'string' ||
      typeof a.installationId !== 'string' ||
      typeof a.privateKey !== 'string' ||
      !/^\d{1,20}$/.test(a.appId) ||
      !/^\d{1,20}$/.test(a.installationId) ||
      !a.privateKey.includes('PRIVATE KEY')
    ) {
      throw new AppError(
        'bad_request',
        '"githubApp" must be {"appId", "installationId"} (numbers as strings) and "privateKey" (the PEM)',
      );
    }
    credentials = {
      githubApp: { appId: a.appId, installationId: a.installationId, privateKey: a.privateKey },
    };
  } else if (tokenEnv === null || token === null || app === null) {
    changes.forge_token_env = null;
    changes.forge_secret = null;
  }
  if (credentials) {
    if (!ctx.config.secretKey) {
      throw new AppError(
        'bad_request',
        'storing forge credentials needs ERRAND_SECRET_KEY set on the server (they are encrypted with it); or use "forgeTokenEnv"',
      );
    }
    // The prefix tells the record which kind is stored without decrypting it.
    changes.forge_secret = `${credentials.githubApp ? 'app:' : 'token:'}${seal(ctx.config.secretKey, JSON.stringify(credentials))}`;
    changes.forge_token_env = null;
  }

  // Checks on the project as it will be.
  const merged = {
    repository: changes.repository ?? current?.repository ?? '',
    forge_kind:
      changes.forge_kind !== undefined ? changes.forge_kind : (current?.forge_kind ?? null),
    forge_api_url:
      changes.forge_api_url !== undefined
        ? changes.forge_api_url
        : (current?.forge_api_url ?? null),
  };
  const resolved = projectForge(merged);
  if (resolved.kind !== 'git' && !resolved.apiUrl) {
    throw new AppError(
      'bad_request',
      `a ${resolved.kind} project needs "forgeUrl", the API base URL (e.g. ${resolved.kind === 'github' ? 'https://ghe.example.com/api/v3' : resolved.kind === 'gitlab' ? 'https://gitlab.example.com/api/v4' : 'https://gitea.example.com/api/v1'})`,
    );
  }
  if (credentials?.githubApp && resolved.kind !== 'github') {
    throw new AppError('bad_request', '"githubApp" credentials are for GitHub projects only');
  }
  if (resolved.kind !== 'git') {
    // Catches a repository URL the forge cannot parse now, not at the first job.
    try {
      forgeProviders.get(resolved.kind)?.create({
        apiUrl: resolved.apiUrl ?? '',
        repository: merged.repository,
        credentials: { token: 'validation-only' },
      });
    } catch (err) {
      throw new AppError('bad_request', err instanceof Error ? err.message : String(err));
    }
  }
  return changes;
}

/** Parses a create body and stores the project. */
export async function createProject(ctx: AppContext, body: unknown): Promise<ProjectRow> {
  const changes = await parseFields(ctx, body);
  return ctx.db
    .insertInto('projects')
    .values({
      id: newId('prj'),
      name: changes.name ?? '',
      repository: changes.repository ?? '',
      ref: changes.ref ?? 'main',
      model: changes.model ?? null,
      forge_kind: changes.forge_kind ?? null,
      forge_api_url: changes.forge_api_url ?? null,
      forge_token_env: changes.forge_token_env ?? null,
      forge_secret: changes.forge_secret ?? null,
      ...(changes.draft_pull_requests !== undefined
        ? { draft_pull_requests: changes.draft_pull_requests }
        : {}),
      updated_at: sql`now()`,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Applies an update body; jobs already created keep the repository and ref they started with. */
export async function updateProject(
  ctx: AppContext,
  projectId: string,
  body: unknown,
): Promise<ProjectRow> {
  const current = await getProject(ctx, projectId);
  const changes = await parseFields(ctx, body, current);
  return ctx.db
    .updateTable('projects')
    .set({ ...changes, updated_at: sql`now()` })
    .where('id', '=', projectId)
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

/**
 * Every column of a project row, for SQL written by hand (auth.ts). findProject selects exactly
 * these, so a column added to the table but not here fails the typecheck there.
 */
export const PROJECT_COLUMNS = [
  'id',
  'name',
  'repository',
  'ref',
  'model',
  'forge_kind',
  'forge_api_url',
  'forge_token_env',
  'forge_secret',
  'draft_pull_requests',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof ProjectRow)[];

export async function findProject(
  ctx: AppContext,
  projectId: string,
): Promise<ProjectRow | undefined> {
  if (!isId('prj', projectId)) return undefined;
  return ctx.db
    .selectFrom('projects')
    .select(PROJECT_COLUMNS)
    .where('id', '=', projectId)
    .executeTakeFirst();
}

export async function getProject(ctx: AppContext, projectId: string): Promise<ProjectRow> {
  const project = await findProject(ctx, projectId);
  if (!project) throw new AppError('not_found', `project ${projectId} not found`);
  return project;
}
