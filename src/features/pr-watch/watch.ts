// One look at a job's pull request: ask the forge what holds (the pull request, its head's
// checks), decide (decide.ts) and act: record what the forge said in the job's `pr`, report
// failed checks, queue a turn that fixes them or brings the base in, merge, or stop acting and
// say why in the thread. Events and the record are written in one transaction; the turns are
// accepted by the same service function as the API's follow-ups, so budgets, rate limits and
// archived jobs apply alike.
import type { Who } from '../../audit/audit.ts';
import type { JobRow, ProjectRow } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import type { ProjectForgeClient } from '../../forges/clients.ts';
import type { CheckResult, ForgeClient, PullRequestStatus } from '../../forges/types.ts';
import type { JobsContext } from '../../jobs/context.ts';
import { type PullRequestEvent, recordPullRequest } from '../../jobs/pull-request.ts';
import { sendMessage } from '../../jobs/service.ts';
import type { Logger } from '../../log.ts';
import { turnSecrets } from '../../projects/secrets.ts';
import type { PrRecord } from '../../records/pr.ts';
import { scrubSecrets } from '../../secrets/scrub.ts';
import { secretScrubForms } from '../../turns/secrets.ts';
import { type Decision, decide, type WatchMemory, wantedChecks } from './decide.ts';
import type { ClaimedWatch, WatchChange } from './store.ts';
import { CLOSED_REASON, saveNow } from './store.ts';
import {
  autofixPrompt,
  CHECKS_WITH_LOGS,
  conflictPrompt,
  type FailedCheck,
  LOG_BYTES_IN_ALL,
  LOG_BYTES_PER_CHECK,
  pausedComment,
} from './text.ts';

/** What the watch uses of the application context. */
export interface WatchContext extends JobsContext {
  log: Logger;
  forges: { client(project: ProjectRow, repository: string): ProjectForgeClient };
}

/** What a look changed, and when the next one is due. */
export interface LookResult {
  change: WatchChange;
  /** Seconds until the next look; undefined: the usual interval. */
  afterSeconds?: number;
}

/** How soon to look again while the forge works something out (whether the head merges). */
const SOON_SECONDS = 5;
/** How soon to look again after the service refused a turn for a while (a rate limit). */
const REFUSED_SECONDS = 60;

/** Errand's own acts: no person asked, no request made them. */
const ERRAND: Who = { actor: null, address: null, requestId: null };

type WatchJob = Pick<
  JobRow,
  'id' | 'project_id' | 'repository' | 'ref' | 'status' | 'pr_number' | 'pr' | 'branch'
>;

/** The facts a look works from. */
interface Look {
  job: WatchJob & { pr_number: number };
  project: ProjectRow;
  client: ForgeClient;
  status: PullRequestStatus;
  checks: CheckResult[];
  watch: WatchMemory;
}

export class PrWatch {
  readonly #ctx: WatchContext;
  readonly #publicUrl: string;

  /** `publicUrl`: where users reach Errand; the watch's comments link the job's page. */
  constructor(ctx: WatchContext, publicUrl: string) {
    this.#ctx = ctx;
    this.#publicUrl = publicUrl.replace(/\/+$/, '');
  }

  /**
   * Looks at a claimed watch's pull request and acts. Returns what changed; throws when the
   * forge or the database failed on the way (the worker looks again later).
   */
  async look(watch: ClaimedWatch): Promise<LookResult> {
    const ctx = this.#ctx;
    const job = await ctx.db
      .selectFrom('jobs')
      .select(['id', 'project_id', 'repository', 'ref', 'status', 'pr_number', 'pr', 'branch'])
      .where('id', '=', watch.jobId)
      .executeTakeFirst();
    if (!job || job.status === 'archived' || job.pr_number === null)
      return { change: { state: 'ended', reason: 'the job is archived' } };
    const project = await ctx.db
      .selectFrom('projects')
      .selectAll()
      .where('id', '=', job.project_id)
      .executeTakeFirstOrThrow();
    const { client } = ctx.forges.client(project, job.repository);
    if (!client)
      return { change: { state: 'ended', reason: "the project's forge has no pull requests" } };
    const status = await client.pullRequestStatus(job.pr_number);
    const checks =
      status.state === 'open'
        ? wantedChecks(await client.checks(status.headSha), project.autofix_checks)
        : [];
    const look: Look = {
      job: { ...job, pr_number: job.pr_number },
      project,
      client,
      status,
      checks,
      watch,
    };
    const decision = decide({
      status,
      checks,
      watch,
      settings: {
        autofixAttempts: project.autofix_attempts,
        autofixChecks: project.autofix_checks,
        autoMerge: project.auto_merge,
      },
      errandSha: await this.#errandSha(job.id),
      turnOpen: await this.#turnOpen(job.id),
    });
    return this.#act(look, decision);
  }

