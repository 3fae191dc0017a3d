// The fields of a project as the admin API and the dashboard's forms take them: each field's
// shape, with refusals that name it. What needs the server's settings or the stored project
// (repository access, forge token variables, credentials) is the project service's to check.
import { z } from 'zod';
import {
  AUTO_MERGE_MODES,
  CONFLICT_STRATEGIES,
  DEFAULT_ENVIRONMENT_KEY_FILES,
  ENGINE_NAMES,
  FORGE_KINDS,
  MAX_AUTOFIX_ATTEMPTS,
  MERGE_METHODS,
  PR_WATCH_TEXTS,
} from '../records/project.ts';
import type { ProjectFields } from './changes.ts';
import {
  environmentKeyFileRefusal,
  MAX_ENVIRONMENT_KEY_FILE_CHARS,
  MAX_ENVIRONMENT_KEY_FILES,
} from './environment-key-files.ts';
import { mcpServersField } from './mcp-servers.ts';
import { networkField } from './network-schema.ts';
import { isValidModelId, isValidRef } from './repository.ts';

/** A string field whose refusals name it. */
function text(field: string) {
  return z.string({
    error: (issue) =>
      issue.input === undefined ? `"${field}" is required` : `"${field}" must be a string`,
  });
}

const NAME = '"name" must be 1 to 200 characters';
const GITHUB_APP =
  '"githubApp" must be {"appId", "installationId"} (numbers as strings) and "privateKey" (the PEM)';
const FORGE = `"forge" must be one of ${FORGE_KINDS.join(', ')}`;

/** A command limit: a whole number in its range, or null for the sandbox's default. */
function limit(field: string, min: number, max: number, what: string) {
  const message = `"${field}" must be a whole number from ${min} to ${max}, or null for the default`;
  return z
    .number({ error: message })
    .int({ error: message })
    .min(min, { error: message })
    .max(max, { error: message })
    .nullable()
    .describe(`${what} (${min} to ${max}; null: the default).`);
}

/** The ranges of the command limits, shared with the CLI's and the dashboard's help. */
const COMMAND_LIMIT_RANGES = {
  commandTimeoutSeconds: { min: 1, max: 3600 },
  commandCpuSeconds: { min: 1, max: 3600 },
  commandMemoryMb: { min: 64, max: 65536 },
  commandProcesses: { min: 16, max: 4096 },
  commandFileSizeMb: { min: 1, max: 65536 },
  commandDiskMb: { min: 16, max: 1048576 },
} as const;

/** A budget in US dollars: more than 0, or null for none. */
function budget(field: string, what: string) {
  const message = `"${field}" must be a number of US dollars above 0 (at most 1000000000), or null for no budget`;
  return z
    .number({ error: message })
    .gt(0, { error: message })
    .max(1_000_000_000, { error: message })
    .nullable()
    .describe(
      `${what}, in US dollars at the model's list prices (null: none). Needs a model whose prices are known.`,
    );
}

/** What a webhook secret the admin chooses must be: long enough not to be guessed, one header value. */
const FORGE_WEBHOOK_SECRET_TEXT =
  '"forgeWebhookSecret" must be 16 to 256 characters without spaces or control characters, or null to remove it';
const FORGE_HANDLE =
  '"forgeHandle" must be the name comments mention, without the @: 1 to 100 letters, digits, ".", "_" or "-", starting with a letter or digit';
const FORGE_LABEL = '"forgeLabel" must be 1 to 100 characters';

const SETUP_COMMAND = '"setupCommand" must be a string of at most 2000 characters, or null';
const MAINTENANCE_COMMAND =
  '"maintenanceCommand" must be a string of at most 2000 characters, or null';
/** The longest check command, in characters (a job's own is held to the same, src/jobs/best-of.ts). */
const MAX_CHECK_COMMAND = 4000;
const CHECK_COMMAND = `"checkCommand" must be a command of at most ${MAX_CHECK_COMMAND} characters with at least one non-space character, or null (or empty) for none`;
const KEY_FILES = `"environmentKeyFiles" must be a list of at most ${MAX_ENVIRONMENT_KEY_FILES} globs (strings of 1 to ${MAX_ENVIRONMENT_KEY_FILE_CHARS} characters), or null for the common lock files`;

