// POST /v2/agent/{projectId}/job/{id}/archive: terminal and idempotent; stops the running turn
// and cancels queued ones. The 404s of the job id and the common auth cases.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterQueuedTurns, turnsEnded } from '../../../test/support/jobs.ts';
import {
  authCases,
  createJobId,
  createRouteFixture,
  isoNear,
  jobIdCases,
  type RouteFixture,
  type RouteSpec,
  SCRIPTED_ENV,
  scriptedRunner,
  turnStarted,
} from '../../../test/support/route-cases.ts';
import type { RecordingRunner } from '../../../test/support/runners.ts';
import { startTestService, type TestService, waitFor } from '../../../test/support/service.ts';

const spec: RouteSpec = {
  method: 'POST',
  scope: 'project',
  path: ({ projectId, jobId }) => `/v2/agent/${projectId}/job/${jobId}/archive`,
};

describe('POST /v2/agent/{projectId}/job/{id}/archive', () => {
  let svc: TestService;
  let runner: RecordingRunner;
  let fx: RouteFixture;
  const fixture = () => fx;

  before(async () => {
    runner = scriptedRunner();
    svc = await startTestService({ runner, env: SCRIPTED_ENV });
    fx = await createRouteFixture(svc);
  });
  after(async () => {
    await svc?.close();
  });

  const archive = (jobId: string, opts: { key?: string; body?: unknown } = {}) =>
    svc.request('POST', `/v2/agent/${fx.project.id}/job/${jobId}/archive`, {
      key: opts.key ?? fx.projectKey,
      ...(opts.body !== undefined ? { body: opts.body } : {}),
    });
  const getJob = (jobId: string) => svc.request('GET', `/v2/agent/${fx.project.id}/job/${jobId}`);
  const turnStates = async (jobId: string) =>
    (
      await svc.service.ctx.db
        .selectFrom('turns')
        .select('state')
        .where('job_id', '=', jobId)
        .orderBy('seq')
        .execute()
    ).map((t) => t.state);
  const archivedEvents = async (jobId: string) =>
    svc.service.ctx.db
      .selectFrom('events')
      .selectAll()
      .where('job_id', '=', jobId)
      .where('type', '=', 'job.archived')
      .execute();
  const waitForStatus = (jobId: string, status: string) =>
    waitFor(`job ${jobId} to be ${status}`, async () => {
      const res = await getJob(jobId);
      return res.json.status === status ? res : undefined;
    });

  describe('happy path', () => {
    test('archiving a running job: 200, archived, its turn aborted, queued turns cancelled', async () => {
      const jobId = await createJobId(svc, fx.project.id, 'hold until archived');
      const call = await turnStarted(runner, jobId);
      const queued = await svc.request('POST', `/v2/agent/${fx.project.id}/job/${jobId}/message`, {
        body: { prompt: 'complete after the first turn' },
      });
      assert.equal(queued.status, 200);

      const endedArchived = await turnsEnded(svc, 'archived');
      const archivedAt = Date.now();
      const res = await archive(jobId);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.id, jobId);
      assert.equal(res.json.status, 'archived');
      isoNear(res.json.archivedAt);
      assert.equal(res.json.updatedAt, res.json.archivedAt);
      assert.equal(res.json.turns, 2);
      assert.equal(res.json.prLink, null);

      await waitFor('the running turn to see the abort', async () =>
        call.endedAt !== undefined ? true : undefined,
      );
      assert.equal(call.aborted, true);
      // The worker shares the API's process: the abort is immediate, not at a heartbeat.
      assert.ok((call.endedAt ?? 0) - archivedAt < 1500, 'the turn was not aborted at once');
      assert.deepEqual(await turnStates(jobId), ['cancelled', 'cancelled']);
      // Once the worker has settled and let go of the aborted turn, the job must still be as
      // archived; and once a job queued after that has run two turns, a runnable turn 2 of this
      // job would have run before them.
      await waitFor('the worker to let go of the aborted turn', async () =>
        (await turnsEnded(svc, 'archived')) > endedArchived ? true : undefined,
      );
      await afterQueuedTurns(svc, fx.project.id, ['complete a sentinel', 'complete its follow-up']);
      assert.deepEqual((await getJob(jobId)).json, res.json);
      assert.ok(!runner.calls.some((c) => c.jobId === jobId && c.seq === 2));
      const events = await archivedEvents(jobId);
      assert.equal(events.length, 1);
      assert.equal(events[0]?.turn, null);
      // The event carries the record the archive answered with.
      assert.deepEqual(events[0]?.data, { job: res.json });
    });

    test('archiving again returns the same record and writes nothing', async () => {
      const jobId = await createJobId(svc, fx.project.id, 'hold, archive twice');
      await turnStarted(runner, jobId);
      const first = await archive(jobId);
      assert.equal(first.status, 200);
      const second = await archive(jobId, { key: svc.adminKey });
      assert.equal(second.status, 200, second.text);
      assert.deepEqual(second.json, first.json);
      assert.equal((await archivedEvents(jobId)).length, 1);
    });

    test('a completed or a failed job can be archived; its other fields stay', async () => {
      const completed = await createJobId(svc, fx.project.id, 'complete then archive');
      const failed = await createJobId(svc, fx.project.id, 'fail then archive');
      const done = await waitForStatus(completed, 'completed');
      const broken = await waitForStatus(failed, 'failed');
      for (const before of [done, broken]) {
        const res = await archive(before.json.id ?? '');
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.status, 'archived');
        isoNear(res.json.archivedAt);
        for (const field of ['createdAt', 'error', 'prLink', 'turns', 'source', 'model'] as const) {
          assert.deepEqual(res.json[field], before.json[field], field);
        }
      }
    });

    test('archiving while the worker starts or ends a turn: always 200', async () => {
      // Archive right after create races the worker's turn transactions; each must succeed.
      const statuses: number[] = [];
      for (let i = 0; i < 40; i++) {
        const jobId = await createJobId(svc, fx.project.id, i % 2 ? 'hold, race' : 'fail, race');
        if (i % 3) await sleep(i % 7);
        const res = await archive(jobId);
        statuses.push(res.status);
        if (res.status === 200) assert.equal(res.json.status, 'archived');
      }
      assert.deepEqual(
        statuses.filter((s) => s !== 200),
        [],
        'archive answered other than 200',
      );
    });

    test('an empty JSON object as the body is accepted', async () => {
      const jobId = await createJobId(svc, fx.project.id, 'hold, archive with a body');
      await turnStarted(runner, jobId);
      const res = await archive(jobId, { body: {} });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.status, 'archived');
    });
  });

  describe('errors', () => {
    jobIdCases(spec, fixture);
  });

  describe('security', () => {
    authCases(spec, fixture);

    test('the fixture jobs were never archived by a refused request', async () => {
      for (const [projectId, jobId] of [
        [fx.project.id, fx.jobId],
        [fx.otherProject.id, fx.otherJobId],
      ] as const) {
        const res = await svc.request('GET', `/v2/agent/${projectId}/job/${jobId}`);
        assert.equal(res.json.archivedAt, null);
        assert.notEqual(res.json.status, 'archived');
      }
    });
  });
});
