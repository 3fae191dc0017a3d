// The pull request watch: once a turn opened a job's pull request, Errand follows it on the
// forge. Failing checks of its head become a follow-up turn that fixes them (within the
// project's autofixAttempts and the job's budget), a conflict with its base a turn that brings
// the base in, and a green (and approved) pull request is merged when the project's autoMerge
// allows; a person's push or the no-errand label leaves it alone. What the forge last said is
// the job's `pr`. The forge's webhooks wake it (the forge intake hands their signals here),
// and it polls where a forge sends none. src/service.ts wires it in.
import type { Db } from '../../db/database.ts';
import type { ForgeSignal } from '../../forges/events.ts';
import { nudge, nudgeBase } from './store.ts';
import type { WatchContext } from './watch.ts';
import { type PrWatcher, startPrWatcher } from './worker.ts';

export { watchHook } from './store.ts';
export type { PrWatcher } from './worker.ts';

/** This process's running watchers, woken when a webhook here names a watched pull request. */
const local = new Set<PrWatcher>();

/** Starts the watch's loop in this process (the processes that run turns). */
export function startPrWatch(ctx: WatchContext, publicUrl: string): PrWatcher {
  const watcher = startPrWatcher(ctx, publicUrl);
  local.add(watcher);
  return {
    wake: () => watcher.wake(),
    stop: async () => {
      local.delete(watcher);
      await watcher.stop();
    },
  };
}

/**
 * What a forge's webhook said that may concern watched pull requests (a check, a pipeline, a
 * pull request's change): the project's watches it names are looked at now. Returns how many.
 */
export async function nudgeWatches(
  ctx: { db: Db },
  projectId: string,
  signal: ForgeSignal,
): Promise<number> {
  const jobs = await nudge(ctx.db, projectId, signal);
  if (jobs.length > 0) for (const watcher of local) void watcher.wake();
  return jobs.length;
}

/**
 * A push moved `branch` of the project's repository: the watched pull requests into it may
 * conflict with it now, and are looked at. Returns how many.
 */
export async function nudgeBaseMoved(
  ctx: { db: Db },
  projectId: string,
  branch: string,
): Promise<number> {
  const jobs = await nudgeBase(ctx.db, projectId, branch);
  if (jobs.length > 0) for (const watcher of local) void watcher.wake();
  return jobs.length;
}