/** The key files: each glob trimmed, then checked by the rules the runtime relies on. */
const environmentKeyFiles = z
  .array(z.string({ error: KEY_FILES }).trim(), { error: KEY_FILES })
  .max(MAX_ENVIRONMENT_KEY_FILES, { error: KEY_FILES })
  .superRefine((globs, ctx) => {
    globs.forEach((glob, at) => {
      const refusal = environmentKeyFileRefusal(glob);
      // Named by validation.ts as `invalid "environmentKeyFiles[2]": …`.
      if (refusal) ctx.addIssue({ code: 'custom', path: [at], message: refusal });
    });
  })
  .nullable()
  .describe(
    `Globs of the files, relative to the repository's root, whose content keys the environment: a change to one builds it again (null: the common lock files, ${DEFAULT_ENVIRONMENT_KEY_FILES.join(', ')}; []: none, the setup command alone keys it). At most ${MAX_ENVIRONMENT_KEY_FILES}, each at most ${MAX_ENVIRONMENT_KEY_FILE_CHARS} characters, without .. or a leading /.`,
  );

const AUTOFIX_ATTEMPTS = `"autofixAttempts" must be a whole number from 0 to ${MAX_AUTOFIX_ATTEMPTS} (0: none)`;
/** At most this many globs, each at most this long: names of checks, not a file list. */
const MAX_AUTOFIX_CHECKS = 50;
const MAX_AUTOFIX_CHECK_CHARS = 200;
const AUTOFIX_CHECKS = `"autofixChecks" must be a list of 1 to ${MAX_AUTOFIX_CHECKS} globs of check names (1 to ${MAX_AUTOFIX_CHECK_CHARS} characters each, no control characters), or null for every check`;

/** The check names' globs: each trimmed; a blank list is refused, since null says "every check". */
const autofixChecks = z
  .array(
    z
      .string({ error: AUTOFIX_CHECKS })
      .trim()
      .min(1, { error: AUTOFIX_CHECKS })
      .max(MAX_AUTOFIX_CHECK_CHARS, { error: AUTOFIX_CHECKS })
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what is refused
      .regex(/^[^\u0000-\u001f\u007f]*$/, { error: AUTOFIX_CHECKS }),
    { error: AUTOFIX_CHECKS },
  )
  .min(1, { error: AUTOFIX_CHECKS })
  .max(MAX_AUTOFIX_CHECKS, { error: AUTOFIX_CHECKS })
  .nullable()
  .describe(
    `${PR_WATCH_TEXTS.autofixChecks} At most ${MAX_AUTOFIX_CHECKS}, each 1 to ${MAX_AUTOFIX_CHECK_CHARS} characters.`,
  );

/** A choice among fixed words, refused with the words it takes. */
function oneOf<const T extends readonly [string, ...string[]]>(field: string, values: T) {
  return z.enum(values, { error: `"${field}" must be one of ${values.join(', ')}` });
}

