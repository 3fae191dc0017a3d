// A prompt accepted as a turn of a job: the turn row and its queue entry, written in the
// transaction that accepts it (a job's create, create.ts, or a follow-up, service.ts), and the
// transition that announces it.
import type { Transaction } from 'kysely';
import type {
  Actor,
  AttachmentMediaType,
  Database,
  ProjectRow,
  TurnMode,
  TurnPurpose,
  TurnTrigger,
} from '../db/schema.ts';
import { AppError } from '../errors.ts';
import type { ShownTrigger } from '../events/declare.ts';
import type { StoredResponse } from '../idempotency/keys.ts';
import { engineModelRefusal, engineModeRefusal } from '../projects/engine.ts';
import type { RateLimitState } from '../ratelimit/ratelimit.ts';
import type { JobsContext } from './context.ts';
import { type JobView, toJobRecord } from './record.ts';
import type { TransitionScope } from './transaction.ts';
import type { Transition } from './transitions.ts';

/** A prompt accepted: the job as it left it, and what its project's rate limit has left. */
export interface Accepted {
  job: JobView;
  rateLimit: RateLimitState | undefined;
}

/**
 * What a request with an Idempotency-Key whose first request committed gets instead: that
 * request's response, to send again. Nothing was changed and no rate limit was used.
 */
export interface Replayed {
  replayed: StoredResponse;
}

/** The response a keyed request stores: the status and the JSON text its route sends. */
export function stored(status: number, job: JobView): StoredResponse {
  return { status, body: JSON.stringify(toJobRecord(job)) };
}

/**
 * Refuses a model that cannot be used, and on a project with a budget one whose prices are
 * unknown: its spend could not be counted, so the budget could not hold it.
 */
export function checkModel(ctx: JobsContext, project: ProjectRow, model: string): void {
  const check = ctx.models.check(model);
  if (!check.ok) throw new AppError('model_unavailable', check.message);
  const refusal = engineModelRefusal(project.engine, model);
  if (refusal !== undefined)
    throw new AppError(
      'model_unavailable',
      `${refusal} (the engine of project ${project.id}): ask for such a model, or change the project's engine`,
    );
  const budgets = [
    ...(project.job_budget_usd !== null ? ['jobBudgetUsd'] : []),
    ...(project.monthly_budget_usd !== null ? ['monthlyBudgetUsd'] : []),
  ];
  if (budgets.length > 0 && ctx.models.info(model).prices === undefined)
    throw new AppError(
      'model_unavailable',
      `model '${model}' has no known price, and project ${project.id} has a budget (${budgets.join(', ')}) that could not hold it: give its prices in the server's ERRAND_MODEL_CATALOG file, or use a model whose prices are known`,
    );
}

/** Refuses a mode the project's engine cannot hold (docs/modes.md). */
export function checkMode(project: ProjectRow, mode: TurnMode): void {
  const refusal = engineModeRefusal(project.engine, mode);
  if (refusal !== undefined)
    throw new AppError(
      'bad_request',
      `${refusal} (project ${project.id}): use mode "code", or the errand, claude-code or opencode engine`,
    );
}

/** An image given with a turn (docs/images.md), checked, and fetched when it came as a URL. */
export interface NewAttachment {
  mediaType: AttachmentMediaType;
  data: Buffer;
  /** The https URL it was fetched from; null for one sent inline. */
  source: string | null;
}

/** What a turn may carry besides its prompt (issue 34), on a create and on a follow-up. */
export interface TurnExtras {
  /** The JSON Schema its answer must satisfy (docs/structured-output.md). */
  outputSchema?: Record<string, unknown> | undefined;
  /** Its images, in order (docs/images.md). */
  attachments?: readonly NewAttachment[] | undefined;
}

/** A prompt accepted as a turn of a job. */
export interface NewTurn extends TurnExtras {
  jobId: string;
  seq: number;
  prompt: string;
  trigger?: TurnTrigger | undefined;
  /** Who sent the prompt; null when no one is known. */
  sentBy: Actor | null;
  /** Why Errand queued it itself; absent or null for a prompt someone sent. */
  purpose?: TurnPurpose | null;
  /** What the turn may do; absent: `code`. */
  mode?: TurnMode | undefined;
}

/**
 * Accepts prompts as turns of jobs, in the caller's transaction, which has locked the jobs.
 * The queue entries are written first so that each turn row is written once, with its queue
 * id; no worker can see an entry before the transaction commits.
 */
export async function acceptTurns(
  ctx: Pick<JobsContext, 'queue'>,
  scope: TransitionScope,
  turns: readonly NewTurn[],
): Promise<void> {
  const { trx } = scope;
  const queueIds = await ctx.queue.enqueueAll(
    trx,
    turns.map(({ jobId, seq }) => ({ jobId, seq })),
  );
  await trx
    .insertInto('turns')
    .values(
      turns.map(({ jobId, seq, prompt, trigger, sentBy, purpose, mode, outputSchema }, i) => ({
        job_id: jobId,
        seq,
        prompt,
        state: 'queued' as const,
        queue_id: queueIds[i] ?? null,
        trigger: trigger ? JSON.stringify(trigger) : null,
        sent_by: sentBy ? JSON.stringify(sentBy) : null,
        purpose: purpose ?? null,
        mode: mode ?? 'code',
        output_schema: outputSchema ? JSON.stringify(outputSchema) : null,
      })),
    )
    .execute();
  await writeAttachments(trx, turns);
  await scope.recordAll(turns.map(accepted));
}

/** Stores the images of turns just written, in the caller's transaction. */
export async function writeAttachments(
  trx: Transaction<Database>,
  turns: readonly Pick<NewTurn, 'jobId' | 'seq' | 'attachments'>[],
): Promise<void> {
  const rows = turns.flatMap(({ jobId, seq, attachments = [] }) =>
    attachments.map((image, i) => ({
      job_id: jobId,
      seq,
      n: i + 1,
      media_type: image.mediaType,
      size: image.data.length,
      data: image.data,
      source: image.source,
    })),
  );
  if (rows.length > 0) await trx.insertInto('attachments').values(rows).execute();
}

/**
 * A turn's acceptance: announced, with no event of its own (the job's record says so; a forge
 * event that asked for it is told again by the turn's `turn.started`).
 */
export function accepted(turn: Pick<NewTurn, 'jobId' | 'seq' | 'trigger'>): Transition {
  return {
    type: 'turn.accepted',
    jobId: turn.jobId,
    turn: turn.seq,
    status: 'active',
    data: turn.trigger ? { trigger: shownTrigger(turn.trigger) } : {},
  };
}

/** What the job's events say of the forge event that asked for a turn: never where Errand answers. */
export function shownTrigger(trigger: TurnTrigger): ShownTrigger {
  return { forge: trigger.forge, kind: trigger.kind, url: trigger.url, author: trigger.author };
}
