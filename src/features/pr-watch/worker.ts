// The pull request watch's loop, in the processes that run turns: take the watches that are
// due (store.ts claimDue), look at each (watch.ts), give them back with their next look's time.
// A watch is due when its interval has passed (the poll: every ERRAND_PR_POLL_SECONDS for a
// project whose forge sends no webhooks, ten times that where it does), when a forge webhook
// named it, or when a turn of its job ended; this process wakes at once for its own, and every
// few seconds for what other processes marked.
import { ExternalError } from '../../errors.ts';
import { type ClaimedWatch, claimDue, release } from './store.ts';
import { PrWatch, type WatchContext } from './watch.ts';

/** How often the loop looks for due watches another process marked. */
const TICK_MS = 3_000;
/** Watches looked at at once by this process: each is a few forge calls. */
const CONCURRENCY = 4;
/** How long a look that failed waits before the next, at most. */
const FAILED_SECONDS = 300;

export interface PrWatcher {
  /** Looks for due watches now (a webhook named some); resolves when that pass is done. */
  wake(): Promise<void>;
  stop(): Promise<void>;
}

/** `publicUrl`: where users reach Errand, for the job links in the watch's comments. */
export function startPrWatcher(ctx: WatchContext, publicUrl: string): PrWatcher {
  const watch = new PrWatch(ctx, publicUrl);
  let stopped = false;
  let pass: Promise<void> | undefined;
  let again = false;

  const lookAt = async (claimed: ClaimedWatch): Promise<void> => {
    const log = ctx.log.child({ jobId: claimed.jobId });
    try {
      const { change, afterSeconds } = await watch.look(claimed);
      await release(ctx.db, claimed, change, afterSeconds ?? (await pollSeconds(claimed.jobId)));
    } catch (err) {
      const transient = !(err instanceof ExternalError) || err.transient;
      log[transient ? 'warn' : 'error']({ err }, 'pull request watch: the look failed');
      const wait =
        err instanceof ExternalError && err.retryAfterSeconds !== undefined
          ? Math.min(err.retryAfterSeconds, FAILED_SECONDS)
          : Math.min(await pollSeconds(claimed.jobId), FAILED_SECONDS);
      await release(ctx.db, claimed, {}, wait).catch((e: unknown) =>
        log.error({ err: e }, 'pull request watch: the watch could not be given back'),
      );
    }
  };

  /** The interval of the job's project: longer where its forge sends webhooks. */
  const pollSeconds = async (jobId: string): Promise<number> => {
    const row = await ctx.db
      .selectFrom('jobs')
      .innerJoin('projects', 'projects.id', 'jobs.project_id')
      .select('projects.forge_webhook_secret')
      .where('jobs.id', '=', jobId)
      .executeTakeFirst();
    const hooked = row?.forge_webhook_secret != null;
    return ctx.config.prPollSeconds * (hooked ? 10 : 1);
  };

  const runPass = async (): Promise<void> => {
    do {
      again = false;
      for (;;) {
        if (stopped) return;
        const due = await claimDue(ctx.db, CONCURRENCY);
        if (due.length === 0) break;
        await Promise.all(due.map(lookAt));
      }
    } while (again && !stopped);
  };

  const wake = (): Promise<void> => {
    if (pass) {
      // A pass under way may have passed the newly due row: it goes round once more.
      again = true;
      return pass;
    }
    pass = runPass()
      .catch((err: unknown) => ctx.log.error({ err }, 'pull request watch: a pass failed'))
      .finally(() => {
        pass = undefined;
      });
    return pass;
  };

  const unsubscribe = ctx.transitions.subscribe((t) => {
    if (t.type !== 'turn.finished' && t.type !== 'turn.failed') return;
    // The turn's transaction woke the job's watch (store.ts watchHook): look now.
    void wake();
  });
  const timer = setInterval(() => void wake(), TICK_MS);
  timer.unref();
  void wake();

  return {
    wake,
    async stop() {
      stopped = true;
      clearInterval(timer);
      unsubscribe();
      await pass;
    },
  };
}
