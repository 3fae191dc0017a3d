// A schedule's firings: two `errand worker` processes and a service on one database (each
// running pg-boss's scheduler, the two workers taking firings) make one job per occurrence,
// minute after minute; a redelivered entry makes no
// second job; a paused schedule makes none; a refusal of the project's rate limit is recorded on
// the schedule and its firing, and no job is made.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { exited, startWorkerProcess } from '../../../test/support/process.ts';
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('schedule firings', () => {
  // The API (its pg-boss runs the scheduler's pass too, and takes no firing) and two worker
  // processes on its database: each runs the pass and takes the schedules' queue.
  let a: TestService;
  const workers: ChildProcess[] = [];

  before(async () => {
    a = await startTestService({ worker: false });
    for (let i = 0; i < 2; i++)
      workers.push(
        await startWorkerProcess({
          ...a.env,
          ERRAND_PUBLIC_URL: a.url,
          // The jobs' turns reach for their model here, on loopback, where nothing answers:
          // only the jobs' count matters.
          ANTHROPIC_BASE_URL: 'http://127.0.0.1:9/v1',
        }),
      );
  });
  after(async () => {
    for (const worker of workers) {
      worker.kill('SIGTERM');
      await exited(worker);
    }
    await a?.close();
  });

  test('one job per occurrence across two workers, made by the schedule', async () => {
    const project = await a.createProject({ name: 'scheduled' });
    const schedule = await createSchedule(a, project.id, {
      name: 'every minute',
      cron: '* * * * *',
      prompt: 'complete the chore',
    });
    const ctx = a.service.ctx;
    // The occurrence of this minute is due at once; the next comes with the next minute.
    await waitFor('the first firing', async () =>
      (await jobsOf(ctx, project.id)).length >= 1 ? true : undefined,
    );
    await waitFor(
      'the next minute’s firing',
      async () => ((await jobsOf(ctx, project.id)).length >= 2 ? true : undefined),
      75_000,
    );
    // Both workers' passes run every five seconds: a second job for either occurrence would
    // have come by now.
    await sleep(7_000);
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
    const project = await a.createProject({ name: 'paused' });
    const schedule = await createSchedule(a, project.id, {
      cron: '* * * * *',
      prompt: 'complete never',
      paused: true,
    });
    await fire(a.service.ctx, { id: randomUUID(), data: { scheduleId: schedule.id } });
    // Two of the scheduler's passes: an active schedule of the same expression fires in one.
    await sleep(11_000);
    assert.equal((await jobsOf(a.service.ctx, project.id)).length, 0);
    assert.equal((await getSchedule(a, schedule)).lastFiring, null);
    const deleted = await a.request(
      'DELETE',
      `/v2/admin/projects/${project.id}/schedules/${schedule.id}`,
    );
    assert.equal(deleted.status, 204);
    await fire(a.service.ctx, { id: randomUUID(), data: { scheduleId: schedule.id } });
    assert.equal((await jobsOf(a.service.ctx, project.id)).length, 0);
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
