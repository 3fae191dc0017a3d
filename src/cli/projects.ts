// `errand project create|update|show|list`: projects through the admin API, their forge, the
// sandbox settings of their commands and their pull request watch given as flags (the server
// checks the values' ranges).
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { CreateProjectInput, Project, UpdateProjectInput } from '../client/index.ts';
import {
  AUTO_MERGE_MODES,
  COMMANDS_NETWORK_MODES,
  CONFLICT_STRATEGIES,
  ENGINE_NAMES,
  MERGE_METHODS,
} from '../records/project.ts';
import { formatUsd } from '../words.ts';
import { ADMIN_NOTE, withAdminClient } from './api.ts';
import {
  boolFlag,
  defineCommand,
  type Family,
  print,
  type Values,
  wholeNumber,
} from './command.ts';
import { CliError, EXIT, UsageError } from './errors.ts';
import { readMcpServers } from './mcp-servers.ts';

const FORGE = 'FORGE';
const COMMANDS = 'COMMANDS';
const BUDGETS = 'BUDGETS';
const NETWORK = 'NETWORK';
const FORGE_WEBHOOK = 'FORGE_WEBHOOK';
const ENVIRONMENT = 'ENVIRONMENT';
const PR_WATCH = 'PR_WATCH';

/** The options both create and update take, after name and repo. */
const SETTINGS = {
  ref: { type: 'string', value: 'REF' },
  model: { type: 'string', value: 'provider:model' },
  engine: { type: 'string', choices: ENGINE_NAMES },
  forge: { type: 'string', choices: ['github', 'gitlab', 'gitea', 'git'], group: FORGE },
  'forge-url': { type: 'string', value: 'API_URL', group: FORGE },
  'draft-prs': { type: 'string', value: 'true|false', group: FORGE },
  'forge-token-env': { type: 'string', value: 'NAME', group: FORGE },
  'forge-token': { type: 'string', value: 'TOKEN', group: FORGE },
  'github-app-id': { type: 'string', value: 'ID', group: FORGE },
  'github-app-key-file': { type: 'string', value: 'PEM', group: FORGE },
  'github-installation-id': { type: 'string', value: 'ID', group: FORGE },
  'forge-webhook-secret': { type: 'string', value: 'SECRET', group: FORGE_WEBHOOK },
  'forge-handle': { type: 'string', value: 'NAME', group: FORGE_WEBHOOK },
  'forge-label': { type: 'string', value: 'LABEL', group: FORGE_WEBHOOK },
  commands: { type: 'string', value: 'true|false', group: COMMANDS },
  'setup-command': { type: 'string', value: 'CMD', group: COMMANDS },
  'check-command': { type: 'string', value: 'CMD', group: COMMANDS },
  'maintenance-command': { type: 'string', value: 'CMD', group: ENVIRONMENT },
  'key-files': { type: 'string', value: 'GLOBS', group: ENVIRONMENT },
  'setup-network': {
    type: 'string',
    // true and false: the older on/off setting, "open" and "none".
    choices: ['none', 'allowlist', 'open', 'true', 'false'],
    group: NETWORK,
  },
  'commands-network': { type: 'string', choices: COMMANDS_NETWORK_MODES, group: NETWORK },
  allow: { type: 'string', value: 'PATTERNS', group: NETWORK },
  'command-timeout': { type: 'string', value: 'S', group: COMMANDS },
  'command-cpu': { type: 'string', value: 'S', group: COMMANDS },
  'command-memory': { type: 'string', value: 'MB', group: COMMANDS },
  'command-processes': { type: 'string', value: 'N', group: COMMANDS },
  'command-file-size': { type: 'string', value: 'MB', group: COMMANDS },
  'command-disk': { type: 'string', value: 'MB', group: COMMANDS },
  'job-budget': { type: 'string', value: 'USD', group: BUDGETS },
  'monthly-budget': { type: 'string', value: 'USD', group: BUDGETS },
  'autofix-attempts': { type: 'string', value: 'N', group: PR_WATCH },
  'autofix-checks': { type: 'string', value: 'GLOBS', group: PR_WATCH },
  'auto-merge': { type: 'string', choices: AUTO_MERGE_MODES, group: PR_WATCH },
  'merge-method': { type: 'string', choices: MERGE_METHODS, group: PR_WATCH },
  'conflict-strategy': { type: 'string', choices: CONFLICT_STRATEGIES, group: PR_WATCH },
  'mcp-servers': { type: 'string', value: 'FILE|JSON' },
  json: { type: 'boolean' },
  'data-dir': { type: 'string', value: 'DIR', hidden: true },
} as const;

