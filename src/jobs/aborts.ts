// The turns running in this process, by job id. Archiving a job aborts its turn here at once
// when the worker shares the API's process; elsewhere the worker notices at its next
// heartbeat that the queue entry was cancelled.
export class TurnAborts {
  readonly #running = new Map<string, AbortController>();

  start(jobId: string): AbortController {
    const controller = new AbortController();
    this.#running.set(jobId, controller);
    return controller;
  }

  finish(jobId: string, controller: AbortController): void {
    if (this.#running.get(jobId) === controller) this.#running.delete(jobId);
  }

  /** Whether a turn of the job runs in this process now. */
  running(jobId: string): boolean {
    return this.#running.has(jobId);
  }

  abort(jobId: string, reason: string): void {
    this.#running.get(jobId)?.abort(new Error(reason));
  }

  abortAll(reason: string): void {
    for (const controller of this.#running.values()) controller.abort(new Error(reason));
  }
}
