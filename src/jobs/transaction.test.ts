// One transaction per transition on the real database: a rolled-back one is neither recorded
// nor announced, a failing subscriber changes nothing, and each change of a job's status is an
// event carrying the job's record, none while the status stays.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { useLifecycle } from '../../test/support/lifecycle.ts';
import type { JobStatus, ProjectRow } from '../db/schema.ts';
import type { RunningService } from '../service.ts';
import { failTurn, finishTurn, startTurn } from './lifecycle.ts';
import { toJobRecord } from './record.ts';
import { archiveJob, createJob, sendMessage } from './service.ts';
import { inTransition } from './transaction.ts';

describe('transitions', () => {
  const lifecycle = useLifecycle();
  const { takeHeard, eventsOf, turnOf, jobOf, recordOf } = lifecycle;
  let svc: RunningService;
  let project: ProjectRow;
  before(() => {
    ({ svc, project } = lifecycle);
  });

  test('a rolled-back transition is neither recorded nor announced', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'rolled back' });
    await takeHeard();
    const created = await eventsOf(job.id);
    assert.deepEqual(
      created.map((e) => e.type),
      ['job.created'],
    );
    const failure = new Error('the transaction fails after recording');
    await assert.rejects(
      inTransition(ctx, async ({ trx, record }) => {
        await trx
          .updateTable('turns')
          .set({ state: 'running' })
          .where('job_id', '=', job.id)
          .execute();
        await record({
          type: 'turn.started',
          jobId: job.id,
          turn: 1,
          status: 'active',
          data: { attempt: 1 },
        });
        throw failure;
      }),
      (err) => err === failure,
    );
    assert.deepEqual(await takeHeard(), []);
    assert.deepEqual(await eventsOf(job.id), created);
    assert.equal((await turnOf(job.id, 1)).state, 'queued');
    // A refused follow-up is no transition either.
    await archiveJob(ctx, project.id, job.id);
    await takeHeard();
    await assert.rejects(sendMessage(ctx, project, job.id, 'refused'), { code: 'conflict' });
    assert.deepEqual(await takeHeard(), []);
  });

  test('a failing subscriber neither undoes the transition nor keeps others from hearing it', async () => {
    const { ctx } = svc;
    const others: string[] = [];
    const stopThrowing = ctx.transitions.subscribe(() => {
      throw new Error('a broken subscriber');
    });
    const stopRejecting = ctx.transitions.subscribe(async () => {
      throw new Error('a broken async subscriber');
    });
    const stopOther = ctx.transitions.subscribe((t) => {
      others.push(t.type);
    });
    try {
      const { job } = await createJob(ctx, project, {
        prompt: 'heard despite a broken subscriber',
      });
      assert.equal((await jobOf(job.id)).status, 'active');
      assert.deepEqual(others, ['job.created', 'turn.accepted']);
    } finally {
      stopThrowing();
      stopRejecting();
      stopOther();
    }
    // Unsubscribed listeners hear nothing more.
    await createJob(ctx, project, { prompt: 'after unsubscribing' });
    assert.deepEqual(others, ['job.created', 'turn.accepted']);
    await takeHeard();
  });

  /** The job's status events (`job.*`) in order. */
  async function statusEventsOf(jobId: string) {
    return (await eventsOf(jobId)).filter((e) => e.type.startsWith('job.'));
  }

  test('each change of status is an event of the job carrying its record as the change left it', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'status one' });
    const expected: { turn: number | null; type: string; data: unknown }[] = [];
    const heardStatus: [string, number | null, string, unknown][] = [];
    /** Expects `type` as the newest status event, with the record GET would return now. */
    const changed = async (type: string, status: JobStatus) => {
      const record = await recordOf(job.id);
      assert.equal(record.status, status);
      expected.push({ turn: null, type, data: { job: record } });
      heardStatus.push([type, null, status, { job: record }]);
      assert.deepEqual(await statusEventsOf(job.id), expected, `after ${type}`);
      assert.deepEqual(
        (await takeHeard())
          .filter((h) => h.transition.type.startsWith('job.'))
          .map((h) => [h.transition.type, h.transition.turn, h.statusSeen, h.transition.data]),
        heardStatus.slice(-1),
        `the announcement of ${type}`,
      );
    };
    await changed('job.created', 'active');
    assert.deepEqual(expected[0]?.data, { job: toJobRecord(job) });

    await startTurn(ctx, job.id, 1, 1);
    await finishTurn(ctx, job.id, 1, {
      summary: 'one',
      prLink: 'https://example.test/pr/8',
      prNumber: 8,
    });
    await changed('job.completed', 'completed');
    assert.equal((await recordOf(job.id)).prLink, 'https://example.test/pr/8');

    // A follow-up to a completed job makes it active again, its pull request kept.
    const second = await sendMessage(ctx, project, job.id, 'status two');
    await changed('job.reactivated', 'active');
    assert.deepEqual(expected.at(-1)?.data, { job: toJobRecord(second.job) });
    assert.equal(toJobRecord(second.job).turns, 2);
    assert.equal(toJobRecord(second.job).prLink, 'https://example.test/pr/8');

    await startTurn(ctx, job.id, 2, 1);
    await failTurn(ctx, job.id, 2, 'the tests failed');
    await changed('job.failed', 'failed');
    assert.equal((await recordOf(job.id)).error, 'the tests failed');

    // A follow-up to a failed job makes it active again too.
    await sendMessage(ctx, project, job.id, 'status three');
    await changed('job.reactivated', 'active');
    assert.equal((await recordOf(job.id)).turns, 3);

    const archived = await archiveJob(ctx, project.id, job.id);
    await changed('job.archived', 'archived');
    assert.deepEqual(expected.at(-1)?.data, { job: toJobRecord(archived) });
    assert.ok((await recordOf(job.id)).archivedAt);
  });

  test('no status event while the status stays: a turn queued behind a running one, a turn ending with another queued', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'stay one' });
    await startTurn(ctx, job.id, 1, 1);
    await takeHeard();
    const onlyCreated = await eventsOf(job.id);
    assert.deepEqual(
      onlyCreated.map((e) => [e.turn, e.type]),
      [
        [null, 'job.created'],
        [1, 'turn.started'],
      ],
    );

    // A follow-up to an active job: a new turn, the job still active.
    await sendMessage(ctx, project, job.id, 'stay two');
    assert.equal((await jobOf(job.id)).status, 'active');
    assert.equal((await jobOf(job.id)).turn_count, 2);
    assert.deepEqual(
      (await takeHeard()).map((h) => [h.transition.type, h.transition.turn]),
      [['turn.accepted', 2]],
    );
    assert.deepEqual(await eventsOf(job.id), onlyCreated);

    // Turn 1 finishes, and fails, with turn 2 waiting: the job stays active both times.
    await finishTurn(ctx, job.id, 1, { summary: 'one done' });
    await startTurn(ctx, job.id, 2, 1);
    await sendMessage(ctx, project, job.id, 'stay three');
    await failTurn(ctx, job.id, 2, 'two failed');
    assert.equal((await jobOf(job.id)).status, 'active');
    assert.deepEqual(
      (await takeHeard()).map((h) => [h.transition.type, h.transition.turn, h.transition.status]),
      [
        ['turn.finished', 1, 'active'],
        ['turn.started', 2, 'active'],
        ['turn.accepted', 3, 'active'],
        ['turn.failed', 2, 'active'],
      ],
    );
    assert.deepEqual(
      (await eventsOf(job.id)).map((e) => [e.turn, e.type]),
      [
        [null, 'job.created'],
        [1, 'turn.started'],
        [1, 'turn.finished'],
        [2, 'turn.started'],
        [2, 'turn.failed'],
      ],
    );
  });
});
