// A schedule's firing: one queue entry from pg-boss's scheduler becomes at most one job. The
// firing is claimed first, by its entry's id, in a transaction of its own (a redelivered entry
// finds its claim and does nothing; a paused or deleted schedule claims nothing); the job is then
// made through the job core's createJob, so the project's rate limit, budget and model checks
// apply, and what it refused is recorded on the schedule and logged, not thrown away.
import { sql } from 'kysely';
import type { Who } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import type { ScheduleRow } from '../../db/schema.ts';
import { AppError, errorMessage } from '../../errors.ts';
import type { NewJob } from '../../jobs/create.ts';
import { createJob } from '../../jobs/service.ts';
import type { ScheduleEntry } from '../../queue/schedules.ts';

/** What a firing needs of its queue entry: its id (the firing's identity) and its schedule. */
type Firing = Pick<ScheduleEntry, 'id' | 'data'>;

/** Who a firing's job is created by: the schedule, with its id and name. */
function scheduleWho(schedule: ScheduleRow): Who {
  return {
    actor: { kind: 'schedule', id: schedule.id, name: schedule.name },
    address: null,
    requestId: null,
  };
}

/**
 * The job a firing asks for: the one place a schedule becomes createJob's input, in the
 * schedule's mode (a weekly "what changed" is an ask; a dependency update is code).
 */
export function firingJob(schedule: ScheduleRow): NewJob {
  return {
    prompt: schedule.prompt,
    model: schedule.model ?? undefined,
    mode: schedule.mode,
    by: scheduleWho(schedule),
  };
}

/** Claims the entry's firing; the schedule, or undefined when nothing is to be done. */
async function claim(ctx: AppContext, entry: Firing): Promise<ScheduleRow | undefined> {
  return ctx.db.transaction().execute(async (trx) => {
    const schedule = await trx
      .selectFrom('schedules')
      .selectAll()
      .where('id', '=', entry.data.scheduleId)
      .forUpdate()
      .executeTakeFirst();
    if (!schedule || schedule.paused) return undefined;
    const claimed = await trx
      .insertInto('schedule_firings')
      .values({ entry_id: entry.id, schedule_id: schedule.id })
      .onConflict((oc) => oc.column('entry_id').doNothing())
      .returning('entry_id')
      .executeTakeFirst();
    return claimed ? schedule : undefined;
  });
}

/** Records what the firing made: a job, or why there is none. */
async function record(
  ctx: AppContext,
  entry: Firing,
  scheduleId: string,
  outcome: { jobId: string; error: null } | { jobId: null; error: string },
): Promise<void> {
  await ctx.db.transaction().execute(async (trx) => {
    await trx
      .updateTable('schedule_firings')
      .set({ job_id: outcome.jobId, error: outcome.error })
      .where('entry_id', '=', entry.id)
      .execute();
    await trx
      .updateTable('schedules')
      .set({ last_fired_at: sql`now()`, last_job_id: outcome.jobId, last_error: outcome.error })
      .where('id', '=', scheduleId)
      .execute();
  });
}

/** Handles one firing's entry: at most one job, whatever the number of deliveries. */
export async function fire(ctx: AppContext, entry: Firing): Promise<void> {
  const schedule = await claim(ctx, entry);
  if (!schedule) return;
  const scope = { scheduleId: schedule.id, projectId: schedule.project_id };
  const project = await ctx.db
    .selectFrom('projects')
    .selectAll()
    .where('id', '=', schedule.project_id)
    .executeTakeFirst();
  if (!project) return;
  try {
    const { job } = await createJob(ctx, project, firingJob(schedule));
    await record(ctx, entry, schedule.id, { jobId: job.id, error: null });
    ctx.log.info({ ...scope, jobId: job.id }, 'schedule fired');
  } catch (err) {
    // A refusal (rate limit, budget, model) ends this firing: the next occurrence tries again.
    const error = err instanceof AppError ? `${err.code}: ${err.message}` : errorMessage(err);
    await record(ctx, entry, schedule.id, { jobId: null, error });
    if (err instanceof AppError)
      ctx.log.warn({ ...scope, code: err.code, error }, 'schedule firing refused');
    else ctx.log.error({ ...scope, err }, 'schedule firing failed');
  }
}
