// The forge as a client of Errand: what a forge event (src/forges/events.ts, queued by the
// webhook endpoint) starts. A comment that mentions the project's handle on a job's pull request
// becomes a follow-up of that job; a labelled issue, or a mention in an issue, a job of its own
// (a second mention while that job is open, its follow-up). Turns are accepted by the same
// service functions as the API's, so rate limits, budgets and archived jobs apply alike; the
// turn keeps the event (turns.trigger) so that its answer, when it ends, survives a restart.
// What became of each event, and why, is recorded for the dashboard (records.ts).
import { sql } from 'kysely';
import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import type { Who } from '../../audit/audit.ts';
import type { JobOrigin, ProjectRow, TurnTrigger } from '../../db/schema.ts';
import { AppError, ExternalError } from '../../errors.ts';
import type { ProjectForgeClient } from '../../forges/clients.ts';
import type { ForgeCommentEvent, ForgeEvent } from '../../forges/events.ts';
import type { CommentRef, ForgeClient, ThreadRef } from '../../forges/types.ts';
import type { JobsContext } from '../../jobs/context.ts';
import { createJob, sendMessage } from '../../jobs/service.ts';
import type { Logger } from '../../log.ts';
import { type EventDecision, eventKind, recordDecision } from './records.ts';
import { claimRefusal, REFUSALS_PER_HOUR, releaseRefusal } from './refusals.ts';
import {
  acceptedOnIssue,
  followUpPrompt,
  issuePrompt,
  mentions,
  noAccess,
  refused,
  sameRepository,
  turnEnded,
  writtenByErrand,
} from './text.ts';

/** A forge event as the `forge-events` queue carries it (src/queue/forge-events.ts). */
interface ForgeEventMessage {
  projectId: string;
  event: ForgeEvent;
}

/** What the intake uses of the application context. */
export interface IntakeContext extends JobsContext {
  log: Logger;
  forges: { client(project: ProjectRow, repository: string): ProjectForgeClient };
}

/**
 * How long a forge's answer to "may this user write?" is trusted, either way: someone asking in
 * thread after thread costs one call a minute, and someone just given access waits a minute.
 */
const ACCESS_TTL_MS = 60_000;
/** How long after a turn ended its answer is still worth giving (the sweep's horizon). */
const ANSWER_HORIZON = '1 day';

const threadSchema = z.object({
  kind: z.enum(['issue', 'pull-request']),
  number: z.number().int().positive(),
});
/** Where a turn's answer goes: a comment's thread, or (a label) the issue's conversation. */
const replyToSchema = z.union([
  z.object({
    thread: threadSchema,
    where: z.enum(['conversation', 'line', 'review']),
    commentId: z.string(),
    discussionId: z.string().nullable(),
  }),
  z.object({ thread: threadSchema }),
]);

export interface IntakeOptions {
  /**
   * The time, for the hourly limit of answers to people without write access and how long a
   * forge's answer about access is trusted; tests give a clock they move.
   */
  now?: () => Date;
}

/** What the intake will do with an event once its author may ask, or why it does nothing. */
type Plan = { followUp: string; prompt: string } | { create: true } | { ignored: string };

export class ForgeIntake {
  readonly #ctx: IntakeContext;
  readonly #publicUrl: string;
  readonly #now: () => Date;
  readonly #access: LRUCache<string, Promise<boolean>>;

