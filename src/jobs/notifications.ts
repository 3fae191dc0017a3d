// Hears of every event committed to a job's log, whichever process wrote it: the database
// announces each insert on the channel errand_events (migration 0005) once its transaction
// commits, and one connection of this process LISTENs. A lost connection may have missed
// announcements: after reconnecting, listeners are told to read everything again (resync).
import pg from 'pg';
import type { DatabaseHandle } from '../db/database.ts';
import type { Logger } from '../log.ts';

const EVENTS_CHANNEL = 'errand_events';

/** How often the listening connection is checked; a dead one is replaced. */
const CHECK_INTERVAL_MS = 10_000;
/** Waits between attempts to reconnect, growing up to the last. */
const RECONNECT_DELAYS_MS = [250, 500, 1_000, 2_000, 5_000];

export interface EventListeners {
  /** A job's log has new events. */
  event(jobId: string): void;
  /** Announcements may have been missed (the connection was lost): read everything again. */
  resync(): void;
}

export class EventNotifications {
  readonly #connection: DatabaseHandle['connection'];
  readonly #connectTimeoutMs: number;
  readonly #log: Logger;
  readonly #listeners = new Set<EventListeners>();
  #started: Promise<void> | undefined;
  #client: pg.Client | undefined;
  #timer: NodeJS.Timeout | undefined;
  #reconnects = 0;
  #closed = false;

  constructor(connection: DatabaseHandle['connection'], connectTimeoutMs: number, log: Logger) {
    this.#connection = connection;
    this.#connectTimeoutMs = connectTimeoutMs;
    this.#log = log;
  }

  /**
   * Adds listeners, starting to listen on first use (a process that streams nothing holds no
   * connection for it). Resolves once announcements are heard; the returned function removes
   * them.
   */
  async subscribe(listeners: EventListeners): Promise<() => void> {
    this.#started ??= this.#start().catch((err: unknown) => {
      this.#started = undefined;
      throw err;
    });
    await this.#started;
    this.#listeners.add(listeners);
    return () => {
      this.#listeners.delete(listeners);
    };
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => {});
  }

  async #start(): Promise<void> {
    await this.#connect();
    this.#schedule(CHECK_INTERVAL_MS);
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({
      ...this.#connection,
      connectionTimeoutMillis: this.#connectTimeoutMs,
      keepAlive: true,
    });
    // A dropped connection is replaced at once; errors come with an 'end', or are caught by the
    // periodic check (a server that stopped answering ends nothing).
    client.on('error', () => {});
    client.on('end', () => {
      if (this.#client !== client || this.#closed) return;
      clearTimeout(this.#timer);
      this.#schedule(0);
    });
    client.on('notification', (message) => {
      if (message.channel === EVENTS_CHANNEL && message.payload) this.#event(message.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
    } catch (err) {
      await client.end().catch(() => {});
      throw err;
    }
    this.#client = client;
  }

  #schedule(ms: number): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => void this.#check(), ms);
    this.#timer.unref();
  }

  /** Pings the listening connection; replaces it when it does not answer in time. */
  async #check(): Promise<void> {
    const client = this.#client;
    if (client && (await answers(client, this.#connectTimeoutMs))) {
      this.#schedule(CHECK_INTERVAL_MS);
      return;
    }
    if (client) {
      this.#client = undefined;
      this.#log.warn('event notifications: connection lost, reconnecting');
      // end() waits for a server that may never answer: the socket goes at once instead.
      client.end().catch(() => {});
    }
    try {
      await this.#connect();
    } catch (err) {
      const delay =
        RECONNECT_DELAYS_MS[Math.min(this.#reconnects, RECONNECT_DELAYS_MS.length - 1)] ?? 5_000;
      if (this.#reconnects === 0) this.#log.error({ err }, 'event notifications: cannot reconnect');
      this.#reconnects++;
      this.#schedule(delay);
      return;
    }
    if (this.#closed) {
      await this.#client?.end().catch(() => {});
      return;
    }
    this.#reconnects = 0;
    this.#log.info('event notifications: listening again');
    for (const listeners of this.#listeners) listeners.resync();
    this.#schedule(CHECK_INTERVAL_MS);
  }

  #event(jobId: string): void {
    for (const listeners of this.#listeners) listeners.event(jobId);
  }
}

/** Whether the connection answers a trivial query within `timeoutMs`. */
async function answers(client: pg.Client, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([client.query('SELECT 1').then(() => true), timeout]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
