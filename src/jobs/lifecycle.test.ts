// The job lifecycle's transitions on the real databases: what each one writes, the event it
// records, and that subscribers hear of it once, after the commit, and never of a rolled-back
// one. Also the guard that keeps src/jobs/ the only writer of jobs, turns and events.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from '../../test/support/databases.ts';
import { untilStatus } from '../../test/support/jobs.ts';
import { RecordingRunner } from '../../test/support/runners.ts';
import { startTestService, testEnv, waitFor } from '../../test/support/service.ts';
import { loadConfig } from '../config.ts';
import type { JobStatus, ProjectRow } from '../db/schema.ts';
import { type RunningService, startService } from '../service.ts';
import {
  createJobBatched,
  failOrphan,
  failTurn,
  finishTurn,
  inTransition,
  lockJob,
  ORPHAN_MESSAGE,
  recordProgress,
  recordReviewDiff,
  retryTurn,
  startTurn,
  turnContext,
} from './lifecycle.ts';
import { type JobRecord, toJobRecord } from './record.ts';
import { archiveJob, createJob, sendMessage } from './service.ts';
import type { Transition } from './transitions.ts';

/** A transition as a subscriber heard it, and the job's status it read once it was told. */
interface Heard {
  transition: Transition;
  statusSeen: JobStatus | undefined;
}