type SettingValues = Values<typeof SETTINGS> & { name?: string; repo?: string };

/** The command settings given as flags; the ranges are checked by the server. */
function commandFields(values: SettingValues): UpdateProjectInput {
  const body: UpdateProjectInput = {};
  const commands = boolFlag(values.commands, 'commands');
  if (commands !== undefined) body.commandsEnabled = commands;
  // An empty command removes it.
  if (values['setup-command'] !== undefined) body.setupCommand = values['setup-command'] || null;
  if (values['maintenance-command'] !== undefined)
    body.maintenanceCommand = values['maintenance-command'] || null;
  if (values['check-command'] !== undefined) body.checkCommand = values['check-command'] || null;
  const keyFiles = values['key-files'];
  // 'default': the common lock files; '': none. The server checks each glob.
  if (keyFiles !== undefined)
    body.environmentKeyFiles = keyFiles.trim() === 'default' ? null : splitGlobs(keyFiles);
  const limits = [
    ['command-timeout', 'commandTimeoutSeconds'],
    ['command-cpu', 'commandCpuSeconds'],
    ['command-memory', 'commandMemoryMb'],
    ['command-processes', 'commandProcesses'],
    ['command-file-size', 'commandFileSizeMb'],
    ['command-disk', 'commandDiskMb'],
  ] as const;
  for (const [flag, field] of limits) {
    const value = values[flag];
    if (value === undefined) continue;
    body[field] = value === 'default' ? null : wholeNumber(value, flag);
  }
  return body;
}

/**
 * Globs given as one flag: separated by commas (and by white space, unless `spaces` says the
 * globs may hold some, as check names do: "build (ubuntu)"), except a comma inside braces,
 * which is the glob's own (`deps/{a,b}.lock`).
 */
function splitGlobs(text: string, spaces: 'separate' | 'keep' = 'separate'): string[] {
  const globs: string[] = [];
  let glob = '';
  let depth = 0;
  const end = () => {
    const trimmed = glob.trim();
    if (trimmed) globs.push(trimmed);
    glob = '';
  };
  for (const c of text) {
    if (c === '{') depth += 1;
    else if (c === '}') depth = Math.max(0, depth - 1);
    if ((c === ',' && depth === 0) || (spaces === 'separate' && /\s/.test(c))) end();
    else glob += c;
  }
  end();
  return globs;
}

/** The pull request watch's settings given as flags; the ranges are checked by the server. */
function prWatchFields(values: SettingValues): UpdateProjectInput {
  const body: UpdateProjectInput = {};
  const attempts = wholeNumber(values['autofix-attempts'], 'autofix-attempts');
  if (attempts !== undefined) body.autofixAttempts = attempts;
  const checks = values['autofix-checks'];
  // 'all' (or '', which names no check): every check, the default.
  if (checks !== undefined) {
    const globs = checks.trim() === 'all' ? [] : splitGlobs(checks, 'keep');
    body.autofixChecks = globs.length > 0 ? globs : null;
  }
  if (values['auto-merge'] !== undefined) body.autoMerge = values['auto-merge'];
  if (values['merge-method'] !== undefined) body.mergeMethod = values['merge-method'];
  if (values['conflict-strategy'] !== undefined)
    body.conflictStrategy = values['conflict-strategy'];
  return body;
}

/** The network policy given as flags: each part given is sent, the others kept by the server. */
function networkFields(values: SettingValues): UpdateProjectInput {
  const network: NonNullable<UpdateProjectInput['network']> = {};
  const setup = values['setup-network'];
  if (setup !== undefined) {
    network.setup = setup === 'true' ? 'open' : setup === 'false' ? 'none' : setup;
  }
  if (values['commands-network'] !== undefined) network.commands = values['commands-network'];
  // Comma- or space-separated; '' empties the list. The server checks each pattern.
  if (values.allow !== undefined) network.allow = values.allow.split(/[\s,]+/).filter(Boolean);
  return Object.keys(network).length > 0 ? { network } : {};
}

