// What the forges' payload readers share to take a webhook request: its headers as Node gives
// them, the checks of a signature or token in constant time, and the error of a payload that is
// not what the forge sends. Each reader (github.ts, gitlab.ts, gitea.ts beside this one)
// verifies its forge's signature and reads its payloads into ForgeEvents (src/forges/events.ts).
// (A forge calls each request a "delivery" and names it by a delivery id header; Errand keeps
// that word for its own webhooks out, and says "delivery id" only for the forge's header.)
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { ForgeEvent, ForgePush, ForgeSignal, ForgeThread } from '../../../forges/events.ts';

/** A request's headers, names in lower case (Node's IncomingHttpHeaders). */
export type RequestHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** What the intake reads of one forge's webhook requests. */
export interface PayloadReader {
  /**
   * The events to select in the forge's webhook form, as the form names them: what the
   * project page and the docs tell the admin to tick.
   */
  readonly webhookEvents: readonly string[];
  /** Whether the request was signed (or carries the token) with `secret`; constant time. */
  verifySignature(headers: RequestHeaders, body: Buffer, secret: string): boolean;
  /**
   * The events a verified request means to Errand: none for a ping or an event Errand has no
   * use for, usually one, more when one request adds several labels. Throws
   * MalformedPayloadError when the payload is not what the forge sends for its event.
   */
  readEvents(headers: RequestHeaders, body: unknown): ForgeEvent[];
  /**
   * The push a verified request is, or null when it is no push of a branch or tag. Throws
   * MalformedPayloadError when the payload is not what the forge sends for a push.
   */
  readPush(headers: RequestHeaders, body: unknown): ForgePush | null;
  /**
   * What a verified request tells the pull request watch (a check, a pipeline, a commit status,
   * a pull request's change or review), or null when it is none of those. Throws
   * MalformedPayloadError when the payload is not what the forge sends for its event.
   */
  readSignal(headers: RequestHeaders, body: unknown): ForgeSignal | null;
}

/** A signed request whose payload is not the shape its forge sends for the event it names. */
export class MalformedPayloadError extends Error {
  override name = 'MalformedPayloadError';
}

/** A header's value; the first when it was sent more than once; '' when absent. */
export function header(headers: RequestHeaders, name: string): string {
  const value = headers[name.toLowerCase()];
  return (Array.isArray(value) ? value[0] : value) ?? '';
}

/** Compares two strings without leaking, by timing, where they first differ. */
export function equalSecret(given: string, expected: string): boolean {
  // Hashing first gives both sides one length, which timingSafeEqual needs.
  const a = createHash('sha256').update(given, 'utf8').digest();
  const b = createHash('sha256').update(expected, 'utf8').digest();
  return timingSafeEqual(a, b);
}

/** The hex HMAC-SHA256 of the body with the secret, as GitHub and Gitea sign. */
export function hmacSha256Hex(secret: string, body: Buffer): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/**
 * The forge's delivery id from the first of `names` that is set; without one, a hash of the body, so
 * that a forge resending the same request without an id is still recognised.
 */
export function deliveryIdOf(headers: RequestHeaders, names: readonly string[], body: unknown) {
  for (const name of names) {
    const value = header(headers, name).trim();
    if (value) return value.slice(0, 200);
  }
  return `sha256:${createHash('sha256').update(JSON.stringify(body)).digest('hex')}`;
}

/**
 * An event's signed identity (ForgeEvent.key) from the payload's fields that name it: the forge,
 * what kind of thing it is, then its ids; each part escaped, so that no two differ only in where
 * a colon falls.
 */
export function eventKey(forge: string, kind: string, ...parts: readonly (string | number)[]) {
  return [forge, kind, ...parts.map((part) => encodeURIComponent(String(part)))].join(':');
}

/** An issue's or pull request's fields as GitHub and Gitea payloads give them alike. */
export const webThreadFields = {
  number: z.number().int().positive(),
  title: z.string(),
  body: z.string().nullable().optional(),
  html_url: z.string(),
};

/** An issue or pull request of a GitHub or Gitea payload (webThreadFields) as a ForgeThread. */
export function webThread(
  kind: ForgeThread['kind'],
  item: { number: number; title: string; body?: string | null; html_url: string },
): ForgeThread {
  return {
    kind,
    number: item.number,
    title: item.title,
    body: item.body ?? '',
    url: item.html_url,
  };
}

/** Parses a payload with its schema, or says what the forge's event lacks. */
export function parsePayload<T extends z.ZodType>(
  schema: T,
  body: unknown,
  event: string,
): z.infer<T> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const where = issue && issue.path.length > 0 ? issue.path.join('.') : '(body)';
  throw new MalformedPayloadError(
    `the ${event} delivery is not what the forge sends: ${where}: ${issue?.message ?? 'invalid'}`,
  );
}

/** A commit id of zeros (SHA-1 or SHA-256 length): what forges give as `after` of a deletion. */
const NO_COMMIT = /^0+$/;

/** A push payload as GitHub and Gitea/Forgejo give it alike (GitHub alone says `deleted`). */
const webPushSchema = z.object({
  ref: z.string(),
  after: z.string(),
  deleted: z.boolean().optional(),
  repository: z.object({ html_url: z.string() }),
});

/** A GitHub or Gitea/Forgejo `push` payload as a ForgePush. */
export function webPush(base: Pick<ForgePush, 'forge' | 'deliveryId'>, body: unknown): ForgePush {
  const p = parsePayload(webPushSchema, body, 'push');
  return {
    ...base,
    repositoryUrl: p.repository.html_url,
    ref: p.ref,
    after: p.deleted === true ? null : pushedCommit(p.after),
  };
}

/** The commit a push left its ref at: null for zeros, which name no commit (a deletion). */
export function pushedCommit(after: string | null | undefined): string | null {
  return after && !NO_COMMIT.test(after) ? after : null;
}
