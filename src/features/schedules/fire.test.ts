// A schedule's firings: two services on one database (each running pg-boss's scheduler and
// taking firings) make one job per occurrence, minute after minute; a redelivered entry makes no
// second job; a paused schedule makes none; a refusal of the project's rate limit is recorded on
// the schedule and its firing, and no job is made. The scheduler's time is a TestClock of pg-boss's
// that the tests move by hand: an absence is shown by having run every pass of the scheduler that
// could have made it, never by waiting.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { TestClock } from 'pg-boss';
import { SCRIPTED_ENV, scriptedRunner } from '../../../test/support/route-cases.ts';
import { startTestService, type TestService, waitFor } from '../../../test/support/service.ts';
import type { AppContext } from '../../context.ts';
import { createLogger } from '../../log.ts';
import { fire, firingJob } from './fire.ts';
import type { ScheduleRecord } from './types.ts';

async function createSchedule(
  svc: TestService,
  projectId: string,
  body: Record<string, unknown>,
): Promise<ScheduleRecord> {
  const res = await svc.request('POST', `/v2/admin/projects/${projectId}/schedules`, { body });
  assert.equal(res.status, 201, res.text);
  return JSON.parse(res.text) as ScheduleRecord;
}

async function getSchedule(svc: TestService, schedule: ScheduleRecord): Promise<ScheduleRecord> {
  const res = await svc.request(
    'GET',
    `/v2/admin/projects/${schedule.projectId}/schedules/${schedule.id}`,
  );
  assert.equal(res.status, 200, res.text);
  return JSON.parse(res.text) as ScheduleRecord;
}

async function jobsOf(ctx: AppContext, projectId: string) {
  return ctx.db
    .selectFrom('jobs')
    .select(['id', 'created_by'])
    .where('project_id', '=', projectId)
    .orderBy('created_at')
    .execute();
}

async function firingsOf(ctx: AppContext, scheduleId: string) {
  return ctx.db
    .selectFrom('schedule_firings')
    .selectAll()
    .where('schedule_id', '=', scheduleId)
    .orderBy('fired_at')
    .execute();
}

/** The states of the schedules' queue entries the scheduler sent for a schedule, oldest first. */
async function entriesOf(ctx: AppContext, scheduleId: string): Promise<string[]> {
  const { rows } = await sql<{ state: string }>`
    SELECT state FROM pgboss.job
    WHERE name = 'schedules' AND data->>'scheduleId' = ${scheduleId}
    ORDER BY created_on`.execute(ctx.db);
  return rows.map((r) => r.state);
}

/** Waits until every entry sent for the schedule has been handled, and returns their count. */
async function settledEntries(ctx: AppContext, scheduleId: string): Promise<number> {
  return waitFor(`the firings of ${scheduleId} handled`, async () => {
    const states = await entriesOf(ctx, scheduleId);
    return states.every((s) => s === 'completed') ? states.length : undefined;
  });
}

const MINUTE = 60_000;

