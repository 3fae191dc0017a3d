// The eval runs' worker, in each process that runs turns: a run moves on (runner.ts) when one of
// its jobs leaves `active` in this process (heard as a transition), and every few seconds for
// every running run (the jobs other processes ran, the runs the API just created, what a restart
// interrupted). Each run is moved on by one call at a time in a process; across processes the
// runner's claims keep the steps apart.
import type { AppContext } from '../../context.ts';
import { advanceRun, runningRuns } from './runner.ts';

/** How often every running run is moved on, in milliseconds. */
const SWEEP_MS = 3000;

export interface EvalWorker {
  stop(): Promise<void>;
}

export function startEvalWorker(ctx: AppContext): EvalWorker {
  // Per run: the call under way, and whether another is due once it ends.
  const busy = new Map<string, { again: boolean; done: Promise<void> }>();
  let stopped = false;

  const advance = (runId: string): void => {
    const current = busy.get(runId);
    if (current) {
      current.again = true;
      return;
    }
    const entry = { again: false, done: Promise.resolve() };
    busy.set(runId, entry);
    entry.done = (async () => {
      do {
        entry.again = false;
        try {
          await advanceRun(ctx, runId);
        } catch (err) {
          ctx.log.error({ err, evalRunId: runId }, 'eval run could not move on');
        }
      } while (entry.again && !stopped);
      busy.delete(runId);
    })();
  };

  const unsubscribe = ctx.transitions.subscribe(async (t) => {
    if (stopped || t.status === 'active') return;
    const job = await ctx.db
      .selectFrom('jobs')
      .select('eval_run_id')
      .where('id', '=', t.jobId)
      .executeTakeFirst();
    if (job?.eval_run_id) advance(job.eval_run_id);
  });

  let sweeping: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    sweeping = (async () => {
      try {
        for (const runId of await runningRuns(ctx)) if (!stopped) advance(runId);
      } catch (err) {
        ctx.log.error({ err }, 'eval sweep failed');
      }
    })();
  }, SWEEP_MS);
  timer.unref();

  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      unsubscribe();
      await sweeping;
      await Promise.all([...busy.values()].map((entry) => entry.done));
    },
  };
}
