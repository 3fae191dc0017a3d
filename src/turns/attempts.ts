// Best-of-N (docs/eval.md): a code turn whose row asks for `best_of` runs its attempts in
// parallel, each with its own agent (engine and model), on a clone, a branch and an engine
// state of its own; each commits what it changed and the check command judges its finished
// checkout. The winner (passed first, then the cheapest, then the smallest diff, then the
// lowest number) is published as a normal turn is: pushed to the job's branch, with its pull
// request, so follow-ups continue from it. The attempts that committed are pushed to their own
// branches too, for a person to compare; an eval job (jobs.eval_run_id) pushes nothing at all.
// A retry of the turn runs the attempts again: each clone is reset to the job's start.

import type { AttemptResult, BestOf } from '../db/schema.ts';
import { errorMessage } from '../errors.ts';
import type { Emit } from '../events/catalog.ts';
import { attemptAgent } from '../jobs/best-of.ts';
import { TurnFailedError, type TurnInput, type TurnOutput } from '../jobs/runner.ts';
import { addTokens, NO_TOKENS, readUsage, roundUsd, type TokenUsage } from '../jobs/usage.ts';
import type { ScrubSecret } from '../secrets/scrub.ts';
import { gitOut } from '../workspace/git.ts';
import {
  attemptWorkspaceId,
  type Checkout,
  changedFiles,
  commitAll,
  type JobLease,
  prepareCheckout,
  pushBranch,
  withJobLock,
} from '../workspace/index.ts';
import { CheckUnavailableError, runCheck } from './check.ts';
import { commitMessage } from './commits.ts';
import type { TurnForge } from './forge.ts';
import { refuseSecretsInPush } from './secrets.ts';
import type { TurnSteps } from './steps.ts';

/** What the turn hands its attempts: its forge, its ordered and scrubbing emit, its scrubbers. */
export interface AttemptsContext {
  forge: TurnForge;
  emit: Emit;
  scrub: (text: string) => string;
  scrubbed: <T>(value: T) => T;
  secrets: readonly ScrubSecret[];
}

/** One attempt as it ended: its record, and what the turn needs of it. */
interface Finished {
  result: AttemptResult;
  tokens: TokenUsage;
  summary: string;
  messages: unknown[];
  /** The value asked for by the turn's output schema, when it has one. */
  output?: { value: unknown } | undefined;
  checkout: Checkout | undefined;
}

/** Runs the turn's attempts and publishes the winner; TurnFailedError when none finished. */
export async function runAttempts(
  steps: TurnSteps,
  input: TurnInput,
  bestOf: BestOf,
  how: AttemptsContext,
): Promise<TurnOutput> {
  const { job, signal } = input;
  const numbers = Array.from({ length: bestOf.count }, (_, i) => i + 1);
  // Each clone stays locked from its prepare to the winner's push (the janitor skips it).
  return withLeases(steps, job.id, numbers, signal, async (leases) => {
    for (const n of numbers) {
      const agent = attemptAgent(bestOf, n, { engine: input.project.engine, model: job.model });
      await how.emit('attempt.started', { n, ...agent, branch: attemptBranch(job.branch, n) });
    }
    // All settled before the locks go: a cancelled turn's attempts stop on their own.
    const settled = await Promise.allSettled(
      numbers.map((n, i) => runAttempt(steps, input, bestOf, how, n, leases[i] as JobLease)),
    );
    signal.throwIfAborted();
    const finished = settled.map((s) => {
      if (s.status === 'rejected') throw s.reason;
      return s.value;
    });
    const winner = pickWinner(finished.map((f) => f.result));
    const tokens = finished.reduce((sum, f) => addTokens(sum, f.tokens), NO_TOKENS);
    const costs = finished.map((f) => f.result.costUsd);
    const spent = {
      ...tokens,
      costUsd: costs.some((c) => c === null)
        ? null
        : roundUsd(costs.reduce<number>((sum, c) => sum + (c ?? 0), 0)),
    };
    if (winner === undefined) {
      const errors = finished.map((f) => `attempt ${f.result.n}: ${f.result.error ?? 'failed'}`);
      throw new TurnFailedError(`no attempt finished: ${errors.join('; ')}`);
    }
    const attempts = finished.map((f) => ({ ...f.result, winner: f.result.n === winner.n }));
    const won = finished.find((f) => f.result.n === winner.n) as Finished;
    const base = {
      summary: won.summary,
      messages: won.messages,
      ...(won.output ? { output: how.scrubbed(won.output) } : {}),
      usage: tokens,
      spent,
      attempts,
    };
    // An eval's attempts stay in this worker's clones: no branch, no pull request.
    if (job.eval_run_id !== null || winner.commitSha === null || !won.checkout)
      return { ...base, commitSha: null };
    const published = await steps.publish(
      input,
      won.checkout,
      how.forge,
      winner.commitSha,
      won.summary,
      how.emit,
    );
    // The others that committed, on branches of their own: a person may prefer one of them.
    for (const f of finished) {
      if (f.result.commitSha === null || !f.checkout) continue;
      await pushAttempt(steps, input, how, f.checkout, f.result);
    }
    return { ...base, ...published };
  });
}

