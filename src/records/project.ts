// The project record as the admin API returns it, declared once: the server's ProjectRecord,
// the OpenAPI component Project and the typed client's Project come from this schema; never its
// credentials. With it, the lists of values its fields take, which the project service, the
// request schemas (src/projects/schemas.ts), the CLI and the dashboard read from here.
import { z } from 'zod';
import type { ProjectRow } from '../db/schema.ts';

/** Where a project's pull requests go; `git` is a plain remote with Errand's review page. */
export const FORGE_KINDS = ['github', 'gitlab', 'gitea', 'git'] as const;

/** Every engine a project may choose; `errand` is Errand's own loop (src/agent/). */
export const ENGINE_NAMES = ['errand', 'claude-code', 'codex', 'opencode'] as const;

/** When the pull request watch merges a job's pull request (src/features/pr-watch/). */
export const AUTO_MERGE_MODES = ['off', 'green', 'green-and-approved'] as const;

/** How the watch merges it, with the forge's own merge API (src/forges/types.ts's MergeMethod). */
export const MERGE_METHODS = ['merge', 'squash', 'rebase'] as const;

/** How a turn brings a pull request that conflicts with its base up to it. */
export const CONFLICT_STRATEGIES = ['merge', 'rebase'] as const;

/** The most autofix turns one pull request may get in a row (the column's check says the same). */
export const MAX_AUTOFIX_ATTEMPTS = 10;
/** What a project not told otherwise allows (the column's default, migration 0029). */
export const DEFAULT_AUTOFIX_ATTEMPTS = 2;

/** The setup command's network, and that of the agent's commands (src/projects/network.ts). */
export const SETUP_NETWORK_MODES = ['none', 'allowlist', 'open'] as const;
export const COMMANDS_NETWORK_MODES = ['none', 'allowlist'] as const;

/** The presets an allowlist may name, each a registry's hosts (src/projects/network.ts). */
export const NETWORK_PRESET_NAMES = [
  '@npm',
  '@yarn',
  '@pypi',
  '@crates',
  '@go',
  '@github',
  '@rubygems',
  '@packagist',
  '@maven',
] as const;

/**
 * The lock files of npm, pnpm, yarn, bun, pip, uv, poetry, pipenv, cargo, go, bundler and
 * composer, anywhere in the tree (`**` matches no directory too): what a setup that installs
 * dependencies reads, and so what keys a project's environment when it names no files.
 */
export const DEFAULT_ENVIRONMENT_KEY_FILES: readonly string[] = Object.freeze([
  '**/package-lock.json',
  '**/npm-shrinkwrap.json',
  '**/pnpm-lock.yaml',
  '**/yarn.lock',
  '**/bun.lock',
  '**/requirements*.txt',
  '**/uv.lock',
  '**/poetry.lock',
  '**/Pipfile.lock',
  '**/Cargo.lock',
  '**/go.sum',
  '**/Gemfile.lock',
  '**/composer.lock',
]);

// The database's columns say the same values (src/db/schema.ts).
FORGE_KINDS satisfies readonly NonNullable<ProjectRow['forge_kind']>[];
ENGINE_NAMES satisfies readonly ProjectRow['engine'][];
SETUP_NETWORK_MODES satisfies readonly ProjectRow['network_setup'][];
COMMANDS_NETWORK_MODES satisfies readonly ProjectRow['network_commands'][];
AUTO_MERGE_MODES satisfies readonly ProjectRow['auto_merge'][];
MERGE_METHODS satisfies readonly ProjectRow['merge_method'][];
CONFLICT_STRATEGIES satisfies readonly ProjectRow['conflict_strategy'][];

/**
 * What the pull request watch's settings do, said once for the record, the create and update
 * bodies, and so the OpenAPI document and the client's types.
 */
export const PR_WATCH_TEXTS = {
  autofixAttempts: `How many turns in a row Errand queues to fix a pull request's failing checks (0 to ${MAX_AUTOFIX_ATTEMPTS}; 0: none). A green run starts the count again; the job's budget applies. Default ${DEFAULT_AUTOFIX_ATTEMPTS}.`,
  autofixChecks:
    'Globs of the names of the checks the watch acts on, e.g. ["ci/*", "lint"]: only their failures queue a fix. null: every check, the default.',
  autoMerge:
    'Whether Errand merges the pull request itself: "off" (never, the default), "green" (once every check passed) or "green-and-approved" (and the forge\'s approval rules are met). It uses the forge\'s merge API and never bypasses branch protection.',
  mergeMethod:
    'How Errand merges: "merge" (a merge commit, the default), "squash" or "rebase". On GitLab, "squash" squashes; the merge commit or fast-forward is the GitLab project\'s own setting.',
  conflictStrategy:
    'How a turn brings a pull request that conflicts with its base up to it: "merge" (merges the base into the work branch, the default) or "rebase" (rebases the work branch onto it).',
} as const;

