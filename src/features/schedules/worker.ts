// The firings' worker: takes the schedules' queue in each process that runs turns and hands each
// entry to fire.ts; at its start, pg-boss's scheduler is brought in line with the table.
import type { AppContext } from '../../context.ts';
import { fire } from './fire.ts';
import { syncSchedules } from './store.ts';

const CONCURRENCY = 2;

export interface ScheduleWorker {
  stop(): Promise<void>;
}

export async function startScheduleWorker(ctx: AppContext): Promise<ScheduleWorker> {
  await syncSchedules(ctx);
  await ctx.queue.schedules.work(CONCURRENCY, (entry) => fire(ctx, entry));
  return { stop: () => ctx.queue.schedules.stopWork() };
}
