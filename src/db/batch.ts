// Groups concurrent calls into batches, each run by one call of a batch function: the polling
// reads share one statement (http/auth.ts), the creates of jobs one transaction
// (jobs/create.ts). Under load, the fixed cost of a statement or a commit (a socket write and
// read on each side, PostgreSQL's per-statement work, a WAL flush) is most of the cost of a
// small read or write; paying it once per batch instead of once per request is what lets them
// scale. Every call still runs in a batch started after it was made, so a client never sees a
// state older than its request (a key revoked before the request is refused, a job changed
// before the request is seen changed).

/** Runs one batch; answers one result per item, in the items' order. */
export type BatchRunner<I, O> = (items: readonly I[]) => Promise<readonly O[]>;

export interface BatchOptions {
  /** Most items in one batch. */
  maxItems: number;
  /** Most batches in flight at once; items wait for a free one. */
  maxInFlight: number;
  /**
   * A batch not answered in this time fails its items with `error()` and frees its slot, so a
   * connection that hangs (a dead peer without a reset) cannot hold every later item.
   */
  timeout: { ms: number; error: () => Error };
}

interface Waiter<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (err: unknown) => void;
}

export class Batcher<I, O> {
  readonly #run: BatchRunner<I, O>;
  readonly #opts: BatchOptions;
  #pending: Waiter<I, O>[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(run: BatchRunner<I, O>, opts: BatchOptions) {
    if (opts.maxItems < 1 || opts.maxInFlight < 1 || opts.timeout.ms < 1) {
      throw new RangeError('maxItems, maxInFlight and timeout.ms must be at least 1');
    }
    this.#run = run;
    this.#opts = opts;
  }

  /** Adds `item` to the next batch; answers its result once that batch has run. */
  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#pending.push({ item, resolve, reject });
      this.#schedule();
    });
  }

  /**
   * Flushes after the current I/O phase, so that the requests parsed from all sockets that were
   * readable together share one batch; at low load this adds no waiting beyond that phase.
   */
  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#opts.maxInFlight) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    while (this.#pending.length > 0 && this.#inFlight < this.#opts.maxInFlight) {
      const batch = this.#pending.splice(0, this.#opts.maxItems);
      this.#inFlight++;
      this.#dispatch(batch).finally(() => {
        this.#inFlight--;
        if (this.#pending.length > 0) this.#schedule();
      });
    }
  }

  async #dispatch(batch: Waiter<I, O>[]): Promise<void> {
    const { ms, error } = this.#opts.timeout;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(error()), ms);
    });
    let results: readonly O[];
    try {
      // A run that settles after the timeout is ignored: the race is already decided.
      results = await Promise.race([this.#run(batch.map((w) => w.item)), timedOut]);
      if (results.length !== batch.length) {
        throw new Error(`batch answered ${results.length} results for ${batch.length} items`);
      }
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    } finally {
      clearTimeout(timer);
    }
    batch.forEach((w, i) => {
      w.resolve(results[i] as O);
    });
  }
}
