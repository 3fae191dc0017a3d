// Starts Errand in one process: database, migrations, turn queue, then the HTTP API and/or
// the workers. `serve` runs both (or the API only with --no-worker), `worker` only workers.
// Here the listeners of the job core are registered (the webhook outbox, the workspace
// janitor) and the periodic upkeep of each module is scheduled.
import type { FastifyInstance } from 'fastify';
import { ModelCatalog, readCatalogFile } from './agent/catalog.ts';
import { ModelRegistry } from './agent/models.ts';
import { AuditStream, NO_AUDIT_STREAM } from './audit/stream.ts';
import { type Config, ConfigError } from './config.ts';
import type { AppContext } from './context.ts';
import { dashboardWith } from './dashboard/plugin.ts';
import { type DatabaseHandle, openDatabase } from './db/database.ts';
import { migrate } from './db/migrate.ts';
import { engineInstalls } from './engines/catalog.ts';
import { Environments } from './environments/environments.ts';
import { configuredReader } from './features/attachments/index.ts';
import { type EvalWorker, evalPages, evalRoutes, startEvalWorker } from './features/eval/index.ts';
import {
  type ForgeWorker,
  forgeIntakePages,
  forgeIntakeRoutes,
  forgetForgeEvents,
  forgetRefusals,
  startForgeWorker,
} from './features/forge-intake/index.ts';
import { agentMcpOpener, connectRemote, engineMcpOpener } from './features/mcp-servers/index.ts';
import { type PrWatcher, startPrWatch, watchHook } from './features/pr-watch/index.ts';
import {
  type ScheduleWorker,
  schedulePages,
  scheduleRoutes,
  startScheduleWorker,
} from './features/schedules/index.ts';
import { liveStream } from './features/stream/index.ts';
import {
  type DeliveryWorker,
  startDeliveryWorker,
  webhookOutbox,
  webhookPages,
  webhookRoutes,
} from './features/webhooks/index.ts';
import { Forges } from './forges/clients.ts';
import { buildApp } from './http/app.ts';
import { purgeExpiredKeys } from './idempotency/keys.ts';
import { TurnAborts } from './jobs/aborts.ts';
import { EventNotifications } from './jobs/notifications.ts';
import type { TurnRunner } from './jobs/runner.ts';
import { jobBudgetLeft, monthBudgetLeft } from './jobs/spend.ts';
import { Transitions } from './jobs/transitions.ts';
import { ensureAdminKey } from './keys/bootstrap.ts';
import { createLogger, type Logger } from './log.ts';
import { databaseSampler } from './metrics/database.ts';
import { type MetricsServer, startMetricsServer } from './metrics/http.ts';
import { Metrics } from './metrics/metrics.ts';
import { type EnvironmentWorker, startEnvironmentWorker } from './queue/environment-worker.ts';
import { type QueueClock, TurnQueue } from './queue/queue.ts';
import { startWorker, type Worker } from './queue/worker.ts';
import { pruneCounters } from './ratelimit/ratelimit.ts';
import { reportSandboxStatus, runBound } from './sandbox/report.ts';
import { sandboxStatus } from './sandbox/sandbox.ts';
import { ensureSecretKeyFile } from './secrets/key-file.ts';
import { EnvironmentBuilder } from './turns/environment-build.ts';
import { TurnPipeline, workspaceConfig } from './turns/pipeline.ts';
import { type Janitor, startJanitor, workspaceUsage } from './workspace/index.ts';

/** The API routes of the features (src/features/), in the order the OpenAPI document lists them. */
const FEATURE_ROUTES = [forgeIntakeRoutes, webhookRoutes, scheduleRoutes, evalRoutes];
/** The dashboard pages of the features. */
const FEATURE_PAGES = [webhookPages, forgeIntakePages, schedulePages, evalPages];

export interface ServiceOptions {
  api: boolean;
  worker: boolean;
  /** What runs a turn; the turn pipeline by default. Tests pass their own to script turns. */
  runner?: TurnRunner;
  log?: Logger;
  /** Called once with a newly minted first admin key. */
  onAdminKey?: (key: string) => void;
  /** The queue's clock; the system's by default. Tests pass a TestClock to move time by hand. */
  clock?: QueueClock;
}

