// A schedule as the admin API returns it, declared once: the server's type, the OpenAPI component
// Schedule and the typed client's type come from this schema; toScheduleRecord maps a row onto it.
import { z } from 'zod';
import type { ScheduleRow } from '../../db/schema.ts';
import { actorRecord } from '../../records/actor.ts';

/** The modes a schedule's jobs run in (issue 34's modes: code changes, ask answers, plan waits). */
export const SCHEDULE_MODES = Object.freeze(['code', 'ask', 'plan'] as const);

export const scheduleRecord = z
  .object({
    id: z.string().describe('The schedule id (sch_ and 20 characters).'),
    projectId: z.string(),
    name: z.string().describe("A name to know it by; the jobs' createdBy carries it."),
    cron: z.string().describe('When it fires: a cron expression (five fields, minutes first).'),
    timezone: z.string().describe('The IANA time zone the expression is read in.'),
    prompt: z.string().describe('The prompt of each job it creates.'),
    mode: z.enum(SCHEDULE_MODES).describe('The mode of the jobs it creates.'),
    model: z.string().nullable().describe("The jobs' model; null: the project's at each firing."),
    paused: z.boolean().describe('A paused schedule does not fire.'),
    createdBy: actorRecord.nullable().describe('Who made the schedule.'),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
    lastFiring: z
      .object({
        at: z.iso.datetime().describe('When it fired last.'),
        jobId: z.string().nullable().describe('The job that firing created; null when none.'),
        error: z
          .string()
          .nullable()
          .describe('Why no job was created (a rate limit, the budget, a model); null: one was.'),
      })
      .nullable()
      .describe('Its last firing; null until it has fired.'),
  })
  .meta({ id: 'Schedule', description: "A project's recurring prompt: a job at each firing." });

export type ScheduleRecord = z.infer<typeof scheduleRecord>;

export function toScheduleRecord(row: ScheduleRow): ScheduleRecord {
  return {
    id: row.id,
    projectId: row.project_id,
    name: row.name,
    cron: row.cron,
    timezone: row.timezone,
    prompt: row.prompt,
    mode: row.mode,
    model: row.model,
    paused: row.paused,
    createdBy: row.created_by,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    lastFiring: row.last_fired_at
      ? { at: row.last_fired_at.toISOString(), jobId: row.last_job_id, error: row.last_error }
      : null,
  };
}