  /** `publicUrl`: where users reach Errand; the answers link the dashboard's job pages. */
  constructor(ctx: IntakeContext, publicUrl: string, options: IntakeOptions = {}) {
    this.#ctx = ctx;
    this.#publicUrl = publicUrl.replace(/\/+$/, '');
    const now = options.now ?? (() => new Date());
    this.#now = now;
    this.#access = new LRUCache<string, Promise<boolean>>({
      max: 10_000,
      ttl: ACCESS_TTL_MS,
      perf: { now: () => now().getTime() },
    });
  }

  jobUrl(projectId: string, jobId: string): string {
    return `${this.#publicUrl}/projects/${projectId}/jobs/${jobId}`;
  }

  /**
   * Acts on one forge event and records what became of it. Returns when it is done with (acted
   * on, or refused with a reason); throws when trying again may help (the forge or the database
   * failed on the way).
   */
  async handle(message: ForgeEventMessage): Promise<void> {
    const { projectId, event } = message;
    const log = this.#ctx.log.child({
      projectId,
      forgeDelivery: event.deliveryId,
      forgeEvent: event.key,
      forge: event.forge,
    });
    let decision: EventDecision;
    try {
      decision = await this.#decide(message, log);
    } catch (err) {
      // A refusal that waiting cannot change (a token without the permission): said in the log.
      if (!(err instanceof ExternalError) || err.transient) throw err;
      log.error({ err }, 'forge event failed');
      decision = { outcome: 'failed', reason: err.message };
    }
    if (decision.outcome === 'accepted')
      log.info({ jobId: decision.jobId, turn: decision.turn }, 'forge event accepted');
    else log.info({ reason: decision.reason }, `forge event ${decision.outcome}`);
    await recordDecision(this.#ctx.db, projectId, event.key, decision, this.#now());
  }

  async #decide({ projectId, event }: ForgeEventMessage, log: Logger): Promise<EventDecision> {
    const ctx = this.#ctx;
    const project = await ctx.db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', projectId)
      .executeTakeFirst();
    if (!project) return { outcome: 'ignored', reason: 'the project is gone' };
    const ignored = whyIgnored(project, event);
    if (ignored) return { outcome: 'ignored', reason: ignored };
    const { client, kind } = ctx.forges.client(project, project.repository);
    if (!client || kind !== event.forge)
      return { outcome: 'ignored', reason: `the project's forge is ${kind}` };

    // The event delivered again (the queue's entry, or a record forgotten since) finds the turn
    // it accepted, and only says so if it had not.
    const earlier = await this.#turnOfEvent(projectId, event.key);
    if (earlier) {
      await this.#announce(client, event, earlier);
      return accepted(earlier);
    }
    // Whatever the author may do, some events ask for nothing: no permission call for them.
    const plan = await this.#plan(project, event);
    if ('ignored' in plan) return { outcome: 'ignored', reason: plan.ignored };
    if (!(await this.#canWrite(project, client, event)))
      return { outcome: 'refused', reason: await this.#refuse(project, client, event) };
    const trigger = triggerOf(event);
    try {
      const turn =
        'followUp' in plan
          ? await this.#followUp(project, plan.followUp, plan.prompt, trigger)
          : await this.#create(project, event, trigger);
      await this.#announce(client, event, turn);
      return accepted(turn);
    } catch (err) {
      const refusal = serviceRefusal(err);
      if (!refusal) throw err;
      log.info({ code: refusal.code }, 'forge event refused by the service');
      // Only people with write access come here: each answer answers a request of theirs.
      await answer(client, event, refused(refusal));
      return { outcome: 'refused', reason: refusal.message };
    }
  }

  /** What the event asks for, found without asking the forge anything. */
  async #plan(project: ProjectRow, event: ForgeEvent): Promise<Plan> {
    const ctx = this.#ctx;
    if (event.thread.kind === 'pull-request') {
      if (event.type !== 'comment') return { ignored: 'a label on a pull request' };
      const job = await ctx.db
        .selectFrom('jobs')
        .select('id')
        .where('project_id', '=', project.id)
        .where('repository', '=', project.repository)
        .where('pr_number', '=', event.thread.number)
        .orderBy('created_at', 'desc')
        .executeTakeFirst();
      return job
        ? { followUp: job.id, prompt: followUpPrompt(event) }
        : { ignored: 'no job of this project on this pull request' };
    }
    const open = await ctx.db
      .selectFrom('jobs')
      .select('id')
      .where('project_id', '=', project.id)
      .where(sql<boolean>`(origin->>'number')::integer = ${event.thread.number}`)
      .where(sql<boolean>`origin->>'forge' = ${event.forge}`)
      .where('status', '!=', 'archived')
      .orderBy('created_at', 'desc')
      .executeTakeFirst();
    if (open) {
      // A label added again to an issue whose job is open asks for nothing new.
      if (event.type !== 'comment') return { ignored: `the issue's job ${open.id} is open` };
      return { followUp: open.id, prompt: followUpPrompt(event) };
    }
    // A label the issue carried already (Gitea reports every label at any change of them, a
    // label removed included): its job, archived since, is not made again.
    if (event.type === 'labeled' && !event.added && (await this.#hadJob(project, event)))
      return { ignored: 'the issue had a job already' };
    return { create: true };
  }

  async #create(project: ProjectRow, event: ForgeEvent, trigger: TurnTrigger): Promise<Accepted> {
    const origin: JobOrigin = {
      forge: event.forge,
      number: event.thread.number,
      url: event.thread.url,
      title: event.thread.title,
    };
    const created = await createJob(this.#ctx, project, {
      prompt: issuePrompt(event),
      origin,
      trigger,
      by: forgeUser(trigger),
    });
    return { jobId: created.job.id, projectId: project.id, seq: 1, fromIssue: true };
  }

  async #hadJob(project: ProjectRow, event: ForgeEvent): Promise<boolean> {
    const row = await this.#ctx.db
      .selectFrom('jobs')
      .select('id')
      .where('project_id', '=', project.id)
      .where(sql<boolean>`(origin->>'number')::integer = ${event.thread.number}`)
      .where(sql<boolean>`origin->>'forge' = ${event.forge}`)
      .executeTakeFirst();
    return row !== undefined;
  }

  async #followUp(
    project: ProjectRow,
    jobId: string,
    prompt: string,
    trigger: TurnTrigger,
  ): Promise<Accepted> {
    const { job } = await sendMessage(this.#ctx, project, jobId, prompt, {
      trigger,
      by: forgeUser(trigger),
    });
    return { jobId, projectId: project.id, seq: job.turn_count, fromIssue: false };
  }

  async #turnOfEvent(projectId: string, key: string): Promise<Accepted | undefined> {
    const row = await this.#ctx.db
      .selectFrom('turns')
      .innerJoin('jobs', 'jobs.id', 'turns.job_id')
      .select(['turns.job_id', 'turns.seq', 'jobs.origin'])
      .where('turns.trigger', 'is not', null)
      .where(sql<boolean>`turns.trigger->>'event' = ${key}`)
      .where('jobs.project_id', '=', projectId)
      .executeTakeFirst();
    return row
      ? { jobId: row.job_id, projectId, seq: row.seq, fromIssue: row.seq === 1 && !!row.origin }
      : undefined;
  }

  /**
   * Says on the forge that the turn is accepted, once: an 👀 on the comment that asked, and on
   * an issue that became a job, the job's link.
   */
  async #announce(client: ForgeClient, event: ForgeEvent, accepted: Accepted): Promise<void> {
    if (!(await this.#claim(accepted, 'accepted'))) return;
    try {
      if (event.type === 'comment') await client.acknowledge(commentRef(event));
      if (accepted.fromIssue)
        await client.comment(
          threadRef(event),
          acceptedOnIssue(this.jobUrl(accepted.projectId, accepted.jobId), accepted.jobId),
        );
    } catch (err) {
      await this.#unclaimIfTransient(accepted, 'accepted', err);
    }
  }

  /**
   * Whether the event's author may write, asked of the forge once per ACCESS_TTL_MS: events of
   * one author handled at once share the one question.
   */
  async #canWrite(project: ProjectRow, client: ForgeClient, event: ForgeEvent): Promise<boolean> {
    const key = `${project.id}\n${event.forge}\n${event.author.id}\n${event.author.login}`;
    const known = this.#access.get(key);
    if (known !== undefined) return known;
    const asked = client.canWrite(event.author);
    this.#access.set(key, asked);
    // A failed question is not remembered: the event's retry asks again.
    asked.catch(() => {
      if (this.#access.get(key) === asked) this.#access.delete(key);
    });
    return asked;
  }

  /**
   * Tells someone without write access that Errand takes no requests from them, within the
   * project's limits (refusals.ts); returns the reason recorded, which says whether they were told.
   */
  async #refuse(project: ProjectRow, client: ForgeClient, event: ForgeEvent): Promise<string> {
    const thread = `${event.forge}:${event.thread.kind}:${event.thread.number}`;
    const who = `@${event.author.login} has no write access`;
    const claim = await claimRefusal(this.#ctx.db, project.id, thread, this.#now());
    if (claim === 'told') return `${who}; told in this thread before, not again`;
    if (claim === 'limited')
      return `${who}; not told: the project gave its ${REFUSALS_PER_HOUR} answers to people without write access in the last hour`;
    try {
      await answer(client, event, noAccess(event.author.login, project.forge_handle));
    } catch (err) {
      if (err instanceof ExternalError && err.transient)
        await releaseRefusal(this.#ctx.db, project.id, thread);
      throw err;
    }
    return `${who}; told in the thread`;
  }

  /**
   * Answers a turn a forge event asked for, once it has ended: in the comment's thread, or on
   * the issue. Does nothing for other turns, or one answered already.
   */
  async answerTurn(jobId: string, seq: number): Promise<void> {
    const ctx = this.#ctx;
    const row = await ctx.db
      .selectFrom('turns')
      .innerJoin('jobs', 'jobs.id', 'turns.job_id')
      .select([
        'turns.state',
        'turns.summary',
        'turns.commit_sha',
        'turns.error',
        'turns.trigger',
        'jobs.project_id',
        'jobs.repository',
        'jobs.pr_link',
      ])
      .where('turns.job_id', '=', jobId)
      .where('turns.seq', '=', seq)
      .executeTakeFirst();
    if (!row?.trigger || (row.state !== 'done' && row.state !== 'failed')) return;
    const replyTo = replyToSchema.safeParse(row.trigger.replyTo);
    if (!replyTo.success) {
      ctx.log.warn({ jobId, turn: seq }, "a turn's forge trigger names no place to answer");
      return;
    }
    const project = await ctx.db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', row.project_id)
      .executeTakeFirst();
    if (!project) return;
    const turn = { jobId, projectId: row.project_id, seq, fromIssue: false };
    if (!(await this.#claim(turn, 'ended'))) return;
    const body = turnEnded({
      state: row.state,
      summary: row.summary,
      commitSha: row.commit_sha,
      error: row.error,
      jobId,
      jobUrl: this.jobUrl(row.project_id, jobId),
      prLink: row.pr_link,
    });
    const target = replyTo.data;
    try {
      // Claimed first: a project whose credentials are gone is said in the log once.
      const { client, kind } = ctx.forges.client(project, row.repository);
      if (!client || kind !== row.trigger.forge) return;
      if ('where' in target) await client.reply(target, body);
      else await client.comment(target.thread, body);
    } catch (err) {
      await this.#unclaimIfTransient(turn, 'ended', err);
    }
  }

  /**
   * Answers the ended turns no process answered (one stopped between a turn's end and its
   * answer), within a day of their end.
   */
  async answerMissed(): Promise<void> {
    const missed = await this.#ctx.db
      .selectFrom('turns')
      .select(['job_id', 'seq'])
      .where('trigger', 'is not', null)
      .where('state', 'in', ['done', 'failed'])
      .where(sql<boolean>`finished_at > now() - ${ANSWER_HORIZON}::interval`)
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('forge_replies')
              .select('forge_replies.seq')
              .whereRef('forge_replies.job_id', '=', 'turns.job_id')
              .whereRef('forge_replies.seq', '=', 'turns.seq')
              .where('forge_replies.kind', '=', 'ended'),
          ),
        ),
      )
      .limit(50)
      .execute();
    for (const turn of missed) {
      await this.answerTurn(turn.job_id, turn.seq).catch((err: unknown) =>
        this.#ctx.log.warn({ err, jobId: turn.job_id, turn: turn.seq }, 'forge answer failed'),
      );
    }
  }

  /** Takes the right to say `kind` about a turn: false when someone already has. */
  async #claim(turn: Accepted, kind: 'accepted' | 'ended'): Promise<boolean> {
    const row = await this.#ctx.db
      .insertInto('forge_replies')
      .values({ job_id: turn.jobId, seq: turn.seq, kind })
      .onConflict((oc) => oc.doNothing())
      .returning('seq')
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * A failed answer: tried again later when waiting may help (the claim is given back and the
   * error thrown), else logged and left (a missing permission will not come by itself).
   */
  async #unclaimIfTransient(
    turn: Accepted,
    kind: 'accepted' | 'ended',
    err: unknown,
  ): Promise<void> {
    if (err instanceof ExternalError && !err.transient) {
      this.#ctx.log.warn({ err, jobId: turn.jobId, turn: turn.seq, kind }, 'forge answer refused');
      return;
    }
    await this.#ctx.db
      .deleteFrom('forge_replies')
      .where('job_id', '=', turn.jobId)
      .where('seq', '=', turn.seq)
      .where('kind', '=', kind)
      .execute();
    throw err;
  }
}

