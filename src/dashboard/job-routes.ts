// The job pages' routes, for an admin session or one of the job's project: a project's jobs and
// the new-job form, a job's page, a follow-up, and archiving (the page's live progress log is
// the live stream's, src/features/stream/). Jobs are read and changed through src/jobs/, with
// the API's schemas for what a person typed.
import type { FastifyInstance } from 'fastify';
import { whoOf } from '../audit/audit.ts';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { listEvents, toEventRecord } from '../events/log.ts';
import { isId } from '../ids.ts';
import { listAttachments } from '../jobs/attachments.ts';
import { requireMayArchive } from '../jobs/creator.ts';
import { createJobBody, promptBody } from '../jobs/input.ts';
import { firstPrompts, getReviewDiff, listTurns } from '../jobs/read.ts';
import { toJobRecord } from '../jobs/record.ts';
import { archiveJob, createJob, getJob, listJobs, sendMessage } from '../jobs/service.ts';
import { type MonthUsage, monthUsage } from '../jobs/spend.ts';
import { readUsage } from '../jobs/usage.ts';
import { access } from '../keys/route-access.ts';
import { toProjectRecord } from '../projects/service.ts';
import { JOB_STATUSES } from '../records/job.ts';
import { actorLabel, actorNames } from './actors.ts';
import { parseDiff, renderDiff } from './diff.ts';
import { html, SafeHtml } from './html.ts';
import { imagePath, registerJobImages } from './job-images.ts';
import { archivePage, eventView, type FormAgent, jobPage, jobsPage } from './job-pages.ts';
import { renderMarkdown } from './markdown.ts';
import { type Form, given, parse, sendPage, visibleProject } from './requests.ts';

const JOBS_PER_PAGE = 20;
/** The events a job's page shows, and its live lines send at most at once (features/stream/). */
export const EVENTS_ON_PAGE = 1000;

/** The start of a prompt, for a list. */
function excerpt(prompt: string): string {
  const line = prompt.replace(/\s+/g, ' ').trim();
  return line.length > 140 ? `${line.slice(0, 139)}…` : line;
}

/** A page of the project's jobs, with the start of each one's prompt. */
async function jobList(
  ctx: AppContext,
  projectId: string,
  query: {
    status?: string | undefined;
    cursor?: string | undefined;
    createdBy?: string | undefined;
  },
) {
  const status = query.status
    ? (JOB_STATUSES.find((s) => s === query.status) ??
      (() => {
        throw new AppError('bad_request', `"status" must be one of ${JOB_STATUSES.join(', ')}`);
      })())
    : undefined;
  const listed = await listJobs(ctx, projectId, {
    limit: JOBS_PER_PAGE,
    status,
    cursor: query.cursor || undefined,
    createdBy: query.createdBy || undefined,
  });
  const names = await actorNames(
    ctx.db,
    listed.jobs.map((job) => job.created_by),
  );
  const prompts = await firstPrompts(
    ctx,
    listed.jobs.map((job) => job.id),
  );
  return {
    items: listed.jobs.map((job) => ({
      job: toJobRecord(job),
      prompt: excerpt(prompts.get(job.id) ?? ''),
      createdBy: actorLabel(job.created_by, names),
    })),
    status,
    createdBy: query.createdBy || undefined,
    nextCursor: listed.nextCursor,
    now: Date.now(),
  };
}

async function spentThisMonth(ctx: AppContext, projectId: string): Promise<MonthUsage> {
  const month = (await monthUsage(ctx, [projectId])).get(projectId);
  if (!month) throw new Error(`no month's usage for ${projectId}`);
  return month;
}

/** The most attempts a job makes at once, as many agent rows as the form has. */
const FORM_AGENT_ROWS = 4;

/** Each attempt's agent as the form sent it (engineN, modelN), trimmed. */
function formAgents(form: Form | undefined): FormAgent[] {
  return Array.from({ length: FORM_AGENT_ROWS }, (_, i) => ({
    engine: given(form ?? {}, `engine${i + 1}`) ?? '',
    model: given(form ?? {}, `model${i + 1}`) ?? '',
  }));
}

