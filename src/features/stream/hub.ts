// The hub of the live streams of jobs' events (Server-Sent Events), for every stream open on
// this API process. Streams of one job share their reads: an announcement of the job's new events
// (jobs/notifications.ts) leads to one query, whose rows go to each of its streams past its cursor.
// A stream whose reader is slow is skipped until its socket drains, and then reads on from its
// own cursor, so nothing is buffered beyond one batch per stream. A stream ends after the
// event that leaves its job terminal.
//
// One hub per API process (index.ts builds it): the API's events route (route.ts) and the
// dashboard job page's live lines (page-routes.ts) both open their streams on it.
import type { ServerResponse } from 'node:http';
import { sql } from 'kysely';
import type { AppContext } from '../../context.ts';
import type { JobStatus } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import type { EventRecord } from '../../events/log.ts';

/** What the hub needs of the service: it reads events, hears of new ones and counts its streams. */
type StreamsContext = Pick<AppContext, 'db' | 'log' | 'config' | 'metrics' | 'notifications'>;

/** Statuses after which a job has nothing more to say until someone writes to it again. */
const TERMINAL: ReadonlySet<JobStatus> = new Set(['completed', 'failed', 'archived']);

/** Events read per query; a longer backlog is read in several. */
const BATCH = 500;

/** A reader that has not taken anything for this many keep-alive periods is cut off. */
const STALLED_PERIODS = 4;

/** Every this many keep-alive periods (a minute by default), keys are checked for revocation. */
const KEY_CHECK_PERIODS = 4;

/** What the browser's EventSource waits before reconnecting after a dropped connection. */
const RETRY_MS = 3_000;

interface Stream {
  jobId: string;
  keyId: string;
  res: ServerResponse;
  /** The seq of the last event written to it. */
  cursor: number;
  /** Since when its socket refuses more (write returned false), or 0. */
  blockedSince: number;
  ended: boolean;
  format: EventFormat;
}

/**
 * How an event is written to a stream: its `event:` name and its `data:` (one line). By
 * default, the event's type and the event as JSON; the dashboard sends lines of HTML.
 */
export type EventFormat = (event: EventRecord) => { name: string; data: string };

const asJson: EventFormat = (event) => ({ name: event.type, data: JSON.stringify(event) });

interface Feed {
  streams: Set<Stream>;
  reading: boolean;
  again: boolean;
}

interface Row {
  status: JobStatus;
  seq: string | null;
  turn: number | null;
  type: string | null;
  data: unknown;
  at: Date | null;
}

export interface StreamRequest {
  jobId: string;
  keyId: string;
  /** Resume after this seq (Last-Event-ID or ?after=). */
  after: number;
  requestId: string;
}

/** The seq a stream resumes after: Last-Event-ID (a reconnecting EventSource sends it) wins. */
export function resumeAfter(lastEventId: string | string[] | undefined, after: number): number {
  if (lastEventId === undefined) return after;
  const value = Array.isArray(lastEventId) ? undefined : lastEventId.trim();
  if (value === undefined || !/^\d{1,15}$/.test(value))
    throw new AppError('bad_request', '"Last-Event-ID" must be an event seq (a whole number)');
  return Number(value);
}

/** Whether a request asks for the stream (its Accept lists text/event-stream). */
export function wantsStream(accept: string | undefined): boolean {
  return accept?.toLowerCase().includes('text/event-stream') ?? false;
}

export class EventStreams {
  readonly #ctx: StreamsContext;
  readonly #feeds = new Map<string, Feed>();
  readonly #perKey = new Map<string, number>();
  #unsubscribe: (() => void) | undefined;
  #subscribing: Promise<void> | undefined;
  #keepAlive: NodeJS.Timeout | undefined;
  #ticks = 0;
  #closing = false;

  constructor(ctx: StreamsContext) {
    this.#ctx = ctx;
  }

