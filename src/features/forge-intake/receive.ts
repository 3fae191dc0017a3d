// Forge webhooks in: a request to POST /v2/forges/{projectId}/webhook is checked against the
// project's webhook secret by its forge's payload reader, read into ForgeEvents, and queued for the
// forge-events worker with each event recorded by what the forge signed that names it (its
// key), in one transaction: the answer is quick (the work is the worker's), and an event that
// comes again, under its delivery id or any other, is acknowledged and not queued again. A push
// is no such event: one that moved the project's base ref asks for a build of its environment,
// nothing recorded or queued for the forge-events worker.
import type { AppContext } from '../../context.ts';
import type { ProjectRow } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import type { ForgePush, ForgeSignal } from '../../forges/events.ts';
import { afterBaseMoved } from '../../projects/environment-builds.ts';
import { type ForgeKind, projectForge } from '../../projects/forge.ts';
import { findProject } from '../../projects/service.ts';
import { open } from '../../secrets/box.ts';
import { nudgeBaseMoved, nudgeWatches } from '../pr-watch/index.ts';
import { payloadReaders } from './payloads/readers.ts';
import {
  MalformedPayloadError,
  type PayloadReader,
  type RequestHeaders,
} from './payloads/shared.ts';
import { recordReceived } from './records.ts';
import { sameRepository } from './text.ts';

/** Where a project's forge sends its webhook requests, under `base`, the address users reach Errand at. */
export function forgeWebhookUrl(base: string, projectId: string): string {
  return `${base.replace(/\/+$/, '')}/v2/forges/${encodeURIComponent(projectId)}/webhook`;
}

type ReceivedOutcome =
  /** Its events recorded and queued (those that were not recorded before). */
  | 'queued'
  /** Every event of it was recorded before: acknowledged, nothing queued again. */
  | 'duplicate'
  /** A push that moved the project's base ref: a build of its environment asked for. */
  | 'build'
  /** A check, a pull request's change or a base's push that names watched pull requests. */
  | 'watch'
  /** A ping, or an event Errand has no use for: nothing recorded or queued. */
  | 'ignored';

export interface ReceivedRequest {
  outcome: ReceivedOutcome;
  /** How many events were queued. */
  events: number;
}

/**
 * One answer for every request that is not let in, whatever the reason: the endpoint has no
 * API key, so telling "no such project" from "wrong signature" would let anyone list projects.
 * The log says which it was.
 */
function refused(): AppError {
  return new AppError(
    'unauthorized',
    "the delivery is not signed with this project's forge webhook secret",
  );
}

/** A request whose signature was checked: the project it is for, and its forge's reader. */
export interface VerifiedRequest {
  project: ProjectRow;
  forge: Exclude<ForgeKind, 'git'>;
  reader: PayloadReader;
}

/**
 * Checks that the request's bytes were signed (GitLab: carry the token) with the project's
 * webhook secret; throws the AppError it is answered with otherwise.
 */
export async function verifyRequest(
  ctx: AppContext,
  projectId: string,
  headers: RequestHeaders,
  raw: Buffer,
): Promise<VerifiedRequest> {
  const log = ctx.log.child({ projectId });
  const project = await findProject(ctx, projectId);
  if (!project) {
    log.info('forge delivery refused: no such project');
    throw refused();
  }
  const forge = projectForge(project, ctx.forges);
  const reader = forge.kind === 'git' ? undefined : payloadReaders.get(forge.kind);
  if (forge.kind === 'git' || !reader || !project.forge_webhook_secret) {
    log.warn(
      { forge: forge.kind },
      reader
        ? 'forge delivery refused: the project has no forge webhook secret'
        : 'forge delivery refused: the project is on plain git, which sends no webhooks',
    );
    throw refused();
  }
  if (!ctx.config.secretKey) {
    log.error(
      'forge delivery refused: ERRAND_SECRET_KEY is not set, so the webhook secret cannot be read',
    );
    throw new AppError(
      'unavailable',
      "this server cannot read the project's webhook secret (ERRAND_SECRET_KEY is not set)",
    );
  }
  let secret: string;
  try {
    secret = open(ctx.config.secretKey, project.forge_webhook_secret);
  } catch (err) {
    // Sealed with another key: the server's setting is wrong, not the forge's request.
    log.error({ err }, 'forge delivery refused: the webhook secret cannot be read');
    throw new AppError(
      'unavailable',
      "this server cannot read the project's webhook secret (it was stored with another ERRAND_SECRET_KEY)",
    );
  }
  if (!reader.verifySignature(headers, raw, secret)) {
    log.warn({ forge: forge.kind }, 'forge delivery refused: bad or missing signature');
    throw refused();
  }
  return { project, forge: forge.kind, reader };
}

/** What `read` makes of a request, or the 400 of a payload its forge does not send. */
function readPayload<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof MalformedPayloadError) throw new AppError('bad_request', err.message);
    throw err;
  }
}

/**
 * Whether the push moved the project's base ref: the branch `ref` names (`main`, or in full
 * `refs/heads/main`) pushed to a commit. A tag, another branch and a deletion move nothing,
 * and neither does a push to another repository than the project's (one webhook secret may be
 * given to several).
 */
