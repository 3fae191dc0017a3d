// Starts Errand in one process: database, migrations, turn queue, then the HTTP API and/or
// the workers. `serve` runs both (or the API only with --no-worker), `worker` only workers.
import type { FastifyInstance } from 'fastify';
import { AgentRunner } from './agent/runner.ts';
import type { Config } from './config.ts';
import type { AppContext } from './context.ts';
import { type DatabaseHandle, openDatabase } from './db/database.ts';
import { migrate } from './db/migrate.ts';
import { buildApp } from './http/app.ts';
import { TurnAborts } from './jobs/aborts.ts';
import type { TurnRunner } from './jobs/runner.ts';
import { ensureAdminKey } from './keys/bootstrap.ts';
import { createLogger, type Logger } from './log.ts';
import { databaseSampler } from './metrics/database.ts';
import { type MetricsServer, startMetricsServer } from './metrics/http.ts';
import { Metrics } from './metrics/metrics.ts';
import { TurnQueue } from './queue/queue.ts';
import { startWorker, type Worker } from './queue/worker.ts';
import { workspaceUsage } from './workspace/index.ts';

export interface ServiceOptions {
  api: boolean;
  worker: boolean;
  /** The turn pipeline; the agent by default. Tests pass their own to script turns. */
  runner?: TurnRunner;
  log?: Logger;
  /** Called once with a newly minted first admin key. */
  onAdminKey?: (key: string) => void;
}

export interface RunningService {
  ctx: AppContext;
  /** Base URL of the API, when it runs. */
  url: string | undefined;
  app: FastifyInstance | undefined;
  /** The metrics listener's URL, when ERRAND_METRICS_PORT opens one. */
  metricsUrl: string | undefined;
  stop(): Promise<void>;
}

export async function startService(config: Config, opts: ServiceOptions): Promise<RunningService> {
  const log = opts.log ?? createLogger(config.logLevel);
  const handle: DatabaseHandle = await openDatabase({
    dataDir: config.dataDir,
    databaseUrl: config.databaseUrl,
    timeouts: {
      connectMs: config.database.connectTimeoutSeconds * 1000,
      statementMs: config.database.statementTimeoutSeconds * 1000,
    },
  });
  const metrics = new Metrics();
  metrics.sample(databaseSampler(handle.db, metrics));
  let queue: TurnQueue | undefined;
  let app: FastifyInstance | undefined;
  let worker: Worker | undefined;
  let metricsServer: MetricsServer | undefined;
  const stop = async () => {
    await metricsServer?.close();
    await app?.close();
    await worker?.stop();
    await queue?.stop();
    await handle.close();
  };
  try {
    const applied = await migrate(handle);
    if (applied.length > 0) log.info({ migrations: applied }, 'database migrated');
    queue = await TurnQueue.start(handle, config, log);
    const ctx: AppContext = {
      config,
      db: handle.db,
      prepared: handle.prepared,
      log,
      queue,
      aborts: new TurnAborts(),
      metrics,
    };
    if (opts.api) {
      const key = await ensureAdminKey(handle.db, config.dataDir);
      if (key) opts.onAdminKey?.(key);
    }
    if (opts.worker) {
      // Workspaces live on the machines that run turns; the janitor measures them.
      metrics.sample(async () => {
        const usage = workspaceUsage();
        metrics.workspaceBytes.set({ kind: 'jobs' }, usage.jobsBytes);
        metrics.workspaceBytes.set({ kind: 'mirrors' }, usage.mirrorsBytes);
        metrics.workspaceCount.set({ kind: 'jobs' }, usage.jobsCount);
        metrics.workspaceCount.set({ kind: 'mirrors' }, usage.mirrorsCount);
      });
      worker = await startWorker(
        ctx,
        opts.runner ?? new AgentRunner({ config, db: handle.db, log, metrics }),
      );
    }
    let url: string | undefined;
    if (opts.api) {
      app = await buildApp(ctx);
      url = await app.listen({ host: config.host, port: config.port });
    }
    metricsServer = await startMetricsServer(config, metrics, log);
    log.info(
      { url, database: handle.kind, worker: opts.worker, metrics: metricsServer?.url },
      'errand started',
    );
    return { ctx, url, app, metricsUrl: metricsServer?.url, stop };
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
}
