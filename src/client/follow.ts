// Following a job: its live event stream (Server-Sent Events, resumed after a dropped
// connection without a gap or a repeat) and polling its record until it settles.
import { ErrandError } from './errors.ts';
import { checkEvent, checkJob, type Job, type JobEvent, TERMINAL_STATUSES } from './records.ts';
import { sseMessages } from './sse.ts';
import { type Clock, networkError, type Transport } from './transport.ts';

/** The events that leave a job terminal; Errand ends the live stream after one of them. */
const TERMINAL_EVENTS: ReadonlySet<string> = new Set([
  'job.completed',
  'job.failed',
  'job.archived',
]);

/** Polling: the first wait, the longest, and how long a failing connection is retried. */
const POLL_FIRST_MS = 500;
const POLL_MAX_MS = 5000;
/** A live stream that cannot be opened again this many times in a row is given up. */
const STREAM_RECONNECTS = 10;

/**
 * The live stream; resumes after a dropped connection (Last-Event-ID), ends when the server
 * ends it (terminal) or the signal aborts.
 *
 * Each event is yielded once, in seq order: a reconnection asks for the events after the
 * last one seen. A stream that ends without a terminal event (a server restarting, say) is
 * opened again; a 204 (nothing left of a terminal job) ends the loop. Aborting ends the loop
 * without an error; an answer that is not a stream (404, 401…) throws.
 */
export async function* streamEvents(
  transport: Transport,
  path: string,
  jobId: string,
  options: {
    after?: number | undefined;
    signal?: AbortSignal | undefined;
    retryDelay?: { firstMs: number; maxMs: number } | undefined;
  },
): AsyncGenerator<JobEvent, void, undefined> {
  const firstMs = options.retryDelay?.firstMs ?? POLL_FIRST_MS;
  const maxMs = options.retryDelay?.maxMs ?? POLL_MAX_MS;
  let last = options.after ?? 0;
  let failures = 0;
  let delay = firstMs;
  // Ends the request when the loop is left early (break, return) as well as on abort.
  const local = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, local.signal]) : local.signal;
  try {
    for (;;) {
      if (signal.aborted) return;
      let response: Response;
      try {
        response = await transport.request(`${path}?after=${last}`, {
          method: 'GET',
          headers: { accept: 'text/event-stream', 'last-event-id': String(last) },
          signal,
          what: 'events',
        });
      } catch (err) {
        if (signal.aborted) return;
        if (!(err instanceof ErrandError) || !err.transient || ++failures > STREAM_RECONNECTS)
          throw err;
        await pause(transport.clock, err, delay, signal);
        delay = Math.min(delay * 2, maxMs);
        continue;
      }
      if (response.status === 204) return;
      const type = response.headers.get('content-type') ?? '';
      if (!type.startsWith('text/event-stream') || !response.body) {
        await response.body?.cancel();
        throw new ErrandError(`events: expected an event stream, got ${type || 'no body'}`, {
          code: 'invalid_response',
          status: response.status,
        });
      }
      let terminal = false;
      let progressed = false;
      try {
        for await (const message of sseMessages(response.body)) {
          let parsed: unknown;
          try {
            parsed = JSON.parse(message.data);
          } catch {
            throw new ErrandError('events: a streamed event is not JSON', {
              code: 'invalid_response',
              status: response.status,
            });
          }
          const event = checkEvent(parsed, response.status);
          if (event.seq <= last) continue;
          last = event.seq;
          failures = 0;
          delay = firstMs;
          terminal = TERMINAL_EVENTS.has(event.type);
          progressed = true;
          yield event;
        }
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof ErrandError) throw err;
        // The connection dropped mid-stream: open it again after the last event seen.
        if (++failures > STREAM_RECONNECTS) throw networkError('events', transport.base, err);
        await transport.clock.sleep(delay, signal).catch(() => {});
        delay = Math.min(delay * 2, maxMs);
        continue;
      }
      if (terminal) return;
      // Ended without a terminal event (a server stopping, say): open it again, at once if
      // it brought events, else after a pause, so that a server that keeps ending streams
      // is not asked again and again.
      if (progressed) continue;
      if (++failures > STREAM_RECONNECTS)
        throw new ErrandError(
          `events: the stream of job ${jobId} ended ${STREAM_RECONNECTS} times in a row with no event`,
          { code: 'invalid_response', status: response.status },
        );
      await transport.clock.sleep(delay, signal).catch(() => {});
      delay = Math.min(delay * 2, maxMs);
    }
  } finally {
    local.abort();
  }
}