describe('job lifecycle', () => {
  let database: TestDatabase;
  let svc: RunningService;
  let project: ProjectRow;
  let heard: Heard[];
  let reads: Promise<void>[];
  let unsubscribe: () => void;

  before(async () => {
    database = await createTestDatabase();
    svc = await startService(loadConfig(testEnv(database)), { api: false, worker: false });
    const { db } = svc.ctx;
    await db
      .insertInto('projects')
      .values({
        id: 'prj_lifecycle00000000000',
        name: 'p',
        repository: database.dataDir,
        ref: 'main',
        model: null,
      })
      .execute();
    project = await db.selectFrom('projects').selectAll().executeTakeFirstOrThrow();
    // The subscriber reads the job back as soon as it is told: it must see the change
    // committed (an announcement from inside the transaction would see the old row).
    unsubscribe = svc.ctx.transitions.subscribe((transition) => {
      const entry: Heard = { transition, statusSeen: undefined };
      heard.push(entry);
      const read = db
        .selectFrom('jobs')
        .select('status')
        .where('id', '=', transition.jobId)
        .executeTakeFirst()
        .then((row) => {
          entry.statusSeen = row?.status;
        });
      reads.push(read);
      return read;
    });
  });
  after(async () => {
    unsubscribe?.();
    await svc?.stop();
    await database?.drop();
  });

  /** What the subscriber heard since the last call, once its reads are done. */
  async function takeHeard(): Promise<Heard[]> {
    await Promise.all(reads);
    const taken = heard;
    heard = [];
    reads = [];
    return taken;
  }

  beforeEach(() => {
    heard = [];
    reads = [];
  });

  async function eventsOf(jobId: string) {
    return svc.ctx.db
      .selectFrom('events')
      .select(['turn', 'type', 'data'])
      .where('job_id', '=', jobId)
      .orderBy('seq')
      .execute();
  }

  async function turnOf(jobId: string, seq: number) {
    return svc.ctx.db
      .selectFrom('turns')
      .selectAll()
      .where('job_id', '=', jobId)
      .where('seq', '=', seq)
      .executeTakeFirstOrThrow();
  }

  async function jobOf(jobId: string) {
    return svc.ctx.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', jobId)
      .executeTakeFirstOrThrow();
  }

  /** The job's record as GET renders it now (the same function over the same row). */
  async function recordOf(jobId: string): Promise<JobRecord> {
    return toJobRecord(await jobOf(jobId));
  }

  test('concurrent creates share one transaction; one that fails there is tried alone and fails alone', async () => {
    const { ctx } = svc;
    const newJob = (i: number, projectId = project.id) => ({
      id: `job_atonce${String(i).padStart(15, '0')}`,
      projectId,
      repository: project.repository,
      ref: 'main',
      model: 'anthropic:claude-sonnet-4-5',
      prompt: `together ${i}`,
    });
    /** The transaction that wrote each job (its row version's xmin). */
    const writers = async (ids: string[]) =>
      (
        await sql<{ id: string; writer: string }>`
            SELECT id, xmin::text AS writer FROM jobs WHERE id = ANY (${ids}) ORDER BY id`.execute(
          ctx.db,
        )
      ).rows;
    // Asked in one turn of the event loop: one transaction.
    const together = [0, 1, 2, 3, 4, 5].map((i) => newJob(i));
    const created = await Promise.all(together.map((job) => createJobBatched(ctx, job)));
    assert.deepEqual(
      created.map((c) => c?.job.id),
      together.map((j) => j.id),
    );
    const shared = await writers(together.map((j) => j.id));
    assert.equal(shared.length, 6);
    assert.equal(
      new Set(shared.map((w) => w.writer)).size,
      1,
      'the creates were not one transaction',
    );
    const announced = await takeHeard();
    assert.deepEqual(
      announced.map((h) => [h.transition.type, h.transition.jobId, h.statusSeen]),
      together.flatMap((j) => [
        ['job.created', j.id, 'active'],
        ['turn.accepted', j.id, 'active'],
      ]),
    );
    for (const job of together) {
      const turn = await turnOf(job.id, 1);
      assert.equal(turn.prompt, job.prompt);
      assert.ok(turn.queue_id);
      assert.deepEqual(
        (await eventsOf(job.id)).map((e) => [e.type, e.data]),
        [['job.created', { job: await recordOf(job.id) }]],
      );
    }

    // A create for a project that does not exist fails the shared transaction: the others are
    // created each alone, and only it fails, with the database's own error.
    const mixed = [6, 7, 8].map((i) => newJob(i));
    const orphan = newJob(9, 'prj_nosuchproject0000000');
    const results = await Promise.allSettled(
      [...mixed, orphan].map((job) => createJobBatched(ctx, job)),
    );
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'fulfilled', 'fulfilled', 'rejected'],
    );
    const failure = results[3];
    assert.equal(
      failure?.status === 'rejected' && (failure.reason as { code?: string }).code,
      '23503',
    );
    const alone = await writers([...mixed, orphan].map((j) => j.id));
    assert.deepEqual(
      alone.map((w) => w.id),
      mixed.map((j) => j.id),
    );
    assert.equal(new Set(alone.map((w) => w.writer)).size, 3);
    // Each alone, in the order their statements ended.
    assert.deepEqual(
      (await takeHeard()).map((h) => `${h.transition.jobId} ${h.transition.type}`).sort(),
      mixed.flatMap((j) => [`${j.id} job.created`, `${j.id} turn.accepted`]).sort(),
    );
  });

  test('a turn is accepted, started and finished; each is announced once, after commit', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'first' });
    const accepted = await takeHeard();
    const createdRecord = await recordOf(job.id);
    assert.deepEqual(createdRecord, toJobRecord(job));
    assert.deepEqual(
      accepted.map((h) => [h.transition.type, h.transition.turn, h.transition.status]),
      [
        ['job.created', null, 'active'],
        ['turn.accepted', 1, 'active'],
      ],
    );
    assert.deepEqual(accepted[0]?.transition.data, { job: createdRecord });
    assert.deepEqual(
      accepted.map((h) => h.statusSeen),
      ['active', 'active'],
      'the subscriber did not see the new job',
    );
    assert.equal((await turnOf(job.id, 1)).state, 'queued');
    // Accepting a turn records no event of its own (the job's record says so); creating the
    // job is one, carrying the record as it was created.
    assert.deepEqual(await eventsOf(job.id), [
      { turn: null, type: 'job.created', data: { job: createdRecord } },
    ]);

    const started = await startTurn(ctx, job.id, 1, 1);
    assert.equal(started?.turn.state, 'running');
    assert.equal(started?.turn.attempts, 1);
    assert.equal(started?.job.status, 'active');
    // The job was active already: starting its turn is no change of status.
    assert.deepEqual(
      (await takeHeard()).map((h) => [h.transition.type, h.transition.data, h.statusSeen]),
      [['turn.started', { attempt: 1 }, 'active']],
    );

    const finished = await finishTurn(ctx, job.id, 1, {
      summary: 'did it',
      prLink: 'https://example.test/pr/7',
      prNumber: 7,
      usage: { inputTokens: 10, outputTokens: 5 },
      messages: [{ role: 'user', content: 'first' }],
      commitSha: 'abc123',
    });
    assert.equal(finished, true);
    const done = await turnOf(job.id, 1);
    assert.equal(done.state, 'done');
    assert.equal(done.summary, 'did it');
    assert.equal(done.commit_sha, 'abc123');
    assert.ok(done.finished_at);
    const row = await jobOf(job.id);
    assert.equal(row.status, 'completed');
    assert.equal(row.pr_link, 'https://example.test/pr/7');
    assert.equal(row.pr_number, 7);
    const completedRecord = await recordOf(job.id);
    assert.equal(completedRecord.status, 'completed');
    assert.equal(completedRecord.prLink, 'https://example.test/pr/7');
    const heardFinish = await takeHeard();
    assert.deepEqual(
      heardFinish.map((h) => [
        h.transition.type,
        h.transition.turn,
        h.transition.status,
        h.statusSeen,
      ]),
      [
        ['turn.finished', 1, 'completed', 'completed'],
        ['job.completed', null, 'completed', 'completed'],
      ],
    );
    assert.deepEqual(heardFinish[1]?.transition.data, { job: completedRecord });
    assert.deepEqual(await eventsOf(job.id), [
      { turn: null, type: 'job.created', data: { job: createdRecord } },
      { turn: 1, type: 'turn.started', data: { attempt: 1 } },
      {
        turn: 1,
        type: 'turn.finished',
        data: {
          summary: 'did it',
          usage: { inputTokens: 10, outputTokens: 5 },
          prLink: 'https://example.test/pr/7',
        },
      },
      { turn: null, type: 'job.completed', data: { job: completedRecord } },
    ]);

    // A repeated delivery of a settled turn changes nothing and announces nothing.
    assert.equal(await startTurn(ctx, job.id, 1, 2), undefined);
    assert.equal(await finishTurn(ctx, job.id, 1, { summary: 'again' }), false);
    assert.equal(await failTurn(ctx, job.id, 1, 'late failure'), false);
    assert.deepEqual(await takeHeard(), []);
    assert.equal((await eventsOf(job.id)).length, 4);
    assert.deepEqual(await recordOf(job.id), completedRecord);

    // The next turn works from the project and the finished turn's conversation.
    const context = await turnContext(ctx, await jobOf(job.id), 2);
    assert.equal(context.project.id, project.id);
    assert.deepEqual(context.earlier, [
      {
        seq: 1,
        prompt: 'first',
        summary: 'did it',
        messages: [{ role: 'user', content: 'first' }],
      },
    ]);
  });

  test('a job stays active while a later turn is queued, whether its turn finishes or fails', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'one' });
    await startTurn(ctx, job.id, 1, 1);
    await sendMessage(ctx, project, job.id, 'two');
    await sendMessage(ctx, project, job.id, 'three');
    await finishTurn(ctx, job.id, 1, { summary: 'one done' });
    assert.equal((await jobOf(job.id)).status, 'active');
    await startTurn(ctx, job.id, 2, 1);
    assert.equal(await failTurn(ctx, job.id, 2, 'the model refused'), true);
    let row = await jobOf(job.id);
    assert.equal(row.status, 'active', 'a failed turn with one queued behind it failed the job');
    assert.equal(row.error, 'the model refused');
    await startTurn(ctx, job.id, 3, 1);
    assert.equal((await jobOf(job.id)).error, null, 'a started turn kept the last error');
    assert.equal(await failTurn(ctx, job.id, 3, 'the push was refused'), true);
    row = await jobOf(job.id);
    assert.equal(row.status, 'failed');
    assert.equal(row.error, 'the push was refused');
    assert.equal((await turnOf(job.id, 3)).error, 'the push was refused');
    const transitions = (await takeHeard()).map((h) => [
      h.transition.type,
      h.transition.turn,
      h.transition.status,
      h.statusSeen,
    ]);
    assert.deepEqual(transitions, [
      ['job.created', null, 'active', 'active'],
      ['turn.accepted', 1, 'active', 'active'],
      ['turn.started', 1, 'active', 'active'],
      ['turn.accepted', 2, 'active', 'active'],
      ['turn.accepted', 3, 'active', 'active'],
      ['turn.finished', 1, 'active', 'active'],
      ['turn.started', 2, 'active', 'active'],
      ['turn.failed', 2, 'active', 'active'],
      ['turn.started', 3, 'active', 'active'],
      ['turn.failed', 3, 'failed', 'failed'],
      ['job.failed', null, 'failed', 'failed'],
    ]);
  });

  test('a retry is recorded without settling the turn; an orphan fails with a message that says why', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'flaky' });
    await startTurn(ctx, job.id, 1, 1);
    const data = { error: 'the model answered 503', attempt: 1, retryInSeconds: 4 };
    assert.equal(await retryTurn(ctx, job.id, 1, data), true);
    assert.equal((await turnOf(job.id, 1)).state, 'running');
    assert.equal((await jobOf(job.id)).status, 'active');
    assert.equal(await failOrphan(ctx, job.id, 1), true);
    const row = await jobOf(job.id);
    assert.equal(row.status, 'failed');
    assert.equal(row.error, ORPHAN_MESSAGE);
    const failedRecord = toJobRecord(row);
    assert.equal(failedRecord.error, ORPHAN_MESSAGE);
    assert.deepEqual(
      (await eventsOf(job.id)).map((e) => [e.type, e.data]),
      [
        ['job.created', { job: toJobRecord(job) }],
        ['turn.started', { attempt: 1 }],
        ['turn.retrying', data],
        ['turn.failed', { error: ORPHAN_MESSAGE }],
        ['job.failed', { job: failedRecord }],
      ],
    );
    assert.deepEqual(
      (await takeHeard()).map((h) => [h.transition.type, h.statusSeen]),
      [
        ['job.created', 'active'],
        ['turn.accepted', 'active'],
        ['turn.started', 'active'],
        ['turn.retrying', 'active'],
        ['turn.failed', 'failed'],
        ['job.failed', 'failed'],
      ],
    );
    assert.equal(await failOrphan(ctx, job.id, 1), false, 'an orphan failed twice');
  });

  test('archiving cancels open turns, and no later transition changes the job', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'long' });
    await startTurn(ctx, job.id, 1, 1);
    await sendMessage(ctx, project, job.id, 'queued behind');
    const archivedView = await archiveJob(ctx, project.id, job.id);
    const row = await jobOf(job.id);
    assert.equal(row.status, 'archived');
    assert.ok(row.archived_at);
    const archivedRecord = toJobRecord(row);
    assert.deepEqual(archivedRecord, toJobRecord(archivedView));
    for (const seq of [1, 2]) assert.equal((await turnOf(job.id, seq)).state, 'cancelled');
    // The worker's late result of the running turn and a retry find nothing to change.
    assert.equal(await finishTurn(ctx, job.id, 1, { summary: 'too late' }), false);
    assert.equal(
      await retryTurn(ctx, job.id, 1, { error: 'x', attempt: 1, retryInSeconds: 1 }),
      false,
    );
    assert.equal(await startTurn(ctx, job.id, 2, 1), undefined);
    assert.equal((await jobOf(job.id)).status, 'archived');
    assert.deepEqual(
      (await eventsOf(job.id)).map((e) => [e.turn, e.type]),
      [
        [null, 'job.created'],
        [1, 'turn.started'],
        [null, 'job.archived'],
      ],
    );
    assert.deepEqual((await eventsOf(job.id)).at(-1)?.data, { job: archivedRecord });
    assert.equal(archivedRecord.archivedAt, row.archived_at?.toISOString());
    const archived = (await takeHeard()).filter((h) => h.transition.type === 'job.archived');
    assert.deepEqual(
      archived.map((h) => [h.transition.turn, h.transition.status, h.statusSeen]),
      [[null, 'archived', 'archived']],
    );
    assert.deepEqual(archived[0]?.transition.data, { job: archivedRecord });
    // Archiving again is no transition.
    await archiveJob(ctx, project.id, job.id);
    assert.deepEqual(await takeHeard(), []);
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
          data: {},
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

  test('the review diff is stored on the job', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'diff' });
    await recordReviewDiff(ctx, job.id, 'diff --git a/x b/x\n', true);
    const row = await jobOf(job.id);
    assert.equal(row.review_diff, 'diff --git a/x b/x\n');
    assert.equal(row.review_diff_truncated, true);
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

  test('a progress event of a job that is gone writes nothing and does not throw', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'deleted under the worker' });
    await startTurn(ctx, job.id, 1, 1);
    await recordProgress(ctx, job.id, 1, 'agent.step', { step: 'before' });
    assert.deepEqual(
      (await eventsOf(job.id)).map((e) => [e.type, e.data]),
      [
        ['job.created', { job: toJobRecord(job) }],
        ['turn.started', { attempt: 1 }],
        ['agent.step', { step: 'before' }],
      ],
    );
    await ctx.db.deleteFrom('jobs').where('id', '=', job.id).execute();
    await recordProgress(ctx, job.id, 1, 'agent.step', { step: 'after' });
    const left = await ctx.db
      .selectFrom('events')
      .select(({ fn }) => fn.countAll<string>().as('n'))
      .where('job_id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.equal(Number(left.n), 0);
    await takeHeard();
  });

  test('a progress event waits for the lock on its job, so its seq is drawn after the holder’s event', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'ordered' });
    await startTurn(ctx, job.id, 1, 1);
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let locked = () => {};
    const isLocked = new Promise<void>((resolve) => {
      locked = resolve;
    });
    // A transition that holds the job's lock, and writes its event only once the progress
    // event is waiting for that lock.
    const holder = inTransition(ctx, async ({ trx, record }) => {
      await lockJob(trx, job.id);
      locked();
      await gate;
      await record({
        type: 'turn.retrying',
        jobId: job.id,
        turn: 1,
        status: 'active',
        data: { error: 'held', attempt: 1, retryInSeconds: 1 },
      });
    });
    await isLocked;
    let progressSettled = false;
    const progress = recordProgress(ctx, job.id, 1, 'agent.step', { step: 'waited' }).finally(
      () => {
        progressSettled = true;
      },
    );
    try {
      await waitFor(
        'the progress event to wait for the job lock',
        async () => {
          if (progressSettled) throw new Error('the progress event did not wait for the lock');
          const { rows } = await sql<{ n: string }>`
                SELECT count(*) AS n FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'
                  AND query ILIKE '%insert into%events%'`.execute(ctx.db);
          return Number(rows[0]?.n) === 1 ? true : undefined;
        },
        5_000,
      );
      assert.equal(progressSettled, false);
      assert.deepEqual(
        (await eventsOf(job.id)).map((e) => e.type),
        ['job.created', 'turn.started'],
      );
    } finally {
      release();
    }
    await Promise.all([holder, progress]);
    const events = await ctx.db
      .selectFrom('events')
      .select(['seq', 'type'])
      .where('job_id', '=', job.id)
      .where('type', 'in', ['turn.retrying', 'agent.step'])
      .orderBy('seq')
      .execute();
    assert.deepEqual(
      events.map((e) => e.type),
      ['turn.retrying', 'agent.step'],
      "the progress event's seq is below the lock holder's: a reader could have missed it",
    );
    assert.ok(Number(events[1]?.seq) > Number(events[0]?.seq));
    await takeHeard();
  });
});

