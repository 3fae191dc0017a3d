// Scripted turn runners for lifecycle tests. They stand in for the agent pipeline only: the
// queue, the database and the job model around them are the real ones.
import { setTimeout as sleep } from 'node:timers/promises';
import type { TurnInput, TurnOutput, TurnRunner } from '../../src/jobs/runner.ts';

export interface TurnCall {
  jobId: string;
  seq: number;
  prompt: string;
  startedAt: number;
  endedAt?: number;
  aborted?: boolean;
}

/** Records every turn it runs; each turn is handled by `behaviour`. */
export class RecordingRunner implements TurnRunner {
  readonly calls: TurnCall[] = [];
  running = 0;
  maxRunning = 0;
  readonly #behaviour: (input: TurnInput, call: TurnCall) => Promise<TurnOutput>;
  readonly #now: () => number;

  /** `now`: the clock a call's times are read on (a test's queue clock; the real one by default). */
  constructor(
    behaviour: (input: TurnInput, call: TurnCall) => Promise<TurnOutput>,
    now: () => number = Date.now,
  ) {
    this.#behaviour = behaviour;
    this.#now = now;
  }

  async run(input: TurnInput): Promise<TurnOutput> {
    const call: TurnCall = {
      jobId: input.job.id,
      seq: input.turn.seq,
      prompt: input.turn.prompt,
      startedAt: this.#now(),
    };
    this.calls.push(call);
    this.running++;
    this.maxRunning = Math.max(this.maxRunning, this.running);
    try {
      return await this.#behaviour(input, call);
    } catch (err) {
      call.aborted = input.signal.aborted;
      throw err;
    } finally {
      call.endedAt = this.#now();
      this.running--;
    }
  }
}

/** Waits `ms` or until the signal aborts (then rejects with the signal's reason). */
export async function work(ms: number, signal: AbortSignal): Promise<void> {
  await sleep(ms, undefined, { signal });
}