interface Accepted {
  jobId: string;
  projectId: string;
  seq: number;
  /** The job was made from an issue by this turn: the issue gets the job's link. */
  fromIssue: boolean;
}

/**
 * The service's refusal in `err`, to be said on the forge (a rate limit, a budget, an archived
 * job, a model): undefined for anything else, which is thrown to try the event again. The
 * service's own failures (a database that did not answer: `unavailable`) are no answer: said on
 * the forge they would tell people to go away from a request a retry may well accept, and the
 * retry finds its turn if the write committed after all.
 */
export function serviceRefusal(err: unknown): AppError | undefined {
  return err instanceof AppError && err.status < 500 ? err : undefined;
}

/** Why an event starts nothing, or undefined when it may. */
function whyIgnored(project: ProjectRow, event: ForgeEvent): string | undefined {
  if (!sameRepository(event.repositoryUrl, project.repository)) return 'another repository';
  if (event.author.bot) return 'written by a bot';
  if (event.type === 'labeled') {
    if (event.thread.kind !== 'issue') return 'a label on a pull request';
    return event.label.toLowerCase() === project.forge_label.toLowerCase()
      ? undefined
      : 'another label';
  }
  if (writtenByErrand(event.body)) return "Errand's own comment";
  return mentions(event.body, project.forge_handle) ? undefined : 'no mention of the handle';
}

