// A project's fields as the admin API and the dashboard take them, checked and turned into
// column changes: the checks that need the server's settings, the file system or the stored
// project. Credentials given here are sealed before they are stored (src/secrets/box.ts).
import type { Updateable } from 'kysely';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { McpServers, ProjectRow, ProjectsTable } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { validateRepositoryUrl } from '../repository/url.ts';
import { seal } from '../secrets/box.ts';
import { type EngineInstalls, type EngineName, engineModelRefusal } from './engine.ts';
import { type ForgeCredentials, type ForgeKind, type ForgeTargets, projectForge } from './forge.ts';
import { mcpServersChange } from './mcp-servers.ts';
import { type NetworkChange, networkChanges } from './network.ts';
import { checkRepository, localRepositoryExists } from './repository.ts';
import { forgeTokenEnvRefusal } from './token-env.ts';

/** What the project service uses of the application context (src/context.ts). */
export interface ProjectsContext {
  db: Db;
  config: Config;
  forges: ForgeTargets;
  /** The model registry as projects use it: whether a model's prices are known (budgets). */
  models: { readonly defaultId: string; info(id: string): { prices: object | undefined } };
  /** Which agent engines are installed here: a project may choose only those. */
  engines: EngineInstalls;
}

type ProjectChanges = Updateable<ProjectsTable>;

/**
 * The fields of a create or update body, already shaped by the route's schema
 * (http/routes/admin-projects.ts): types, lengths and formats are checked there. What is
 * left here needs the server's settings, the file system or the stored project. `null`
 * clears a field where that is allowed.
 */
export interface ProjectFields {
  name?: string | undefined;
  repository?: string | undefined;
  ref?: string | null | undefined;
  model?: string | null | undefined;
  forge?: ForgeKind | null | undefined;
  forgeUrl?: string | null | undefined;
  forgeTokenEnv?: string | null | undefined;
  forgeToken?: string | null | undefined;
  githubApp?: { appId: string; installationId: string; privateKey: string } | null | undefined;
  /** The secret the forge signs webhook deliveries with; null removes it. */
  forgeWebhookSecret?: string | null | undefined;
  /** The handle comments mention, without the @. */
  forgeHandle?: string | undefined;
  /** The label that makes an issue a job. */
  forgeLabel?: string | undefined;
  draftPullRequests?: boolean | undefined;
  commandsEnabled?: boolean | undefined;
  setupCommand?: string | null | undefined;
  /** Run after an environment is restored, instead of the setup command. */
  maintenanceCommand?: string | null | undefined;
  /** Judges a best-of-N job's attempts; null or empty: none. */
  checkCommand?: string | null | undefined;
  /** Globs of the files whose content keys the environment; null: the common lock files. */
  environmentKeyFiles?: string[] | null | undefined;
  /** The older way to say network.setup: true is "open", false "none". */
  setupNetwork?: boolean | undefined;
  /** The network policy; a part not given is left as it is. */
  network?: NetworkChange | undefined;
  /** A limit; null returns it to the sandbox's default. */
  commandTimeoutSeconds?: number | null | undefined;
  commandCpuSeconds?: number | null | undefined;
  commandMemoryMb?: number | null | undefined;
  commandProcesses?: number | null | undefined;
  commandFileSizeMb?: number | null | undefined;
  commandDiskMb?: number | null | undefined;
  /** A budget in US dollars; null removes it. */
  jobBudgetUsd?: number | null | undefined;
  monthlyBudgetUsd?: number | null | undefined;
  /** The agent that runs the project's turns. */
  engine?: EngineName | undefined;
  /** The pull request watch: autofix turns in a row for one pull request; 0: none. */
  autofixAttempts?: number | undefined;
  /** Globs of the check names the watch acts on; null: every check. */
  autofixChecks?: string[] | null | undefined;
  autoMerge?: ProjectRow['auto_merge'] | undefined;
  mergeMethod?: ProjectRow['merge_method'] | undefined;
  conflictStrategy?: ProjectRow['conflict_strategy'] | undefined;
  /** The MCP servers its turns get (docs/mcp-servers.md); null: none. */
  mcpServers?: McpServers | null | undefined;
}

/**
 * Turns the fields of a create or update body into column changes. For an update, `current`
 * is the stored project: the checks that span fields run on the merged result.
 */
