// The forge as a client of Errand: what a forge event (src/forges/events.ts, queued by the
// webhook endpoint) starts. A comment that mentions the project's handle on a job's pull request
// becomes a follow-up of that job; a labelled issue, or a mention in an issue, a job of its own
// (a second mention while that job is open, its follow-up). Turns are accepted by the same
// service functions as the API's, so rate limits, budgets and archived jobs apply alike; the
// turn keeps the event (turns.trigger) so that its answer, when it ends, survives a restart.
import { sql } from 'kysely';
import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import type { JobOrigin, ProjectRow, TurnTrigger } from '../../db/schema.ts';
import { AppError, ExternalError } from '../../errors.ts';
import type { JobsContext } from '../../jobs/context.ts';
import { createJob, sendMessage } from '../../jobs/service.ts';
import type { Logger } from '../../log.ts';
import type { ProjectForgeClient } from '../clients.ts';
import type { ForgeCommentEvent, ForgeEvent } from '../events.ts';
import type { CommentRef, ForgeClient, ThreadRef } from '../types.ts';
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

/** How long a forge's answer to "may this user write?" is trusted. */
const ACCESS_TTL_MS = 60_000;
/**
 * How long a thread remembers that someone without write access was told so: long enough that
 * a conversation does not hear it twice, short enough that someone who asks again a month
 * later (perhaps forgetting, perhaps given access meanwhile and still refused) is told why.
 */
const REFUSAL_MEMORY_DAYS = 30;
/** How long after a turn ended its answer is still worth giving (the sweep's horizon). */
const ANSWER_HORIZON = '1 day';

type Forge = TurnTrigger['forge'];

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

export class ForgeIntake {
  readonly #ctx: IntakeContext;
  readonly #publicUrl: string;
  readonly #access = new LRUCache<string, boolean>({ max: 10_000, ttl: ACCESS_TTL_MS });

  /** `publicUrl`: where users reach Errand; the answers link the dashboard's job pages. */
  constructor(ctx: IntakeContext, publicUrl: string) {
    this.#ctx = ctx;
    this.#publicUrl = publicUrl.replace(/\/+$/, '');
  }

  jobUrl(projectId: string, jobId: string): string {
    return `${this.#publicUrl}/projects/${projectId}/jobs/${jobId}`;
  }

