// What moves an eval run on (docs/eval.md): its results are started in the suite's order, at
// most `concurrency` running at once, each as a real job through the job core's createJob; a
// result whose job has left `active` is settled from the job (its attempt's check, cost, time,
// steps, tokens); a run with nothing pending or running is finished. Each step is safe to run
// in any number of processes at once: a result is claimed, with the id its job will have, in a
// transaction that holds the run's row, before the job is made, so that a second create of the
// same job fails on its id rather than making another.
import { sql } from 'kysely';
import type { Who } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import type { EvalResultRow, EvalRunRow, ProjectRow } from '../../db/schema.ts';
import { AppError, errorMessage } from '../../errors.ts';
import { newId } from '../../ids.ts';
import { archiveJob, createJob } from '../../jobs/service.ts';
import { readUsage } from '../../jobs/usage.ts';
import type { Suite } from './suite.ts';

/** A claimed result whose job is still missing after this long was lost with its process. */
const LOST_CREATE_SECONDS = 60;

/** The most lines, and characters, of a failure's tail. */
const TAIL_LINES = 20;
const TAIL_CHARS = 4000;

type Verdict = Pick<EvalResultRow, 'state' | 'check_exit' | 'tail'>;

/** The last lines of `text`, at most TAIL_LINES and TAIL_CHARS. */
function tailOf(text: string): string {
  const lines = text.replace(/\s+$/, '').split('\n').slice(-TAIL_LINES).join('\n');
  return lines.length > TAIL_CHARS ? lines.slice(-TAIL_CHARS) : lines;
}

/** Who a run's jobs are created by: the run's creator. */
function creatorOf(run: EvalRunRow): Who {
  return { actor: run.created_by, address: null, requestId: null };
}

/** The agent a result names, back as engine and model (engines have no slash). */
function agentOf(label: string): { engine: ProjectRow['engine']; model: string } {
  const slash = label.indexOf('/');
  return {
    engine: label.slice(0, slash) as ProjectRow['engine'],
    model: label.slice(slash + 1),
  };
}

/** What a job that left `active` says of its result (the contract of docs/eval.md). */
function verdictOf(job: {
  status: string;
  error: string | null;
  attempts: EvalJob['attempts'];
}): Verdict {
  if (job.status === 'archived')
    return { state: 'error', check_exit: null, tail: 'the job was archived' };
  if (job.status === 'failed')
    return { state: 'error', check_exit: null, tail: tailOf(job.error ?? 'the job failed') };
  const attempt = job.attempts?.[0];
  if (!attempt)
    return { state: 'error', check_exit: null, tail: 'the job finished without an attempt' };
  const exit = attempt.check?.exitCode ?? null;
  const output = attempt.check?.outputTail ?? '';
  switch (attempt.outcome) {
    case 'passed':
      return { state: 'passed', check_exit: exit, tail: null };
    case 'failed':
      return { state: 'failed', check_exit: exit, tail: tailOf(output) };
    case 'no_changes':
      return {
        state: 'failed',
        check_exit: exit,
        tail: tailOf(output || 'the agent changed nothing'),
      };
    case 'unchecked':
      return { state: 'error', check_exit: null, tail: 'no check ran on the attempt' };
    default:
      return {
        state: 'error',
        check_exit: exit,
        tail: tailOf(attempt.error ?? 'the attempt failed'),
      };
  }
}

interface EvalJob {
  status: string;
  error: string | null;
  attempts:
    | {
        outcome: string;
        check: { exitCode: number | null; outputTail: string } | null;
        error: string | null;
      }[]
    | null;
}

