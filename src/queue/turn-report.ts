// What one turn attempt leaves for the operator: a single log line with its outcome and how
// long each phase took, and the turn metrics. The phases are read off the events the turn
// emits, so the pipeline needs no timing code of its own.
import { type EventType, phaseEnded } from '../events/catalog.ts';
import type { Logger } from '../log.ts';
import type { Metrics, TurnOutcome } from '../metrics/metrics.ts';

export class TurnReport {
  readonly #started = performance.now();
  #last = this.#started;
  readonly #phasesMs: Record<string, number> = {};

  /**
   * Notes an event of the turn; the ones that end a phase (the catalog says which) close its
   * timing. The first one seen counts: a phase a turn skips has none.
   */
  mark(eventType: EventType): void {
    const phase = phaseEnded(eventType);
    if (!phase || phase in this.#phasesMs) return;
    const now = performance.now();
    this.#phasesMs[phase] = Math.round(now - this.#last);
    this.#last = now;
  }

  end(log: Logger, metrics: Metrics, outcome: TurnOutcome, err?: unknown): void {
    const totalMs = Math.round(performance.now() - this.#started);
    metrics.turns.inc({ outcome });
    metrics.turnDuration.observe({ outcome }, totalMs / 1000);
    const line = { outcome, totalMs, phasesMs: this.#phasesMs, ...(err ? { err } : {}) };
    if (outcome === 'done' || outcome === 'archived') log.info(line, 'turn ended');
    else log.warn(line, 'turn ended');
  }
}
