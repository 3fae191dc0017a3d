// The worker's transitions on the real database (start, finish, retry, fail a turn; an archive
// meanwhile), what each writes, the event it records and that subscribers hear of it once,
// after the commit; a running turn's progress and review diff; and a worker that changes jobs
// only through them. Creates are in create.test.ts, the transaction's rules in
// transaction.test.ts, the guard that keeps src/jobs/ the only writer in owner.test.ts.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { untilStatus } from '../../test/support/jobs.ts';
import { useLifecycle } from '../../test/support/lifecycle.ts';
import { RecordingRunner } from '../../test/support/runners.ts';
import { startTestService, waitFor } from '../../test/support/service.ts';
import type { ProjectRow } from '../db/schema.ts';
import type { RunningService } from '../service.ts';
import {
  failOrphan,
  failTurn,
  finishTurn,
  loadTurnInputs,
  ORPHAN_MESSAGE,
  recordProgress,
  recordReviewDiff,
  retryTurn,
  startTurn,
} from './lifecycle.ts';
import { toJobRecord } from './record.ts';
import { archiveJob, createJob, sendMessage } from './service.ts';
import {
  BudgetExhaustedError,
  jobBudgetLeft,
  monthBudgetLeft,
  monthUsage,
  rebuildSpend,
} from './spend.ts';
import { inTransition, lockJob } from './transaction.ts';
import { roundUsd } from './usage.ts';

