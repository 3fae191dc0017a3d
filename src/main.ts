// The `errand` command: `serve`, `worker`, `migrate`, `export` and `import` (src/cli/transfer.ts),
// the job commands `job …` (src/cli/jobs.ts, clients of the job API), and the admin commands
// `project …`, `key …` and `webhook …`, which are clients of the admin API.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { parseArgs } from 'node:util';
import { ApiClient, CliError } from './cli/client.ts';
import { runJob } from './cli/jobs.ts';
import {
  COMMAND_USAGE,
  EXIT,
  errandVersion,
  parseCommandLine,
  USAGE,
  UsageError,
} from './cli/usage.ts';
import { ConfigError, type ConfigOverrides, loadConfig } from './config.ts';
import type { DeliveryRecord, WebhookRecord, WebhookWithSecret } from './events/webhooks/types.ts';
import { adminKeyPath } from './keys/bootstrap.ts';
import type { KeyRecord } from './keys/service.ts';
import type { ProjectRecord } from './projects/service.ts';

const options = {
  host: { type: 'string' },
  port: { type: 'string' },
  'data-dir': { type: 'string' },
  'no-worker': { type: 'boolean' },
  'no-dashboard': { type: 'boolean' },
  concurrency: { type: 'string' },
  name: { type: 'string' },
  repo: { type: 'string' },
  ref: { type: 'string' },
  model: { type: 'string' },
  forge: { type: 'string' },
  'forge-url': { type: 'string' },
  'forge-token-env': { type: 'string' },
  'forge-token': { type: 'string' },
  'github-app-id': { type: 'string' },
  'github-app-key-file': { type: 'string' },
  'github-installation-id': { type: 'string' },
  'draft-prs': { type: 'string' },
  commands: { type: 'string' },
  'setup-command': { type: 'string' },
  'setup-network': { type: 'string' },
  'command-timeout': { type: 'string' },
  'command-cpu': { type: 'string' },
  'command-memory': { type: 'string' },
  'command-processes': { type: 'string' },
  'command-file-size': { type: 'string' },
  project: { type: 'string' },
  admin: { type: 'boolean' },
  url: { type: 'string' },
  events: { type: 'string' },
  description: { type: 'string' },
  disabled: { type: 'boolean' },
  enabled: { type: 'string' },
  'overlap-hours': { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  webhook: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type OptionName = keyof typeof options;

/** The options of one command, and --help; any other is an unknown option for that command. */
function only(...names: OptionName[]): Partial<typeof options> {
  return Object.fromEntries(
    names.map((name) => [name, options[name]]).concat([['help', options.help]]),
  );
}

const FORGE_FLAGS: OptionName[] = [
  'forge',
  'forge-url',
  'forge-token-env',
  'forge-token',
  'github-app-id',
  'github-app-key-file',
  'github-installation-id',
  'draft-prs',
];
const COMMAND_FLAGS: OptionName[] = [
  'commands',
  'setup-command',
  'setup-network',
  'command-timeout',
  'command-cpu',
  'command-memory',
  'command-processes',
  'command-file-size',
];

const COMMAND_OPTIONS: Readonly<Record<string, Partial<typeof options>>> = {
  serve: only('host', 'port', 'data-dir', 'no-worker', 'no-dashboard', 'concurrency'),
  worker: only('data-dir', 'concurrency'),
  migrate: only('data-dir'),
  export: only('data-dir'),
  import: only('data-dir'),
  mcp: only('data-dir'),
  project: only(
    'data-dir',
    'name',
    'repo',
    'ref',
    'model',
    ...FORGE_FLAGS,
    ...COMMAND_FLAGS,
    'json',
  ),
  key: only('data-dir', 'project', 'admin', 'name', 'json'),
  webhook: only(
    'data-dir',
    'project',
    'url',
    'events',
    'description',
    'disabled',
    'enabled',
    'overlap-hours',
    'limit',
    'cursor',
    'webhook',
    'json',
  ),
};

type Values = ReturnType<
  typeof parseArgs<{ options: typeof options; allowPositionals: true }>
>['values'];

function intFlag(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${name} must be a whole number`);
  return n;
}

function overrides(values: Values): ConfigOverrides {
  const o: ConfigOverrides = {};
  if (values.host !== undefined) o.host = values.host;
  const port = intFlag(values.port, 'port');
  if (port !== undefined) o.port = port;
  if (values['data-dir'] !== undefined) o.dataDir = values['data-dir'];
  const concurrency = intFlag(values.concurrency, 'concurrency');
  if (concurrency !== undefined) o.concurrency = concurrency;
  if (values['no-dashboard']) o.dashboard = false;
  return o;
}

function print(json: boolean | undefined, value: unknown, text: string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);
}

function required(value: string | undefined, flag: string): string {
  if (!value) throw new UsageError(`--${flag} is required`);
  return value;
}

async function runService(values: Values, mode: 'serve' | 'worker'): Promise<void> {
  const config = loadConfig(process.env, overrides(values));
  if (mode === 'worker' && !config.databaseUrl) {
    throw new CliError(
      'errand worker needs DATABASE_URL: with the embedded database, run errand serve (it runs workers)',
    );
  }
  // A worker serves no pages, so it has no address of its own to put in review links and pull
  // requests; guessing one (its default host and port) sent users nowhere.
  if (mode === 'worker' && !config.publicUrl) {
    throw new CliError(
      "errand worker needs ERRAND_PUBLIC_URL: the address where users reach Errand's API (e.g. https://errand.example.com), for the review links and pull requests its turns write",
    );
  }
  // Loaded here, not at the top: the admin commands need none of the service's modules.
  const { startService } = await import('./service.ts');
  const service = await startService(config, {
    api: mode === 'serve',
    worker: mode === 'worker' || !values['no-worker'],
    onAdminKey: (key) =>
      process.stdout.write(
        `\nAdmin API key (shown once; also saved to ${adminKeyPath(config.dataDir)}):\n  ${key}\n\n`,
      ),
  });
  if (service.url) process.stdout.write(`errand listening on ${service.url}\n`);
  await new Promise<void>((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        process.stderr.write(`${signal} again: exiting now\n`);
        process.exit(1);
      }
      stopping = true;
      service.ctx.log.info({ signal }, 'stopping');
      service.stop().then(resolve, (err: unknown) => {
        service.ctx.log.error({ err }, 'error while stopping');
        process.exitCode = 1;
        resolve();
      });
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

function boolFlag(value: string | undefined, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value !== 'true' && value !== 'false')
    throw new UsageError(`--${name} must be true or false`);
  return value === 'true';
}

/** The command settings given as flags; the ranges are checked by the server. */
function commandFields(values: Values): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const commands = boolFlag(values.commands, 'commands');
  if (commands !== undefined) body.commandsEnabled = commands;
  // An empty command removes it.
  if (values['setup-command'] !== undefined) body.setupCommand = values['setup-command'] || null;
  const network = boolFlag(values['setup-network'], 'setup-network');
  if (network !== undefined) body.setupNetwork = network;
  const limits = [
    ['command-timeout', 'commandTimeoutSeconds'],
    ['command-cpu', 'commandCpuSeconds'],
    ['command-memory', 'commandMemoryMb'],
    ['command-processes', 'commandProcesses'],
    ['command-file-size', 'commandFileSizeMb'],
  ] as const;
  for (const [flag, field] of limits) {
    const value = values[flag];
    if (value === undefined) continue;
    body[field] = value === 'default' ? null : intFlag(value, flag);
  }
  return body;
}

/** The project fields given as flags; the GitHub App's key is read from its file here. */
async function projectBody(values: Values): Promise<Record<string, unknown>> {
  const body: Record<string, unknown> = {};
  if (values.name !== undefined) body.name = values.name;
  if (values.repo !== undefined) {
    // A relative path means a repository on this disk; the server needs it absolute.
    body.repository = values.repo.startsWith('.') ? path.resolve(values.repo) : values.repo;
  }
  if (values.ref !== undefined) body.ref = values.ref;
  if (values.model !== undefined) body.model = values.model;
  if (values.forge !== undefined) body.forge = values.forge;
  if (values['forge-url'] !== undefined) body.forgeUrl = values['forge-url'];
  if (values['forge-token-env'] !== undefined) body.forgeTokenEnv = values['forge-token-env'];
  if (values['forge-token'] !== undefined) body.forgeToken = values['forge-token'];
  if (values['draft-prs'] !== undefined) {
    if (values['draft-prs'] !== 'true' && values['draft-prs'] !== 'false') {
      throw new UsageError('--draft-prs must be true or false');
    }
    body.draftPullRequests = values['draft-prs'] === 'true';
  }
  Object.assign(body, commandFields(values));
  const app = [
    values['github-app-id'],
    values['github-app-key-file'],
    values['github-installation-id'],
  ];
  if (app.some((v) => v !== undefined)) {
    if (app.some((v) => v === undefined)) {
      throw new UsageError(
        'a GitHub App needs --github-app-id, --github-app-key-file and --github-installation-id',
      );
    }
    let privateKey: string;
    try {
      privateKey = await readFile(values['github-app-key-file'] ?? '', 'utf8');
    } catch {
      throw new CliError(`cannot read the GitHub App key file ${values['github-app-key-file']}`);
    }
    body.githubApp = {
      appId: values['github-app-id'],
      installationId: values['github-installation-id'],
      privateKey,
    };
  }
  return body;
}

async function runProject(
  values: Values,
  sub: string | undefined,
  arg: string | undefined,
): Promise<void> {
  const client = await ApiClient.fromConfig(loadConfig(process.env, overrides(values)));
  if (sub === 'create' || sub === 'update') {
    const body = await projectBody(values);
    const project =
      sub === 'create'
        ? await client.request<ProjectRecord>('POST', '/v2/admin/projects', {
            ...body,
            name: required(values.name, 'name'),
            repository: required(body.repository as string | undefined, 'repo'),
          })
        : await client.request<ProjectRecord>(
            'PATCH',
            `/v2/admin/projects/${encodeURIComponent(required(arg, 'ID (errand project update ID …)'))}`,
            body,
          );
    print(
      values.json,
      project,
      `${sub === 'create' ? 'created' : 'updated'} project ${project.id} (${project.name}: ${project.repository} @ ${project.ref}; forge ${project.forge.kind}, credentials ${project.forge.credentials}; commands ${project.commandsEnabled ? 'on' : 'off'}${project.setupCommand ? ', with a setup command' : ''})`,
    );
  } else if (sub === 'list') {
    const { projects } = await client.request<{ projects: ProjectRecord[] }>(
      'GET',
      '/v2/admin/projects',
    );
    print(
      values.json,
      projects,
      projects.length === 0
        ? 'no projects'
        : projects
            .map(
              (p) =>
                `${p.id}  ${p.name}  ${p.repository} @ ${p.ref}${p.model ? `  ${p.model}` : ''}`,
            )
            .join('\n'),
    );
  } else {
    throw new UsageError(sub ? `unknown command: project ${sub}` : 'missing the subcommand');
  }
}

async function runKey(
  values: Values,
  sub: string | undefined,
  arg: string | undefined,
): Promise<void> {
  const client = await ApiClient.fromConfig(loadConfig(process.env, overrides(values)));
  if (sub === 'create') {
    if (Boolean(values.admin) === Boolean(values.project))
      throw new UsageError('give exactly one of --project ID or --admin');
    const created = await client.request<KeyRecord & { key: string }>('POST', '/v2/admin/keys', {
      ...(values.admin ? { admin: true } : { projectId: values.project }),
      ...(values.name ? { name: values.name } : {}),
    });
    print(
      values.json,
      created,
      `created ${created.admin ? 'admin' : `project ${created.projectId}`} key ${created.id} (shown once):\n  ${created.key}`,
    );
  } else if (sub === 'list') {
    const { keys } = await client.request<{ keys: KeyRecord[] }>('GET', '/v2/admin/keys');
    print(
      values.json,
      keys,
      keys.length === 0
        ? 'no keys'
        : keys
            .map(
              (k) =>
                `${k.id}  ${k.start}…  ${k.admin ? 'admin' : k.projectId}  ${k.name ?? ''}${k.revokedAt ? '  (revoked)' : ''}`,
            )
            .join('\n'),
    );
  } else if (sub === 'revoke') {
    const id = arg ?? '';
    if (!id) throw new UsageError('missing ID');
    const key = await client.request<KeyRecord>(
      'POST',
      `/v2/admin/keys/${encodeURIComponent(id)}/revoke`,
    );
    print(values.json, key, `revoked key ${key.id}`);
  } else {
    throw new UsageError(sub ? `unknown command: key ${sub}` : 'missing the subcommand');
  }
}

/** An endpoint on one line, for lists and after a change. */
function webhookLine(w: WebhookRecord): string {
  return `${w.id}  ${w.url}  ${w.events.join(',')}  ${w.enabled ? 'enabled' : 'disabled'}${
    w.description ? `  ${w.description}` : ''
  }`;
}

function webhookDetails(w: WebhookRecord): string {
  return [
    `${w.id} (project ${w.projectId})`,
    `  url:          ${w.url}`,
    `  events:       ${w.events.join(', ')}`,
    `  enabled:      ${w.enabled ? 'yes' : 'no'}`,
    `  description:  ${w.description ?? ''}`,
    ...(w.previousSecretExpiresAt
      ? [`  previous secret also signs until ${w.previousSecretExpiresAt}`]
      : []),
    `  created:      ${w.createdAt}`,
    `  updated:      ${w.updatedAt}`,
  ].join('\n');
}

/** The secret is in the API's answer this once: say so, since nothing can show it again. */
function secretText(w: WebhookWithSecret): string {
  return `signing secret (shown once, it will not be shown again; store it where the receiver verifies signatures):\n  ${w.secret}`;
}

function deliveryLine(d: DeliveryRecord): string {
  const last = d.attempts.at(-1);
  const outcome = !last
    ? 'not tried yet'
    : last.status !== null
      ? `last status ${last.status}`
      : `last: no answer${last.error ? ` (${last.error})` : ''}`;
  return `${d.id}  ${d.type}  ${d.jobId}  ${d.state}  attempts ${d.attempts.length}  ${outcome}  ${d.createdAt}`;
}

/** The endpoint fields given as flags, as the admin API's body. */
function webhookBody(values: Values): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (values.url !== undefined) body.url = values.url;
  if (values.events !== undefined) {
    // The server checks the names, so the list of valid ones lives in one place.
    body.events = values.events
      .split(',')
      .map((e) => e.trim())
      .filter((e) => e !== '');
  }
  // An empty description removes it.
  if (values.description !== undefined) body.description = values.description || null;
  if (values.enabled !== undefined) {
    if (values.enabled !== 'true' && values.enabled !== 'false') {
      throw new UsageError('--enabled must be true or false');
    }
    if (values.disabled) throw new UsageError('give one of --enabled and --disabled');
    body.enabled = values.enabled === 'true';
  }
  if (values.disabled) body.enabled = false;
  return body;
}

async function runWebhook(
  values: Values,
  sub: string | undefined,
  arg: string | undefined,
): Promise<void> {
  const subs = ['create', 'list', 'get', 'update', 'delete', 'rotate', 'deliveries', 'redeliver'];
  if (!sub || !subs.includes(sub)) {
    throw new UsageError(sub ? `unknown command: webhook ${sub}` : 'missing the subcommand');
  }
  const client = await ApiClient.fromConfig(loadConfig(process.env, overrides(values)));
  const base = `/v2/admin/projects/${encodeURIComponent(required(values.project, 'project'))}/webhooks`;
  const one = () => {
    if (!arg) throw new UsageError('missing ID');
    return `${base}/${encodeURIComponent(arg)}`;
  };
  if (sub === 'create') {
    const created = await client.request<WebhookWithSecret>('POST', base, {
      ...webhookBody(values),
      url: required(values.url, 'url'),
    });
    print(values.json, created, `created webhook ${webhookLine(created)}\n${secretText(created)}`);
  } else if (sub === 'list') {
    const { webhooks } = await client.request<{ webhooks: WebhookRecord[] }>('GET', base);
    print(
      values.json,
      webhooks,
      webhooks.length === 0 ? 'no webhooks' : webhooks.map(webhookLine).join('\n'),
    );
  } else if (sub === 'get') {
    const webhook = await client.request<WebhookRecord>('GET', one());
    print(values.json, webhook, webhookDetails(webhook));
  } else if (sub === 'update') {
    const path = one();
    const body = webhookBody(values);
    if (Object.keys(body).length === 0) {
      throw new UsageError(
        'nothing to change: give --url, --events, --description, --enabled or --disabled',
      );
    }
    const webhook = await client.request<WebhookRecord>('PATCH', path, body);
    print(values.json, webhook, `updated webhook ${webhookLine(webhook)}`);
  } else if (sub === 'delete') {
    const path = one();
    await client.request<undefined>('DELETE', path);
    print(values.json, { id: arg, deleted: true }, `deleted webhook ${arg}`);
  } else if (sub === 'rotate') {
    const path = one();
    const hours = intFlag(values['overlap-hours'], 'overlap-hours') ?? 24;
    const rotated = await client.request<WebhookWithSecret>('POST', `${path}/rotate-secret`, {
      overlapSeconds: hours * 3600,
    });
    print(
      values.json,
      rotated,
      `rotated the secret of webhook ${rotated.id}; ${
        rotated.previousSecretExpiresAt
          ? `the previous secret also signs until ${rotated.previousSecretExpiresAt}`
          : 'the previous secret no longer signs'
      }\n${secretText(rotated)}`,
    );
  } else if (sub === 'deliveries') {
    const path = one();
    const query = new URLSearchParams();
    const limit = intFlag(values.limit, 'limit');
    if (limit !== undefined) query.set('limit', String(limit));
    if (values.cursor !== undefined) query.set('cursor', values.cursor);
    const listed = await client.request<{
      deliveries: DeliveryRecord[];
      nextCursor: string | null;
    }>('GET', `${path}/deliveries${query.size ? `?${query.toString()}` : ''}`);
    print(
      values.json,
      listed,
      [
        ...(listed.deliveries.length === 0
          ? ['no deliveries']
          : listed.deliveries.map(deliveryLine)),
        ...(listed.nextCursor ? [`older deliveries: --cursor ${listed.nextCursor}`] : []),
      ].join('\n'),
    );
  } else {
    // redeliver: its argument is a delivery, the webhook is a flag.
    if (!arg) throw new UsageError('missing DELIVERY_ID');
    const webhook = encodeURIComponent(required(values.webhook, 'webhook'));
    const delivery = await client.request<DeliveryRecord>(
      'POST',
      `${base}/${webhook}/deliveries/${encodeURIComponent(arg)}/redeliver`,
    );
    print(values.json, delivery, `delivery ${delivery.id} queued again (${delivery.state})`);
  }
}

/** `errand help [COMMAND [SUBCOMMAND]]`: the usage asked for, on stdout. */
async function help(topic: string | undefined, sub: string | undefined): Promise<number> {
  if (topic === undefined) {
    process.stdout.write(USAGE);
    return EXIT.ok;
  }
  // The job subcommands have a usage each; an admin subcommand is on its command's page.
  if (topic === 'job') return runJob(['--help', ...(sub === undefined ? [] : [sub])], jobIo);
  const usage = COMMAND_USAGE[topic];
  if (!usage) throw new UsageError(`unknown command: ${topic}`, USAGE);
  process.stdout.write(usage);
  return EXIT.ok;
}

/** Errors of the database's start whose message says what to do (db/embedded). */
const KNOWN_ERRORS = new Set([
  'DatabaseLockedError',
  'EmbeddedStartError',
  'EmbeddedUnsupportedError',
]);

/** The command a usage error is about, for the usage printed with it. */
let current: string | undefined;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h') {
    process.stdout.write(USAGE);
    return EXIT.ok;
  }
  if (command === '--version') {
    process.stdout.write(`${errandVersion()}\n`);
    return EXIT.ok;
  }
  if (command === 'help') return help(rest[0], rest[1]);
  if (command === 'job') {
    current = 'job';
    return runJob(rest, jobIo);
  }
  const table = COMMAND_OPTIONS[command];
  if (!table) {
    throw new UsageError(
      command.startsWith('-')
        ? `unknown option ${command} (the command comes first: errand <command> [options])`
        : `unknown command: ${command}`,
      USAGE,
    );
  }
  current = command;
  const parsed = parseCommandLine(rest, table);
  // Each command's table is a part of `options`: its values are a part of theirs.
  const values = parsed.values as Values;
  const [sub, arg] = parsed.positionals;
  if (values.help) {
    process.stdout.write(COMMAND_USAGE[command] ?? USAGE);
    return EXIT.ok;
  }
  switch (command) {
    case 'serve':
    case 'worker':
      await runService(values, command);
      return EXIT.ok;
    case 'migrate': {
      const config = loadConfig(process.env, overrides(values));
      const { openDatabase } = await import('./db/database.ts');
      const { migrate } = await import('./db/migrate.ts');
      const handle = await openDatabase({
        dataDir: config.dataDir,
        databaseUrl: config.databaseUrl,
      });
      try {
        const applied = await migrate(handle);
        process.stdout.write(
          applied.length ? `applied ${applied.join(', ')}\n` : 'database is up to date\n',
        );
      } finally {
        await handle.close();
      }
      return EXIT.ok;
    }
    case 'export':
    case 'import': {
      if (sub === undefined) throw new UsageError('missing FILE');
      if (arg !== undefined) throw new UsageError(`unexpected argument ${arg}`);
      const config = loadConfig(process.env, overrides(values));
      const { runExport, runImport } = await import('./cli/transfer.ts');
      await (command === 'export' ? runExport : runImport)(config, sub);
      return EXIT.ok;
    }
    case 'mcp':
      await (await import('./mcp/server.ts')).runMcp(loadConfig(process.env, overrides(values)));
      return EXIT.ok;
    case 'project':
      await runProject(values, sub, arg);
      return EXIT.ok;
    case 'key':
      await runKey(values, sub, arg);
      return EXIT.ok;
    case 'webhook':
      await runWebhook(values, sub, arg);
      return EXIT.ok;
    default:
      throw new UsageError(`unknown command: ${command}`, USAGE);
  }
}

const jobIo = {
  stdout: process.stdout,
  env: process.env,
  loadConfig: (env: NodeJS.ProcessEnv, dataDir: string | undefined) =>
    loadConfig(env, dataDir === undefined ? {} : { dataDir }),
};

main(process.argv.slice(2)).then(
  (code) => {
    // Not set when 0: a service that failed to stop cleanly has set 1 already.
    if (code !== EXIT.ok) process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) {
      // A wrong command line: the reason, then what the command accepts; nothing on stdout.
      const usage = err.usage ?? (current ? COMMAND_USAGE[current] : undefined) ?? USAGE;
      process.stderr.write(`errand${current ? ` ${current}` : ''}: ${err.message}\n\n${usage}`);
      process.exitCode = EXIT.usage;
      return;
    }
    // Errors a user can act on print their message; anything else is a bug and keeps its stack.
    const known =
      err instanceof CliError ||
      err instanceof ConfigError ||
      (err instanceof Error && KNOWN_ERRORS.has(err.name));
    process.stderr.write(
      `errand: ${known ? (err as Error).message : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = EXIT.failed;
  },
);
