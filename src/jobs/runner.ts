// The boundary between the job model and the turn pipeline: a turn handler hands one turn
// to a TurnRunner, with everything it works from, and records what comes back. The pipeline
// (src/turns/pipeline.ts) implements it without reading the database; tests pass scripted
// runners to exercise the queue and the job model around it.
import type {
  AttachmentMediaType,
  AttemptResult,
  JobRow,
  ProjectRow,
  TurnRow,
} from '../db/schema.ts';
import type { Emit } from '../events/catalog.ts';
import type { TurnSecret } from '../projects/secrets.ts';
import type { TokenUsage, Usage } from './usage.ts';

/** One of the job's earlier finished turns. */
export interface EarlierTurn {
  seq: number;
  prompt: string;
  summary: string | null;
  /** Its part of the model conversation, as TurnOutput.messages gave it. */
  messages: unknown[];
}

/** An image a turn was given: its place among the turn's images (from 1), type and bytes. */
export interface TurnImage {
  n: number;
  mediaType: AttachmentMediaType;
  data: Uint8Array;
}

export interface TurnInput {
  job: JobRow;
  turn: TurnRow;
  /** The job's project as it is now: its forge settings apply to this turn. */
  project: ProjectRow;
  /**
   * The project's secrets, opened: its commands get them by exposure, and every value is
   * scrubbed from what the turn stores, shows, sends to a model or pushes.
   */
  secrets: readonly TurnSecret[];
  /** The job's earlier finished turns, in order: the conversation so far. */
  earlier: EarlierTurn[];
  /** The turn's images, in order (docs/images.md); absent or empty: none. */
  images?: readonly TurnImage[] | undefined;
  /** Aborted when the job is archived, the worker shuts down, or the turn's claim is lost. */
  signal: AbortSignal;
  /** Appends a progress event, declared in the event catalog, to the job's event log. */
  emit: Emit;
  /** Stores the job's review diff (what the branch changes, for the review page). */
  saveReviewDiff(diff: string, truncated: boolean): Promise<void>;
}

export interface TurnOutput {
  /** The agent's summary of what it did, or null. */
  summary: string | null;
  /** Set when the turn opened or updated a pull request. */
  prLink?: string | null;
  prNumber?: number | null;
  /**
   * What the turn's model calls used, all of them (compaction's included); unpriced: the worker
   * prices it. When absent, the tokens of the turn's `model.step` events count instead.
   */
  usage?: TokenUsage | null;
  /** The turn's part of the model conversation (prompt, replies, tool calls), kept for follow-ups. */
  messages?: unknown[] | null;
  /** The commit this turn pushed, if any. */
  commitSha?: string | null;
  /**
   * The value its agent produced against the turn's output schema (docs/structured-output.md),
   * already checked; absent for a turn without one.
   */
  output?: { value: unknown } | undefined;
  /**
   * A best-of-N turn's attempts (docs/eval.md), the winner marked: the job's `attempts`. Absent
   * for a turn that made none.
   */
  attempts?: AttemptResult[] | undefined;
  /**
   * `usage` already priced, for a turn whose model calls were not all the job's model's (the
   * attempts' agents); absent: the worker prices `usage` at the job's model.
   */
  spent?: Usage | undefined;
}

export interface TurnRunner {
  run(input: TurnInput): Promise<TurnOutput>;
}

/**
 * A failure that trying again cannot fix (bad credentials, missing repository, exhausted
 * budget). Its message is shown to the user as the job's `error`.
 */
export class TurnFailedError extends Error {
  override name = 'TurnFailedError';
}