/** Records what the result's job (no longer active) says: its verdict and its figures. */
async function settle(ctx: AppContext, runId: string, n: number, jobId: string): Promise<void> {
  const job = await ctx.db
    .selectFrom('jobs')
    .select(['status', 'error', 'attempts', 'usage'])
    .where('id', '=', jobId)
    .executeTakeFirst();
  if (!job || job.status === 'active') return;
  const first = await ctx.db
    .selectFrom('turns')
    .select(['started_at', 'finished_at', 'error'])
    .where('job_id', '=', jobId)
    .where('seq', '=', 1)
    .executeTakeFirst();
  const { steps } = await ctx.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<string>().as('steps'))
    .where('job_id', '=', jobId)
    .where('type', '=', 'model.step')
    .executeTakeFirstOrThrow();
  const usage = readUsage(job.usage);
  const verdict = verdictOf({ ...job, error: job.error ?? first?.error ?? null });
  const duration =
    first?.started_at && first.finished_at
      ? first.finished_at.getTime() - first.started_at.getTime()
      : null;
  const settled = await ctx.db
    .updateTable('eval_results')
    .set({
      ...verdict,
      cost_usd: usage?.costUsd ?? null,
      duration_ms: duration,
      steps: Number(steps),
      input_tokens: usage?.inputTokens ?? null,
      output_tokens: usage?.outputTokens ?? null,
      finished_at: sql`now()`,
    })
    .where('run_id', '=', runId)
    .where('n', '=', n)
    .where('state', '=', 'running')
    .returning('task')
    .executeTakeFirst();
  if (settled)
    ctx.log.info({ evalRunId: runId, jobId, state: verdict.state }, 'eval result settled');
}

/** Marks a running result an error that made no job, with why. */
async function refuse(ctx: AppContext, runId: string, n: number, why: string): Promise<void> {
  await ctx.db
    .updateTable('eval_results')
    .set({ state: 'error', job_id: null, tail: tailOf(why), finished_at: sql`now()` })
    .where('run_id', '=', runId)
    .where('n', '=', n)
    .where('state', '=', 'running')
    .execute();
}

const jobExists = async (ctx: AppContext, jobId: string) =>
  (await ctx.db.selectFrom('jobs').select('id').where('id', '=', jobId).executeTakeFirst()) !==
  undefined;

/**
 * Makes the job of a claimed result, with the id the claim recorded. A create the project
 * refuses (its rate limit, its budget, a model) makes the result an error with the reason.
 */
async function startJob(ctx: AppContext, run: EvalRunRow, result: EvalResultRow): Promise<void> {
  const jobId = result.job_id;
  if (jobId === null) return;
  const scope = { evalRunId: run.id, jobId, task: result.task, agent: result.agent };
  const task = (run.suite as Suite).tasks.find((t) => t.id === result.task);
  const project = await ctx.db
    .selectFrom('projects')
    .selectAll()
    .where('id', '=', result.project_id)
    .executeTakeFirst();
  if (!task || !project) {
    await refuse(ctx, run.id, result.n, `project ${result.project_id} is gone`);
    return;
  }
  const agent = agentOf(result.agent);
  try {
    await createJob(ctx, project, {
      id: jobId,
      prompt: task.prompt,
      baseRef: task.ref,
      model: agent.model,
      attempts: { count: 1, agents: [agent] },
      checkCommand: task.check,
      evalRunId: run.id,
      by: creatorOf(run),
    });
  } catch (err) {
    // A create that failed after all (a second one of the same id, a lost answer) made it.
    if (await jobExists(ctx, jobId)) return;
    const why = err instanceof AppError ? `${err.code}: ${err.message}` : errorMessage(err);
    await refuse(ctx, run.id, result.n, why);
    ctx.log.warn({ ...scope, error: why }, 'eval job refused');
    return;
  }
  ctx.log.info(scope, 'eval job created');
  // Cancelled while it was being made: the cancel could not archive a job not yet there.
  const now = await ctx.db
    .selectFrom('eval_results')
    .select('state')
    .where('run_id', '=', run.id)
    .where('n', '=', result.n)
    .executeTakeFirst();
  if (now?.state === 'cancelled') await archiveJob(ctx, project.id, jobId, creatorOf(run));
}

/**
 * Claims pending results up to the run's concurrency, in the suite's order: each becomes
 * `running` with the id its job will have, in one transaction that holds the run's row (two
 * processes cannot both count the same free places).
 */