const fields = {
  name: text('name')
    .trim()
    .min(1, { error: NAME })
    .max(200, { error: NAME })
    .describe('1 to 200 characters.'),
  repository: text('repository')
    .min(1, { error: '"repository" is required' })
    .describe('The git URL (https, ssh, or a local path where the server allows it).'),
  ref: text('ref')
    .refine(isValidRef, {
      error: (issue) => `invalid "ref": '${String(issue.input)}' is not a valid git ref name`,
    })
    .nullable()
    .describe('The branch, tag or commit jobs start from; main when not given (null resets it).'),
  model: text('model')
    .refine(isValidModelId, {
      error: '"model" must look like provider:model, e.g. anthropic:claude-sonnet-4-5',
    })
    .nullable()
    .describe("The project's default model, provider:model (null: the server's default)."),
  forge: z
    .enum(FORGE_KINDS, { error: FORGE })
    .nullable()
    .describe('Where pull requests go; inferred from the repository URL when not given.'),
  forgeUrl: text('forgeUrl').nullable().describe('The API base URL of a self-hosted forge.'),
  forgeTokenEnv: text('forgeTokenEnv')
    .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, {
      error: '"forgeTokenEnv" must be an environment variable name',
    })
    .nullable()
    .describe("The server's environment variable holding the forge token."),
  forgeToken: text('forgeToken')
    .min(8, { error: '"forgeToken" must be 8 to 1024 characters without spaces' })
    .max(1024, { error: '"forgeToken" must be 8 to 1024 characters without spaces' })
    .regex(/^\S*$/, { error: '"forgeToken" must be 8 to 1024 characters without spaces' })
    .nullable()
    .describe('A forge token, stored encrypted (needs ERRAND_SECRET_KEY); never returned.'),
  githubApp: z
    .strictObject(
      {
        appId: z.string({ error: GITHUB_APP }).regex(/^\d{1,20}$/, { error: GITHUB_APP }),
        installationId: z.string({ error: GITHUB_APP }).regex(/^\d{1,20}$/, { error: GITHUB_APP }),
        privateKey: z.string({ error: GITHUB_APP }).includes('PRIVATE KEY', { error: GITHUB_APP }),
      },
      { error: (issue) => (issue.code === 'invalid_type' ? GITHUB_APP : undefined) },
    )
    .nullable()
    .describe('GitHub App credentials, stored encrypted; never returned.'),
  forgeWebhookSecret: text('forgeWebhookSecret')
    .min(16, { error: FORGE_WEBHOOK_SECRET_TEXT })
    .max(256, { error: FORGE_WEBHOOK_SECRET_TEXT })
    .regex(/^[\x21-\x7e]+$/, { error: FORGE_WEBHOOK_SECRET_TEXT })
    .nullable()
    .describe(
      'The secret the forge signs webhook deliveries with, chosen by the admin (or let Errand make one: POST /v2/admin/projects/{id}/forge-webhook-secret); stored encrypted (needs ERRAND_SECRET_KEY), never returned. null removes it: every delivery is then refused.',
    ),
  forgeHandle: text('forgeHandle')
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, { error: FORGE_HANDLE })
    .describe(
      'The name a forge comment mentions to reach Errand, without the @ (default errand: @errand).',
    ),
  forgeLabel: text('forgeLabel')
    .trim()
    .min(1, { error: FORGE_LABEL })
    .max(100, { error: FORGE_LABEL })
    .describe('The label that makes a forge issue a job (default errand).'),
  draftPullRequests: z
    .boolean({ error: '"draftPullRequests" must be a boolean' })
    .describe('Open pull requests as drafts.'),
  commandsEnabled: z
    .boolean({ error: '"commandsEnabled" must be a boolean' })
    .describe(
      "Give the agent the run_command tool (the repository's commands in a sandbox, with the network of network.commands); offered only where the sandbox works. Default true.",
    ),
  setupCommand: z
    .string({ error: SETUP_COMMAND })
    .max(2000, { error: SETUP_COMMAND })
    .nullable()
    .describe(
      "A shell command run in the sandbox to prepare the checkout, e.g. npm ci (null: none). What it leaves in the checkout is kept as the project's environment, restored by later turns instead of running it again while the setup command, its network, the secrets' names and the key files stay the same.",
    ),
  maintenanceCommand: z
    .string({ error: MAINTENANCE_COMMAND })
    .max(2000, { error: MAINTENANCE_COMMAND })
    .nullable()
    .describe(
      "A shell command run in the sandbox after the environment is restored, instead of the setup command, e.g. npm run build (null: none). It gets the setup's network and secrets; changing it does not build the environment again.",
    ),
  // Empty clears it like null; only spaces is refused: a command typed blank is a mistake.
  checkCommand: z
    .string({ error: CHECK_COMMAND })
    .max(MAX_CHECK_COMMAND, { error: CHECK_COMMAND })
    .refine((command) => command === '' || command.trim().length > 0, { error: CHECK_COMMAND })
    .nullable()
    .describe(
      `The command that judges a best-of-N job's attempts (docs/eval.md): run by sh in the sandbox, with the project's environment, on each attempt's finished checkout; exit 0 passes, e.g. npm test. A job's own checkCommand replaces it. At most ${MAX_CHECK_COMMAND} characters; null or empty: none.`,
    ),
  environmentKeyFiles,
  setupNetwork: z
    .boolean({ error: '"setupNetwork" must be a boolean' })
    .describe(
      'The older way to say network.setup: true is "open", false "none". Not together with network.',
    ),
  network: networkField,
  commandTimeoutSeconds: limit(
    'commandTimeoutSeconds',
    COMMAND_LIMIT_RANGES.commandTimeoutSeconds.min,
    COMMAND_LIMIT_RANGES.commandTimeoutSeconds.max,
    'Wall time of one command, the longest timeout the agent may ask for',
  ),
  commandCpuSeconds: limit(
    'commandCpuSeconds',
    COMMAND_LIMIT_RANGES.commandCpuSeconds.min,
    COMMAND_LIMIT_RANGES.commandCpuSeconds.max,
    'CPU time of one command',
  ),
  commandMemoryMb: limit(
    'commandMemoryMb',
    COMMAND_LIMIT_RANGES.commandMemoryMb.min,
    COMMAND_LIMIT_RANGES.commandMemoryMb.max,
    'Memory of one command, in MB',
  ),
  commandProcesses: limit(
    'commandProcesses',
    COMMAND_LIMIT_RANGES.commandProcesses.min,
    COMMAND_LIMIT_RANGES.commandProcesses.max,
    'Processes and threads one command may have',
  ),
  commandFileSizeMb: limit(
    'commandFileSizeMb',
    COMMAND_LIMIT_RANGES.commandFileSizeMb.min,
    COMMAND_LIMIT_RANGES.commandFileSizeMb.max,
    'Largest file one command may write, in MB',
  ),
  commandDiskMb: limit(
    'commandDiskMb',
    COMMAND_LIMIT_RANGES.commandDiskMb.min,
    COMMAND_LIMIT_RANGES.commandDiskMb.max,
    "How much one command, or one turn of an engine, may grow the job's checkout, in MB",
  ),
  jobBudgetUsd: budget(
    'jobBudgetUsd',
    "What all turns of one job may cost: a turn that reaches it stops, and the job's follow-ups are refused",
  ),
  monthlyBudgetUsd: budget(
    'monthlyBudgetUsd',
    "What the project's jobs may cost in a calendar month (UTC): once it is spent, creates and follow-ups are refused (429 budget_exhausted)",
  ),
  autofixAttempts: z
    .number({ error: AUTOFIX_ATTEMPTS })
    .int({ error: AUTOFIX_ATTEMPTS })
    .min(0, { error: AUTOFIX_ATTEMPTS })
    .max(MAX_AUTOFIX_ATTEMPTS, { error: AUTOFIX_ATTEMPTS })
    .describe(PR_WATCH_TEXTS.autofixAttempts),
  autofixChecks,
  autoMerge: oneOf('autoMerge', AUTO_MERGE_MODES).describe(PR_WATCH_TEXTS.autoMerge),
  mergeMethod: oneOf('mergeMethod', MERGE_METHODS).describe(PR_WATCH_TEXTS.mergeMethod),
  conflictStrategy: oneOf('conflictStrategy', CONFLICT_STRATEGIES).describe(
    PR_WATCH_TEXTS.conflictStrategy,
  ),
  mcpServers: mcpServersField.nullable(),
};