/** The budgets given as flags: US dollars, or `default` or '' for none. */
function budgetFields(values: SettingValues): UpdateProjectInput {
  const body: UpdateProjectInput = {};
  const flags = [
    ['job-budget', 'jobBudgetUsd'],
    ['monthly-budget', 'monthlyBudgetUsd'],
  ] as const;
  for (const [flag, field] of flags) {
    const value = values[flag]?.trim().replace(/^\$/, '');
    if (value === undefined) continue;
    if (value === '' || value === 'default') {
      body[field] = null;
      continue;
    }
    const usd = Number(value);
    if (!/^(\d+(\.\d*)?|\.\d+)$/.test(value) || !(usd > 0))
      throw new UsageError(
        `--${flag} must be an amount of US dollars above 0 (or default for none)`,
      );
    body[field] = usd;
  }
  return body;
}

/** The project fields given as flags; the GitHub App's key is read from its file here. */
async function projectFields(values: SettingValues): Promise<UpdateProjectInput> {
  const body: UpdateProjectInput = {};
  if (values.name !== undefined) body.name = values.name;
  if (values.repo !== undefined) {
    // A relative path means a repository on this disk; the server needs it absolute.
    body.repository = values.repo.startsWith('.') ? path.resolve(values.repo) : values.repo;
  }
  if (values.ref !== undefined) body.ref = values.ref;
  if (values.model !== undefined) body.model = values.model;
  if (values.engine !== undefined) body.engine = values.engine;
  if (values.forge !== undefined) body.forge = values.forge;
  if (values['forge-url'] !== undefined) body.forgeUrl = values['forge-url'];
  if (values['forge-token-env'] !== undefined) body.forgeTokenEnv = values['forge-token-env'];
  if (values['forge-token'] !== undefined) body.forgeToken = values['forge-token'];
  // An empty secret removes it.
  if (values['forge-webhook-secret'] !== undefined)
    body.forgeWebhookSecret = values['forge-webhook-secret'] || null;
  if (values['forge-handle'] !== undefined) body.forgeHandle = values['forge-handle'];
  if (values['forge-label'] !== undefined) body.forgeLabel = values['forge-label'];
  const drafts = boolFlag(values['draft-prs'], 'draft-prs');
  if (drafts !== undefined) body.draftPullRequests = drafts;
  // `none` clears the setting.
  if (values['mcp-servers'] !== undefined)
    body.mcpServers = await readMcpServers(values['mcp-servers']);
  Object.assign(
    body,
    commandFields(values),
    networkFields(values),
    budgetFields(values),
    prWatchFields(values),
  );
  const appId = values['github-app-id'];
  const keyFile = values['github-app-key-file'];
  const installationId = values['github-installation-id'];
  const app = [appId, keyFile, installationId];
  if (app.some((v) => v !== undefined)) {
    if (appId === undefined || keyFile === undefined || installationId === undefined) {
      throw new UsageError(
        'a GitHub App needs --github-app-id, --github-app-key-file and --github-installation-id',
      );
    }
    let privateKey: string;
    try {
      privateKey = await readFile(keyFile, 'utf8');
    } catch {
      throw new CliError(`cannot read the GitHub App key file ${keyFile}`);
    }
    body.githubApp = { appId, installationId, privateKey };
  }
  return body;
}

function summary(verb: string, p: Project): string {
  return `${verb} project ${p.id} (${p.name}: ${p.repository} @ ${p.ref}${p.engine === 'errand' ? '' : `; engine ${p.engine}`}; forge ${p.forge.kind}, credentials ${p.forge.credentials}; commands ${p.commandsEnabled ? 'on' : 'off'}${p.setupCommand ? ', with a setup command' : ''}${p.maintenanceCommand ? ' and a maintenance command' : ''}${p.checkCommand ? '; attempts checked by a command' : ''}${network(p)}${budgets(p)}${p.autoMerge === 'off' ? '' : `; merges its pull requests when ${mergeWhen(p)}`})`;
}

