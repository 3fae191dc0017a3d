// A webhook receiver on loopback for the delivery tests: a real HTTP server that records every
// request and answers as the test says (a status, or never), and endpoints written straight
// into the database (the admin API refuses loopback targets unless allowed; these tests are
// about delivery, not about managing endpoints).
import { randomBytes } from 'node:crypto';
import {
  createServer,
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { newId } from '../../src/ids.ts';
import { seal } from '../../src/secrets/box.ts';
import type { TestService } from '../support/service.ts';

export const SECRET_KEY = 'webhook-tests-secret-key-2f7c0a9e';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** The webhook-id header. */
  id: string;
  /** The payload's `type`. */
  type: string;
  at: number;
}

/** What to answer: a status, or 'hang' to hold the request open until the receiver closes. */
export type Answer = number | 'hang';

export class Receiver {
  readonly requests: Received[] = [];
  answer: (request: Received, index: number) => Answer = () => 200;
  readonly #server: Server;
  readonly #held: ServerResponse[] = [];
  readonly #arrivals = new Set<() => void>();
  readonly #now: () => number;
  url = '';

  private constructor(now: () => number) {
    this.#now = now;
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        let type = '';
        try {
          type = String((JSON.parse(body) as { type?: unknown }).type);
        } catch {}
        const received: Received = {
          headers: req.headers,
          body,
          id: String(req.headers['webhook-id']),
          type,
          at: this.#now(),
        };
        this.requests.push(received);
        const answer = this.answer(received, this.requests.length - 1);
        for (const wake of this.#arrivals) wake();
        if (answer === 'hang') {
          this.#held.push(res);
          return;
        }
        res.writeHead(answer, { 'content-type': 'text/plain' }).end('answer');
      });
    });
  }

  /** `now`: the clock a request's `at` is read on (a test's fake clock; the real one by default). */
  static async start(now: () => number = Date.now): Promise<Receiver> {
    const receiver = new Receiver(now);
    await new Promise<void>((resolve) => receiver.#server.listen(0, '127.0.0.1', resolve));
    const { port } = receiver.#server.address() as AddressInfo;
    receiver.url = `http://127.0.0.1:${port}`;
    return receiver;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  /** Resolves once `count` requests have arrived, or rejects after `timeoutMs`. */
  async until(count: number, timeoutMs = 30_000): Promise<Received[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.requests.length < count) {
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `the receiver got ${this.requests.length} requests, not ${count}: ${this.requests.map((r) => r.type).join(', ')}`,
        );
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.#arrivals.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.#arrivals.add(wake);
      });
    }
    return this.requests;
  }

  async close(): Promise<void> {
    for (const res of this.#held) res.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

export const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

export interface StoredWebhook {
  id: string;
  secret: string;
}

/** Writes an endpoint of `projectId` into the database, its secrets sealed as the API does. */
export async function addWebhook(
  svc: TestService,
  projectId: string,
  url: string,
  events: string[],
  opts: { previousSecret?: string; previousExpiresAt?: Date; enabled?: boolean } = {},
): Promise<StoredWebhook> {
  const id = newId('whk');
  const secret = newSecret();
  await svc.service.ctx.db
    .insertInto('webhooks')
    .values({
      id,
      project_id: projectId,
      url,
      events,
      description: null,
      enabled: opts.enabled ?? true,
      secret: seal(SECRET_KEY, secret),
      previous_secret: opts.previousSecret ? seal(SECRET_KEY, opts.previousSecret) : null,
      previous_secret_expires_at: opts.previousExpiresAt ?? null,
      created_at: new Date(),
      updated_at: new Date(),
    })
    .execute();
  return { id, secret };
}

export interface StoredAttempt {
  attempt: number;
  status: number | null;
  error: string | null;
  latencyMs: number;
}

/** A delivery's row and attempt log, by the webhook-id a receiver saw. */
export async function deliveryLog(
  svc: TestService,
  deliveryId: string,
): Promise<{ state: string; attempts: number; eventSeq: number; log: StoredAttempt[] }> {
  const { db } = svc.service.ctx;
  const row = await db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', deliveryId)
    .executeTakeFirstOrThrow();
  const attempts = await db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where('delivery_id', '=', deliveryId)
    .orderBy('attempt')
    .execute();
  return {
    state: row.state,
    attempts: row.attempts,
    eventSeq: Number(row.event_seq),
    log: attempts.map((a) => ({
      attempt: a.attempt,
      status: a.status,
      error: a.error,
      latencyMs: a.latency_ms,
    })),
  };
}