  async #act(look: Look, decision: Decision): Promise<LookResult> {
    const { status, watch } = look;
    switch (decision.act) {
      case 'end': {
        const merged = decision.state === 'merged';
        const change: WatchChange = {
          state: 'ended',
          reason: merged ? 'the pull request was merged' : CLOSED_REASON,
        };
        // Said once: a record that already says so was said before.
        const told = look.job.pr?.state === decision.state;
        const events: PullRequestEvent[] = told
          ? []
          : [
              merged
                ? {
                    type: 'pr.merged',
                    data: {
                      ...this.#pullRequest(look),
                      sha: null,
                      mergedAt: status.mergedAt,
                      byErrand: false,
                      method: null,
                    },
                  }
                : { type: 'pr.closed', data: this.#pullRequest(look) },
            ];
        await this.#record(look, change, events);
        return { change };
      }
      case 'wait':
        await this.#record(look, {}, []);
        return { change: {}, ...(decision.soon ? { afterSeconds: SOON_SECONDS } : {}) };
      case 'unmergeable': {
        const change: WatchChange = { unmergeableSha: status.headSha };
        await this.#record(look, change, []);
        return { change, afterSeconds: SOON_SECONDS };
      }
      case 'resume': {
        const change: WatchChange = { state: 'watching', reason: null };
        await this.#record(look, change, []);
        return { change, afterSeconds: 0 };
      }
      case 'pause':
        return this.#pause(look, decision.reason, decision.stays && decision.comment);
      case 'failed':
        return this.#failed(look, decision.failed, decision.report, decision.fix);
      case 'conflict':
        return this.#conflict(look);
      case 'green': {
        const change: WatchChange = watch.autofixes > 0 ? { autofixes: 0 } : {};
        if (!decision.merge) {
          await this.#record(look, change, []);
          return { change, ...(decision.soon ? { afterSeconds: SOON_SECONDS } : {}) };
        }
        return this.#merge(look, change);
      }
    }
  }