describe('schedule firings', () => {
  // Two services on one database, as two processes would be: each runs pg-boss's scheduler
  // (whose pass one instance at a time claims) and takes the schedules' queue. Their queues share
  // one TestClock, which also moves pg-boss's time in the database. It starts ten seconds before
  // a minute (M1).
  const m1 = Math.ceil(Date.now() / MINUTE) * MINUTE + MINUTE;
  const clock = new TestClock(m1 - 10_000);
  /** Moves the queues' time to `t`, running every timer of both on the way (polls, passes). */
  const tickTo = (t: number) => clock.tick(t - clock.now());
  // One worker per queue and service: each polls on the clock, and every poll is a statement the
  // clock waits for as it moves.
  const env = { ERRAND_CONCURRENCY: '1', ERRAND_WEBHOOK_CONCURRENCY: '1' };
  let a: TestService;
  let b: TestService;

  before(async () => {
    a = await startTestService({ clock, runner: scriptedRunner(), env });
    b = await startTestService({
      clock,
      database: a.database,
      adminKey: a.adminKey,
      runner: scriptedRunner(),
      env,
    });
  });
  after(async () => {
    await b?.stop();
    await a?.close();
  });

  test('one job per occurrence across two services, made by the schedule', async () => {
    const project = await a.createProject({ name: 'scheduled' });
    const schedule = await createSchedule(a, project.id, {
      name: 'every minute',
      cron: '* * * * *',
      prompt: 'complete the chore',
    });
    const ctx = a.service.ctx;
    // The occurrence of this minute (M0) is due at once: the next pass, before M1, sends it.
    await tickTo(m1 - 1_000);
    await waitFor('the first firing', async () =>
      (await jobsOf(ctx, project.id)).length >= 1 ? true : undefined,
    );
    // M1's, in the first pass after it.
    await tickTo(m1 + 10_000);
    await waitFor('the next minute’s firing', async () =>
      (await jobsOf(ctx, project.id)).length >= 2 ? true : undefined,
    );
    // Every other pass of both schedulers that holds M1 in its due window, up to the next
    // minute: any of them could have sent a second entry for it.
    await tickTo(m1 + MINUTE - 1_000);
    assert.equal(await settledEntries(ctx, schedule.id), 2, 'one entry per occurrence');
    const jobs = await jobsOf(ctx, project.id);
    const firings = await firingsOf(ctx, schedule.id);
    assert.equal(jobs.length, 2, 'one job per occurrence');
    assert.equal(firings.length, 2);
    assert.deepEqual(
      firings.map((f) => f.job_id),
      jobs.map((j) => j.id),
    );
    for (const job of jobs)
      assert.deepEqual(job.created_by, {
        kind: 'schedule',
        id: schedule.id,
        name: 'every minute',
      });
    const now = await getSchedule(a, schedule);
    assert.equal(now.lastFiring?.jobId, jobs[1]?.id);
    assert.equal(now.lastFiring?.error, null);
    const job = await a.request('GET', `/v2/agent/${project.id}/job/${jobs[1]?.id}`);
    assert.equal(job.status, 200, job.text);
    assert.match(job.text, /"kind":"schedule"/);

    // Paused: no more firings, and an entry already sent does nothing.
    const paused = await a.request(
      'PATCH',
      `/v2/admin/projects/${project.id}/schedules/${schedule.id}`,
      { body: { paused: true } },
    );
    assert.equal(paused.status, 200, paused.text);
    await fire(ctx, { id: randomUUID(), data: { scheduleId: schedule.id } });
    assert.equal((await jobsOf(ctx, project.id)).length, 2);
    assert.equal((await firingsOf(ctx, schedule.id)).length, 2);
  });

  test('an entry delivered twice, at once or later, makes one job', async () => {
    const project = await a.createProject({ name: 'redelivered' });
    const schedule = await createSchedule(a, project.id, {
      cron: '0 0 1 1 *',
      prompt: 'complete once',
      paused: false,
    });
    const entry = { id: randomUUID(), data: { scheduleId: schedule.id } };
    await Promise.all([fire(a.service.ctx, entry), fire(a.service.ctx, entry)]);
    await fire(a.service.ctx, entry);
    assert.equal((await jobsOf(a.service.ctx, project.id)).length, 1);
    assert.equal((await firingsOf(a.service.ctx, schedule.id)).length, 1);
  });

  test('a paused schedule fires nothing, and a deleted one nothing either', async () => {
    const ctx = a.service.ctx;
    // Once an hour, at the queues' next minute: no earlier occurrence is due.
    const minute = Math.ceil((clock.now() + 1) / MINUTE) * MINUTE;
    const cron = `${new Date(minute).getUTCMinutes()} * * * *`;
    const project = await a.createProject({ name: 'paused' });
    const schedule = await createSchedule(a, project.id, {
      cron,
      prompt: 'complete never',
      paused: true,
    });
    // An active schedule of the same expression: what the same passes do when not paused.
    const other = await a.createProject({ name: 'active' });
    const active = await createSchedule(a, other.id, {
      cron,
      prompt: 'complete the active one',
    });
    await fire(ctx, { id: randomUUID(), data: { scheduleId: schedule.id } });
    // Every pass of both schedulers whose due window holds that minute: the active schedule fires
    // once.
    await tickTo(minute + MINUTE - 1_000);
    assert.equal(await settledEntries(ctx, active.id), 1);
    assert.equal((await jobsOf(ctx, other.id)).length, 1);
    assert.deepEqual(await entriesOf(ctx, schedule.id), []);
    assert.equal((await jobsOf(ctx, project.id)).length, 0);
    assert.equal((await getSchedule(a, schedule)).lastFiring, null);
    const deleted = await a.request(
      'DELETE',
      `/v2/admin/projects/${project.id}/schedules/${schedule.id}`,
    );
    assert.equal(deleted.status, 204);
    await fire(ctx, { id: randomUUID(), data: { scheduleId: schedule.id } });
    assert.equal((await jobsOf(ctx, project.id)).length, 0);
  });

  test('the job of a firing: its prompt, mode, model and creator', () => {
    const job = firingJob({
      id: 'sch_00000000000000000000',
      project_id: 'prj_00000000000000000000',
      name: 'weekly',
      cron: '0 6 * * 1',
      timezone: 'UTC',
      prompt: 'update the dependencies',
      mode: 'ask',
      model: null,
      paused: false,
      created_by: null,
      created_at: new Date(),
      updated_at: new Date(),
      last_fired_at: null,
      last_job_id: null,
      last_error: null,
    });
    assert.equal(job.prompt, 'update the dependencies');
    assert.equal(job.mode, 'ask');
    assert.equal(job.model, undefined);
    assert.deepEqual(job.by?.actor, {
      kind: 'schedule',
      id: 'sch_00000000000000000000',
      name: 'weekly',
    });
  });
});

