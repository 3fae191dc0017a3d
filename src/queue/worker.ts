// Runs turns from the queue. A turn is claimed from pg-boss, marked running, handed to the
// TurnRunner and settled: done, failed for good, or handed back to the queue to try again
// (after Errand's backoff for a transient failure; at once when the worker was interrupted).
// A stopping worker drains: it takes no more turns, lets the running ones finish for a while,
// then hands the rest back without using up their attempts. Delivery is at-least-once, so
// every step checks the turn's state before acting on it. The worker writes nothing itself:
// each change of a job, turn or event is a transition of src/jobs/lifecycle.ts.
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { ExternalError, errorMessage } from '../errors.ts';
import type { Emit, EventType } from '../events/catalog.ts';
import type { JobsContext } from '../jobs/context.ts';
import {
  failOrphan,
  failTurn,
  finishTurn,
  handBackTurn,
  loadTurnInputs,
  recordProgress,
  recordReviewDiff,
  recordSpent,
  retryTurn,
  startTurn,
} from '../jobs/lifecycle.ts';
import { TurnFailedError, type TurnRunner } from '../jobs/runner.ts';
import { jobStatus } from '../jobs/states.ts';
import {
  addTokens,
  NO_TOKENS,
  readUsage,
  roundUsd,
  type TokenUsage,
  type Usage,
} from '../jobs/usage.ts';
import type { Logger } from '../log.ts';
import type { Metrics, TurnOutcome } from '../metrics/metrics.ts';
import { attemptsBefore, type TurnEntry, type TurnQueue } from './queue.ts';
import { TurnReport } from './turn-report.ts';

/** What the worker uses of the application context (src/context.ts). */
export interface WorkerContext extends JobsContext {
  queue: TurnQueue;
  log: Logger;
  metrics: Metrics;
  models: JobsContext['models'] & {
    /** Tokens with their cost on the model (src/agent/models.ts ModelRegistry.usage). */
    usage(modelId: string, tokens: TokenUsage): Usage;
  };
}

export interface Worker {
  /**
   * Stops taking turns at once, lets the running ones finish for up to `drainSeconds` (none by
   * default), then hands the rest back to the queue without using up their attempts, and
   * resolves once every turn has ended here.
   */
  stop(drainSeconds?: number): Promise<void>;
}

export interface WorkerOptions {
  /**
   * Told when this worker is done with a turn, however it ended (the workspace janitor then
   * deletes the clone of a job archived meanwhile).
   */
  turnEnded?: (jobId: string) => void;
}

const SWEEP_INTERVAL_MS = 10_000;
/** The states of a queue entry that no worker will take up again (see sweep). */
const ORPHANED: ReadonlySet<string> = new Set(['failed', 'cancelled', 'completed']);
/** The progress events that carry a model call's usage: a step, and a compaction's summary. */
const MODEL_CALLS: ReadonlySet<EventType> = new Set(['model.step', 'context.compacted']);
const MAX_RETRY_AFTER_SECONDS = 300;

/** Why a stopping worker's turns are aborted once its drain is over. */
const HAND_BACK_REASON = 'the worker is shutting down';

/** The turns this worker runs, and whether it is stopping (see Worker.stop). */
class Shift {
  readonly running = new Set<Promise<void>>();
  /** Takes no more turns: one the queue delivers now is handed back at once. */
  stopping = false;
  /** The drain is over: a turn aborted now goes back to the queue unfinished. */
  handingBack = false;
  handedBack = 0;

  /** Resolves when every turn running now has ended, or after `seconds`: true when they all did. */
  async ended(seconds: number): Promise<boolean> {
    const all = Promise.allSettled([...this.running]).then(() => true);
    const timeout = new AbortController();
    try {
      return await Promise.race([
        all,
        sleep(seconds * 1000, false, { signal: timeout.signal }).catch(() => false),
      ]);
    } finally {
      timeout.abort();
    }
  }
}

export async function startWorker(
  ctx: WorkerContext,
  runner: TurnRunner,
  opts: WorkerOptions = {},
): Promise<Worker> {
  const shift = new Shift();
  await ctx.queue.work(ctx.config.concurrency, async (entry) => {
    const turn = shift.stopping
      ? handBackUnstarted(ctx, shift, entry)
      : handleTurn(ctx, runner, entry, shift).finally(() => opts.turnEnded?.(entry.data.jobId));
    shift.running.add(turn);
    try {
      await turn;
    } finally {
      shift.running.delete(turn);
    }
  });
  let sweeping = Promise.resolve();
  let cursor: SweepCursor | undefined;
  const timer = setInterval(() => {
    sweeping = sweep(ctx, cursor)
      .then((next) => {
        cursor = next;
      })
      .catch((err: unknown) => ctx.log.error({ err }, 'sweep failed'));
  }, SWEEP_INTERVAL_MS);
  timer.unref();
  return {
    async stop(drainSeconds = 0) {
      clearInterval(timer);
      shift.stopping = true;
      await ctx.queue.stopTaking();
      const turns = shift.running.size;
      ctx.log.info({ turns, drainSeconds }, 'draining');
      const finished = turns === 0 || (drainSeconds > 0 && (await shift.ended(drainSeconds)));
      if (!finished) {
        // The drain is over: the turns still running go back to the queue, their attempts
        // unused, for another worker to run from the start.
        shift.handingBack = true;
        ctx.aborts.abortAll(HAND_BACK_REASON);
      }
      await ctx.queue.stopWork();
      await sweeping;
      ctx.log.info({ turns, handedBack: shift.handedBack }, 'drained');
    },
  };
}

