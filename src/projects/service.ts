// Projects: a repository, the ref jobs start from, an optional default model, and where
// pull requests go (the forge and its credentials). Credentials are write-only: stored
// encrypted or named by environment variable, and never returned.
import { sql } from 'kysely';
import type { ProjectRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { isId, newId, randomBase62 } from '../ids.ts';
import type { ProjectRecord } from '../records/project.ts';
import { type ProjectFields, type ProjectsContext, toChanges } from './changes.ts';
import { projectForge } from './forge.ts';
import { DEFAULT_LIMITS, type SandboxLimits } from './limits.ts';
import { mcpServersView } from './mcp-servers.ts';
import { networkColumns, networkRecord } from './network.ts';

/** The limits a project's commands run under: its own where set, else the sandbox's defaults. */
export function projectCommandLimits(row: ProjectRow): SandboxLimits {
  return {
    timeoutSeconds: row.command_timeout_seconds ?? DEFAULT_LIMITS.timeoutSeconds,
    cpuSeconds: row.command_cpu_seconds ?? DEFAULT_LIMITS.cpuSeconds,
    memoryMb: row.command_memory_mb ?? DEFAULT_LIMITS.memoryMb,
    processes: row.command_processes ?? DEFAULT_LIMITS.processes,
    fileSizeMb: row.command_file_size_mb ?? DEFAULT_LIMITS.fileSizeMb,
    diskMb: row.command_disk_mb ?? DEFAULT_LIMITS.diskMb,
  };
}

/** A project's row as the admin API shows it (src/records/project.ts): never its credentials. */
export function toProjectRecord(
  ctx: Pick<ProjectsContext, 'forges'>,
  row: ProjectRow,
): ProjectRecord {
  const forge = projectForge(row, ctx.forges);
  const limits = projectCommandLimits(row);
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
    forgeWebhookSecretSet: row.forge_webhook_secret !== null,
    forgeHandle: row.forge_handle,
    forgeLabel: row.forge_label,
    draftPullRequests: row.draft_pull_requests,
    commandsEnabled: row.commands_enabled,
    setupCommand: row.setup_command,
    maintenanceCommand: row.maintenance_command,
    checkCommand: row.check_command,
    environmentKeyFiles: row.environment_key_files,
    ...networkRecord(row),
    commandTimeoutSeconds: limits.timeoutSeconds,
    commandCpuSeconds: limits.cpuSeconds,
    commandMemoryMb: limits.memoryMb,
    commandProcesses: limits.processes,
    commandFileSizeMb: limits.fileSizeMb,
    commandDiskMb: limits.diskMb,
    jobBudgetUsd: row.job_budget_usd,
    monthlyBudgetUsd: row.monthly_budget_usd,
    engine: row.engine,
    autofixAttempts: row.autofix_attempts,
    autofixChecks: row.autofix_checks,
    autoMerge: row.auto_merge,
    mergeMethod: row.merge_method,
    conflictStrategy: row.conflict_strategy,
    mcpServers: mcpServersView(row.mcp_servers),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/**
 * Makes the project a new random webhook secret, replacing any, and returns it: the only time
 * it is shown. Refused for a plain git project, which has no forge to send deliveries.
 */
export async function generateForgeWebhookSecret(
  ctx: ProjectsContext,
  projectId: string,
): Promise<{ row: ProjectRow; secret: string }> {
  const current = await getProject(ctx, projectId);
  const secret = randomBase62(40);
  const changes = await toChanges(ctx, { forgeWebhookSecret: secret }, current);
  const row = await ctx.db
    .updateTable('projects')
    .set({ ...changes, updated_at: sql`now()` })
    .where('id', '=', projectId)
    .returningAll()
    .executeTakeFirstOrThrow();
  return { row, secret };
}

/** Checks a create body and stores the project. */
export async function createProject(
  ctx: ProjectsContext,
  body: ProjectFields,
): Promise<ProjectRow> {
  const changes = await toChanges(ctx, body);
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
      forge_webhook_secret: changes.forge_webhook_secret ?? null,
      ...(changes.forge_handle !== undefined ? { forge_handle: changes.forge_handle } : {}),
      ...(changes.forge_label !== undefined ? { forge_label: changes.forge_label } : {}),
      ...(changes.draft_pull_requests !== undefined
        ? { draft_pull_requests: changes.draft_pull_requests }
        : {}),
      ...(changes.commands_enabled !== undefined
        ? { commands_enabled: changes.commands_enabled }
        : {}),
      setup_command: changes.setup_command ?? null,
      maintenance_command: changes.maintenance_command ?? null,
      check_command: changes.check_command ?? null,
      environment_key_files: changes.environment_key_files ?? null,
      ...networkColumns(changes),
      command_timeout_seconds: changes.command_timeout_seconds ?? null,
      command_cpu_seconds: changes.command_cpu_seconds ?? null,
      command_memory_mb: changes.command_memory_mb ?? null,
      command_processes: changes.command_processes ?? null,
      command_file_size_mb: changes.command_file_size_mb ?? null,
      command_disk_mb: changes.command_disk_mb ?? null,
      job_budget_usd: changes.job_budget_usd ?? null,
      monthly_budget_usd: changes.monthly_budget_usd ?? null,
      ...(changes.engine !== undefined ? { engine: changes.engine } : {}),
      // The watch's settings not given keep the columns' defaults (migration 0029).
      ...(changes.autofix_attempts !== undefined
        ? { autofix_attempts: changes.autofix_attempts }
        : {}),
      autofix_checks: changes.autofix_checks ?? null,
      ...(changes.auto_merge !== undefined ? { auto_merge: changes.auto_merge } : {}),
      ...(changes.merge_method !== undefined ? { merge_method: changes.merge_method } : {}),
      ...(changes.conflict_strategy !== undefined
        ? { conflict_strategy: changes.conflict_strategy }
        : {}),
      mcp_servers: changes.mcp_servers ?? null,
      updated_at: sql`now()`,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Applies an update body; jobs already created keep the repository and ref they started with.
 * Returns the project as it was (`before`, what the environment's build compares) and is.
 */
export async function updateProject(
  ctx: ProjectsContext,
  projectId: string,
  body: ProjectFields,
): Promise<{ before: ProjectRow; row: ProjectRow }> {
  const before = await getProject(ctx, projectId);
  const changes = await toChanges(ctx, body, before);
  const row = await ctx.db
    .updateTable('projects')
    .set({ ...changes, updated_at: sql`now()` })
    .where('id', '=', projectId)
    .returningAll()
    .executeTakeFirstOrThrow();
  return { before, row };
}

export async function listProjects(ctx: ProjectsContext): Promise<ProjectRow[]> {
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
  'commands_enabled',
  'setup_command',
  'maintenance_command',
  'environment_key_files',
  'network_setup',
  'network_commands',
  'network_allow',
  'command_timeout_seconds',
  'command_cpu_seconds',
  'command_memory_mb',
  'command_processes',
  'command_file_size_mb',
  'command_disk_mb',
  'job_budget_usd',
  'monthly_budget_usd',
  'engine',
  'forge_webhook_secret',
  'forge_handle',
  'forge_label',
  'autofix_attempts',
  'autofix_checks',
  'auto_merge',
  'merge_method',
  'conflict_strategy',
  'mcp_servers',
  'check_command',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof ProjectRow)[];

export async function findProject(
  ctx: ProjectsContext,
  projectId: string,
): Promise<ProjectRow | undefined> {
  if (!isId('prj', projectId)) return undefined;
  return ctx.db
    .selectFrom('projects')
    .select(PROJECT_COLUMNS)
    .where('id', '=', projectId)
    .executeTakeFirst();
}

export async function getProject(ctx: ProjectsContext, projectId: string): Promise<ProjectRow> {
  const project = await findProject(ctx, projectId);
  if (!project) throw new AppError('not_found', `project ${projectId} not found`);
  return project;
}
