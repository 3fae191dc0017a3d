// A project's schedules: the one writer of the schedules table (its firings are fire.ts's). Each
// change is one transaction with its audit row; pg-boss's scheduler is told in that transaction,
// before the commit, so a schedule the scheduler refused is never stored, and one it was not told
// to stop (a failed commit after unschedule) fires into a row that is gone and does nothing.
import { sql, type Transaction } from 'kysely';
import { auditedChange, type Who } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import type { Database, ProjectRow, ScheduleRow } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { isId, newId } from '../../ids.ts';
import { checkModel } from '../../jobs/accept.ts';
import { type ScheduleRecord, toScheduleRecord } from './types.ts';

/** Schedules per project: each is a scheduler row every pass reads. */
export const MAX_SCHEDULES_PER_PROJECT = 50;

type Mode = ScheduleRow['mode'];

/** What a create gives; a name, a zone and a mode may be left out. */
export interface NewSchedule {
  name?: string | undefined;
  cron: string;
  timezone?: string | undefined;
  prompt: string;
  mode?: Mode | undefined;
  model?: string | null | undefined;
  paused?: boolean | undefined;
}

/** What an update changes: the given fields. */
export type ScheduleChanges = Partial<Omit<NewSchedule, 'name'> & { name: string }>;

type Tx = Transaction<Database>;

async function projectRow(db: AppContext['db'] | Tx, projectId: string, lock = false) {
  if (isId('prj', projectId)) {
    let query = db.selectFrom('projects').selectAll().where('id', '=', projectId);
    if (lock) query = query.forUpdate();
    const row = await query.executeTakeFirst();
    if (row) return row;
  }
  throw new AppError('not_found', `project ${projectId} not found`);
}

async function scheduleRow(
  db: AppContext['db'] | Tx,
  projectId: string,
  scheduleId: string,
  lock = false,
): Promise<ScheduleRow> {
  if (isId('sch', scheduleId)) {
    let query = db
      .selectFrom('schedules')
      .selectAll()
      .where('id', '=', scheduleId)
      .where('project_id', '=', projectId);
    if (lock) query = query.forUpdate();
    const row = await query.executeTakeFirst();
    if (row) return row;
  }
  throw new AppError('not_found', `schedule ${scheduleId} not found`);
}

/** The name a schedule gets when none is given: its prompt's first line, cut. */
function defaultName(prompt: string): string {
  const line = prompt.trim().split('\n', 1)[0] ?? '';
  return line.length > 60 ? `${line.slice(0, 59)}…` : line;
}

/**
 * Refuses what pg-boss's scheduler or the job core would refuse at a firing: the zone, the
 * expression, the model. Checked before anything is written.
 */
function check(
  ctx: AppContext,
  project: ProjectRow,
  row: { cron: string; timezone: string; model: string | null },
): void {
  const zone = ctx.queue.schedules.refusal({ cron: '0 0 * * *', timezone: row.timezone });
  if (zone !== undefined)
    throw new AppError('bad_request', `"timezone": '${row.timezone}' is not an IANA time zone`);
  const cron = ctx.queue.schedules.refusal({ cron: row.cron, timezone: 'UTC' });
  if (cron !== undefined)
    throw new AppError('bad_request', `"cron": '${row.cron}' is not a cron expression: ${cron}`);
  if (row.model !== null) checkModel(ctx, project, row.model);
}

export async function createSchedule(
  ctx: AppContext,
  who: Who,
  projectId: string,
  input: NewSchedule,
): Promise<ScheduleRecord> {
  const project = await projectRow(ctx.db, projectId);
  const values = {
    id: newId('sch'),
    project_id: projectId,
    name: input.name ?? defaultName(input.prompt),
    cron: input.cron,
    timezone: input.timezone ?? 'UTC',
    prompt: input.prompt,
    mode: input.mode ?? 'code',
    model: input.model ?? null,
    paused: input.paused ?? false,
    created_by: who.actor ? JSON.stringify(who.actor) : null,
  };
  check(ctx, project, values);
  const row = await auditedChange(ctx, who, async (trx) => {
    // The project's row lock makes the count and the insert one step for concurrent creates.
    await projectRow(trx, projectId, true);
    const { count } = await trx
      .selectFrom('schedules')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('project_id', '=', projectId)
      .executeTakeFirstOrThrow();
    if (Number(count) >= MAX_SCHEDULES_PER_PROJECT)
      throw new AppError(
        'conflict',
        `project ${projectId} has ${MAX_SCHEDULES_PER_PROJECT} schedules, the most a project may have; delete one first`,
      );
    const created = await trx
      .insertInto('schedules')
      .values(values)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (!created.paused) await ctx.queue.schedules.schedule(created.id, created);
    return {
      result: created,
      entry: {
        action: 'schedule.create',
        target: { kind: 'schedule', id: created.id },
        details: { projectId, cron: created.cron, timezone: created.timezone, mode: created.mode },
      },
    };
  });
  ctx.log.info({ scheduleId: row.id, projectId }, 'schedule created');
  return toScheduleRecord(row);
}