/** A turn the queue delivered as the worker began to stop: it goes back before it starts. */
async function handBackUnstarted(ctx: WorkerContext, shift: Shift, entry: TurnEntry) {
  const log = ctx.log.child({ jobId: entry.data.jobId, turn: entry.data.seq });
  if (!(await ctx.queue.handBack(entry, HAND_BACK_REASON))) return;
  shift.handedBack += 1;
  log.info('turn handed back unstarted: the worker is stopping');
}

async function handleTurn(
  ctx: WorkerContext,
  runner: TurnRunner,
  entry: TurnEntry,
  shift: Shift,
): Promise<void> {
  const { jobId, seq } = entry.data;
  const before = attemptsBefore(entry);
  const log = ctx.log.child({ jobId, turn: seq, attempt: before });
  const started = await startTurn(ctx, jobId, seq, before + 1);
  if (!started) return;
  const report = new TurnReport();
  // What this attempt's model calls used, as its progress events tell it: what a failed or
  // retried attempt spent counts too (its output, which would say, never comes).
  let stepTokens: TokenUsage = NO_TOKENS;
  // A best-of-N turn's attempts run on models of their own: its steps come priced at theirs.
  let stepCost: number | null = 0;
  const emit: Emit = (type, data) => {
    report.mark(type);
    const used = MODEL_CALLS.has(type) && 'usage' in data ? readUsage(data.usage) : undefined;
    if (used) stepTokens = addTokens(stepTokens, used);
    if (used)
      stepCost = stepCost === null || used.costUsd === null ? null : stepCost + used.costUsd;
    return recordProgress(ctx, jobId, seq, type, data);
  };
  const spent = (tokens: TokenUsage = stepTokens) => ctx.models.usage(started.job.model, tokens);
  // What the steps spent, for a turn that gives no output to say it.
  const stepsSpent = (): Usage =>
    started.turn.best_of
      ? { ...stepTokens, costUsd: stepCost === null ? null : roundUsd(stepCost) }
      : spent();
  log.info('turn started');

  const local = ctx.aborts.start(jobId);
  const signal = AbortSignal.any([entry.signal, local.signal]);
  // Stays 'interrupted' when settling throws: the turn goes back to the queue undecided.
  let outcome: TurnOutcome = 'interrupted';
  let failure: unknown;
  try {
    const { project, secrets, earlier, images } = await loadTurnInputs(ctx, started.job, seq);
    const output = await runner.run({
      job: started.job,
      turn: started.turn,
      project,
      secrets,
      earlier,
      images,
      signal,
      emit,
      saveReviewDiff: (diff, truncated) => recordReviewDiff(ctx, jobId, diff, truncated),
    });
    signal.throwIfAborted();
    await finishTurn(ctx, jobId, seq, output, output.spent ?? spent(output.usage ?? stepTokens));
    outcome = 'done';
  } catch (err) {
    failure = err;
    outcome = await settleFailure(ctx, entry, err, { signal, shift }, stepsSpent());
  } finally {
    ctx.aborts.finish(jobId, local);
    report.end(log, ctx.metrics, outcome, failure);
  }
}

/**
 * The wait before retry `retryCount + 1`: the configured delay, doubled for each retry before
 * it, plus up to a fifth more so that turns failed by one outage do not all return at once.
 */
function retryDelaySeconds(base: number, retryCount: number): number {
  const doubled = base * 2 ** Math.min(retryCount, 16);
  return Math.round(doubled * (1 + Math.random() / 5));
}

function isTransient(err: unknown): boolean {
  if (err instanceof TurnFailedError) return false;
  if (err instanceof ExternalError) return err.transient;
  // Anything else (a dropped database connection, a bug) gets the bounded retries too.
  return true;
}

