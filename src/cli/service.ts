// `errand serve`, `errand worker` and `errand migrate`: the commands that run Errand itself
// (src/service.ts) or its database's migrations, rather than a client of its API. Their
// modules are loaded when they run: the client commands need none of them.
import type { ConfigOverrides } from '../config.ts';
import { loadConfig } from '../config.ts';
import { adminKeyPath } from '../keys/bootstrap.ts';
import { defineCommand, type Io, wholeNumber } from './command.ts';
import { CliError, EXIT } from './errors.ts';

const DATA_DIR = { type: 'string', value: 'DIR' } as const;
const CONCURRENCY = { type: 'string', value: 'N' } as const;

interface ServiceFlags {
  host?: string;
  port?: string;
  'data-dir'?: string;
  'no-dashboard'?: boolean;
  concurrency?: string;
}

function loadServiceConfig(io: Io, values: ServiceFlags) {
  const o: ConfigOverrides = {};
  if (values.host !== undefined) o.host = values.host;
  const port = wholeNumber(values.port, 'port');
  if (port !== undefined) o.port = port;
  if (values['data-dir'] !== undefined) o.dataDir = values['data-dir'];
  const concurrency = wholeNumber(values.concurrency, 'concurrency');
  if (concurrency !== undefined) o.concurrency = concurrency;
  if (values['no-dashboard']) o.dashboard = false;
  return loadConfig(io.env, o);
}

/**
 * Starts the service and runs until SIGINT or SIGTERM, then stops it, its workers draining (a
 * second signal exits at once).
 */
async function runService(
  io: Io,
  values: ServiceFlags,
  mode: 'serve' | 'worker',
  worker: boolean,
): Promise<number> {
  const config = loadServiceConfig(io, values);
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
  const { startService } = await import('../service.ts');
  const service = await startService(config, {
    api: mode === 'serve',
    worker,
    onAdminKey: (key) =>
      io.stdout.write(
        `\nAdmin API key (shown once; also saved to ${adminKeyPath(config.dataDir)}):\n  ${key}\n\n`,
      ),
  });
  if (service.url) io.stdout.write(`errand listening on ${service.url}\n`);
  await new Promise<void>((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        process.stderr.write(`${signal} again: exiting now\n`);
        process.exit(EXIT.failed);
      }
      stopping = true;
      service.ctx.log.info({ signal }, 'stopping');
      // The workers drain: their running turns may finish for ERRAND_DRAIN_SECONDS, and what
      // still runs then goes back to the queue. A second signal exits at once; the turns it
      // cuts are taken up again as a dead worker's are.
      service.stop({ drainSeconds: config.turn.drainSeconds }).then(resolve, (err: unknown) => {
        service.ctx.log.error({ err }, 'error while stopping');
        // Exits 1 once the rest of the process is done, whatever main resolves with.
        process.exitCode = EXIT.failed;
        resolve();
      });
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
  return EXIT.ok;
}

export const serve = defineCommand({
  name: 'serve',
  options: {
    host: { type: 'string', value: 'H' },
    port: { type: 'string', value: 'P' },
    'data-dir': DATA_DIR,
    'no-worker': { type: 'boolean' },
    'no-dashboard': { type: 'boolean' },
    concurrency: CONCURRENCY,
  },
  summary:
    'API, dashboard and workers (API only with --no-worker; no dashboard at / with --no-dashboard)',
  details: `The API, the dashboard at / and the workers, in one process; --no-worker serves the API
only (scaling out on PostgreSQL), --no-dashboard leaves the dashboard out.
`,
  run: ({ values, io }) => runService(io, values, 'serve', !values['no-worker']),
});

export const worker = defineCommand({
  name: 'worker',
  options: { 'data-dir': DATA_DIR, concurrency: CONCURRENCY },
  summary: 'workers only (needs DATABASE_URL and ERRAND_PUBLIC_URL)',
  details: `Workers only: they run the turns of jobs. Needs DATABASE_URL and ERRAND_PUBLIC_URL.
`,
  run: ({ values, io }) => runService(io, values, 'worker', true),
});

export const migrate = defineCommand({
  name: 'migrate',
  options: { 'data-dir': DATA_DIR },
  summary: 'apply database migrations and exit',
  details: `Applies the database migrations and exits (every process also migrates at start).
`,
  async run({ values, io }) {
    const config = loadServiceConfig(io, values);
    const { openDatabase } = await import('../db/database.ts');
    const { migrate: apply } = await import('../db/migrate.ts');
    const handle = await openDatabase({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
    try {
      const applied = await apply(handle);
      io.stdout.write(
        applied.length ? `applied ${applied.join(', ')}\n` : 'database is up to date\n',
      );
    } finally {
      await handle.close();
    }
    return EXIT.ok;
  },
});