/** When the watch merges a pull request, in words. */
function mergeWhen(p: Project): string {
  return p.autoMerge === 'green-and-approved' ? 'green and approved' : 'green';
}

/** What the pull request watch does, as `project show` says it. */
function prWatch(p: Project): string[] {
  const checks = p.autofixChecks === null ? 'every check' : p.autofixChecks.join(', ');
  return [
    `  autofix:  ${p.autofixAttempts === 0 ? 'off' : `up to ${p.autofixAttempts} turn${p.autofixAttempts === 1 ? '' : 's'} in a row for failing checks (${checks})`}`,
    `  merge:    ${p.autoMerge === 'off' ? 'by a person (auto-merge off)' : `when ${mergeWhen(p)}`}, method ${p.mergeMethod}`,
    `  conflict: ${p.conflictStrategy === 'merge' ? 'a turn merges the base into the branch' : 'a turn rebases the branch onto the base'}`,
  ];
}

/** A project, one fact a line. */
function details(p: Project): string {
  const setup = [
    ...(p.setupCommand ? [`setup: ${p.setupCommand}`] : []),
    ...(p.maintenanceCommand ? [`maintenance: ${p.maintenanceCommand}`] : []),
  ];
  return [
    `${p.id} (${p.name})`,
    `  source:   ${p.repository} @ ${p.ref}`,
    `  model:    ${p.model ?? "the server's default"}${p.engine === 'errand' ? '' : `; engine ${p.engine}`}`,
    `  forge:    ${p.forge.kind}${p.forge.apiUrl ? ` (${p.forge.apiUrl})` : ''}, credentials ${p.forge.credentials}${p.forge.kind === 'git' ? '' : `; @${p.forgeHandle}, label ${p.forgeLabel}, webhook secret ${p.forgeWebhookSecretSet ? 'set' : 'not set'}`}`,
    `  commands: ${p.commandsEnabled ? 'on' : 'off'}${setup.length > 0 ? `; ${setup.join('; ')}` : ''}${network(p)}`,
    ...(p.checkCommand ? [`  check:    ${p.checkCommand}`] : []),
    ...(budgets(p) ? [`  budgets:  ${budgets(p).replace(/^; budget /, '')}`] : []),
    ...prWatch(p),
    `  created:  ${p.createdAt}`,
    `  updated:  ${p.updatedAt}`,
  ].join('\n');
}

/** The network policy, where the project has one. */
function network(p: Project): string {
  const { setup, commands, allow } = p.network;
  if (setup === 'none' && commands === 'none') return '';
  const list = allow.length > 0 ? ` (${allow.join(', ')})` : '';
  return `; network: setup ${setup}, commands ${commands}${setup === 'allowlist' || commands === 'allowlist' ? list : ''}`;
}

function budgets(p: Project): string {
  const set = [
    ...(p.jobBudgetUsd !== null ? [`${formatUsd(p.jobBudgetUsd)} per job`] : []),
    ...(p.monthlyBudgetUsd !== null ? [`${formatUsd(p.monthlyBudgetUsd)} per month`] : []),
  ];
  return set.length > 0 ? `; budget ${set.join(', ')}` : '';
}

const create = defineCommand({
  name: 'project create',
  options: {
    name: { type: 'string', value: 'NAME', required: true },
    repo: { type: 'string', value: 'URL', required: true },
    ...SETTINGS,
  },
  summary: 'add a project: the repository its jobs work on, and where their pull requests go',
  async run({ values, io }) {
    const fields = await projectFields(values);
    const body: CreateProjectInput = {
      ...fields,
      name: values.name,
      repository: fields.repository ?? values.repo,
    };
    const project = await withAdminClient(io, values['data-dir'], (c) => c.createProject(body));
    print(io, values.json, project, summary('created', project));
    return EXIT.ok;
  },
});

const update = defineCommand({
  name: 'project update',
  args: ['ID'],
  options: {
    name: { type: 'string', value: 'NAME' },
    repo: { type: 'string', value: 'URL' },
    ...SETTINGS,
  },
  summary: 'change what is given (the jobs already created keep their repository and ref)',
  async run({ values, args: [id = ''], io }) {
    const body = await projectFields(values);
    const project = await withAdminClient(io, values['data-dir'], (c) => c.updateProject(id, body));
    print(io, values.json, project, summary('updated', project));
    return EXIT.ok;
  },
});