describe('job lifecycle', () => {
  const lifecycle = useLifecycle();
  const { takeHeard, settled, eventsOf, turnOf, jobOf, recordOf } = lifecycle;
  let svc: RunningService;
  let project: ProjectRow;
  before(() => {
    ({ svc, project } = lifecycle);
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
      [['turn.started', { attempt: 1, mode: 'code' }, 'active']],
    );

    const finished = await finishTurn(ctx, job.id, 1, {
      summary: 'did it',
      prLink: 'https://example.test/pr/7',
      prNumber: 7,
      usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 },
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
      { turn: 1, type: 'turn.started', data: { attempt: 1, mode: 'code' } },
      {
        turn: 1,
        type: 'turn.finished',
        data: {
          summary: 'did it',
          // Priced by the worker; a finish given tokens alone knows no cost.
          usage: {
            inputTokens: 10,
            outputTokens: 5,
            cacheReadTokens: 0,
            cacheWriteTokens: 0,
            costUsd: null,
          },
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
    const inputs = await loadTurnInputs(ctx, await jobOf(job.id), 2);
    assert.equal(inputs.project.id, project.id);
    assert.deepEqual(inputs.earlier, [
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
    // Each transition's status is read back before the next one runs.
    const step = async <T>(transition: Promise<T>): Promise<T> => {
      const result = await transition;
      await settled();
      return result;
    };
    const { job } = await step(createJob(ctx, project, { prompt: 'one' }));
    await step(startTurn(ctx, job.id, 1, 1));
    await step(sendMessage(ctx, project, job.id, 'two'));
    await step(sendMessage(ctx, project, job.id, 'three'));
    await step(finishTurn(ctx, job.id, 1, { summary: 'one done' }));
    assert.equal((await jobOf(job.id)).status, 'active');
    await step(startTurn(ctx, job.id, 2, 1));
    assert.equal(await step(failTurn(ctx, job.id, 2, 'the model refused')), true);
    let row = await jobOf(job.id);
    assert.equal(row.status, 'active', 'a failed turn with one queued behind it failed the job');
    assert.equal(row.error, 'the model refused');
    await step(startTurn(ctx, job.id, 3, 1));
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
    // What the subscriber read of the job so far, before the orphan's failure changes it.
    await settled();
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
        ['turn.started', { attempt: 1, mode: 'code' }],
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

  test("what each attempt used adds up on its turn, its job and its project's month; an unknown cost stays unknown", async () => {
    const { ctx } = svc;
    const monthBefore = (await monthUsage(ctx, [project.id])).get(project.id);
    const { job } = await createJob(ctx, project, { prompt: 'costly' });
    assert.deepEqual(toJobRecord(job).usage, {
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      costUsd: 0,
    });
    const first = { inputTokens: 1000, outputTokens: 100, cacheReadTokens: 0, cacheWriteTokens: 0 };
    const second = {
      inputTokens: 3000,
      outputTokens: 200,
      cacheReadTokens: 2000,
      cacheWriteTokens: 500,
    };
    await startTurn(ctx, job.id, 1, 1);
    const retry = { error: 'the model answered 503', attempt: 1, retryInSeconds: 0 };
    assert.equal(await retryTurn(ctx, job.id, 1, retry, { ...first, costUsd: 0.0045 }), true);
    await startTurn(ctx, job.id, 1, 2);
    assert.equal(
      await finishTurn(
        ctx,
        job.id,
        1,
        { summary: 'done', usage: second },
        { ...second, costUsd: 0.007 },
      ),
      true,
    );
    const both = {
      inputTokens: 4000,
      outputTokens: 300,
      cacheReadTokens: 2000,
      cacheWriteTokens: 500,
      costUsd: 0.0115,
    };
    assert.deepEqual((await turnOf(job.id, 1)).usage, both);
    assert.deepEqual((await recordOf(job.id)).usage, both);
    const events = await eventsOf(job.id);
    assert.deepEqual(events.find((e) => e.type === 'turn.retrying')?.data, {
      ...retry,
      usage: { ...first, costUsd: 0.0045 },
    });
    const finished = events.find((e) => e.type === 'turn.finished')?.data as
      | { usage: unknown }
      | undefined;
    assert.deepEqual(finished?.usage, both);
    // The job.completed event carries the record with the sum.
    const completed = events.find((e) => e.type === 'job.completed')?.data as {
      job: { usage: unknown };
    };
    assert.deepEqual(completed.job.usage, both);

    // A failed turn's spend counts too; a cost that is unknown makes the job's unknown.
    await sendMessage(ctx, project, job.id, 'again');
    await startTurn(ctx, job.id, 2, 1);
    const third = { inputTokens: 10, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 };
    assert.equal(await failTurn(ctx, job.id, 2, 'stopped', { ...third, costUsd: null }), true);
    assert.deepEqual((await eventsOf(job.id)).find((e) => e.type === 'turn.failed')?.data, {
      error: 'stopped',
      usage: { ...third, costUsd: null },
    });
    assert.deepEqual((await recordOf(job.id)).usage, {
      inputTokens: 4010,
      outputTokens: 301,
      cacheReadTokens: 2000,
      cacheWriteTokens: 500,
      costUsd: null,
    });
    const month = (await monthUsage(ctx, [project.id])).get(project.id);
    assert.ok(month && monthBefore);
    assert.equal(month.usage.inputTokens - monthBefore.usage.inputTokens, 4010);
    assert.equal(month.usage.cacheReadTokens - monthBefore.usage.cacheReadTokens, 2000);
    assert.equal(roundUsd(month.costUsd - monthBefore.costUsd), 0.0115);
    assert.equal(month.unpriced - monthBefore.unpriced, 1);
    assert.equal(month.usage.costUsd, null, 'a month with unpriced usage has no full cost');

    // Summed again from the turns (as after an import): the same sums the transitions kept.
    const kept = await recordOf(job.id);
    await ctx.db.transaction().execute((trx) => rebuildSpend(trx));
    assert.deepEqual((await recordOf(job.id)).usage, kept.usage);
    assert.deepEqual((await monthUsage(ctx, [project.id])).get(project.id), month);
  });

  test("a job's budget: what is left for a turn, and a follow-up refused once it is spent", async () => {
    const { ctx } = svc;
    const budgeted = await ctx.db
      .updateTable('projects')
      .set({ job_budget_usd: 0.01 })
      .where('id', '=', project.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    try {
      const { job } = await createJob(ctx, budgeted, { prompt: 'small budget' });
      assert.deepEqual(await jobBudgetLeft(ctx, job), { limitUsd: 0.01, spentUsd: 0 });
      await startTurn(ctx, job.id, 1, 1);
      const used = {
        inputTokens: 2000,
        outputTokens: 500,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
      };
      await finishTurn(ctx, job.id, 1, { summary: 'spent it' }, { ...used, costUsd: 0.0135 });
      assert.deepEqual(await jobBudgetLeft(ctx, job), { limitUsd: 0.01, spentUsd: 0.0135 });
      const before = await eventsOf(job.id);
      await assert.rejects(sendMessage(ctx, budgeted, job.id, 'more'), (err: unknown) => {
        assert.ok(err instanceof BudgetExhaustedError);
        assert.equal(err.status, 429);
        assert.match(
          err.message,
          /has spent \$0\.0135 of its budget of \$0\.0100 \(the project's jobBudgetUsd\)/,
        );
        return true;
      });
      assert.deepEqual(await eventsOf(job.id), before, 'a refused follow-up wrote an event');
      assert.equal((await jobOf(job.id)).turn_count, 1);
      // Without a budget, there is nothing to hold the turn to.
      assert.equal(await jobBudgetLeft(ctx, { id: 'job_nosuchjob000000000' }), undefined);
    } finally {
      await ctx.db
        .updateTable('projects')
        .set({ job_budget_usd: null })
        .where('id', '=', project.id)
        .execute();
    }
    const { job } = await createJob(ctx, project, { prompt: 'no budget' });
    assert.equal(await jobBudgetLeft(ctx, job), undefined);
  });

  test("a project's monthly budget: what is left for an engine's turn, this month's spend included", async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'monthly' });
    assert.equal(await monthBudgetLeft(ctx, job), undefined, 'no budget, nothing to hold to');
    await ctx.db
      .updateTable('projects')
      .set({ monthly_budget_usd: 50 })
      .where('id', '=', project.id)
      .execute();
    try {
      const spent = (await monthUsage(ctx, [project.id])).get(project.id)?.costUsd ?? 0;
      assert.deepEqual(await monthBudgetLeft(ctx, job), { limitUsd: 50, spentUsd: spent });
      await startTurn(ctx, job.id, 1, 1);
      const used = { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 };
      await finishTurn(ctx, job.id, 1, { summary: 'spent' }, { ...used, costUsd: 0.25 });
      assert.deepEqual(await monthBudgetLeft(ctx, job), {
        limitUsd: 50,
        spentUsd: roundUsd(spent + 0.25),
      });
      // Another month's spend is not this month's.
      const nextMonth = new Date(Date.UTC(new Date().getUTCFullYear() + 1, 0, 15));
      assert.deepEqual(await monthBudgetLeft(ctx, job, nextMonth), { limitUsd: 50, spentUsd: 0 });
      assert.equal(await monthBudgetLeft(ctx, { id: 'job_nosuchjob000000000' }), undefined);
    } finally {
      await ctx.db
        .updateTable('projects')
        .set({ monthly_budget_usd: null })
        .where('id', '=', project.id)
        .execute();
    }
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

  test('the review diff is stored on the job', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'diff' });
    await recordReviewDiff(ctx, job.id, 'diff --git a/x b/x\n', true);
    const row = await jobOf(job.id);
    assert.equal(row.review_diff, 'diff --git a/x b/x\n');
    assert.equal(row.review_diff_truncated, true);
    await takeHeard();
  });

  test('a progress event of a job that is gone writes nothing and does not throw', async () => {
    const { ctx } = svc;
    const { job } = await createJob(ctx, project, { prompt: 'deleted under the worker' });
    await startTurn(ctx, job.id, 1, 1);
    await recordProgress(ctx, job.id, 1, 'command.started', { command: 'before', cwd: '.' });
    assert.deepEqual(
      (await eventsOf(job.id)).map((e) => [e.type, e.data]),
      [
        ['job.created', { job: toJobRecord(job) }],
        ['turn.started', { attempt: 1, mode: 'code' }],
        ['command.started', { command: 'before', cwd: '.' }],
      ],
    );
    await ctx.db.deleteFrom('jobs').where('id', '=', job.id).execute();
    await recordProgress(ctx, job.id, 1, 'command.started', { command: 'after', cwd: '.' });
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
    const progress = recordProgress(ctx, job.id, 1, 'command.started', {
      command: 'waited',
      cwd: '.',
    }).finally(() => {
      progressSettled = true;
    });
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
      .where('type', 'in', ['turn.retrying', 'command.started'])
      .orderBy('seq')
      .execute();
    assert.deepEqual(
      events.map((e) => e.type),
      ['turn.retrying', 'command.started'],
      "the progress event's seq is below the lock holder's: a reader could have missed it",
    );
    assert.ok(Number(events[1]?.seq) > Number(events[0]?.seq));
    await takeHeard();
  });
});

describe('a worker changes jobs only through the lifecycle', () => {
  test('a subscriber hears every transition of a turn the worker runs, with its progress in the log', async () => {
    const runner = new RecordingRunner(async (input) => {
      await input.emit('command.started', { command: 'step 1', cwd: '.' });
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
        ['job.created', 'turn.started', 'command.started', 'turn.finished', 'job.completed'],
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