function movesBaseRef(project: ProjectRow, push: ForgePush): boolean {
  if (push.after === null || !push.ref.startsWith('refs/heads/')) return false;
  const base = project.ref.startsWith('refs/') ? project.ref : `refs/heads/${project.ref}`;
  return push.ref === base && sameRepository(push.repositoryUrl, project.repository);
}

/**
 * A push: a build of the project's environment when it moved the base ref and the project has
 * one to build, and a look at the watched pull requests into that branch (they may conflict
 * with it now). Not recorded: a redelivery asks again, and that is harmless (at most one build
 * of a project waits, and a builder that has the snapshot builds nothing; a look repeats
 * nothing it did). A queue that refuses is logged, and the push answered as ignored: the next
 * turn finds the new key anyway.
 */
async function takePush(
  ctx: AppContext,
  project: ProjectRow,
  push: ForgePush,
): Promise<ReceivedRequest> {
  const log = ctx.log.child({ projectId: project.id });
  const fields = { forge: push.forge, deliveryId: push.deliveryId, ref: push.ref };
  const branch = pushedBranch(project, push);
  const watched = branch === null ? 0 : await nudgeBaseMoved(ctx, project.id, branch);
  if (!movesBaseRef(project, push)) {
    if (watched > 0) return { outcome: 'watch', events: watched };
    log.debug(fields, "forge push ignored: it did not move the project's base ref");
    return { outcome: 'ignored', events: 0 };
  }
  if (!(await afterBaseMoved(ctx, project))) {
    if (watched > 0) return { outcome: 'watch', events: watched };
    log.debug(fields, 'forge push ignored: no environment build was asked for');
    return { outcome: 'ignored', events: 0 };
  }
  log.info({ ...fields, after: push.after }, 'forge push: environment build asked for');
  return { outcome: 'build', events: 0 };
}

/** The branch a push of the project's repository moved, or null (a tag, a deletion, another repository). */
function pushedBranch(project: ProjectRow, push: ForgePush): string | null {
  if (push.after === null || !push.ref.startsWith('refs/heads/')) return null;
  if (!sameRepository(push.repositoryUrl, project.repository)) return null;
  return push.ref.slice('refs/heads/'.length);
}

/**
 * A check, a pipeline or a pull request's change: the watched pull requests of the project it
 * names are looked at now. Nothing is recorded or queued: the watch asks the forge what holds.
 */
async function takeSignal(
  ctx: AppContext,
  project: ProjectRow,
  signal: ForgeSignal,
): Promise<ReceivedRequest> {
  const log = ctx.log.child({ projectId: project.id });
  const fields = { forge: signal.forge, deliveryId: signal.deliveryId, kind: signal.kind };
  if (!sameRepository(signal.repositoryUrl, project.repository)) {
    log.debug(fields, 'forge signal ignored: another repository');
    return { outcome: 'ignored', events: 0 };
  }
  const watched = await nudgeWatches(ctx, project.id, signal);
  if (watched === 0) {
    log.debug(fields, 'forge signal ignored: it names no watched pull request');
    return { outcome: 'ignored', events: 0 };
  }
  log.info({ ...fields, watched }, 'forge signal: watched pull requests looked at');
  return { outcome: 'watch', events: watched };
}

/**
 * Reads a verified request's parsed body into events and queues those not recorded before,
 * recording them, in one transaction: a request whose events were all recorded queues nothing.
 * A push is taken apart (takePush).
 */
export async function receiveRequest(
  ctx: AppContext,
  { project, forge, reader }: VerifiedRequest,
  headers: RequestHeaders,
  body: unknown,
): Promise<ReceivedRequest> {
  const log = ctx.log.child({ projectId: project.id });
  const push = readPayload(() => reader.readPush(headers, body));
  if (push) return takePush(ctx, project, push);
  const events = readPayload(() => reader.readEvents(headers, body));
  // A review may be both: a comment for Errand, and an approval the watch looks at.
  const signal = readPayload(() => reader.readSignal(headers, body));
  const watched = signal ? await takeSignal(ctx, project, signal) : undefined;
  const first = events[0];
  if (!first) {
    if (watched) return watched;
    log.debug({ forge }, 'forge delivery ignored: an event Errand does not read');
    return { outcome: 'ignored', events: 0 };
  }

  const deliveryId = first.deliveryId;
  const queued = await ctx.db.transaction().execute(async (trx) => {
    const fresh = await recordReceived(trx, project.id, deliveryId, events);
    await ctx.queue.forgeEvents.enqueueAll(
      trx,
      fresh.map((event) => ({ projectId: project.id, event })),
    );
    return fresh.length;
  });
  if (queued === 0) {
    log.info(
      { forge, deliveryId, events: events.map((e) => e.key) },
      'forge delivery acknowledged again: its events were taken before',
    );
    return { outcome: 'duplicate', events: 0 };
  }
  log.info({ forge, deliveryId, events: queued }, 'forge delivery queued');
  return { outcome: 'queued', events: queued };
}