/** The descriptions of the network's parts, in the record and in a create or update body. */
export const NETWORK_TEXTS = {
  setup:
    'The setup command\'s network: "none" (none at all), "allowlist" (HTTP and HTTPS to the hosts of "allow" only, through Errand\'s egress proxy), or "open" (any public address, never a private one or the worker\'s own).',
  commands:
    'The network of the agent\'s run_command and of an engine\'s whole sandbox: "none" or "allowlist". An engine reaches its model through Errand either way.',
  allow: `The hosts "allowlist" lets through: "registry.example.com" (port 443 for HTTPS, 80 for plain HTTP), "*.example.com" (the names below it, not example.com itself), "host:port", or a preset (${NETWORK_PRESET_NAMES.join(', ')}). Loopback, private, link-local and reserved addresses are refused whatever a name resolves to.`,
} as const;

export const projectRecord = z
  .object({
    id: z.string(),
    name: z.string(),
    repository: z.string(),
    ref: z.string(),
    model: z.string().nullable(),
    forge: z.object({
      kind: z.enum(FORGE_KINDS),
      apiUrl: z.string().nullable(),
      inferred: z.boolean().describe('True when the kind was inferred from the repository URL.'),
      credentials: z
        .enum(['none', 'token-env', 'stored-token', 'github-app'])
        .describe('How credentials are given; never the credentials themselves.'),
      tokenEnv: z.string().nullable(),
    }),
    forgeWebhookSecretSet: z
      .boolean()
      .describe(
        "Whether the forge's webhook deliveries have a secret to be checked with; never the secret.",
      ),
    forgeHandle: z
      .string()
      .describe('The handle forge comments mention to reach Errand, without the @.'),
    forgeLabel: z.string().describe('The label that makes a forge issue a job.'),
    draftPullRequests: z.boolean(),
    commandsEnabled: z.boolean(),
    setupCommand: z.string().nullable(),
    maintenanceCommand: z
      .string()
      .nullable()
      .describe(
        'Run after the environment is restored, instead of the setup command (null: none).',
      ),
    checkCommand: z
      .string()
      .nullable()
      .describe(
        "The command that judges a best-of-N job's attempts (docs/eval.md): run by sh in the sandbox, with the project's environment, on each attempt's finished checkout; exit 0 passes. A job's own checkCommand replaces it. null: none (the attempts are unchecked).",
      ),
    environmentKeyFiles: z
      .array(z.string())
      .nullable()
      .describe(
        `The globs of the files whose content keys the environment (null: the common lock files, ${DEFAULT_ENVIRONMENT_KEY_FILES.join(', ')}).`,
      ),
    setupNetwork: z
      .boolean()
      .describe('Whether network.setup is "open" (kept for clients of the older setting).'),
    network: z
      .object({
        setup: z.enum(SETUP_NETWORK_MODES).describe(NETWORK_TEXTS.setup),
        commands: z.enum(COMMANDS_NETWORK_MODES).describe(NETWORK_TEXTS.commands),
        allow: z.array(z.string()).describe(NETWORK_TEXTS.allow),
      })
      .describe("What the project's commands may reach."),
    commandTimeoutSeconds: z.number().int(),
    commandCpuSeconds: z.number().int(),
    commandMemoryMb: z.number().int(),
    commandProcesses: z.number().int(),
    commandFileSizeMb: z.number().int(),
    commandDiskMb: z.number().int(),
    jobBudgetUsd: z
      .number()
      .nullable()
      .describe('What all turns of one job may cost, in US dollars (null: no budget).'),
    monthlyBudgetUsd: z
      .number()
      .nullable()
      .describe(
        "What the project's jobs may cost in a calendar month (UTC), in US dollars (null: none).",
      ),
    engine: z
      .enum(ENGINE_NAMES)
      .describe("The agent that runs the project's turns (errand: Errand's own)."),
    autofixAttempts: z.number().int().describe(PR_WATCH_TEXTS.autofixAttempts),
    autofixChecks: z.array(z.string()).nullable().describe(PR_WATCH_TEXTS.autofixChecks),
    autoMerge: z.enum(AUTO_MERGE_MODES).describe(PR_WATCH_TEXTS.autoMerge),
    mergeMethod: z.enum(MERGE_METHODS).describe(PR_WATCH_TEXTS.mergeMethod),
    conflictStrategy: z.enum(CONFLICT_STRATEGIES).describe(PR_WATCH_TEXTS.conflictStrategy),
    mcpServers: z
      .record(
        z.string(),
        z.union([
          z.object({
            command: z.string(),
            args: z.array(z.string()),
            envNames: z.array(z.string()).describe('The names of its env variables, not values.'),
          }),
          z.object({
            url: z.string(),
            headerNames: z.array(z.string()).describe('The names of its headers, not values.'),
          }),
        ]),
      )
      .nullable()
      .describe(
        "The MCP servers the project's turns get (docs/mcp-servers.md), by name: a stdio server's command and arguments, a remote one's URL, and only the names of env variables and headers, whose values may be tokens. null: none.",
      ),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  // A component of the OpenAPI document, which every answer with a project refers to.
  .meta({ id: 'Project', description: 'A project.' });

export type ProjectRecord = z.infer<typeof projectRecord>;