async function settleFailure(
  ctx: WorkerContext,
  entry: TurnEntry,
  err: unknown,
  { signal, shift }: { signal: AbortSignal; shift: Shift },
  spent: Usage,
): Promise<Exclude<TurnOutcome, 'done'>> {
  const { jobId, seq } = entry.data;
  const before = attemptsBefore(entry);
  const log = ctx.log.child({ jobId, turn: seq, attempt: before });
  const status = await jobStatus(ctx.db, jobId);
  const gone = status === undefined || status === 'archived';
  if (!gone && signal.aborted && shift.handingBack) return handBack(ctx, entry, shift, spent);
  if (gone || signal.aborted) await recordSpent(ctx, jobId, seq, spent);
  if (gone) return 'archived';
  if (signal.aborted) {
    // Shutdown or a lost claim: the queue gives the turn to another worker.
    log.warn({ reason: errorMessage(signal.reason) }, 'turn interrupted');
    throw err;
  }
  const message = errorMessage(err);
  if (isTransient(err) && before < ctx.config.turn.retries) {
    const backoff = retryDelaySeconds(ctx.config.turn.retryDelaySeconds, before);
    // A service's Retry-After wins over a shorter backoff, bounded so a bad header cannot
    // defer a turn for days.
    const retryAfter =
      err instanceof ExternalError
        ? Math.min(err.retryAfterSeconds ?? 0, MAX_RETRY_AFTER_SECONDS)
        : 0;
    const delay = Math.max(backoff, retryAfter);
    log.debug({ retryInSeconds: delay }, 'turn retry scheduled');
    await retryTurn(
      ctx,
      jobId,
      seq,
      {
        error: message,
        attempt: before + 1,
        retryInSeconds: delay,
        ...(retryAfter > 0 ? { retryAfterSeconds: retryAfter } : {}),
      },
      spent,
    );
    // The backoff is Errand's, not pg-boss's: the queue retries at once so that a dead
    // worker's turn is taken up without delay (queue.ts). The turn goes back to the queue
    // deferred by `delay`, and this worker is free for other turns meanwhile.
    if (!(await ctx.queue.retryLater(entry, delay, message)))
      log.warn('turn retry not scheduled: its claim was gone');
    return 'retried';
  }
  await failTurn(ctx, jobId, seq, message, spent);
  return 'failed';
}

/**
 * A turn the drain did not see finish: it goes back to the queue unfinished, for another
 * worker to run from the start at the attempt it had here (its attempt is given back, in the
 * queue and in the turn's count). What it used is recorded: the model was paid for it.
 */
async function handBack(
  ctx: WorkerContext,
  entry: TurnEntry,
  shift: Shift,
  spent: Usage,
): Promise<'interrupted'> {
  const { jobId, seq } = entry.data;
  const log = ctx.log.child({ jobId, turn: seq, attempt: attemptsBefore(entry) });
  if (await ctx.queue.handBack(entry, HAND_BACK_REASON)) {
    await handBackTurn(ctx, jobId, seq, spent);
    shift.handedBack += 1;
    log.warn('turn handed back: the worker stopped before it finished');
  } else {
    // Taken back meanwhile (cancelled, or as if this worker had died): the queue decides.
    await recordSpent(ctx, jobId, seq, spent);
    log.warn('turn interrupted: its claim was gone before it could be handed back');
  }
  return 'interrupted';
}

/** Where a sweep goes on from: the last turn the sweep before it looked up. */
interface SweepCursor {
  jobId: string;
  seq: number;
}

/**
 * How many unsettled turns one sweep looks up. pg-boss's public API finds entries by one id at
 * a time (`findJobs`), not many, so a sweep asks once per turn; a larger backlog is gone
 * through over several sweeps, each going on where the one before it stopped.
 */
const SWEEP_BATCH = 100;

/**
 * Settles turns the queue has given up on: a worker that died on every attempt leaves its
 * entry `failed`, which would also hold back the job's later turns (strict FIFO per job).
 * Such a turn fails with a message, and its queue entry is removed to free the job's queue.
 * A turn whose entry is gone, cancelled or completed while the turn is unsettled is failed
 * the same way. Looks at up to SWEEP_BATCH turns after `after`, in key order; returns where
 * the next sweep goes on from, or undefined when it reached the last turn.
 */
export async function sweep(
  ctx: WorkerContext,
  after?: SweepCursor,
): Promise<SweepCursor | undefined> {
  const turns = await ctx.db
    .selectFrom('turns')
    .select(['job_id', 'seq', 'queue_id'])
    .where('state', 'in', ['queued', 'running'])
    .where('created_at', '<', sql<Date>`now() - interval '15 seconds'`)
    .$if(after !== undefined, (q) =>
      q.where(sql<boolean>`(job_id, seq) > (${after?.jobId}, ${after?.seq})`),
    )
    .orderBy('job_id')
    .orderBy('seq')
    .limit(SWEEP_BATCH)
    .execute();
  for (const turn of turns) {
    const entry = turn.queue_id ? await ctx.queue.entryState(turn.queue_id) : undefined;
    if (entry !== undefined && !ORPHANED.has(entry)) continue;
    const failed = await failOrphan(ctx, turn.job_id, turn.seq);
    if (failed) ctx.log.warn({ jobId: turn.job_id, turn: turn.seq }, 'gave up an orphaned turn');
    if (turn.queue_id && entry === 'failed') await ctx.queue.remove(turn.queue_id);
  }
  const last = turns.at(-1);
  return turns.length === SWEEP_BATCH && last ? { jobId: last.job_id, seq: last.seq } : undefined;
}