function threadRef(event: ForgeEvent): ThreadRef {
  return { kind: event.thread.kind, number: event.thread.number };
}

function commentRef(event: ForgeCommentEvent): CommentRef {
  return {
    thread: threadRef(event),
    where: event.where,
    commentId: event.commentId,
    discussionId: event.discussionId,
  };
}

/** Answers the event where it happened: in the comment's thread, or on the labelled issue. */
async function answer(client: ForgeClient, event: ForgeEvent, body: string): Promise<void> {
  if (event.type === 'comment') await client.reply(commentRef(event), body);
  else await client.comment(threadRef(event), body);
}

function triggerOf(event: ForgeEvent): TurnTrigger {
  const base = {
    forge: event.forge,
    delivery: event.deliveryId,
    event: event.key,
    kind: eventKind(event),
    author: event.author.login,
  };
  if (event.type === 'labeled')
    return { ...base, url: event.thread.url, replyTo: { thread: threadRef(event) } };
  return { ...base, url: event.url, replyTo: { ...commentRef(event) } };
}

/** The record of an accepted event: the same words whether its turn was accepted now or before. */
function accepted(turn: Accepted): EventDecision {
  const reason = turn.fromIssue ? 'a new job' : 'a follow-up of its job';
  return { outcome: 'accepted', reason, jobId: turn.jobId, turn: turn.seq };
}

/**
 * Who asked, as the job and the audit log record it: the forge user who wrote the comment or
 * added the label, from no request of Errand's own (the webhook's request only queued the event).
 */
function forgeUser(trigger: TurnTrigger): Who {
  return {
    actor: { kind: 'forge', forge: trigger.forge, login: trigger.author },
    address: null,
    requestId: null,
  };
}