export async function toChanges(
  ctx: ProjectsContext,
  b: ProjectFields,
  current?: ProjectRow,
): Promise<ProjectChanges> {
  const changes: ProjectChanges = {};

  if (b.name !== undefined) changes.name = b.name;
  else if (!current) throw new AppError('bad_request', '"name" must be 1 to 200 characters');
  const repository = b.repository;
  if (repository !== undefined || !current) {
    if (!repository) throw new AppError('bad_request', '"repository" is required');
    const check = checkRepository(repository, ctx.config.allowLocalRepos);
    if (!check.ok) throw new AppError('bad_request', `invalid "repository": ${check.reason}`);
    if (check.localPath !== undefined && !(await localRepositoryExists(check.localPath))) {
      throw new AppError('bad_request', `invalid "repository": no directory at ${check.localPath}`);
    }
    changes.repository = check.localPath ?? repository;
  }
  if (b.ref !== undefined || !current) changes.ref = b.ref ?? 'main';
  if (b.model !== undefined) changes.model = b.model;
  if (b.forge !== undefined) changes.forge_kind = b.forge;
  const forgeUrl = b.forgeUrl;
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
  if (b.forgeHandle !== undefined) changes.forge_handle = b.forgeHandle;
  if (b.forgeLabel !== undefined) changes.forge_label = b.forgeLabel;
  if (b.forgeWebhookSecret !== undefined)
    changes.forge_webhook_secret =
      b.forgeWebhookSecret === null ? null : sealWebhookSecret(ctx.config, b.forgeWebhookSecret);
  if (b.draftPullRequests !== undefined) changes.draft_pull_requests = b.draftPullRequests;
  if (b.commandsEnabled !== undefined) changes.commands_enabled = b.commandsEnabled;
  Object.assign(
    changes,
    commandChanges(b),
    networkChanges(b),
    await mcpServersChange(b, ctx.config),
  );
  if (b.jobBudgetUsd !== undefined) changes.job_budget_usd = b.jobBudgetUsd;
  if (b.monthlyBudgetUsd !== undefined) changes.monthly_budget_usd = b.monthlyBudgetUsd;
  refuseUnpricedBudget(ctx, b, changes, current);
  if (b.engine !== undefined) changes.engine = b.engine;
  await refuseEngine(ctx, b, changes, current);
  if (b.autofixAttempts !== undefined) changes.autofix_attempts = b.autofixAttempts;
  // A glob given twice selects nothing more: kept once, in the order given.
  if (b.autofixChecks !== undefined)
    changes.autofix_checks = b.autofixChecks === null ? null : [...new Set(b.autofixChecks)];
  if (b.autoMerge !== undefined) changes.auto_merge = b.autoMerge;
  if (b.mergeMethod !== undefined) changes.merge_method = b.mergeMethod;
  if (b.conflictStrategy !== undefined) changes.conflict_strategy = b.conflictStrategy;

  const tokenEnv = b.forgeTokenEnv;
  const token = b.forgeToken;
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
    const refusal = forgeTokenEnvRefusal(tokenEnv, ctx.config);
    if (refusal) throw new AppError('bad_request', `invalid "forgeTokenEnv": ${refusal}`);
    changes.forge_token_env = tokenEnv;
    changes.forge_secret = null;
  } else if (typeof token === 'string') {
    credentials = { token };
  } else if (app !== undefined && app !== null) {
    credentials = { githubApp: app };
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
  const resolved = projectForge(merged, ctx.forges);
  if (resolved.kind !== 'git' && !resolved.apiUrl) {
    throw new AppError(
      'bad_request',
      `a ${resolved.kind} project needs "forgeUrl", the API base URL (e.g. ${resolved.kind === 'github' ? 'https://ghe.example.com/api/v3' : resolved.kind === 'gitlab' ? 'https://gitlab.example.com/api/v4' : 'https://gitea.example.com/api/v1'})`,
    );
  }
  if (changes.forge_webhook_secret && resolved.kind === 'git') {
    throw new AppError(
      'bad_request',
      '"forgeWebhookSecret" is for projects on GitHub, GitLab or Gitea/Forgejo: this project\'s forge is plain git, which sends no webhooks',
    );
  }
  if (credentials?.githubApp && resolved.kind !== 'github') {
    throw new AppError('bad_request', '"githubApp" credentials are for GitHub projects only');
  }
  if (resolved.kind !== 'git') {
    // Catches a repository URL the forge cannot parse now, not at the first job.
    try {
      ctx.forges.check(resolved.kind, resolved.apiUrl ?? '', merged.repository);
    } catch (err) {
      throw new AppError('bad_request', err instanceof Error ? err.message : String(err));
    }
  }
  return changes;
}