/**
 * The form's attempts (best-of-N, docs/eval.md): a count, and each attempt's agent when one is
 * chosen. 1 with no agent, or none, is the usual single run; a count or an agent the schema
 * refuses is refused in its words, and an agent on a row past the count is refused rather than
 * left out.
 */
function formAttempts(
  value: string | undefined,
  agents: readonly FormAgent[],
): { attempts?: { count: number; agents?: { engine?: string; model?: string }[] } } {
  const count = value === undefined || value === '' ? 1 : Number(value);
  const named = (a: FormAgent) => a.engine !== '' || a.model !== '';
  const extra = agents.findIndex((a, i) => named(a) && i >= count);
  if (extra >= 0 && Number.isInteger(count))
    throw new AppError(
      'bad_request',
      `attempt ${extra + 1} has an agent, but the job makes ${count} attempt${count === 1 ? '' : 's'}: choose more attempts or clear its row`,
    );
  const chosen = agents.slice(0, Number.isInteger(count) && count > 0 ? count : 0);
  if (!chosen.some(named))
    return value === undefined || value === '' || value === '1' ? {} : { attempts: { count } };
  return {
    attempts: {
      count,
      agents: chosen.map((a) => ({
        ...(a.engine ? { engine: a.engine } : {}),
        ...(a.model ? { model: a.model } : {}),
      })),
    },
  };
}

/** The form's mode: absent (the approve button sends none) or empty is code. */
function formMode(form: Form | undefined): string | undefined {
  const mode = form?.mode;
  return mode === undefined || mode === '' ? undefined : mode;
}

/** A job's page: its turns, its first events and its review diff. */
async function jobDetail(ctx: AppContext, projectId: string, jobId: string) {
  const job = toJobRecord(await getJob(ctx, projectId, jobId));
  const turns = await listTurns(ctx, job.id);
  const events = await listEvents(ctx.db, job.id, 0, EVENTS_ON_PAGE);
  const review = await getReviewDiff(ctx, job.id);
  const names = await actorNames(ctx.db, [job.createdBy, ...turns.map((turn) => turn.sent_by)]);
  const images = await listAttachments(ctx, job.id);
  return {
    job,
    createdBy: actorLabel(job.createdBy, names),
    turns: turns.map((turn) => ({
      seq: turn.seq,
      state: turn.state,
      prompt: turn.prompt,
      summaryHtml: turn.summary ? renderMarkdown(turn.summary) : undefined,
      error: turn.error,
      usage: readUsage(turn.usage) ?? null,
      createdAt: turn.created_at.toISOString(),
      startedAt: turn.started_at?.toISOString() ?? null,
      finishedAt: turn.finished_at?.toISOString() ?? null,
      sentBy: actorLabel(turn.sent_by, names),
      mode: turn.mode,
      // The value it produced against its output schema (docs/structured-output.md).
      outputJson:
        turn.output_schema !== null && turn.state === 'done'
          ? JSON.stringify(turn.output, null, 2)
          : undefined,
      images: images
        .filter((image) => image.seq === turn.seq)
        .map((image) => ({ ...image, src: imagePath(projectId, job.id, image.seq, image.n) })),
    })),
    events: events.map((event) => eventView(toEventRecord(event))),
    diffHtml: review
      ? html`${review.truncated ? html`<p class="muted">The diff is cut off at the end.</p>` : ''}${new SafeHtml(renderDiff(parseDiff(review.diff)))}`
          .value
      : undefined,
  };
}