  /**
   * Stops acting on the pull request; says why in its thread when `comment`. What the look saw
   * before (`earlier`: a change and events) is recorded with it, in one write.
   */
  async #pause(
    look: Look,
    reason: string,
    comment: boolean,
    earlier: { change: WatchChange; events: readonly PullRequestEvent[] } = {
      change: {},
      events: [],
    },
  ): Promise<LookResult> {
    if (comment)
      await look.client.comment(
        { kind: 'pull-request', number: look.job.pr_number },
        pausedComment(reason, this.#jobUrl(look.job), look.project.forge_handle),
      );
    const change: WatchChange = { ...earlier.change, state: 'paused', reason };
    await this.#record(look, change, [
      ...earlier.events,
      { type: 'pr.watch_paused', data: { ...this.#pullRequest(look), reason } },
    ]);
    return { change };
  }

  async #failed(
    look: Look,
    failed: CheckResult[],
    report: boolean,
    fix: boolean,
  ): Promise<LookResult> {
    const { status, watch, project } = look;
    const reported: PullRequestEvent[] = report
      ? [
          {
            type: 'checks.failed',
            data: {
              ...this.#pullRequest(look),
              sha: status.headSha,
              checks: failed.map((check) => ({ name: check.name, url: check.url })),
            },
          },
        ]
      : [];
    const change: WatchChange = report ? { failedSha: status.headSha } : {};
    if (!fix) {
      await this.#record(look, change, reported);
      return { change };
    }
    const attempt = watch.autofixes + 1;
    const prompt = autofixPrompt({
      sha: status.headSha,
      failed: await this.#logs(look, failed),
      attempt,
      attempts: project.autofix_attempts,
    });
    const queued = await this.#queue(look, prompt, 'autofix', { autofixes: attempt });
    if ('refused' in queued) return this.#refused(look, queued.refused, change, reported);
    const next: WatchChange = { ...change, autofixes: attempt };
    await this.#record(look, next, [
      ...reported,
      {
        type: 'autofix.queued',
        turn: queued.seq,
        data: {
          ...this.#pullRequest(look),
          sha: status.headSha,
          attempt,
          attempts: project.autofix_attempts,
        },
      },
    ]);
    return { change: next };
  }

  async #conflict(look: Look): Promise<LookResult> {
    const { status, project } = look;
    const strategy = project.conflict_strategy;
    const queued = await this.#queue(look, conflictPrompt(status.base, strategy), 'conflict', {
      conflictSha: status.headSha,
    });
    if ('refused' in queued) return this.#refused(look, queued.refused, {}, []);
    const change: WatchChange = { conflictSha: status.headSha };
    await this.#record(look, change, [
      {
        type: 'pr.conflicted',
        turn: queued.seq,
        data: { ...this.#pullRequest(look), sha: status.headSha, base: status.base, strategy },
      },
    ]);
    return { change };
  }

  /**
   * Merges with the forge's merge API, for this head only; a refusal (branch protection, a
   * review missing) is recorded as the watch's reason and not asked again for this head.
   */
  async #merge(look: Look, change: WatchChange): Promise<LookResult> {
    const { status, project, client } = look;
    const method = project.merge_method;
    const outcome = await client.mergePullRequest(look.job.pr_number, {
      method,
      sha: status.headSha,
    });
    if (!outcome.merged) {
      const refused: WatchChange = {
        ...change,
        mergeSha: status.headSha,
        reason: `the forge refused to merge it: ${outcome.reason}`,
      };
      this.#ctx.log.info(
        { jobId: look.job.id, pr: status.number, reason: outcome.reason },
        'pull request merge refused by the forge',
      );
      await this.#record(look, refused, []);
      return { change: refused };
    }
    const mergedAt = new Date().toISOString();
    const ended: WatchChange = {
      ...change,
      mergeSha: status.headSha,
      state: 'ended',
      reason: 'the pull request was merged',
    };
    const merged: Look = { ...look, status: { ...status, state: 'merged', mergedAt } };
    await this.#record(
      merged,
      ended,
      [
        {
          type: 'pr.merged',
          data: {
            ...this.#pullRequest(look),
            sha: outcome.sha,
            mergedAt,
            byErrand: true,
            method,
          },
        },
      ],
      { number: status.number, method, sha: status.headSha },
    );
    return { change: ended };
  }

  /**
   * A turn the service refused: a budget spent pauses the watch with a comment; a rate limit is
   * waited out; an archived job ends it.
   */
  async #refused(
    look: Look,
    err: AppError,
    change: WatchChange,
    events: readonly PullRequestEvent[],
  ): Promise<LookResult> {
    if (err.code === 'rate_limited' || err.code === 'conflict') {
      const waited: WatchChange =
        err.code === 'conflict' ? { ...change, state: 'ended', reason: err.message } : change;
      await this.#record(look, waited, events);
      return {
        change: waited,
        ...(err.code === 'rate_limited' ? { afterSeconds: REFUSED_SECONDS } : {}),
      };
    }
    return this.#pause(look, `the turn was refused: ${err.message}`, true, { change, events });
  }

  /**
   * Queues a turn of the job; `first` is saved before it is, so that a process that stops
   * between the two does not queue it again (the open turn is seen instead).
   */
  async #queue(
    look: Look,
    prompt: string,
    purpose: 'autofix' | 'conflict',
    first: WatchChange,
  ): Promise<{ seq: number } | { refused: AppError }> {
    const ctx = this.#ctx;
    await saveNow(ctx.db, look.job.id, first);
    try {
      const { job } = await sendMessage(ctx, look.project, look.job.id, prompt, {
        by: ERRAND,
        purpose,
      });
      return { seq: job.turn_count };
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      await saveNow(ctx.db, look.job.id, {
        autofixes: look.watch.autofixes,
        conflictSha: look.watch.conflictSha,
      });
      ctx.log.info({ jobId: look.job.id, code: err.code }, 'pull request watch turn refused');
      return { refused: err };
    }
  }

  /** The failed checks' logs' ends, within the bounds, scrubbed of the project's secrets. */
  async #logs(look: Look, failed: readonly CheckResult[]): Promise<FailedCheck[]> {
    const ctx = this.#ctx;
    const secrets = [
      ...ctx.config.secrets,
      // Unreadable secrets fail the look (tried again later): a log unscrubbed never goes out.
      ...secretScrubForms(await turnSecrets(ctx, look.project.id)),
    ];
    const logged = failed.slice(0, CHECKS_WITH_LOGS);
    const perCheck = Math.min(LOG_BYTES_PER_CHECK, Math.floor(LOG_BYTES_IN_ALL / logged.length));
    const logs = await Promise.all(
      logged.map((check) =>
        // A log the forge will not give is no reason to leave the failure unfixed: the turn
        // gets the check's name, page and summary, and the log says why.
        look.client.checkLog(check, perCheck).catch((err: unknown) => {
          ctx.log.warn({ err, jobId: look.job.id, check: check.name }, 'a check log was not read');
          return '';
        }),
      ),
    );
    return failed.map((check, i) => ({ check, log: scrubSecrets(logs[i] ?? '', secrets) }));
  }

  /** Records the job's `pr` as this look found it, with the events and (a merge) the audit row. */
  async #record(
    look: Look,
    change: WatchChange,
    events: readonly PullRequestEvent[],
    merged?: { number: number; method: string; sha: string },
  ): Promise<void> {
    const pr = prRecord(look, { ...look.watch, ...change });
    await recordPullRequest(
      this.#ctx,
      look.job.id,
      pr,
      events,
      merged && {
        who: ERRAND,
        entry: { action: 'job.merge', target: { kind: 'job', id: look.job.id }, details: merged },
      },
    );
  }

  /** The newest commit a turn of the job pushed. */
  async #errandSha(jobId: string): Promise<string | null> {
    const row = await this.#ctx.db
      .selectFrom('turns')
      .select('commit_sha')
      .where('job_id', '=', jobId)
      .where('commit_sha', 'is not', null)
      .orderBy('seq', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row?.commit_sha ?? null;
  }

  async #turnOpen(jobId: string): Promise<boolean> {
    const row = await this.#ctx.db
      .selectFrom('turns')
      .select('seq')
      .where('job_id', '=', jobId)
      .where('state', 'in', ['queued', 'running'])
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  #pullRequest(look: Look): { forge: string; number: number; url: string } {
    return { forge: look.client.kind, number: look.status.number, url: look.status.url };
  }

  #jobUrl(job: WatchJob): string {
    return `${this.#publicUrl}/projects/${job.project_id}/jobs/${job.id}`;
  }
}

/** The job's `pr` as a look leaves it. */
function prRecord(look: Look, watch: WatchMemory): PrRecord {
  const { status } = look;
  return {
    number: status.number,
    url: status.url,
    state: status.state,
    mergedAt: status.mergedAt,
    headSha: status.headSha,
    mergeable: status.mergeable,
    approved: status.approved,
    checks: look.checks.map((check) => ({ name: check.name, state: check.state, url: check.url })),
    watch: { state: watch.state, reason: watch.reason, autofixes: watch.autofixes },
    observedAt: new Date().toISOString(),
  };
}