describe('a worker changes jobs only through the lifecycle', () => {
  test('a subscriber hears every transition of a turn the worker runs, with its progress in the log', async () => {
    const runner = new RecordingRunner(async (input) => {
      await input.emit('agent.step', { step: 1 });
      await input.saveReviewDiff('diff --git a/f b/f\n', false);
      return { summary: `did ${input.turn.prompt}` };
    });
    const svc = await startTestService({ runner });
    const heard: string[] = [];
    const unsubscribe = svc.service.ctx.transitions.subscribe((t) => {
      heard.push(`${t.type} ${t.turn} ${t.status}`);
    });
    try {
      const project = await svc.createProject();
      const created = await svc.request('POST', `/v2/agent/${project.id}/job`, {
        body: { prompt: 'one' },
      });
      assert.equal(created.status, 201, created.text);
      const jobId = created.json.id ?? '';
      const completed = await untilStatus(svc, project.id, jobId, 'completed', {
        failFast: true,
      });
      assert.deepEqual(heard, [
        'job.created null active',
        'turn.accepted 1 active',
        'turn.started 1 active',
        'turn.finished 1 completed',
        'job.completed null completed',
      ]);
      const { db } = svc.service.ctx;
      const events = await db
        .selectFrom('events')
        .select(['type', 'data'])
        .where('job_id', '=', jobId)
        .orderBy('seq')
        .execute();
      assert.deepEqual(
        events.map((e) => e.type),
        ['job.created', 'turn.started', 'agent.step', 'turn.finished', 'job.completed'],
      );
      // The status events carry the record as the API gave it: the create's answer, and what
      // GET returns once the job completed.
      assert.deepEqual(events[0]?.data, { job: created.json });
      assert.deepEqual(events[4]?.data, { job: completed });
      assert.equal(completed.status, 'completed');
      const job = await db
        .selectFrom('jobs')
        .select('review_diff')
        .where('id', '=', jobId)
        .executeTakeFirstOrThrow();
      assert.equal(job.review_diff, 'diff --git a/f b/f\n');
    } finally {
      unsubscribe();
      await svc.close();
    }
  });
});