const forgeWebhook = defineCommand({
  name: 'project forge-webhook',
  args: ['ID'],
  options: { json: SETTINGS.json, 'data-dir': SETTINGS['data-dir'] },
  summary:
    "a new secret for the forge's webhook deliveries, shown once, with the URL and the events to give the forge",
  async run({ values, args: [id = ''], io }) {
    const made = await withAdminClient(io, values['data-dir'], (c) =>
      c.createForgeWebhookSecret(id),
    );
    print(
      io,
      values.json,
      made,
      [
        `made a new forge webhook secret for project ${made.project.id} (the previous one, if any, no longer works)`,
        `payload URL:  ${made.url}`,
        'content type: application/json',
        `secret (shown once, it will not be shown again):\n  ${made.secret}`,
        `events:       ${made.events.join(', ')}`,
        `comments that mention @${made.project.forgeHandle}, and issues labelled '${made.project.forgeLabel}', reach Errand`,
      ].join('\n'),
    );
    return EXIT.ok;
  },
});

const show = defineCommand({
  name: 'project show',
  args: ['ID'],
  options: { json: SETTINGS.json, 'data-dir': SETTINGS['data-dir'] },
  summary: "a project's settings, its pull request watch's among them",
  async run({ values, args: [id = ''], io }) {
    const project = await withAdminClient(io, values['data-dir'], (c) => c.getProject(id));
    print(io, values.json, project, details(project));
    return EXIT.ok;
  },
});

const list = defineCommand({
  name: 'project list',
  options: { json: SETTINGS.json, 'data-dir': SETTINGS['data-dir'] },
  summary: 'every project',
  async run({ values, io }) {
    const projects = await withAdminClient(io, values['data-dir'], (c) => c.listProjects());
    const line = (p: Project) =>
      `${p.id}  ${p.name}  ${p.repository} @ ${p.ref}${p.model ? `  ${p.model}` : ''}${p.engine === 'errand' ? '' : `  (${p.engine})`}`;
    print(
      io,
      values.json,
      projects,
      projects.length === 0 ? 'no projects' : projects.map(line).join('\n'),
    );
    return EXIT.ok;
  },
});

export const projects: Family = {
  name: 'project',
  commands: [create, update, show, list, forgeWebhook],
  groups: {
    [FORGE]:
      'credentials: one of --forge-token-env, --forge-token, or the three --github-app options',
    [FORGE_WEBHOOK]:
      "comments and labels on the forge: the secret its webhook signs with ('' removes it; 'errand project forge-webhook ID' makes one), the @handle comments mention and the label that makes an issue a job (both 'errand' by default)",
    [COMMANDS]:
      "--setup-command '' removes the command; --check-command judges a best-of-N job's attempts (exit 0 passes; '' removes it; see docs/eval.md); a limit given as 'default' returns to the sandbox's default",
    [ENVIRONMENT]:
      "the environment, what the setup command leaves in the checkout and later turns restore: the command run after a restore ('' removes it), and the globs of the files whose content keys it, comma-separated ('default': the common lock files; '': none). See errand environment",
    [NETWORK]:
      "what commands may reach: the setup command's network (none, allowlist or open), the agent's and an engine's (none or allowlist), and the allowlist's patterns, comma-separated (host, *.domain, host:port, or a preset: @npm, @pypi, @github, …; '' empties it)",
    [PR_WATCH]:
      "what Errand does with a job's pull request: how many turns in a row may fix its failing checks (0 to 10, 0: none; default 2), the globs of the check names that count, comma-separated ('all': every check, the default), when it merges it (off, the default; green; green-and-approved), how (merge, squash or rebase), and how a turn brings it up to a base it conflicts with (merge or rebase the branch)",
    [BUDGETS]:
      "US dollars at the model's list prices, for all turns of one job and for a calendar month (UTC); 'default' or '' removes a budget; a budget needs a model whose prices are known",
  },
  subcommandPages: false,
  outro: ADMIN_NOTE,
};
