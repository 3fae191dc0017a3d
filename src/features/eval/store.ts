// Eval runs and their results: the one writer of eval_runs and eval_results apart from the
// runner (runner.ts), which starts and settles results. A run is written with all its results
// (task × agent × repeat) and its audit row in one transaction; a cancel stops what is pending
// and archives the jobs that run.
import { sql } from 'kysely';
import { auditedChange, type Who } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import type { EvalRunRow } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { isId, newId } from '../../ids.ts';
import { archiveJob } from '../../jobs/service.ts';
import { mayActOn, requireAccess } from '../../keys/access.ts';
import type { Principal } from '../../keys/service.ts';
import { acceptSuite, agentLabel, type Suite, type SuiteInput } from './suite.ts';
import { type EvalRunRecord, toEvalRunRecord } from './types.ts';

/** The most runs a list shows. */
const LIST_LIMIT = 200;

/** The projects a run's tasks run in. */
function runProjects(run: Pick<EvalRunRow, 'suite'>): string[] {
  return [...new Set((run.suite as Suite).tasks.map((task) => task.project))];
}

function notFound(runId: string): AppError {
  return new AppError('not_found', `eval run ${runId} not found`);
}

async function runRow(ctx: AppContext, runId: string): Promise<EvalRunRow> {
  const row = isId('evr', runId)
    ? await ctx.db.selectFrom('eval_runs').selectAll().where('id', '=', runId).executeTakeFirst()
    : undefined;
  if (!row) throw notFound(runId);
  return row;
}

/** The run's record with its results. */
async function runRecord(ctx: AppContext, run: EvalRunRow): Promise<EvalRunRecord> {
  const results = await ctx.db
    .selectFrom('eval_results')
    .selectAll()
    .where('run_id', '=', run.id)
    .execute();
  return toEvalRunRecord(run, results);
}

/**
 * Starts a run: the suite checked (suite.ts), then the run, its results (all pending) and its
 * audit row in one transaction. The runner (worker.ts) starts its jobs.
 */
export async function createRun(
  ctx: AppContext,
  principal: Principal,
  who: Who,
  input: SuiteInput,
): Promise<EvalRunRecord> {
  const { suite, results } = await acceptSuite(ctx, principal, input);
  const id = newId('evr');
  const run = await auditedChange(ctx, who, async (trx) => {
    const created = await trx
      .insertInto('eval_runs')
      .values({
        id,
        name: suite.name,
        suite: JSON.stringify(suite),
        created_by: who.actor ? JSON.stringify(who.actor) : null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await trx
      .insertInto('eval_results')
      .values(
        results.map((r) => ({
          run_id: id,
          n: r.n,
          task: r.task.id,
          agent: agentLabel(r.agent),
          repeat: r.repeat,
          project_id: r.projectId,
        })),
      )
      .execute();
    return {
      result: created,
      entry: {
        action: 'eval.create',
        target: { kind: 'eval', id },
        details: {
          projects: runProjects(created),
          tasks: suite.tasks.length,
          agents: [...new Set(results.map((r) => agentLabel(r.agent)))],
          repeat: suite.repeat,
        },
      },
    };
  });
  ctx.log.info({ evalRunId: id, results: results.length }, 'eval run created');
  return runRecord(ctx, run);
}

/** The runs whose every project the principal may read, newest first, without their results. */
export async function listRuns(
  ctx: AppContext,
  principal: Principal,
): Promise<Omit<EvalRunRecord, 'results'>[]> {
  const runs = await ctx.db
    .selectFrom('eval_runs')
    .selectAll()
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(LIST_LIMIT)
    .execute();
  const visible = runs.filter((run) => runProjects(run).every((p) => mayActOn(principal, p)));
  if (visible.length === 0) return [];
  // One read of the results of every run shown: their per-agent tables.
  const results = await ctx.db
    .selectFrom('eval_results')
    .selectAll()
    .where(
      'run_id',
      'in',
      visible.map((run) => run.id),
    )
    .execute();
  const byRun = new Map<string, typeof results>();
  for (const result of results) {
    const list = byRun.get(result.run_id) ?? [];
    list.push(result);
    byRun.set(result.run_id, list);
  }
  return visible.map((run) => {
    const { results: _, ...summary } = toEvalRunRecord(run, byRun.get(run.id) ?? []);
    return summary;
  });
}

/** The run, for a principal that may read each of its projects (403 otherwise, then 404). */
export async function getRun(
  ctx: AppContext,
  principal: Principal,
  runId: string,
): Promise<EvalRunRecord> {
  const run = await runRow(ctx, runId);
  for (const projectId of runProjects(run)) requireAccess(principal, 'viewer', projectId);
  return runRecord(ctx, run);
}

/**
 * Cancels a running run, for a maintainer of each of its projects: its pending results are
 * cancelled and its running ones too, their jobs archived. A run already over is left as it is.
 */
export async function cancelRun(
  ctx: AppContext,
  principal: Principal,
  who: Who,
  runId: string,
): Promise<EvalRunRecord> {
  const found = await runRow(ctx, runId);
  for (const projectId of runProjects(found)) requireAccess(principal, 'maintainer', projectId);
  const stopped = await auditedChange(ctx, who, async (trx) => {
    const run = await trx
      .selectFrom('eval_runs')
      .selectAll()
      .where('id', '=', runId)
      .forNoKeyUpdate()
      .executeTakeFirstOrThrow();
    const jobs =
      run.state === 'running'
        ? await trx
            .updateTable('eval_results')
            .set({ state: 'cancelled', finished_at: sql`now()` })
            .where('run_id', '=', runId)
            .where('state', 'in', ['pending', 'running'])
            .returning(['project_id', 'job_id'])
            .execute()
        : [];
    if (run.state === 'running')
      await trx
        .updateTable('eval_runs')
        .set({ state: 'cancelled', finished_at: sql`now()` })
        .where('id', '=', runId)
        .execute();
    return {
      result: jobs,
      entry: {
        action: 'eval.cancel',
        target: { kind: 'eval', id: runId },
        details: { was: run.state, stopped: jobs.length },
      },
    };
  });
  for (const { project_id, job_id } of stopped) {
    // A result claimed whose job is not made yet: the runner archives it once made.
    if (job_id === null) continue;
    await archiveJob(ctx, project_id, job_id, who).catch((err: unknown) => {
      if (!(err instanceof AppError && err.code === 'not_found')) throw err;
    });
  }
  ctx.log.info({ evalRunId: runId, stopped: stopped.length }, 'eval run cancelled');
  return runRecord(ctx, await runRow(ctx, runId));
}