/** The columns of the project's commands: the setup, maintenance and check commands, the limits. */
function commandChanges(b: ProjectFields): ProjectChanges {
  const changes: ProjectChanges = {};
  // A blank command is no command: stored as null so the pipeline has one case to skip.
  if (b.setupCommand !== undefined) changes.setup_command = b.setupCommand?.trim() || null;
  if (b.maintenanceCommand !== undefined)
    changes.maintenance_command = b.maintenanceCommand?.trim() || null;
  if (b.checkCommand !== undefined) changes.check_command = b.checkCommand?.trim() || null;
  // A glob given twice keys nothing more: kept once, in the order given.
  if (b.environmentKeyFiles !== undefined)
    changes.environment_key_files =
      b.environmentKeyFiles === null ? null : [...new Set(b.environmentKeyFiles)];
  if (b.commandTimeoutSeconds !== undefined)
    changes.command_timeout_seconds = b.commandTimeoutSeconds;
  if (b.commandCpuSeconds !== undefined) changes.command_cpu_seconds = b.commandCpuSeconds;
  if (b.commandMemoryMb !== undefined) changes.command_memory_mb = b.commandMemoryMb;
  if (b.commandProcesses !== undefined) changes.command_processes = b.commandProcesses;
  if (b.commandFileSizeMb !== undefined) changes.command_file_size_mb = b.commandFileSizeMb;
  if (b.commandDiskMb !== undefined) changes.command_disk_mb = b.commandDiskMb;
  return changes;
}

/**
 * A budget holds only a model whose prices are known: its spend is counted at them. Refused
 * when a budget is set, or the model of a project with one is changed, to such a model (the
 * project's, else the server's default).
 */
function refuseUnpricedBudget(
  ctx: ProjectsContext,
  b: ProjectFields,
  changes: ProjectChanges,
  current: ProjectRow | undefined,
): void {
  const touched =
    b.model !== undefined ||
    (b.jobBudgetUsd !== undefined && b.jobBudgetUsd !== null) ||
    (b.monthlyBudgetUsd !== undefined && b.monthlyBudgetUsd !== null);
  if (!touched) return;
  const pick = <T>(changed: T | undefined, stored: T | undefined | null) =>
    changed !== undefined ? changed : (stored ?? null);
  const budgets = [
    ...(pick(changes.job_budget_usd, current?.job_budget_usd) !== null ? ['jobBudgetUsd'] : []),
    ...(pick(changes.monthly_budget_usd, current?.monthly_budget_usd) !== null
      ? ['monthlyBudgetUsd']
      : []),
  ];
  if (budgets.length === 0) return;
  const projectModel = pick(changes.model, current?.model);
  const model = projectModel ?? ctx.models.defaultId;
  if (ctx.models.info(model).prices !== undefined) return;
  throw new AppError(
    'bad_request',
    `${budgets.map((name) => `"${name}"`).join(' and ')} cannot hold model '${model}'${projectModel === null ? " (the server's default)" : ''}: its prices are unknown, so what its jobs spend could not be counted. Give its prices in the server's ERRAND_MODEL_CATALOG file, or choose a model whose prices are known`,
  );
}

/**
 * An engine other than Errand's own must be installed here (so that it is, where workers share
 * the engines directory or were set up alike) and able to talk to the project's model (its own,
 * else the server's default). Checked when the engine or the model changes.
 */
async function refuseEngine(
  ctx: ProjectsContext,
  b: ProjectFields,
  changes: ProjectChanges,
  current: ProjectRow | undefined,
): Promise<void> {
  if (b.engine === undefined && b.model === undefined) return;
  const engine = changes.engine ?? current?.engine ?? 'errand';
  if (engine === 'errand') return;
  const projectModel = changes.model !== undefined ? changes.model : (current?.model ?? null);
  const model = projectModel ?? ctx.models.defaultId;
  const whose = projectModel === null ? " (the server's default)" : '';
  const refusal = engineModelRefusal(engine, model, whose);
  if (refusal !== undefined) {
    throw new AppError(
      'bad_request',
      `${refusal}; choose such a model in "model", or another engine`,
    );
  }
  // Only a change is checked: a project keeps an engine removed since (its turns say so).
  if (
    b.engine !== undefined &&
    b.engine !== current?.engine &&
    !(await ctx.engines.installed(engine))
  ) {
    throw new AppError(
      'bad_request',
      `engine ${engine} is not installed on the server: run \`errand engine install ${engine}\` there (and on every worker), then set it again`,
    );
  }
}

/** A webhook secret sealed for storage; refused without ERRAND_SECRET_KEY, like forge tokens. */
function sealWebhookSecret(config: Config, secret: string): string {
  if (!config.secretKey)
    throw new AppError(
      'bad_request',
      'storing "forgeWebhookSecret" needs ERRAND_SECRET_KEY set on the server (it is encrypted with it)',
    );
  return seal(config.secretKey, secret);
}