// --- Only src/jobs/ writes jobs, turns and events -------------------------------------------

const OWNED = '(?:jobs|turns|events)';
const WRITES: readonly RegExp[] = [
  // Kysely, with or without an alias: insertInto('jobs'), updateTable('turns as t'), …
  new RegExp(
    String.raw`\b(?:insertInto|updateTable|deleteFrom|replaceInto|mergeInto)\(\s*['"\x60]${OWNED}(?:\s+as\s+\w+)?['"\x60]`,
  ),
  // Raw SQL, in upper case as Errand writes it (lower case would match English prose).
  new RegExp(
    String.raw`\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(?:ONLY\s+)?(?:public\.)?"?${OWNED}"?\b`,
  ),
];

/** `file:line: text` of every write to the lifecycle's tables in `root`, outside `jobs/`. */
async function writesOutsideJobs(root: string): Promise<string[]> {
  const found: string[] = [];
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  for (const entry of entries) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    // Tests set up states with their own writes; they are not modules of the service.
    if (entry.name.endsWith('.test.ts')) continue;
    const file = path.relative(root, path.join(entry.parentPath, entry.name));
    if (file.split(path.sep)[0] === 'jobs') continue;
    const lines = (await readFile(path.join(root, file), 'utf8')).split('\n');
    lines.forEach((line, i) => {
      if (WRITES.some((pattern) => pattern.test(line)))
        found.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  return found;
}

describe('the owner of jobs, turns and events', () => {
  test('no module outside src/jobs/ writes them', async () => {
    const src = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
    assert.deepEqual(await writesOutsideJobs(src), []);
  });

  test('the check finds every kind of write, and leaves reads, other tables and src/jobs/ alone', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'errand-owner-'));
    try {
      await mkdir(path.join(root, 'queue'));
      await mkdir(path.join(root, 'jobs'));
      const writes = [
        "await trx.insertInto('events').values(row).execute();",
        "db.updateTable('jobs').set({ status: 'failed' })",
        'db.deleteFrom("turns").where(x)',
        "db.updateTable('turns as t').set(x)",
        "sql`UPDATE turns SET state = 'running'`",
        'sql`INSERT INTO events (job_id) VALUES (1)`',
        'sql`DELETE FROM public.jobs WHERE id = 1`',
      ];
      const harmless = [
        "db.selectFrom('jobs').selectAll()",
        "db.updateTable('projects').set(x)",
        "sql`UPDATE pgboss.job SET state = 'failed'`",
        '// the worker will update jobs through lifecycle.ts',
      ];
      await writeFile(path.join(root, 'queue', 'writer.ts'), [...writes, ...harmless].join('\n'));
      await writeFile(path.join(root, 'queue', 'writer.test.ts'), writes.join('\n'));
      await writeFile(path.join(root, 'jobs', 'owner.ts'), writes.join('\n'));
      const found = await writesOutsideJobs(root);
      assert.deepEqual(
        found,
        writes.map((w, i) => `${path.join('queue', 'writer.ts')}:${i + 1}: ${w}`),
      );
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