async function claim(
  ctx: AppContext,
  runId: string,
): Promise<{ run: EvalRunRow; claimed: EvalResultRow[] }> {
  return ctx.db.transaction().execute(async (trx) => {
    const run = await trx
      .selectFrom('eval_runs')
      .selectAll()
      .where('id', '=', runId)
      .forNoKeyUpdate()
      .executeTakeFirstOrThrow();
    if (run.state !== 'running') return { run, claimed: [] };
    const { running } = await trx
      .selectFrom('eval_results')
      .select((eb) => eb.fn.countAll<string>().as('running'))
      .where('run_id', '=', runId)
      .where('state', '=', 'running')
      .executeTakeFirstOrThrow();
    const free = (run.suite as Suite).concurrency - Number(running);
    if (free <= 0) return { run, claimed: [] };
    const pending = await trx
      .selectFrom('eval_results')
      .select('n')
      .where('run_id', '=', runId)
      .where('state', '=', 'pending')
      .orderBy('n')
      .limit(free)
      .forUpdate()
      .skipLocked()
      .execute();
    const claimed: EvalResultRow[] = [];
    for (const { n } of pending) {
      const row = await trx
        .updateTable('eval_results')
        .set({ state: 'running', job_id: newId('job'), started_at: sql`now()` })
        .where('run_id', '=', runId)
        .where('n', '=', n)
        .returningAll()
        .executeTakeFirstOrThrow();
      claimed.push(row);
    }
    return { run, claimed };
  });
}

/** Finishes the run when none of its results is pending or running. */
async function finishIfDone(ctx: AppContext, runId: string): Promise<void> {
  const done = await ctx.db
    .updateTable('eval_runs')
    .set({ state: 'finished', finished_at: sql`now()` })
    .where('id', '=', runId)
    .where('state', '=', 'running')
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('eval_results')
            .select('n')
            .where('run_id', '=', runId)
            .where('state', 'in', ['pending', 'running']),
        ),
      ),
    )
    .returning('id')
    .executeTakeFirst();
  if (done) ctx.log.info({ evalRunId: runId }, 'eval run finished');
}

/**
 * Moves the run on: settles the results whose job left `active`, makes again the job of a
 * result whose process was lost between its claim and its create, starts pending results up to
 * the concurrency, and finishes the run when nothing is left.
 */
export async function advanceRun(ctx: AppContext, runId: string): Promise<void> {
  const ended = await ctx.db
    .selectFrom('eval_results as r')
    .innerJoin('jobs as j', 'j.id', 'r.job_id')
    .select(['r.n', 'r.job_id'])
    .where('r.run_id', '=', runId)
    .where('r.state', '=', 'running')
    .where('j.status', '!=', 'active')
    .execute();
  for (const { n, job_id } of ended) if (job_id) await settle(ctx, runId, n, job_id);
  const lost = await ctx.db
    .selectFrom('eval_results as r')
    .selectAll('r')
    .where('r.run_id', '=', runId)
    .where('r.state', '=', 'running')
    .where('r.started_at', '<', sql<Date>`now() - make_interval(secs => ${LOST_CREATE_SECONDS})`)
    .where((eb) =>
      eb.not(eb.exists(eb.selectFrom('jobs').select('id').whereRef('jobs.id', '=', 'r.job_id'))),
    )
    .execute();
  if (lost.length > 0) {
    const run = await ctx.db
      .selectFrom('eval_runs')
      .selectAll()
      .where('id', '=', runId)
      .executeTakeFirstOrThrow();
    for (const result of lost) await startJob(ctx, run, result);
  }
  for (;;) {
    const { run, claimed } = await claim(ctx, runId);
    if (claimed.length === 0) break;
    for (const result of claimed) await startJob(ctx, run, result);
  }
  await finishIfDone(ctx, runId);
}

/** The runs still running, oldest first: what a sweep moves on. */
export async function runningRuns(ctx: AppContext): Promise<string[]> {
  const rows = await ctx.db
    .selectFrom('eval_runs')
    .select('id')
    .where('state', '=', 'running')
    .orderBy('created_at')
    .execute();
  return rows.map((r) => r.id);
}
