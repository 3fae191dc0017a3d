// Works off the environment build queue in the processes that run turns: each request builds
// the project's environment on this worker (turns/environment-build.ts) unless it has it. Also
// keeps this worker's snapshots and the environments table in agreement, periodically: rows an
// admin deleted lose their files, and the cache stays under its bound.
import type { Db } from '../db/database.ts';
import type { Environments } from '../environments/environments.ts';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../log.ts';
import { SecretUnavailableError, turnSecrets } from '../projects/secrets.ts';
import { sandboxStatus } from '../sandbox/sandbox.ts';
import type { EnvironmentBuilder } from '../turns/environment-build.ts';
import type { EnvironmentBuildQueue } from './environment-builds.ts';

export interface EnvironmentWorkerContext {
  db: Db;
  config: Parameters<typeof turnSecrets>[0]['config'];
  log: Logger;
  queue: { environmentBuilds: EnvironmentBuildQueue };
  environments: Environments;
}

export interface EnvironmentWorker {
  stop(): Promise<void>;
}

/** Builds at once in this process: each runs a setup in the sandbox, bounded like a command. */
const CONCURRENCY = 1;
const RECONCILE_INTERVAL_MS = 60_000;

export async function startEnvironmentWorker(
  ctx: EnvironmentWorkerContext,
  builder: EnvironmentBuilder,
): Promise<EnvironmentWorker> {
  await ctx.queue.environmentBuilds.work(CONCURRENCY, async (entry) => {
    const { projectId, reason } = entry.data;
    const log = ctx.log.child({ projectId, reason });
    const project = await ctx.db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', projectId)
      .executeTakeFirst();
    // Deleted since, or nothing to build: done.
    if (!project?.commands_enabled || !project.setup_command) return;
    const status = await sandboxStatus();
    if (!status.available) {
      log.warn({ reason: status.reason }, 'environment not built: the sandbox is unavailable');
      return;
    }
    let secrets: Awaited<ReturnType<typeof turnSecrets>>;
    try {
      secrets = await turnSecrets(ctx, projectId);
    } catch (err) {
      // No retry mends a key that does not open them; the first job says so in its turn.
      if (err instanceof SecretUnavailableError) {
        log.warn({ err: err.message }, 'environment not built');
        return;
      }
      throw err;
    }
    const started = performance.now();
    const result = await builder.build(project, secrets, entry.signal);
    log.info({ result, ms: Math.round(performance.now() - started) }, 'environment build ended');
  });
  let reconciling: Promise<void> = Promise.resolve();
  const reconcile = () => {
    reconciling = ctx.environments
      .reconcile()
      .catch((err: unknown) =>
        ctx.log.warn({ err: errorMessage(err) }, 'reconciling the environments failed'),
      );
  };
  reconcile();
  const timer = setInterval(reconcile, RECONCILE_INTERVAL_MS);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await ctx.queue.environmentBuilds.stopWork();
      await reconciling;
      await ctx.environments.settled();
    },
  };
}