/** Attempt `n`'s branch: the job's, numbered (errand/<job>-<n>). */
function attemptBranch(jobBranch: string, n: number): string {
  return `${jobBranch}-${n}`;
}

/** Runs `fn` holding the lock of every attempt's workspace, taken in order (no deadlock). */
function withLeases<T>(
  steps: TurnSteps,
  jobId: string,
  numbers: readonly number[],
  signal: AbortSignal,
  fn: (leases: JobLease[]) => Promise<T>,
  held: JobLease[] = [],
): Promise<T> {
  const next = numbers[held.length];
  if (next === undefined) return fn(held);
  const id = attemptWorkspaceId(jobId, next);
  return withJobLock(
    steps.workspace,
    id,
    (lease) => withLeases(steps, jobId, numbers, signal, fn, [...held, lease]),
    signal,
  );
}

/**
 * One attempt, start to check. It never throws but for the turn's cancellation: whatever
 * else stops it is its outcome `error`, with what it had spent by then.
 */
async function runAttempt(
  steps: TurnSteps,
  parent: TurnInput,
  bestOf: BestOf,
  how: AttemptsContext,
  n: number,
  lease: JobLease,
): Promise<Finished> {
  const { job, project, turn, signal } = parent;
  const agent = attemptAgent(bestOf, n, { engine: project.engine, model: job.model });
  const branch = attemptBranch(job.branch, n);
  // What its model calls used, as its progress events say: an attempt that fails spent it too.
  let stepTokens: TokenUsage = NO_TOKENS;
  const emit: Emit = (type, data) => {
    if (type === 'model.step' && 'usage' in data) {
      const used = readUsage(data.usage);
      if (used) stepTokens = addTokens(stepTokens, used);
    }
    // Every event of the attempt says whose it is (the catalog's payloads are loose).
    return how.emit(type, { ...data, attemptN: n });
  };
  const input: TurnInput = {
    ...parent,
    job: { ...job, model: agent.model },
    project: { ...project, engine: agent.engine },
    emit,
  };
  const record: AttemptResult = {
    n,
    ...agent,
    branch,
    outcome: 'error',
    check: null,
    costUsd: null,
    diff: { files: 0, lines: 0 },
    commitSha: null,
    error: null,
    winner: false,
  };
  const cost = (tokens: TokenUsage) => steps.models.usage(agent.model, tokens).costUsd;
  let checkout: Checkout | undefined;
  let finished: Finished;
  try {
    // The attempt starts where the job's branch is (its start, on a first turn).
    checkout = await prepareCheckout(steps.workspace, {
      projectId: job.project_id,
      jobId: attemptWorkspaceId(job.id, n),
      repository: job.repository,
      ref: job.ref,
      branch: job.branch,
      ...(how.forge.auth ? { auth: how.forge.auth } : {}),
      signal,
      lease,
    });
    const commands = await steps.commands(input, checkout, emit);
    const place = {
      dir: checkout.dir,
      workspaceId: attemptWorkspaceId(job.id, n),
      budgetShare: bestOf.count,
    };
    const result = await steps.agent(input, place, emit, commands);
    const summary = how.scrub(result.summary);
    const messages = how.scrubbed(result.turnMessages);
    const done = { summary, messages, checkout, tokens: result.usage, output: result.output };
    record.costUsd = cost(result.usage);
    const changed = await changedFiles(steps.workspace, { dir: checkout.dir, signal });
    const message = commitMessage(summary, job.id, turn.seq, how.scrub(turn.prompt));
    const sha =
      changed.length > 0
        ? await commitAll(steps.workspace, { dir: checkout.dir, message, signal })
        : null;
    if (sha === null) {
      await emit('turn.no_changes', {});
      finished = { ...done, result: { ...record, outcome: 'no_changes' } };
    } else {
      await emit('files.changed', { files: changed.slice(0, 200), count: changed.length });
      await emit('commit', { sha, subject: message.split('\n')[0] ?? '' });
      const diff = await diffSize(steps, checkout, sha, signal);
      const judged = await judge(steps, input, how, checkout, emit);
      finished = { ...done, result: { ...record, ...judged, diff, commitSha: sha } };
    }
  } catch (err) {
    if (signal.aborted) throw err;
    const error = how.scrub(errorMessage(err));
    finished = {
      result: { ...record, costUsd: cost(stepTokens), error },
      tokens: stepTokens,
      summary: '',
      messages: [],
      checkout,
    };
  }
  const { result } = finished;
  await how.emit('attempt.finished', {
    n,
    outcome: result.outcome,
    exitCode: result.check?.exitCode ?? null,
    costUsd: result.costUsd,
    diff: result.diff,
    ...(result.error !== null ? { error: result.error } : {}),
  });
  return finished;
}