  /** Bytes written to open streams that their sockets have not sent yet. */
  bufferedBytes(): number {
    let bytes = 0;
    for (const stream of this.#all()) bytes += stream.res.writableLength;
    return bytes;
  }

  /**
   * Opens a stream on `res` for a job the caller may read. Refuses (429) a key past its number
   * of open streams. Answers 204, the Server-Sent Events way of saying "do not reconnect", when
   * the job is terminal and nothing is left to send after `after`.
   */
  async open(
    request: StreamRequest,
    res: ServerResponse,
    format: EventFormat = asJson,
  ): Promise<void> {
    if (this.#closing) throw new AppError('unavailable', 'this server is shutting down; try again');
    const limit = this.#ctx.config.streams.perKey;
    const open = this.#perKey.get(request.keyId) ?? 0;
    if (open >= limit)
      throw new AppError(
        'rate_limited',
        `this API key has ${open} event streams open on this server, its limit (ERRAND_STREAMS_PER_KEY); close one first`,
      );
    // Counted before the first await, so that a burst of opens cannot pass the limit together.
    this.#perKey.set(request.keyId, open + 1);
    const stream: Stream = {
      jobId: request.jobId,
      keyId: request.keyId,
      res,
      cursor: request.after,
      blockedSince: 0,
      ended: false,
      format,
    };
    try {
      await this.#listen();
      const [first] = await this.#read(request.jobId, request.after, 1);
      if (!first) throw new AppError('not_found', `job ${request.jobId} not found in this project`);
      if (first.seq === null && TERMINAL.has(first.status)) {
        this.#release(stream);
        res.writeHead(204, { 'x-request-id': request.requestId, 'cache-control': 'no-store' });
        res.end();
        return;
      }
    } catch (err) {
      this.#release(stream);
      throw err;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
      'x-request-id': request.requestId,
    });
    res.write(`retry: ${RETRY_MS}\n: events of job ${request.jobId}\n\n`);
    res.on('close', () => this.#end(stream));
    let feed = this.#feeds.get(request.jobId);
    if (!feed) {
      feed = { streams: new Set(), reading: false, again: false };
      this.#feeds.set(request.jobId, feed);
    }
    feed.streams.add(stream);
    this.#ctx.metrics.eventStreams.inc();
    this.#timers();
    this.#pump(request.jobId);
  }

  /** Ends every stream (a stop): their clients reconnect, to this server or another. */
  async close(): Promise<void> {
    this.#closing = true;
    clearInterval(this.#keepAlive);
    for (const stream of this.#all()) this.#stop(stream);
    this.#unsubscribe?.();
  }

  async #listen(): Promise<void> {
    if (this.#unsubscribe) return;
    this.#subscribing ??= this.#ctx.notifications
      .subscribe({
        event: (jobId) => this.#pump(jobId),
        resync: () => {
          for (const jobId of this.#feeds.keys()) this.#pump(jobId);
        },
      })
      .then((unsubscribe) => {
        this.#unsubscribe = unsubscribe;
      })
      .finally(() => {
        this.#subscribing = undefined;
      });
    await this.#subscribing;
  }

  #timers(): void {
    if (this.#keepAlive) return;
    const every = this.#ctx.config.streams.keepAliveMs;
    this.#keepAlive = setInterval(() => this.#tick(every), every);
    this.#keepAlive.unref();
  }

  /** A comment on every idle stream, so proxies keep it open; a stalled reader is cut off. */
  #tick(every: number): void {
    if (++this.#ticks % KEY_CHECK_PERIODS === 0) void this.#checkKeys();
    const now = Date.now();
    for (const stream of this.#all()) {
      if (stream.blockedSince === 0) {
        if (!stream.res.write(': keep-alive\n\n')) this.#blocked(stream);
      } else if (now - stream.blockedSince > STALLED_PERIODS * every) {
        this.#ctx.log.info({ jobId: stream.jobId }, 'event stream cut: its reader stalled');
        this.#end(stream);
        stream.res.destroy();
      }
    }
  }

  /**
   * Ends the streams of keys revoked since they opened, and of personal tokens revoked, expired
   * or whose user was deactivated.
   */
  async #checkKeys(): Promise<void> {
    const ids = [...this.#perKey.keys()];
    const keys = ids.filter((id) => id.startsWith('key_'));
    const tokens = ids.filter((id) => id.startsWith('tok_'));
    if (keys.length === 0 && tokens.length === 0) return;
    try {
      const revoked = keys.length
        ? await this.#ctx.db
            .selectFrom('api_keys')
            .select('id')
            .where('id', 'in', keys)
            .where('revoked_at', 'is not', null)
            .execute()
        : [];
      const ended = tokens.length
        ? await this.#ctx.db
            .selectFrom('user_tokens as t')
            .innerJoin('users as u', 'u.id', 't.user_id')
            .select('t.id')
            .where('t.id', 'in', tokens)
            .where((eb) =>
              eb.or([
                eb('t.revoked_at', 'is not', null),
                eb('t.expires_at', '<=', sql<Date>`now()`),
                eb('u.deactivated_at', 'is not', null),
              ]),
            )
            .execute()
        : [];
      const gone = new Set([...revoked, ...ended].map((r) => r.id));
      if (gone.size === 0) return;
      for (const stream of this.#all()) if (gone.has(stream.keyId)) this.#stop(stream);
    } catch (err) {
      this.#ctx.log.warn({ err }, 'event streams: could not check their keys');
    }
  }

  /** Reads the job's new events and writes each stream its share; one read per job at a time. */
  #pump(jobId: string): void {
    const feed = this.#feeds.get(jobId);
    if (!feed) return;
    if (feed.reading) {
      feed.again = true;
      return;
    }
    feed.reading = true;
    void this.#drain(jobId, feed)
      .catch((err: unknown) => {
        // The database is away: the streams stay open and are read again when it is back
        // (the notifications' resync) or at the job's next event.
        this.#ctx.log.warn({ err, jobId }, 'event stream: could not read events');
      })
      .finally(() => {
        feed.reading = false;
        if (feed.again) {
          feed.again = false;
          this.#pump(jobId);
        }
      });
  }

  async #drain(jobId: string, feed: Feed): Promise<void> {
    for (;;) {
      feed.again = false;
      const ready = [...feed.streams].filter((s) => s.blockedSince === 0);
      if (ready.length === 0) return;
      const from = Math.min(...ready.map((s) => s.cursor));
      const rows = await this.#read(jobId, from, BATCH);
      const status = rows[0]?.status;
      const events = rows.filter((r) => r.seq !== null).map(toEvent);
      for (const stream of ready) this.#send(stream, events);
      if (status === undefined) {
        // The job is gone (its project was deleted): nothing more will come.
        for (const stream of ready) this.#stop(stream);
        return;
      }
      if (events.length === BATCH) continue;
      if (TERMINAL.has(status)) {
        const last = events.at(-1)?.seq ?? from;
        for (const stream of ready)
          if (stream.blockedSince === 0 && stream.cursor >= last) this.#stop(stream);
      }
      if (!feed.again) return;
    }
  }

  #send(stream: Stream, events: readonly EventRecord[]): void {
    for (const event of events) {
      if (stream.ended || stream.blockedSince !== 0) return;
      if (event.seq <= stream.cursor) continue;
      stream.cursor = event.seq;
      const { name, data } = stream.format(event);
      const chunk = `id: ${event.seq}\nevent: ${name}\ndata: ${data}\n\n`;
      if (!stream.res.write(chunk)) this.#blocked(stream);
    }
  }

  #blocked(stream: Stream): void {
    stream.blockedSince = Date.now();
    stream.res.once('drain', () => {
      stream.blockedSince = 0;
      if (!stream.ended) this.#pump(stream.jobId);
    });
  }

  /**
   * The job's status and its events after `after`, in one statement: one snapshot, so a
   * terminal status comes with the event that made it so.
   */
  async #read(jobId: string, after: number, limit: number): Promise<Row[]> {
    const result = await sql<Row>`
      SELECT j.status, e.seq, e.turn, e.type, e.data, e.at
      FROM jobs j
      LEFT JOIN LATERAL (
        SELECT seq, turn, type, data, at FROM events
        WHERE job_id = j.id AND seq > ${after}
        ORDER BY seq
        LIMIT ${limit}
      ) e ON true
      WHERE j.id = ${jobId}`.execute(this.#ctx.db);
    return result.rows;
  }

  /** Every open stream, as a copy: ending one changes the feeds. */
  #all(): Stream[] {
    return [...this.#feeds.values()].flatMap((feed) => [...feed.streams]);
  }

  /** Ends a stream's response after what was written. */
  #stop(stream: Stream): void {
    this.#end(stream);
    stream.res.end();
  }

  /** Forgets a stream: its response ended, or its client went away. */
  #end(stream: Stream): void {
    if (stream.ended) return;
    stream.ended = true;
    const feed = this.#feeds.get(stream.jobId);
    if (feed?.streams.delete(stream)) this.#ctx.metrics.eventStreams.dec();
    if (feed && feed.streams.size === 0) this.#feeds.delete(stream.jobId);
    this.#release(stream);
  }

  #release(stream: Stream): void {
    const open = (this.#perKey.get(stream.keyId) ?? 1) - 1;
    if (open > 0) this.#perKey.set(stream.keyId, open);
    else this.#perKey.delete(stream.keyId);
  }
}

function toEvent(row: Row): EventRecord {
  return {
    seq: Number(row.seq),
    turn: row.turn,
    type: row.type ?? '',
    data: row.data,
    at: (row.at ?? new Date(0)).toISOString(),
  };
}