export interface RunningService {
  ctx: AppContext;
  /** Base URL of the API, when it runs. */
  url: string | undefined;
  app: FastifyInstance | undefined;
  /** The metrics listener's URL, when ERRAND_METRICS_PORT opens one. */
  metricsUrl: string | undefined;
  /**
   * Stops the service. The workers stop first, while the API and the metrics listener still
   * answer: they take no more turns, environment builds, deliveries or forge events, let their
   * running turns finish for up to `drainSeconds` (none by default), and hand the rest back to
   * the queue without using up their attempts.
   */
  stop(opts?: StopOptions): Promise<void>;
}

interface StopOptions {
  /** How long running turns may go on before they are handed back (ERRAND_DRAIN_SECONDS). */
  drainSeconds?: number;
}

export async function startService(
  settings: Config,
  opts: ServiceOptions,
): Promise<RunningService> {
  const log = opts.log ?? createLogger(settings.logLevel);
  // Read before anything starts, so that a bad file stops the start with its own message.
  const catalog = new ModelCatalog(
    settings.modelCatalogFile === undefined ? {} : readCatalogFile(settings.modelCatalogFile),
  );
  const { handle, config } = await openStore(settings, log);
  const metrics = new Metrics();
  metrics.sample(databaseSampler(handle.db, metrics));
  let queue: TurnQueue | undefined;
  let app: FastifyInstance | undefined;
  let worker: Worker | undefined;
  let janitor: Janitor | undefined;
  let upkeep: Upkeep | undefined;
  let deliveryWorker: DeliveryWorker | undefined;
  let scheduleWorker: ScheduleWorker | undefined;
  let evalWorker: EvalWorker | undefined;
  let forgeWorker: ForgeWorker | undefined;
  let prWatcher: PrWatcher | undefined;
  let environmentWorker: EnvironmentWorker | undefined;
  let metricsServer: MetricsServer | undefined;
  const notifications = new EventNotifications(
    handle.connection,
    config.database.connectTimeoutSeconds * 1000,
    log,
  );
  const auditStream = config.auditLog ? AuditStream.open(config.auditLog, log) : undefined;
  const stop = async ({ drainSeconds = 0 }: StopOptions = {}) => {
    // Whatever takes work stops taking it at once, and the turns drain, while the API and the
    // metrics listener (/healthz) go on answering: a job posted now waits for another worker.
    const takers = [upkeep, evalWorker, prWatcher, deliveryWorker, scheduleWorker, forgeWorker];
    const others = [...takers, environmentWorker].map((w) => w?.stop());
    await settleAll([worker?.stop(drainSeconds), ...others]);
    await janitor?.stop();
    await app?.close();
    await metricsServer?.close();
    await notifications.close();
    await queue?.stop();
    // After everything that writes audit rows has stopped.
    await auditStream?.close();
    await handle.close();
  };
  try {
    const applied = await migrate(handle);
    if (applied.length > 0) log.info({ migrations: applied }, 'database migrated');
    queue = await TurnQueue.start(handle, config, log, opts.clock);
    const ctx: AppContext = {
      config,
      db: handle.db,
      prepared: handle.prepared,
      log,
      queue,
      aborts: new TurnAborts(),
      transitions: new Transitions(log),
      audit: auditStream ?? NO_AUDIT_STREAM,
      models: new ModelRegistry(config.models, config.defaultModel, catalog),
      forges: new Forges(config, metrics),
      notifications,
      metrics,
      engines: engineInstalls(config),
      environments: new Environments({
        config,
        db: handle.db,
        log,
        metrics,
        workspace: workspaceConfig(config),
      }),
      attachments: configuredReader(config),
    };
    hookTransitions(ctx);
    if (opts.api) {
      const key = await ensureAdminKey(handle.db, config, log);
      if (key) opts.onAdminKey?.(key);
    }
    let url: string | undefined;
    if (opts.api) {
      app = await buildApi(ctx);
      url = await app.listen({ host: config.host, port: config.port });
    }
    if (opts.worker) {
      await checkWorkerSandbox(ctx);
      // Workspaces live on the machines that run turns; the janitor measures them.
      metrics.sample(async () => sampleWorkspaces(metrics));
      janitor = await startWorkspaceJanitor(ctx);
      const { reclaim } = janitor;
      worker = await startWorker(ctx, opts.runner ?? turnPipeline(ctx, url), {
        // A turn stopped by an archive leaves a clone nobody needs: it goes now, not later.
        turnEnded: (jobId) => reclaim(jobId),
      });
      upkeep = startUpkeep(ctx);
      // Environments are built ahead of jobs on the machines that run them.
      environmentWorker = await startEnvironmentWorker(
        ctx,
        new EnvironmentBuilder({
          config,
          log,
          forges: ctx.forges,
          environments: ctx.environments,
        }),
      );
      // Webhooks are sent by the processes that run turns, as many at once as configured.
      deliveryWorker = await startDeliveryWorker(ctx);
      // Schedules fire here: each firing's entry becomes a job (at most one).
      scheduleWorker = await startScheduleWorker(ctx);
      // Eval runs move on here: their results' jobs are made, and settled when they end.
      evalWorker = startEvalWorker(ctx);
      // Forge webhook events become turns here, and their answers go back to the forge.
      // The jobs' pull requests are looked after here too: checks, conflicts, merges.
      const publicUrl = config.publicUrl ?? url;
      if (publicUrl) {
        forgeWorker = await startForgeWorker(ctx, publicUrl);
        prWatcher = startPrWatch(ctx, publicUrl);
      } else
        log.warn(
          'forge events and pull requests are not worked on here: ERRAND_PUBLIC_URL is not set',
        );
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

/** Waits for every one of `stops`, then throws the first of their errors, if any. */
async function settleAll(stops: (Promise<void> | undefined)[]): Promise<void> {
  const results = await Promise.allSettled(stops);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/**
 * A worker's sandbox, said at start in its log and its metrics; where it does not work and
 * ERRAND_REQUIRE_SANDBOX=true, the worker does not start.
 */
async function checkWorkerSandbox({ config, log, metrics }: AppContext): Promise<void> {
  const sandbox = await sandboxStatus();
  reportSandboxStatus(log, sandbox);
  metrics.sandboxAvailable.set(
    { reason: sandbox.available ? '' : sandbox.reason },
    sandbox.available ? 1 : 0,
  );
  metrics.sandboxRunBounds.set({ controller: 'memory' }, runBound(sandbox, 'memory'));
  metrics.sandboxRunBounds.set({ controller: 'pids' }, runBound(sandbox, 'pids'));
  if (config.requireSandbox && !sandbox.available)
    throw new ConfigError(
      `the sandbox does not work here: ${sandbox.reason}; ${sandbox.howToFix}. ERRAND_REQUIRE_SANDBOX=true keeps a worker from running without it`,
    );
}

/** The features' hooks in the job core's transitions, in every process that records events. */
function hookTransitions(ctx: AppContext): void {
  // The job core calls its listeners, not the reverse: the outbox writes each event's
  // webhook deliveries in the event's transaction, in every process that records events.
  ctx.transitions.hook(webhookOutbox(ctx));
  // A turn that opened or updated a pull request makes or wakes the job's watch in its own
  // transaction, in whichever process ends it.
  ctx.transitions.hook(watchHook());
}

/** The database, and the settings with the secret key it keeps when none is given. */
async function openStore(
  settings: Config,
  log: Logger,
): Promise<{ handle: DatabaseHandle; config: Config }> {
  const handle = await openDatabase({
    dataDir: settings.dataDir,
    databaseUrl: settings.databaseUrl,
    poolSize: settings.database.poolSize,
    timeouts: {
      connectMs: settings.database.connectTimeoutSeconds * 1000,
      statementMs: settings.database.statementTimeoutSeconds * 1000,
    },
    log,
  });
  const config = await withSecretKey(settings, handle).catch(async (err: unknown) => {
    await handle.close();
    throw err;
  });
  return { handle, config };
}

/** The sizes of this machine's workspaces, as the metrics show them. */
function sampleWorkspaces(metrics: Metrics): void {
  const usage = workspaceUsage();
  metrics.workspaceBytes.set({ kind: 'jobs' }, usage.jobsBytes);
  metrics.workspaceBytes.set({ kind: 'mirrors' }, usage.mirrorsBytes);
  metrics.workspaceCount.set({ kind: 'jobs' }, usage.jobsCount);
  metrics.workspaceCount.set({ kind: 'mirrors' }, usage.mirrorsCount);
}

/**
 * The API with the dashboard: the features' routes and pages are handed to the layers that serve
 * them (src/features/). The live stream's are this process's: its events route and its page share
 * one hub.
 */
function buildApi(ctx: AppContext): Promise<FastifyInstance> {
  const stream = liveStream(ctx);
  return buildApp(
    ctx,
    [dashboardWith([...FEATURE_PAGES, stream.pages])],
    [...FEATURE_ROUTES, stream.routes],
  );
}

/**
 * Starts the janitor of this machine's workspaces (workspace/retention.ts). An archived job's
 * clone goes at once: this process's own archives are heard as transitions, after their
 * commit; another process's through the database's notification of the job's new event. A
 * clone a turn here still uses goes when the turn stops (the worker's turnEnded).
 */
async function startWorkspaceJanitor(ctx: AppContext): Promise<Janitor> {
  const janitor = startJanitor({
    workspace: workspaceConfig(ctx.config),
    db: ctx.db,
    log: ctx.log,
    settings: ctx.config.workspace,
    running: (jobId) => ctx.aborts.running(jobId),
  });
  ctx.transitions.subscribe((t) => {
    if (t.type === 'job.archived') janitor.reclaim(t.jobId);
  });
  try {
    await ctx.notifications.subscribe({
      event: (jobId) => janitor.noticed(jobId),
      // Whatever was missed meanwhile, the janitor's next pass finds.
      resync: () => {},
    });
  } catch (err) {
    ctx.log.warn(
      { err },
      "cannot hear of other processes' archives: their clones here go at the janitor's next pass",
    );
  }
  return janitor;
}

/** How often the processes that run workers do each module's upkeep. */
const UPKEEP_INTERVAL_MS = 10_000;

interface Upkeep {
  stop(): Promise<void>;
}

/**
 * Every module's periodic upkeep, each its owner's function: expired idempotency keys, the
 * rate-limit counters of ended windows, and the records of forge events and of threads told of
 * missing write access older than 30 days are deleted. The processes that run
 * workers do it.
 */
export async function runUpkeep(ctx: Pick<AppContext, 'db' | 'config' | 'log'>): Promise<void> {
  const chores: [string, () => Promise<unknown>][] = [
    ['rate-limit counters', () => pruneCounters(ctx.db, ctx.config.rateLimits.windowSeconds)],
    ['idempotency keys', () => purgeExpiredKeys(ctx.db)],
    ['forge events', () => forgetForgeEvents(ctx)],
    ['forge refusals', () => forgetRefusals(ctx)],
  ];
  for (const [chore, run] of chores) {
    await run().catch((err: unknown) => ctx.log.error({ err, chore }, 'upkeep failed'));
  }
}

function startUpkeep(ctx: Pick<AppContext, 'db' | 'config' | 'log'>): Upkeep {
  let running = Promise.resolve();
  const timer = setInterval(() => {
    running = runUpkeep(ctx);
  }, UPKEEP_INTERVAL_MS);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

/**
 * The embedded mode works out of the box: without ERRAND_SECRET_KEY, the data directory's key
 * file seals webhook secrets and forge tokens (and is scrubbed like the setting).
 */
async function withSecretKey(config: Config, handle: DatabaseHandle): Promise<Config> {
  if (config.secretKey || handle.kind !== 'embedded') return config;
  const secretKey = await ensureSecretKeyFile(config.dataDir);
  return { ...config, secretKey, secrets: [...config.secrets, secretKey] };
}

/**
 * The turn pipeline, with the address its review links and pull requests point to:
 * ERRAND_PUBLIC_URL, else the address this process's API really listens on (the bound port,
 * not a configured 0). A worker without an API of its own must be told (main.ts says so
 * before anything starts).
 */
function turnPipeline(ctx: AppContext, apiUrl: string | undefined): TurnPipeline {
  const { config, log, metrics, models, forges } = ctx;
  const publicUrl = config.publicUrl ?? apiUrl;
  if (!publicUrl)
    throw new ConfigError(
      "ERRAND_PUBLIC_URL is not set: a worker without an API needs the address where users reach Errand's API",
    );
  if (!config.publicUrl && WILDCARD_HOSTS.has(config.host))
    log.warn(
      { publicUrl },
      'listening on every interface without ERRAND_PUBLIC_URL: review links use this address; set ERRAND_PUBLIC_URL to the one users reach',
    );
  return new TurnPipeline({
    config: { ...config, publicUrl },
    log,
    metrics,
    models,
    forges,
    jobBudgetLeft: (job) => jobBudgetLeft(ctx, job),
    monthBudgetLeft: (job) => monthBudgetLeft(ctx, job),
    environments: ctx.environments,
    openAgentMcp: agentMcpOpener({ allowPrivate: config.webhooks.allowPrivate }),
    openEngineMcp: engineMcpOpener({
      allowPrivate: config.webhooks.allowPrivate,
      connect: connectRemote,
    }),
  });
}

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '[::]']);
