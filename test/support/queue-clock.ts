// The queue's time in tests: pg-boss's TestClock, given to a test service (`clock`), moves the
// time of its polls, retries, heartbeats, supervision and scheduler, and of pg-boss's statements
// in the database (`job_now()`) for every session of the service that opts in; a test service
// on a clock opts all of its sessions in (`onQueueClock`), so that what Errand's transactions
// write to the queue (turns, their retries, deliveries) reads the same time.
import { CLOCK_OVERRIDE_SETTING, type TestClock } from 'pg-boss';

/** The database URL whose sessions read pg-boss's time from the TestClock attached to it. */
export function onQueueClock(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  url.searchParams.set('options', `-c ${CLOCK_OVERRIDE_SETTING}=on`);
  return url.toString();
}

/**
 * Runs `clock` ten times faster than real time, 100 ms at a step, until the returned function
 * stops it: the queue's waits (its retries' backoff, its polls) pass in a tenth of their time,
 * while each step waits for the queue's statements, so nothing the queue does is skipped. Paced,
 * not as fast as it can, so that work in flight in real time (an HTTP request, a turn) keeps its
 * claim's heartbeats. For tests whose waits are all for something that must happen.
 */
export function runFast(clock: TestClock): () => Promise<void> {
  let running = true;
  const loop = (async () => {
    while (running) {
      await clock.tick(100);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  return async () => {
    running = false;
    await loop;
  };
}