describe('a firing the rate limit refuses', () => {
  let svc: TestService;
  let logged = '';
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      logged += String(chunk);
      done();
    },
  });
  before(async () => {
    svc = await startTestService({
      runner: scriptedRunner(),
      env: { ...SCRIPTED_ENV, ERRAND_RATE_LIMIT_CREATE: '1' },
      log: createLogger('info', logSink),
    });
  });
  after(() => svc?.close());

  test('is recorded on the schedule and its firing, and makes no job', async () => {
    const project = await svc.createProject({ name: 'limited' });
    const used = await svc.request('POST', `/v2/agent/${project.id}/job`, {
      body: { prompt: 'complete the one job the hour allows' },
    });
    assert.equal(used.status, 201, used.text);
    const schedule = await createSchedule(svc, project.id, {
      cron: '0 0 1 1 *',
      prompt: 'complete another',
    });
    const entry = { id: randomUUID(), data: { scheduleId: schedule.id } };
    await fire(svc.service.ctx, entry);
    const now = await getSchedule(svc, schedule);
    assert.equal(now.lastFiring?.jobId, null);
    assert.match(now.lastFiring?.error ?? '', /^rate_limited: rate limit of 1 job creations/);
    const [firing] = await firingsOf(svc.service.ctx, schedule.id);
    assert.equal(firing?.entry_id, entry.id);
    assert.equal(firing?.job_id, null);
    assert.match(firing?.error ?? '', /rate_limited/);
    assert.equal((await jobsOf(svc.service.ctx, project.id)).length, 1);
    // And in the log, with the schedule and its project.
    const line = logged
      .split('\n')
      .filter((l) => l.includes('"schedule firing refused"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.scheduleId === schedule.id);
    assert.equal(line?.projectId, project.id);
    assert.equal(line?.code, 'rate_limited');
  });
});