/** The project's schedules, oldest first. */
export async function listSchedules(ctx: AppContext, projectId: string): Promise<ScheduleRecord[]> {
  await projectRow(ctx.db, projectId);
  const rows = await ctx.db
    .selectFrom('schedules')
    .selectAll()
    .where('project_id', '=', projectId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map(toScheduleRecord);
}

export async function getSchedule(
  ctx: AppContext,
  projectId: string,
  scheduleId: string,
): Promise<ScheduleRecord> {
  await projectRow(ctx.db, projectId);
  return toScheduleRecord(await scheduleRow(ctx.db, projectId, scheduleId));
}

/** Changes the given fields; pausing stops its firings, resuming starts them again. */
export async function updateSchedule(
  ctx: AppContext,
  who: Who,
  projectId: string,
  scheduleId: string,
  changes: ScheduleChanges,
): Promise<ScheduleRecord> {
  const project = await projectRow(ctx.db, projectId);
  const current = await scheduleRow(ctx.db, projectId, scheduleId);
  const next = {
    name: changes.name ?? current.name,
    cron: changes.cron ?? current.cron,
    timezone: changes.timezone ?? current.timezone,
    prompt: changes.prompt ?? current.prompt,
    mode: changes.mode ?? current.mode,
    model: changes.model === undefined ? current.model : changes.model,
    paused: changes.paused ?? current.paused,
  };
  check(ctx, project, next);
  const row = await auditedChange(ctx, who, async (trx) => {
    await scheduleRow(trx, projectId, scheduleId, true);
    const updated = await trx
      .updateTable('schedules')
      .set({ ...next, updated_at: sql`now()` })
      .where('id', '=', scheduleId)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (updated.paused) await ctx.queue.schedules.unschedule(scheduleId);
    else await ctx.queue.schedules.schedule(scheduleId, updated);
    return {
      result: updated,
      entry: {
        action: 'schedule.update',
        target: { kind: 'schedule', id: scheduleId },
        details: { projectId, fields: Object.keys(changes).sort() },
      },
    };
  });
  ctx.log.info({ scheduleId, projectId, paused: row.paused }, 'schedule updated');
  return toScheduleRecord(row);
}

/** Deletes the schedule and its firings' log; its jobs stay. */
export async function deleteSchedule(
  ctx: AppContext,
  who: Who,
  projectId: string,
  scheduleId: string,
): Promise<void> {
  await projectRow(ctx.db, projectId);
  await auditedChange(ctx, who, async (trx) => {
    await scheduleRow(trx, projectId, scheduleId, true);
    await trx.deleteFrom('schedules').where('id', '=', scheduleId).execute();
    await ctx.queue.schedules.unschedule(scheduleId);
    return {
      result: undefined,
      entry: {
        action: 'schedule.delete',
        target: { kind: 'schedule', id: scheduleId },
        details: { projectId },
      },
    };
  });
  ctx.log.info({ scheduleId, projectId }, 'schedule deleted');
}

/**
 * Brings pg-boss's scheduler in line with the table: every active schedule fired on its
 * expression, nothing else. Run when a worker starts: an imported database (pg-boss's schema is
 * not exported) and a change whose commit failed after the scheduler was told are set right.
 */
export async function syncSchedules(ctx: AppContext): Promise<void> {
  const active = await ctx.db
    .selectFrom('schedules')
    .select(['id', 'cron', 'timezone'])
    .where('paused', '=', false)
    .execute();
  const ids = new Set(active.map((s) => s.id));
  for (const id of await ctx.queue.schedules.scheduled())
    if (!ids.has(id)) await ctx.queue.schedules.unschedule(id);
  for (const schedule of active) await ctx.queue.schedules.schedule(schedule.id, schedule);
}
