// How other modules follow the job lifecycle without the core knowing them: the core records
// each transition and calls whoever registered here, never the other way round. A hook runs
// inside the transaction that wrote the events (the webhook outbox writes its deliveries
// there, so they commit exactly with their event); a subscriber hears each transition once,
// after its transaction has committed (the worker's janitor deletes an archived job's clone).
// A rolled-back transition is never announced. The live stream hears of events through the
// database instead (notifications.ts), since their writer may be another process.
import { type RawBuilder, sql, type Transaction } from 'kysely';
import type { Database, JobStatus } from '../db/schema.ts';
import type { EventData, EventType, TransitionType } from '../events/catalog.ts';
import type { Logger } from '../log.ts';

/** A transition of one declared type (events/catalog.ts), with the data its event holds. */
type TransitionOf<T extends TransitionType> = {
  type: T;
  jobId: string;
  /** The turn it concerns; null for a change of the whole job (archive). */
  turn: number | null;
  /** The job's status once the transition committed. */
  status: JobStatus;
  /** What the transition's event in the job's log holds. */
  data: EventData<T>;
};

export type Transition = { [T in TransitionType]: TransitionOf<T> }[TransitionType];

export type TransitionListener = (transition: Transition) => void | Promise<void>;

/** An event as its insert returned it, in the transaction that recorded it. */
export interface RecordedEvent {
  jobId: string;
  seq: string | number;
  turn: number | null;
  type: EventType;
  data: Record<string, unknown>;
  at: Date;
}

/**
 * Work that must commit, or roll back, with the events that ask for it (the webhook outbox's
 * deliveries). It sees every event written by a transition, and the progress events of the
 * types it `wants`; it may write in `trx`, and a failure undoes the whole transition.
 */
export interface TransitionHook {
  /** Whether a running turn's progress event of this type needs the hook (a transaction). */
  wants(type: EventType): boolean;
  /**
   * Whether the hook may have work for events of jobs of these projects, as a condition that
   * the statement writing the events evaluates (a create's; see Transitions.screen): when it
   * is false the hook does not run, and its own statement is saved. Without it, it always runs.
   */
  concerns?(projectIds: readonly string[]): RawBuilder<boolean>;
  run(trx: Transaction<Database>, events: readonly RecordedEvent[]): Promise<void>;
}

/**
 * The hooks' conditions (TransitionHook.concerns) for the events of some projects' jobs, for
 * the statement that writes those events: `conditions` is an array of booleans it selects, and
 * `passed` the hooks to leave out once it has answered them.
 */
export interface HookScreen {
  conditions: RawBuilder<boolean[]>;
  passed(answers: readonly boolean[] | null): ReadonlySet<TransitionHook>;
}

export class Transitions {
  readonly #listeners = new Set<TransitionListener>();
  readonly #hooks = new Set<TransitionHook>();
  readonly #log: Logger;

  constructor(log: Logger) {
    this.#log = log;
  }

  /** Calls `listener` for every transition from now on; the returned function stops it. */
  subscribe(listener: TransitionListener): () => void {
    // A wrapper per call, so that subscribing one function twice hears each transition twice
    // and each unsubscribe removes its own.
    const own: TransitionListener = (t) => listener(t);
    this.#listeners.add(own);
    return () => {
      this.#listeners.delete(own);
    };
  }

  /**
   * Runs `hook` in the transaction of every transition from now on (registered where the
   * service is assembled); the returned function removes it.
   */
  hook(hook: TransitionHook): () => void {
    const own: TransitionHook = {
      wants: (type) => hook.wants(type),
      concerns: hook.concerns?.bind(hook),
      run: hook.run.bind(hook),
    };
    this.#hooks.add(own);
    return () => {
      this.#hooks.delete(own);
    };
  }

  /** Whether a progress event of this type must be written with the hooks, in a transaction. */
  hooked(type: EventType): boolean {
    for (const hook of this.#hooks) if (hook.wants(type)) return true;
    return false;
  }

  /** The conditions of the hooks that have one, for events of jobs of `projectIds`. */
  screen(projectIds: readonly string[]): HookScreen {
    const screened: TransitionHook[] = [];
    const conditions: RawBuilder<boolean>[] = [];
    for (const hook of this.#hooks) {
      if (!hook.concerns) continue;
      screened.push(hook);
      conditions.push(hook.concerns(projectIds));
    }
    return {
      conditions:
        conditions.length === 0
          ? sql<boolean[]>`ARRAY[]::boolean[]`
          : sql<boolean[]>`ARRAY[${sql.join(conditions)}]`,
      // A hook whose condition did not answer false runs.
      passed: (answers) => new Set(screened.filter((_, i) => answers?.[i] === false)),
    };
  }

  /**
   * Runs the hooks, in the order they were registered, on the events `trx` has just written;
   * all but those `passed` (HookScreen), whose condition said they have no work.
   */
  async runHooks(
    trx: Transaction<Database>,
    events: readonly RecordedEvent[],
    passed: ReadonlySet<TransitionHook> = new Set(),
  ): Promise<void> {
    if (events.length === 0) return;
    for (const hook of this.#hooks) if (!passed.has(hook)) await hook.run(trx, events);
  }

  /**
   * Announces committed transitions, in order. A subscriber's failure is logged and does not
   * reach the transition's caller: the change is already durable, and one subscriber must not
   * keep the others from hearing of it.
   */
  publish(transitions: readonly Transition[]): void {
    for (const transition of transitions) {
      for (const listener of this.#listeners) {
        try {
          const pending = listener(transition);
          if (pending) pending.catch((err: unknown) => this.#failed(err, transition));
        } catch (err) {
          this.#failed(err, transition);
        }
      }
    }
  }

  #failed(err: unknown, transition: Transition): void {
    this.#log.error(
      { err, jobId: transition.jobId, turn: transition.turn, transition: transition.type },
      'transition subscriber failed',
    );
  }
}