export function registerJobRoutes(pages: FastifyInstance, ctx: AppContext): void {
  registerJobImages(pages, ctx);
  pages.get<{
    Params: { id: string };
    Querystring: { status?: string; cursor?: string; created?: string; createdBy?: string };
  }>('/projects/:id/jobs', { config: access('viewer') }, async (request, reply) => {
    const { principal, row } = await visibleProject(ctx, request, request.params.id);
    const created = request.query.created;
    return sendPage(
      reply,
      200,
      jobsPage(
        principal,
        toProjectRecord(ctx, row),
        await spentThisMonth(ctx, row.id),
        await jobList(ctx, row.id, request.query),
        { created: created && isId('job', created) ? created : undefined },
      ),
    );
  });

  pages.post<{ Params: { id: string }; Body: Form | undefined }>(
    '/projects/:id/jobs',
    { config: access('member') },
    async (request, reply) => {
      const { principal, row } = await visibleProject(ctx, request, request.params.id);
      const prompt = request.body?.prompt ?? '';
      const mode = formMode(request.body);
      const attempts = request.body?.attempts;
      const agents = formAgents(request.body);
      try {
        const body = parse(createJobBody(ctx.config.maxPromptChars), {
          prompt,
          mode,
          ...formAttempts(attempts, agents),
        });
        const attachments = await ctx.attachments.read(body.attachments);
        const { job } = await createJob(ctx, row, {
          ...body,
          attachments,
          by: whoOf(request, principal),
        });
        return reply.redirect(`/projects/${row.id}/jobs?created=${job.id}`, 303);
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        return sendPage(
          reply,
          err.status,
          jobsPage(
            principal,
            toProjectRecord(ctx, row),
            await spentThisMonth(ctx, row.id),
            await jobList(ctx, row.id, {}),
            { prompt, mode, attempts, agents, error: err.message },
          ),
        );
      }
    },
  );

  type JobParams = { Params: { id: string; jobId: string } };

  pages.get<JobParams>(
    '/projects/:id/jobs/:jobId',
    { config: access('viewer') },
    async (request, reply) => {
      const { principal, row } = await visibleProject(ctx, request, request.params.id);
      const detail = await jobDetail(ctx, row.id, request.params.jobId);
      return sendPage(
        reply,
        200,
        jobPage(principal, toProjectRecord(ctx, row), detail.job, detail),
      );
    },
  );

  pages.post<JobParams & { Body: Form | undefined }>(
    '/projects/:id/jobs/:jobId/message',
    { config: access('member') },
    async (request, reply) => {
      const { principal, row } = await visibleProject(ctx, request, request.params.id);
      const prompt = request.body?.prompt ?? '';
      const mode = formMode(request.body);
      try {
        const body = parse(promptBody(ctx.config.maxPromptChars), { prompt, mode });
        await sendMessage(ctx, row, request.params.jobId, body.prompt, {
          by: whoOf(request, principal),
          mode: body.mode,
        });
        return reply.redirect(`/projects/${row.id}/jobs/${request.params.jobId}`, 303);
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        const detail = await jobDetail(ctx, row.id, request.params.jobId);
        return sendPage(
          reply,
          err.status,
          jobPage(principal, toProjectRecord(ctx, row), detail.job, {
            ...detail,
            prompt,
            mode,
            error: err.message,
          }),
        );
      }
    },
  );

  pages.get<JobParams>(
    '/projects/:id/jobs/:jobId/archive',
    { config: access('member') },
    async (request, reply) => {
      const { principal, row } = await visibleProject(ctx, request, request.params.id);
      await requireMayArchive(ctx, principal, row.id, request.params.jobId);
      const job = toJobRecord(await getJob(ctx, row.id, request.params.jobId));
      return sendPage(reply, 200, archivePage(principal, row.id, job));
    },
  );

  pages.post<JobParams>(
    '/projects/:id/jobs/:jobId/archive',
    { config: access('member') },
    async (request, reply) => {
      const { principal, row } = await visibleProject(ctx, request, request.params.id);
      await requireMayArchive(ctx, principal, row.id, request.params.jobId);
      await archiveJob(ctx, row.id, request.params.jobId, whoOf(request, principal));
      return reply.redirect(`/projects/${row.id}/jobs/${request.params.jobId}`, 303);
    },
  );
}