/**
 * The check command's verdict on the finished checkout: the job's command, else the
 * project's; none: unchecked. Where the sandbox does not work the attempt cannot be judged:
 * its outcome is error, with the sandbox's reason.
 */
async function judge(
  steps: TurnSteps,
  input: TurnInput,
  how: AttemptsContext,
  checkout: Checkout,
  emit: Emit,
): Promise<Pick<AttemptResult, 'outcome' | 'check' | 'error'>> {
  const command = input.job.check_command ?? input.project.check_command;
  if (!command) return { outcome: 'unchecked', check: null, error: null };
  try {
    const check = await runCheck({
      project: input.project,
      projectSecrets: input.secrets,
      scrub: how.secrets,
      environments: steps.environments,
      dir: checkout.dir,
      baseCommit: checkout.headCommit,
      command,
      emit,
      signal: input.signal,
    });
    return { outcome: check.exitCode === 0 ? 'passed' : 'failed', check, error: null };
  } catch (err) {
    if (!(err instanceof CheckUnavailableError)) throw err;
    return { outcome: 'error', check: null, error: err.message };
  }
}

/** Files and lines (added plus removed) the attempt's commit changed against the turn start. */
async function diffSize(
  steps: TurnSteps,
  checkout: Checkout,
  sha: string,
  signal: AbortSignal,
): Promise<{ files: number; lines: number }> {
  const text = await gitOut(
    steps.workspace,
    [
      'diff',
      '--numstat',
      '--no-renames',
      '--no-ext-diff',
      '--no-textconv',
      checkout.headCommit,
      sha,
    ],
    { cwd: checkout.dir, signal },
  );
  let files = 0;
  let lines = 0;
  for (const line of text.split('\n')) {
    const [added, removed] = line.split('\t');
    if (added === undefined || removed === undefined) continue;
    files += 1;
    // A binary file ("-") counts as one line changed.
    lines += (Number.parseInt(added, 10) || 0) + (Number.parseInt(removed, 10) || 0);
    if (added === '-') lines += 1;
  }
  return { files, lines };
}

/** The order outcomes win in: passed, then failed or unchecked, then no changes. */
const RANK: Record<AttemptResult['outcome'], number> = {
  passed: 0,
  failed: 1,
  unchecked: 1,
  no_changes: 2,
  error: 3,
};

/**
 * The winner among the attempts without error: passed before failed or unchecked (before
 * no changes), then the lowest cost (unknown last), then the smallest diff, then the lowest
 * number. Undefined when every attempt ended in error.
 */
function pickWinner(results: readonly AttemptResult[]): AttemptResult | undefined {
  const cost = (r: AttemptResult) => r.costUsd ?? Number.POSITIVE_INFINITY;
  return results
    .filter((r) => r.outcome !== 'error')
    .sort(
      (a, b) =>
        RANK[a.outcome] - RANK[b.outcome] ||
        (cost(a) === cost(b) ? 0 : cost(a) < cost(b) ? -1 : 1) ||
        a.diff.lines - b.diff.lines ||
        a.n - b.n,
    )[0];
}

/** Pushes an attempt's commit to its own branch; a refusal or failure only loses that branch. */
async function pushAttempt(
  steps: TurnSteps,
  input: TurnInput,
  how: AttemptsContext,
  checkout: Checkout,
  result: AttemptResult,
): Promise<void> {
  const { job, signal } = input;
  if (result.commitSha === null) return;
  try {
    await refuseSecretsInPush(steps.workspace, {
      dir: checkout.dir,
      base: checkout.headCommit,
      head: result.commitSha,
      secrets: input.secrets,
      signal,
    });
    await pushBranch(steps.workspace, {
      dir: checkout.dir,
      repository: job.repository,
      branch: result.branch,
      ...(how.forge.auth ? { auth: how.forge.auth } : {}),
      signal,
    });
    const pushed = { branch: result.branch, sha: result.commitSha };
    await how.emit('push', { ...pushed, ...{ attemptN: result.n } });
  } catch (err) {
    if (signal.aborted) throw err;
    steps.log.warn(
      { jobId: job.id, attempt: result.n, err: how.scrub(errorMessage(err)) },
      "an attempt's branch was not pushed",
    );
  }
}
