// What the job core uses of the application context (src/context.ts, built by service.ts), said
// here so that the core depends on nothing above it: the turn queue (src/queue/) and the model
// registry (src/agent/models.ts) are reached through the little the core asks of them.
import type { Transaction } from 'kysely';
import type { AuditSink } from '../audit/audit.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import type { TurnAborts } from './aborts.ts';
import type { Transitions } from './transitions.ts';

/** A turn to run, as the queue carries it. */
export interface TurnMessage {
  jobId: string;
  seq: number;
}

/** The turn queue as the core uses it (TurnQueue in src/queue/queue.ts). */
interface TurnSender {
  /** Enqueues turns inside `trx`, in one statement; returns the entries' ids in the messages' order. */
  enqueueAll(trx: Transaction<Database>, messages: readonly TurnMessage[]): Promise<string[]>;
  cancel(ids: string[]): Promise<void>;
}

/**
 * The model registry as the core uses it: the default model, the check of a job's model, and
 * whether its prices are known (a budget can hold only a model whose are), and whether it takes
 * images (docs/images.md).
 */
interface ModelCheck {
  readonly defaultId: string;
  check(id: string): { ok: true } | { ok: false; message: string };
  info(id: string): { prices: object | undefined; images: boolean };
}

export interface JobsContext {
  config: Config;
  db: Db;
  queue: TurnSender;
  models: ModelCheck;
  /** Running turns of this process, so an archive can stop them without waiting for a heartbeat. */
  aborts: TurnAborts;
  /** The core's listeners (hooks in each transition's transaction, subscribers after it commits). */
  transitions: Transitions;
  /** Told of the audit rows a transition wrote, once committed (the JSON-lines stream). */
  audit: AuditSink;
}
