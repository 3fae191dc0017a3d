// The `errand` command: `serve`, `worker`, `migrate`, and the admin commands `project …`
// and `key …`, which are clients of the admin API.
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ApiClient, CliError } from './cli/client.ts';
import { ConfigError, type ConfigOverrides, loadConfig } from './config.ts';
import { adminKeyPath } from './keys/bootstrap.ts';
import type { KeyRecord } from './keys/service.ts';
import type { ProjectRecord } from './projects/service.ts';

const USAGE = `Usage: errand <command> [options]

Service:
  serve [--host H] [--port P] [--data-dir DIR] [--no-worker] [--concurrency N]
                     API and workers (API only with --no-worker)
  worker [--concurrency N]
                     workers only (needs DATABASE_URL)
  migrate            apply database migrations and exit

Administration (client of the admin API at ERRAND_URL, key from ERRAND_API_KEY or <data-dir>/admin.key):
  project create --name NAME --repo URL [--ref main] [--model provider:model] [--json]
  project list [--json]
  key create (--project ID | --admin) [--name NAME] [--json]
  key list [--json]
  key revoke ID [--json]
`;

const options = {
  host: { type: 'string' },
  port: { type: 'string' },
  'data-dir': { type: 'string' },
  'no-worker': { type: 'boolean' },
  concurrency: { type: 'string' },
  name: { type: 'string' },
  repo: { type: 'string' },
  ref: { type: 'string' },
  model: { type: 'string' },
  project: { type: 'string' },
  admin: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Values = ReturnType<
  typeof parseArgs<{ options: typeof options; allowPositionals: true }>
>['values'];

function intFlag(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new CliError(`--${name} must be a whole number`);
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
  return o;
}

function print(json: boolean | undefined, value: unknown, text: string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);
}

function required(value: string | undefined, flag: string): string {
  if (!value) throw new CliError(`--${flag} is required`);
  return value;
}

async function runService(values: Values, mode: 'serve' | 'worker'): Promise<void> {
  const config = loadConfig(process.env, overrides(values));
  if (mode === 'worker' && !config.databaseUrl) {
    throw new CliError(
      'errand worker needs DATABASE_URL: with the embedded database, run errand serve (it runs workers)',
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

async function runProject(values: Values, sub: string | undefined): Promise<void> {
  const client = await ApiClient.fromConfig(loadConfig(process.env, overrides(values)));
  if (sub === 'create') {
    let repository = required(values.repo, 'repo');
    // A relative path means a repository on this disk; the server needs it absolute.
    if (repository.startsWith('.')) repository = path.resolve(repository);
    const project = await client.request<ProjectRecord>('POST', '/v2/admin/projects', {
      name: required(values.name, 'name'),
      repository,
      ...(values.ref ? { ref: values.ref } : {}),
      ...(values.model ? { model: values.model } : {}),
    });
    print(
      values.json,
      project,
      `created project ${project.id} (${project.name}: ${project.repository} @ ${project.ref})`,
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
    throw new CliError(`unknown command: project ${sub ?? ''}\n\n${USAGE}`);
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
      throw new CliError('give exactly one of --project ID or --admin');
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
    if (!id) throw new CliError('usage: errand key revoke ID');
    const key = await client.request<KeyRecord>(
      'POST',
      `/v2/admin/keys/${encodeURIComponent(id)}/revoke`,
    );
    print(values.json, key, `revoked key ${key.id}`);
  } else {
    throw new CliError(`unknown command: key ${sub ?? ''}\n\n${USAGE}`);
  }
}

async function main(argv: string[]): Promise<void> {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof options; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new CliError(`${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  const [command, sub, arg] = positionals;
  if (values.help || !command || command === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  switch (command) {
    case 'serve':
    case 'worker':
      return runService(values, command);
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
      return;
    }
    case 'project':
      return runProject(values, sub);
    case 'key':
      return runKey(values, sub, arg);
    default:
      throw new CliError(`unknown command: ${command}\n\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  // Errors a user can act on print their message; anything else is a bug and keeps its stack.
  const known =
    err instanceof CliError ||
    err instanceof ConfigError ||
    (err instanceof Error && err.name === 'DatabaseLockedError');
  process.stderr.write(
    `errand: ${known ? (err as Error).message : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exitCode = 1;
});
