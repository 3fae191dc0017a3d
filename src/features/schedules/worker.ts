// The firings' worker: takes the schedules' queue in each process that runs turns and hands each
// entry to fire.ts.
import type { AppContext } from '../../context.ts';
import { fire } from './fire.ts';

const CONCURRENCY = 2;

export interface ScheduleWorker {
  stop(): Promise<void>;
}

export async function startScheduleWorker(ctx: AppContext): Promise<ScheduleWorker> {
  await ctx.queue.schedules.work(CONCURRENCY, (entry) => fire(ctx, entry));
  return { stop: () => ctx.queue.schedules.stopWork() };
}