/**
 * Polls GET with If-None-Match, backs off, honours Retry-After; resolves on
 * completed/failed/archived.
 *
 * Waits 0.5 s after a change, doubling to 5 s while nothing changes (a 304, or the same
 * record from a server that ignores If-None-Match). A 429 or 503 waits as long as its
 * Retry-After says; a lost connection is retried once the job has been read. Rejects with
 * code `timeout` after timeoutMs, and with the signal's reason when it aborts.
 */
export async function pollJob(
  transport: Transport,
  path: string,
  jobId: string,
  options: {
    timeoutMs?: number | undefined;
    onChange?: ((job: Job) => void) | undefined;
    signal?: AbortSignal | undefined;
  },
): Promise<Job> {
  const { clock } = transport;
  const deadline =
    options.timeoutMs === undefined ? Number.POSITIVE_INFINITY : clock.now() + options.timeoutMs;
  // A request under way when the time is up is cut by a timer of the system's; the waits
  // between requests run on the client's clock and stop at the deadline.
  const timer = new AbortController();
  const timeout =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => timer.abort(), Math.max(0, options.timeoutMs));
  const signal = options.signal ? AbortSignal.any([options.signal, timer.signal]) : timer.signal;
  let etag: string | undefined;
  let seen: string | undefined;
  let job: Job | undefined;
  let delay = POLL_FIRST_MS;
  try {
    for (;;) {
      let wait = delay;
      try {
        const response = await transport.request(path, {
          method: 'GET',
          headers: etag ? { 'if-none-match': etag } : {},
          signal,
          what: 'waitForJob',
        });
        if (response.status === 304 && job) {
          delay = Math.min(delay * 2, POLL_MAX_MS);
        } else {
          const text = JSON.stringify(await transport.json(response, 'waitForJob'));
          job = checkJob(JSON.parse(text), 'waitForJob', response.status);
          etag = response.headers.get('etag') ?? undefined;
          if (text !== seen) {
            seen = text;
            delay = POLL_FIRST_MS;
            options.onChange?.(job);
          } else {
            delay = Math.min(delay * 2, POLL_MAX_MS);
          }
          if (TERMINAL_STATUSES.includes(job.status)) return job;
        }
        wait = delay;
      } catch (err) {
        if (options.signal?.aborted) throw options.signal.reason;
        if (timer.signal.aborted) throw timedOut(jobId, options.timeoutMs, job);
        // Before the first answer a lost connection is most likely a wrong URL: say so now.
        if (!(err instanceof ErrandError) || !err.transient || (!job && err.status === 0))
          throw err;
        wait = err.retryAfterSeconds !== undefined ? err.retryAfterSeconds * 1000 : delay;
        delay = Math.min(delay * 2, POLL_MAX_MS);
      }
      if (clock.now() + wait > deadline) wait = Math.max(0, deadline - clock.now());
      try {
        await clock.sleep(wait, signal);
      } catch (err) {
        if (options.signal?.aborted) throw options.signal.reason;
        if (timer.signal.aborted) throw timedOut(jobId, options.timeoutMs, job);
        throw err;
      }
      if (clock.now() >= deadline) throw timedOut(jobId, options.timeoutMs, job);
    }
  } finally {
    clearTimeout(timeout);
  }
}

/** Waits before trying again: the server's Retry-After when it gave one. */
async function pause(
  clock: Clock,
  err: ErrandError,
  delay: number,
  signal: AbortSignal,
): Promise<void> {
  const ms = err.retryAfterSeconds !== undefined ? err.retryAfterSeconds * 1000 : delay;
  await clock.sleep(ms, signal).catch(() => {});
}

function timedOut(jobId: string, timeoutMs: number | undefined, job: Job | undefined): ErrandError {
  return new ErrandError(
    `waitForJob: job ${jobId} is still ${job?.status ?? 'unread'} after ${timeoutMs} ms`,
    { code: 'timeout', status: 0 },
  );
}