  /**
   * Acts on one forge event. Returns when it is done with (acted on, or refused with a reason
   * logged); throws when trying again may help (the forge or the database failed on the way).
   */
  async handle(message: ForgeEventMessage): Promise<void> {
    const { projectId, event } = message;
    const log = this.#ctx.log.child({
      projectId,
      forgeDelivery: event.deliveryId,
      forge: event.forge,
    });
    try {
      await this.#handle(message, log);
    } catch (err) {
      // A refusal that waiting cannot change (a token without the permission): said in the log.
      if (!(err instanceof ExternalError) || err.transient) throw err;
      log.error({ err }, 'forge event failed');
    }
  }

  async #handle({ projectId, event }: ForgeEventMessage, log: Logger): Promise<void> {
    const ctx = this.#ctx;
    const project = await ctx.db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', projectId)
      .executeTakeFirst();
    if (!project) return log.info('forge event for a project that is gone: ignored');
    const forge = event.forge;
    if (forge === 'git') return log.info('forge event from no forge: ignored');
    const ignored = whyIgnored(project, event);
    if (ignored) return log.info({ reason: ignored }, 'forge event ignored');
    const { client, kind } = ctx.forges.client(project, project.repository);
    if (!client || kind !== forge)
      return log.info(
        { reason: `the project's forge is ${kind}` },
        'forge event ignored: the project does not use this forge',
      );

    // A queue entry delivered again finds the turn it accepted, and only says so if it had not.
    const earlier = await this.#turnOfDelivery(projectId, event.deliveryId);
    if (earlier) return this.#announce(client, event, earlier);

    if (!(await this.#canWrite(project, client, event))) {
      log.info({ author: event.author.login }, 'forge event refused: no write access');
      return this.#refuseOnce(project, client, event);
    }
    const trigger = triggerOf(forge, event);
    try {
      const accepted = await this.#accept(project, event, forge, trigger);
      if (!accepted) return log.info('forge event ignored: no job of this project to follow up');
      log.info({ jobId: accepted.jobId, turn: accepted.seq }, 'forge event accepted');
      await this.#announce(client, event, accepted);
    } catch (err) {
      const refusal = serviceRefusal(err);
      if (!refusal) throw err;
      log.info(
        { code: refusal.code, reason: refusal.message },
        'forge event refused by the service',
      );
      await answer(client, event, refused(refusal));
    }
  }

  /** The turn the event asks for, accepted; undefined when it names no job of this project. */
  async #accept(
    project: ProjectRow,
    event: ForgeEvent,
    forge: Forge,
    trigger: TurnTrigger,
  ): Promise<Accepted | undefined> {
    const ctx = this.#ctx;
    if (event.thread.kind === 'pull-request') {
      if (event.type !== 'comment') return undefined;
      const job = await ctx.db
        .selectFrom('jobs')
        .select('id')
        .where('project_id', '=', project.id)
        .where('repository', '=', project.repository)
        .where('pr_number', '=', event.thread.number)
        .orderBy('created_at', 'desc')
        .executeTakeFirst();
      if (!job) return undefined;
      return this.#followUp(project, job.id, followUpPrompt(event), trigger);
    }
    const open = await ctx.db
      .selectFrom('jobs')
      .select('id')
      .where('project_id', '=', project.id)
      .where(sql<boolean>`(origin->>'number')::integer = ${event.thread.number}`)
      .where(sql<boolean>`origin->>'forge' = ${forge}`)
      .where('status', '!=', 'archived')
      .orderBy('created_at', 'desc')
      .executeTakeFirst();
    if (open) {
      // A label added again to an issue whose job is open asks for nothing new.
      if (event.type !== 'comment') return undefined;
      return this.#followUp(project, open.id, followUpPrompt(event), trigger);
    }
    // A label the issue carried already (Gitea reports every label at any change of them, a
    // label removed included): its job, archived since, is not made again.
    if (event.type === 'labeled' && !event.added && (await this.#hadJob(project, forge, event)))
      return undefined;
    const origin: JobOrigin = {
      forge,
      number: event.thread.number,
      url: event.thread.url,
      title: event.thread.title,
    };
    const created = await createJob(ctx, project, { prompt: issuePrompt(event), origin, trigger });
    return { jobId: created.job.id, projectId: project.id, seq: 1, fromIssue: true };
  }

  async #hadJob(project: ProjectRow, forge: Forge, event: ForgeEvent): Promise<boolean> {
    const row = await this.#ctx.db
      .selectFrom('jobs')
      .select('id')
      .where('project_id', '=', project.id)
      .where(sql<boolean>`(origin->>'number')::integer = ${event.thread.number}`)
      .where(sql<boolean>`origin->>'forge' = ${forge}`)
      .executeTakeFirst();
    return row !== undefined;
  }

  async #followUp(
    project: ProjectRow,
    jobId: string,
    prompt: string,
    trigger: TurnTrigger,
  ): Promise<Accepted> {
    const { job } = await sendMessage(this.#ctx, project, jobId, prompt, undefined, trigger);
    return { jobId, projectId: project.id, seq: job.turn_count, fromIssue: false };
  }

  async #turnOfDelivery(projectId: string, delivery: string): Promise<Accepted | undefined> {
    const row = await this.#ctx.db
      .selectFrom('turns')
      .innerJoin('jobs', 'jobs.id', 'turns.job_id')
      .select(['turns.job_id', 'turns.seq', 'jobs.origin'])
      .where('turns.trigger', 'is not', null)
      .where(sql<boolean>`turns.trigger->>'delivery' = ${delivery}`)
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

  async #canWrite(project: ProjectRow, client: ForgeClient, event: ForgeEvent): Promise<boolean> {
    const key = `${project.id}\n${event.forge}\n${event.author.id}\n${event.author.login}`;
    const known = this.#access.get(key);
    if (known !== undefined) return known;
    const allowed = await client.canWrite(event.author);
    this.#access.set(key, allowed);
    return allowed;
  }

  /** One polite answer per issue or pull request to people without write access. */
  async #refuseOnce(project: ProjectRow, client: ForgeClient, event: ForgeEvent): Promise<void> {
    const thread = `${event.forge}:${event.thread.kind}:${event.thread.number}`;
    const claimed = await this.#ctx.db
      .insertInto('forge_refusals')
      .values({ project_id: project.id, thread })
      .onConflict((oc) => oc.doNothing())
      .returning('thread')
      .executeTakeFirst();
    if (!claimed) return;
    try {
      await answer(client, event, noAccess(event.author.login, project.forge_handle));
    } catch (err) {
      if (err instanceof ExternalError && err.transient) {
        await this.#ctx.db
          .deleteFrom('forge_refusals')
          .where('project_id', '=', project.id)
          .where('thread', '=', thread)
          .execute();
      }
      throw err;
    }
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

function triggerOf(forge: Forge, event: ForgeEvent): TurnTrigger {
  if (event.type === 'labeled') {
    return {
      forge,
      delivery: event.deliveryId,
      kind: 'label',
      url: event.thread.url,
      author: event.author.login,
      replyTo: { thread: threadRef(event) },
    };
  }
  return {
    forge,
    delivery: event.deliveryId,
    kind: event.where === 'line' ? 'line comment' : event.where === 'review' ? 'review' : 'comment',
    url: event.url,
    author: event.author.login,
    replyTo: { ...commentRef(event) },
  };
}

/**
 * Forgets the threads told of missing write access more than REFUSAL_MEMORY_DAYS ago; returns
 * how many. The processes that run workers call it periodically (service.ts).
 */
export async function forgetRefusals(ctx: { db: IntakeContext['db'] }): Promise<number> {
  const result = await ctx.db
    .deleteFrom('forge_refusals')
    .where('at', '<', sql<Date>`now() - make_interval(days => ${REFUSAL_MEMORY_DAYS})`)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
