// Lets other modules (the live stream, webhooks, the dashboard) follow the job lifecycle
// without touching the queue or the agent: each transition is announced once, after its
// transaction has committed, to every subscriber in this process. A rolled-back transition
// is never announced.
import type { JobStatus } from '../db/schema.ts';
import type { Logger } from '../log.ts';

export type TransitionType =
  | 'job.created'
  | 'job.reactivated'
  | 'job.completed'
  | 'job.failed'
  | 'job.archived'
  | 'turn.accepted'
  | 'turn.started'
  | 'turn.retrying'
  | 'turn.finished'
  | 'turn.failed';

export interface Transition {
  type: TransitionType;
  jobId: string;
  /** The turn it concerns; null for a change of the whole job (archive). */
  turn: number | null;
  /** The job's status once the transition committed. */
  status: JobStatus;
  /** What the transition's event in the job's log holds. */
  data: Record<string, unknown>;
}

export type TransitionListener = (transition: Transition) => void | Promise<void>;

export class Transitions {
  readonly #listeners = new Set<TransitionListener>();
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
