// `errand schedule …`: a project's schedules (recurring prompts, a job at each firing) through
// the admin API: create, list, pause, resume, delete.
import type { CreateScheduleInput, Schedule } from '../client/index.ts';
import { ADMIN_NOTE, withAdminClient } from './api.ts';
import { COMMON_OPTIONS, defineCommand, type Family, print } from './command.ts';
import { EXIT, UsageError } from './errors.ts';

const PROJECT = { project: { type: 'string', value: 'ID', required: true } } as const;
const MODES = ['code', 'ask', 'plan'] as const;

/** A schedule on one line: id, state, when, name, and its last firing. */
function scheduleLine(s: Schedule): string {
  const last = s.lastFiring
    ? `  last ${s.lastFiring.at} ${s.lastFiring.jobId ?? `refused: ${s.lastFiring.error ?? ''}`}`
    : '  not fired yet';
  return `${s.id}  ${s.paused ? 'paused' : 'active'}  ${s.cron} (${s.timezone})  ${s.mode}  ${s.name}${last}`;
}

function modeOf(value: string | undefined): CreateScheduleInput['mode'] {
  if (value === undefined) return undefined;
  const mode = MODES.find((m) => m === value);
  if (!mode) throw new UsageError(`--mode must be one of ${MODES.join(', ')}`);
  return mode;
}

const create = defineCommand({
  name: 'schedule create',
  options: {
    ...PROJECT,
    cron: { type: 'string', value: 'EXPR', required: true },
    prompt: { type: 'string', value: 'TEXT', required: true },
    timezone: { type: 'string', value: 'ZONE' },
    name: { type: 'string', value: 'NAME' },
    mode: { type: 'string', value: 'code|ask|plan' },
    model: { type: 'string', value: 'PROVIDER:MODEL' },
    paused: { type: 'boolean' },
    ...COMMON_OPTIONS,
  },
  summary:
    'a job with --prompt at each occurrence of --cron (five fields, in --timezone, UTC by default)',
  async run({ values, io }) {
    const body: CreateScheduleInput = { cron: values.cron, prompt: values.prompt };
    if (values.timezone !== undefined) body.timezone = values.timezone;
    if (values.name !== undefined) body.name = values.name;
    const mode = modeOf(values.mode);
    if (mode !== undefined) body.mode = mode;
    if (values.model !== undefined) body.model = values.model;
    if (values.paused) body.paused = true;
    const created = await withAdminClient(
      io,
      values['data-dir'],
      (c) => c.createSchedule(body),
      values.project,
    );
    print(io, values.json, created, `created schedule ${scheduleLine(created)}`);
    return EXIT.ok;
  },
});

const list = defineCommand({
  name: 'schedule list',
  options: { ...PROJECT, ...COMMON_OPTIONS },
  summary: "the project's schedules, with each one's last firing and its job",
  async run({ values, io }) {
    const schedules = await withAdminClient(
      io,
      values['data-dir'],
      (c) => c.listSchedules(),
      values.project,
    );
    const text = schedules.length === 0 ? 'no schedules' : schedules.map(scheduleLine).join('\n');
    print(io, values.json, schedules, text);
    return EXIT.ok;
  },
});

function pausing(paused: boolean) {
  return defineCommand({
    name: paused ? 'schedule pause' : 'schedule resume',
    args: ['ID'],
    options: { ...PROJECT, ...COMMON_OPTIONS },
    summary: paused ? 'stop its firings until resumed' : 'fire it again',
    async run({ values, args: [id = ''], io }) {
      const schedule = await withAdminClient(
        io,
        values['data-dir'],
        (c) => c.updateSchedule(id, { paused }),
        values.project,
      );
      print(
        io,
        values.json,
        schedule,
        `${paused ? 'paused' : 'resumed'} ${scheduleLine(schedule)}`,
      );
      return EXIT.ok;
    },
  });
}

const remove = defineCommand({
  name: 'schedule delete',
  args: ['ID'],
  options: { ...PROJECT, ...COMMON_OPTIONS },
  summary: 'delete the schedule; the jobs it made stay',
  async run({ values, args: [id = ''], io }) {
    await withAdminClient(io, values['data-dir'], (c) => c.deleteSchedule(id), values.project);
    print(io, values.json, { id, deleted: true }, `deleted schedule ${id}`);
    return EXIT.ok;
  },
});

export const schedules: Family = {
  name: 'schedule',
  commands: [create, list, pausing(true), pausing(false), remove],
  subcommandPages: false,
  collapsed: true,
  outro: ADMIN_NOTE,
};