const ENGINE = `"engine" must be one of ${ENGINE_NAMES.join(', ')}`;

const engineField = z
  .enum(ENGINE_NAMES, { error: ENGINE })
  .describe(
    "The agent that runs the project's turns: errand (Errand's own, the default), claude-code, codex or opencode, which must be installed on the server (errand engine install NAME) and fit the project's model: claude-code runs anthropic: models, codex openai:, opencode anthropic:, openai: or openai-compatible:.",
  );

const notAnObject = {
  error: (issue: z.core.$ZodRawIssue) =>
    issue.code === 'invalid_type' ? 'request body must be a JSON object' : undefined,
};

export const projectUpdateBody = z.strictObject(
  {
    name: fields.name.optional(),
    repository: fields.repository.optional(),
    ref: fields.ref.optional(),
    model: fields.model.optional(),
    forge: fields.forge.optional(),
    forgeUrl: fields.forgeUrl.optional(),
    forgeTokenEnv: fields.forgeTokenEnv.optional(),
    forgeToken: fields.forgeToken.optional(),
    githubApp: fields.githubApp.optional(),
    forgeWebhookSecret: fields.forgeWebhookSecret.optional(),
    forgeHandle: fields.forgeHandle.optional(),
    forgeLabel: fields.forgeLabel.optional(),
    draftPullRequests: fields.draftPullRequests.optional(),
    commandsEnabled: fields.commandsEnabled.optional(),
    setupCommand: fields.setupCommand.optional(),
    maintenanceCommand: fields.maintenanceCommand.optional(),
    checkCommand: fields.checkCommand.optional(),
    environmentKeyFiles: fields.environmentKeyFiles.optional(),
    setupNetwork: fields.setupNetwork.optional(),
    network: fields.network.optional(),
    commandTimeoutSeconds: fields.commandTimeoutSeconds.optional(),
    commandCpuSeconds: fields.commandCpuSeconds.optional(),
    commandMemoryMb: fields.commandMemoryMb.optional(),
    commandProcesses: fields.commandProcesses.optional(),
    commandFileSizeMb: fields.commandFileSizeMb.optional(),
    commandDiskMb: fields.commandDiskMb.optional(),
    jobBudgetUsd: fields.jobBudgetUsd.optional(),
    monthlyBudgetUsd: fields.monthlyBudgetUsd.optional(),
    engine: engineField.optional(),
    autofixAttempts: fields.autofixAttempts.optional(),
    autofixChecks: fields.autofixChecks.optional(),
    autoMerge: fields.autoMerge.optional(),
    mergeMethod: fields.mergeMethod.optional(),
    conflictStrategy: fields.conflictStrategy.optional(),
    mcpServers: fields.mcpServers.optional(),
  },
  notAnObject,
) satisfies z.ZodType<ProjectFields>;

/** A create: the update's fields, with the name and the repository required. */
export const projectCreateBody = projectUpdateBody.extend({
  name: fields.name,
  repository: fields.repository,
}) satisfies z.ZodType<ProjectFields>;
