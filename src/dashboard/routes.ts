// The dashboard's routes, served by `errand serve` at `/` beside the API. Pages need a
// session (src/dashboard/sessions.ts); actions go through the same services and schemas as
// the admin API, and a refusal is shown on the page with the API's message.
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { type EventStreams, resumeAfter, wantsStream } from '../events/streams.ts';
import { sendError, toAppError } from '../http/errors.ts';
import { projectCreateBody, projectUpdateBody } from '../http/routes/admin-projects.ts';
import { createJobBody, promptBody, refusal } from '../http/schemas.ts';
import { isId } from '../ids.ts';
import { type EventRecord, listEvents, toEventRecord } from '../jobs/events.ts';
import { toJobRecord } from '../jobs/record.ts';
import {
  archiveJob,
  createJob,
  getJob,
  JOB_STATUSES,
  listJobs,
  sendMessage,
} from '../jobs/service.ts';
import { createKey, listKeys, type Principal, revokeKey, toKeyRecord } from '../keys/service.ts';
import {
  createProject,
  findProject,
  getProject,
  listProjects,
  type ProjectFields,
  type ProjectRecord,
  toProjectRecord,
  updateProject,
} from '../projects/service.ts';
import { DIFF_STYLE, parseDiff, renderDiff } from './diff.ts';
import { renderMarkdown } from './markdown.ts';
import {
  adminKeysPage,
  archivePage,
  type EventView,
  errorPage,
  eventItem,
  jobPage,
  jobsPage,
  projectKeysPage,
  projectsPage,
  projectValues,
  revokePage,
  settingsPage,
  signInPage,
} from './pages.ts';
import {
  endSession,
  readSession,
  SESSION_COOKIE,
  SESSION_MAX_SECONDS,
  sessionIdFrom,
  signIn,
} from './sessions.ts';
import { registerWebhookPages } from './webhooks.ts';

// No inline script or style anywhere, so the policy needs no 'unsafe-inline'.
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

const ASSETS: Record<string, { type: string; body: string }> = {
  'dashboard.css': {
    type: 'text/css; charset=utf-8',
    body: readFileSync(new URL('./assets/dashboard.css', import.meta.url), 'utf8'),
  },
  // The diff view's styles (src/dashboard/diff.ts) as a file: the CSP allows no inline style.
  'diff.css': { type: 'text/css; charset=utf-8', body: DIFF_STYLE },
  'dashboard.js': {
    type: 'text/javascript; charset=utf-8',
    body: readFileSync(new URL('./assets/dashboard.js', import.meta.url), 'utf8'),
  },
};

type Form = Record<string, string>;

const JOBS_PER_PAGE = 20;
const EVENTS_ON_PAGE = 1000;

/**
 * A status event's line (`job.*`, whose data is the whole job record): what the change means
 * for the reader, not the record, whose facts the page already shows.
 */
function statusText(job: Record<string, unknown>): string | undefined {
  const { status, error, prLink, turns } = job;
  if (typeof status !== 'string') return undefined;
  if (status === 'failed' && typeof error === 'string') return `failed: ${error}`;
  if (status === 'completed' && typeof prLink === 'string') return `completed: ${prLink}`;
  if (status === 'active' && typeof turns === 'number') return `active, turn ${turns} queued`;
  return status;
}

/** The events after which a job is no longer active: the page reloads to show the outcome. */
const SETTLING_EVENTS: ReadonlySet<string> = new Set([
  'job.completed',
  'job.failed',
  'job.archived',
]);

/** A progress event as one line of text: its own title or summary where it has one. */
function eventView(row: EventRecord): EventView {
  const data = row.data;
  let text = '';
  if (data && typeof data === 'object' && !Array.isArray(data)) {
    const fields = data as Record<string, unknown>;
    const job = fields.job;
    const named =
      (row.type.startsWith('job.') && job && typeof job === 'object'
        ? statusText(job as Record<string, unknown>)
        : undefined) ??
      fields.title ??
      fields.summary ??
      fields.message ??
      fields.prLink;
    text = typeof named === 'string' ? named : JSON.stringify(data);
  } else if (data !== null) text = JSON.stringify(data);
  return {
    seq: row.seq,
    at: row.at,
    type: row.type,
    text: text.length > 500 ? `${text.slice(0, 499)}…` : text,
  };
}

function tokenUsage(usage: unknown): { inputTokens?: number; outputTokens?: number } | null {
  if (!usage || typeof usage !== 'object') return null;
  const u = usage as Record<string, unknown>;
  return {
    ...(typeof u.inputTokens === 'number' ? { inputTokens: u.inputTokens } : {}),
    ...(typeof u.outputTokens === 'number' ? { outputTokens: u.outputTokens } : {}),
  };
}

/** The start of a prompt, for a list. */
function excerpt(prompt: string): string {
  const line = prompt.replace(/\s+/g, ' ').trim();
  return line.length > 140 ? `${line.slice(0, 139)}…` : line;
}

declare module 'fastify' {
  interface FastifyRequest {
    session: Principal | null;
  }
}

/** A browser navigation gets pages; a script (fetch, curl) gets the API's JSON errors. */
function wantsHtml(request: FastifyRequest): boolean {
  return (request.headers.accept ?? '').includes('text/html');
}

function sendPage(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

/** An optional text field: an empty input means "not given". */
function given(form: Form, name: string): string | undefined {
  const value = form[name]?.trim();
  return value ? value : undefined;
}

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const result = schema.safeParse(body);
  if (!result.success) throw refusal(schema, 'body', result.error);
  return result.data;
}

/** The admin API's create body from the new-project form. */
function createFields(form: Form): ProjectFields {
  return parse(projectCreateBody, {
    name: form.name ?? '',
    repository: form.repository ?? '',
    ...optional(form, ['ref', 'model', 'forge', 'forgeUrl', 'forgeTokenEnv', 'forgeToken']),
    draftPullRequests: form.draftPullRequests === '1',
    ...commandFields(form, undefined),
  });
}

const LIMIT_FIELDS = [
  'commandTimeoutSeconds',
  'commandCpuSeconds',
  'commandMemoryMb',
  'commandProcesses',
  'commandFileSizeMb',
] as const;

/**
 * The command settings of a project form. A limit left empty is the default; on the settings
 * form a limit shown and saved unchanged is left alone, so saving does not pin today's default.
 */
function commandFields(form: Form, current: ProjectRecord | undefined): Record<string, unknown> {
  const body: Record<string, unknown> = {
    commandsEnabled: form.commandsEnabled === '1',
    setupNetwork: form.setupNetwork === '1',
    setupCommand: given(form, 'setupCommand') ?? null,
  };
  for (const name of LIMIT_FIELDS) {
    const value = given(form, name);
    // The schema refuses what is not a whole number in range, naming the field.
    if (value === undefined) body[name] = null;
    else if (current === undefined || value !== String(current[name])) body[name] = Number(value);
  }
  return body;
}

/**
 * The admin API's update body from the settings form: an emptied field resets it (null), and
 * empty credential fields keep the stored credentials.
 */
function updateFields(form: Form, current: ProjectRecord): ProjectFields {
  const body: Record<string, unknown> = {
    name: form.name ?? '',
    repository: form.repository ?? '',
    draftPullRequests: form.draftPullRequests === '1',
    ...commandFields(form, current),
  };
  for (const name of ['ref', 'model', 'forge', 'forgeUrl'] as const) {
    body[name] = given(form, name) ?? null;
  }
  const tokenEnv = given(form, 'forgeTokenEnv');
  const token = given(form, 'forgeToken');
  if (form.clearCredentials === '1') body.forgeToken = null;
  else if (token !== undefined) body.forgeToken = token;
  else if (tokenEnv !== undefined) {
    if (tokenEnv !== current.forge.tokenEnv) body.forgeTokenEnv = tokenEnv;
  } else if (current.forge.credentials === 'token-env') body.forgeTokenEnv = null;
  return parse(projectUpdateBody, body);
}

function optional(form: Form, names: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = given(form, name);
    if (value !== undefined) out[name] = value;
  }
  return out;
}

export async function registerDashboard(
  app: FastifyInstance,
  ctx: AppContext,
  streams: EventStreams,
): Promise<void> {
  const secure = ctx.config.publicUrl?.startsWith('https:') ?? false;
  const publicOrigin = ctx.config.publicUrl ? new URL(ctx.config.publicUrl).origin : undefined;

  const sessionCookie = (value: string, maxAge: number) =>
    `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${secure ? '; Secure' : ''}`;

  await app.register(async (scope) => {
    scope.decorateRequest('session', null);
    // Pages, not the API: they stay out of the OpenAPI document.
    scope.addHook('onRoute', (route) => {
      route.schema = { ...route.schema, hide: true };
    });
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: 256 * 1024 },
      (_request, body, done) => {
        done(null, Object.fromEntries(new URLSearchParams(String(body))));
      },
    );
    scope.addHook('onSend', (_request, reply, payload, done) => {
      reply.header('Content-Security-Policy', CSP);
      reply.header('X-Content-Type-Options', 'nosniff');
      // Not no-referrer: under it a browser sends "Origin: null" with form posts, and the
      // Origin check below could not tell this site's forms from another's.
      reply.header('Referrer-Policy', 'same-origin');
      // Pages hold data of a signed-in user: never kept, so after sign-out "back" shows none.
      if (!reply.hasHeader('Cache-Control')) reply.header('Cache-Control', 'no-store');
      done(null, payload);
    });
    // Cross-site form posts: SameSite=Strict keeps the cookie off them, and this refuses any
    // POST whose Origin is not this server's, even one that carries no cookie (sign-in).
    scope.addHook('onRequest', async (request) => {
      if (request.method !== 'POST') return;
      const site = request.headers['sec-fetch-site'];
      const origin = request.headers.origin;
      const own = `${request.protocol}://${request.host}`;
      if (
        (site !== undefined && site !== 'same-origin') ||
        (origin !== own && origin !== publicOrigin)
      ) {
        throw new AppError('forbidden', 'cross-site request refused; use the form on this site');
      }
    });
    scope.setErrorHandler((err, request, reply) => {
      const appError = toAppError(err instanceof Error ? err : new Error(String(err)));
      if (appError.status >= 500)
        ctx.log.error({ err, requestId: request.id, url: request.url }, 'dashboard request failed');
      if (!wantsHtml(request)) return sendError(reply, request, appError);
      return sendPage(
        reply,
        appError.status,
        errorPage(request.session ?? undefined, appError.status, appError.message),
      );
    });

    scope.get<{ Params: { name: string } }>('/assets/:name', async (request, reply) => {
      const asset = ASSETS[request.params.name];
      if (!asset) throw new AppError('not_found', `no asset ${request.params.name}`);
      return reply
        .header('Cache-Control', 'public, max-age=3600')
        .type(asset.type)
        .send(asset.body);
    });

    scope.get('/', async (request, reply) => {
      const principal = await readSession(ctx.db, sessionIdFrom(request.headers.cookie));
      if (principal) return reply.redirect('/projects', 303);
      return sendPage(reply, 200, signInPage());
    });

    scope.post<{ Body: Form | undefined }>('/sign-in', async (request, reply) => {
      try {
        const { id } = await signIn(ctx.db, request.body?.key ?? '');
        reply.header('Set-Cookie', sessionCookie(id, SESSION_MAX_SECONDS));
        return reply.redirect('/projects', 303);
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        return sendPage(reply, err.status, signInPage(err.message));
      }
    });

    scope.post('/sign-out', async (request, reply) => {
      await endSession(ctx.db, sessionIdFrom(request.headers.cookie));
      reply.header('Set-Cookie', sessionCookie('', 0));
      return reply.redirect('/', 303);
    });

    // Everything below needs a session: a page without one sends a browser to sign in.
    await scope.register(async (pages) => {
      pages.addHook('onRequest', async (request, reply) => {
        const principal = await readSession(ctx.db, sessionIdFrom(request.headers.cookie));
        if (principal) {
          request.session = principal;
          return;
        }
        if (request.method === 'GET' && wantsHtml(request)) return reply.redirect('/', 303);
        throw new AppError('unauthorized', 'sign in first: this needs a dashboard session');
      });

      const session = (request: FastifyRequest): Principal => {
        if (!request.session) throw new AppError('unauthorized', 'sign in first');
        return request.session;
      };
      const admin = (request: FastifyRequest): Principal => {
        const principal = session(request);
        if (principal.projectId !== null) {
          throw new AppError('forbidden', 'this page needs an admin key; this is a project key');
        }
        return principal;
      };
      const baseUrl = (request: FastifyRequest) =>
        ctx.config.publicUrl ?? `${request.protocol}://${request.host}`;

      const projectRows = async (principal: Principal) => {
        const projects =
          principal.projectId === null
            ? await listProjects(ctx)
            : [await getProject(ctx, principal.projectId)];
        const counts = await ctx.db
          .selectFrom('jobs')
          .select((eb) => [
            'project_id',
            eb.fn.countAll<string>().as('total'),
            eb.fn.countAll<string>().filterWhere('status', '=', 'active').as('active'),
          ])
          .groupBy('project_id')
          .execute();
        const byProject = new Map(counts.map((c) => [c.project_id, c]));
        return projects.map((row) => ({
          project: toProjectRecord(row),
          activeJobs: Number(byProject.get(row.id)?.active ?? 0),
          totalJobs: Number(byProject.get(row.id)?.total ?? 0),
        }));
      };

      pages.get('/projects', async (request, reply) => {
        const principal = session(request);
        return sendPage(
          reply,
          200,
          // A new project has commands on, as the API's default.
          projectsPage(principal, await projectRows(principal), {
            values: { commandsEnabled: '1' },
          }),
        );
      });

      pages.post<{ Body: Form | undefined }>('/projects', async (request, reply) => {
        const principal = admin(request);
        const form = request.body ?? {};
        try {
          await createProject(ctx, createFields(form));
          return reply.redirect('/projects', 303);
        } catch (err) {
          if (!(err instanceof AppError) || err.status >= 500) throw err;
          const { forgeToken, ...values } = form;
          return sendPage(
            reply,
            err.status,
            projectsPage(principal, await projectRows(principal), { values, error: err.message }),
          );
        }
      });

      const project = async (id: string): Promise<ProjectRecord> =>
        toProjectRecord(await getProject(ctx, id));

      pages.get<{ Params: { id: string }; Querystring: { saved?: string } }>(
        '/projects/:id/settings',
        async (request, reply) => {
          const principal = admin(request);
          const current = await project(request.params.id);
          return sendPage(
            reply,
            200,
            settingsPage(principal, current, {
              values: projectValues(current),
              saved: request.query.saved === '1',
            }),
          );
        },
      );

      pages.post<{ Params: { id: string }; Body: Form | undefined }>(
        '/projects/:id/settings',
        async (request, reply) => {
          const principal = admin(request);
          const current = await project(request.params.id);
          const form = request.body ?? {};
          try {
            await updateProject(ctx, current.id, updateFields(form, current));
            return reply.redirect(`/projects/${current.id}/settings?saved=1`, 303);
          } catch (err) {
            if (!(err instanceof AppError) || err.status >= 500) throw err;
            const { forgeToken, ...values } = form;
            return sendPage(
              reply,
              err.status,
              settingsPage(principal, current, { values, error: err.message }),
            );
          }
        },
      );

      /** The project a session may see jobs of: any for an admin key, its own for a project key. */
      const visibleProject = async (request: FastifyRequest, id: string) => {
        const principal = session(request);
        if (principal.projectId !== null && principal.projectId !== id) {
          throw new AppError('forbidden', `this API key is not valid for project ${id}`);
        }
        return { principal, row: await getProject(ctx, id) };
      };

      const jobList = async (
        projectId: string,
        query: { status?: string | undefined; cursor?: string | undefined },
      ) => {
        const status = query.status
          ? (JOB_STATUSES.find((s) => s === query.status) ??
            (() => {
              throw new AppError(
                'bad_request',
                `"status" must be one of ${JOB_STATUSES.join(', ')}`,
              );
            })())
          : undefined;
        const listed = await listJobs(ctx, projectId, {
          limit: JOBS_PER_PAGE,
          status,
          cursor: query.cursor || undefined,
        });
        const ids = listed.jobs.map((job) => job.id);
        const prompts = ids.length
          ? await ctx.db
              .selectFrom('turns')
              .select(['job_id', 'prompt'])
              .where('job_id', 'in', ids)
              .where('seq', '=', 1)
              .execute()
          : [];
        const promptOf = new Map(prompts.map((turn) => [turn.job_id, turn.prompt]));
        return {
          items: listed.jobs.map((job) => ({
            job: toJobRecord(job),
            prompt: excerpt(promptOf.get(job.id) ?? ''),
          })),
          status,
          nextCursor: listed.nextCursor,
          statuses: JOB_STATUSES,
          now: Date.now(),
        };
      };

      pages.get<{
        Params: { id: string };
        Querystring: { status?: string; cursor?: string; created?: string };
      }>('/projects/:id/jobs', async (request, reply) => {
        const { principal, row } = await visibleProject(request, request.params.id);
        const created = request.query.created;
        return sendPage(
          reply,
          200,
          jobsPage(principal, toProjectRecord(row), await jobList(row.id, request.query), {
            created: created && isId('job', created) ? created : undefined,
          }),
        );
      });

      pages.post<{ Params: { id: string }; Body: Form | undefined }>(
        '/projects/:id/jobs',
        async (request, reply) => {
          const { principal, row } = await visibleProject(request, request.params.id);
          const prompt = request.body?.prompt ?? '';
          try {
            const body = parse(createJobBody(ctx.config.maxPromptChars), { prompt });
            const { job } = await createJob(ctx, row, body);
            return reply.redirect(`/projects/${row.id}/jobs?created=${job.id}`, 303);
          } catch (err) {
            if (!(err instanceof AppError) || err.status >= 500) throw err;
            return sendPage(
              reply,
              err.status,
              jobsPage(principal, toProjectRecord(row), await jobList(row.id, {}), {
                prompt,
                error: err.message,
              }),
            );
          }
        },
      );

      const jobDetail = async (projectId: string, jobId: string) => {
        const job = toJobRecord(await getJob(ctx, projectId, jobId));
        const turns = await ctx.db
          .selectFrom('turns')
          .select([
            'seq',
            'state',
            'prompt',
            'summary',
            'error',
            'usage',
            'created_at',
            'started_at',
            'finished_at',
          ])
          .where('job_id', '=', job.id)
          .orderBy('seq')
          .execute();
        const events = await listEvents(ctx.db, job.id, 0, EVENTS_ON_PAGE);
        const stored = await ctx.db
          .selectFrom('jobs')
          .select(['review_diff', 'review_diff_truncated'])
          .where('id', '=', job.id)
          .executeTakeFirst();
        return {
          job,
          turns: turns.map((turn) => ({
            seq: turn.seq,
            state: turn.state,
            prompt: turn.prompt,
            summaryHtml: turn.summary ? renderMarkdown(turn.summary) : undefined,
            error: turn.error,
            usage: tokenUsage(turn.usage),
            createdAt: turn.created_at.toISOString(),
            startedAt: turn.started_at?.toISOString() ?? null,
            finishedAt: turn.finished_at?.toISOString() ?? null,
          })),
          events: events.map((event) => eventView(toEventRecord(event))),
          diffHtml: stored?.review_diff
            ? `${stored.review_diff_truncated ? '<p class="muted">The diff is cut off at the end.</p>' : ''}${renderDiff(parseDiff(stored.review_diff))}`
            : undefined,
        };
      };

      type JobParams = { Params: { id: string; jobId: string } };

      pages.get<JobParams>('/projects/:id/jobs/:jobId', async (request, reply) => {
        const { principal, row } = await visibleProject(request, request.params.id);
        const detail = await jobDetail(row.id, request.params.jobId);
        return sendPage(reply, 200, jobPage(principal, toProjectRecord(row), detail.job, detail));
      });

      // The page's script follows the job's live event stream, as lines of HTML the server
      // renders and escapes; asked for JSON, what happened since the last event the page shows.
      pages.get<JobParams & { Querystring: { after?: string } }>(
        '/projects/:id/jobs/:jobId/events',
        async (request, reply) => {
          const { principal, row } = await visibleProject(request, request.params.id);
          const job = await getJob(ctx, row.id, request.params.jobId);
          const after = Number(request.query.after ?? 0);
          if (!Number.isSafeInteger(after) || after < 0) {
            throw new AppError('bad_request', '"after" must be an event number');
          }
          if (wantsStream(request.headers.accept)) {
            await streams.open(
              {
                jobId: job.id,
                keyId: principal.keyId,
                after: resumeAfter(request.headers['last-event-id'], after),
                requestId: request.id,
              },
              reply.raw,
              (event) => ({
                name: 'line',
                data: JSON.stringify({
                  seq: event.seq,
                  html: eventItem(eventView(event)),
                  settled: SETTLING_EVENTS.has(event.type),
                }),
              }),
            );
            reply.hijack();
            return reply;
          }
          const events = await listEvents(ctx.db, job.id, after, EVENTS_ON_PAGE);
          return {
            status: job.status,
            events: events.map((event) => {
              const view = eventView(toEventRecord(event));
              return { seq: view.seq, html: eventItem(view) };
            }),
          };
        },
      );

      pages.post<JobParams & { Body: Form | undefined }>(
        '/projects/:id/jobs/:jobId/message',
        async (request, reply) => {
          const { principal, row } = await visibleProject(request, request.params.id);
          const prompt = request.body?.prompt ?? '';
          try {
            const body = parse(promptBody(ctx.config.maxPromptChars), { prompt });
            await sendMessage(ctx, row, request.params.jobId, body.prompt);
            return reply.redirect(`/projects/${row.id}/jobs/${request.params.jobId}`, 303);
          } catch (err) {
            if (!(err instanceof AppError) || err.status >= 500) throw err;
            const detail = await jobDetail(row.id, request.params.jobId);
            return sendPage(
              reply,
              err.status,
              jobPage(principal, toProjectRecord(row), detail.job, {
                ...detail,
                prompt,
                error: err.message,
              }),
            );
          }
        },
      );

      pages.get<JobParams>('/projects/:id/jobs/:jobId/archive', async (request, reply) => {
        const { principal, row } = await visibleProject(request, request.params.id);
        const job = toJobRecord(await getJob(ctx, row.id, request.params.jobId));
        return sendPage(reply, 200, archivePage(principal, row.id, job));
      });

      pages.post<JobParams>('/projects/:id/jobs/:jobId/archive', async (request, reply) => {
        const { row } = await visibleProject(request, request.params.id);
        await archiveJob(ctx, row.id, request.params.jobId);
        return reply.redirect(`/projects/${row.id}/jobs/${request.params.jobId}`, 303);
      });

      const keysOf = async (projectId: string | null) =>
        (await listKeys(ctx)).map(toKeyRecord).filter((key) => key.projectId === projectId);

      pages.get<{ Params: { id: string } }>('/projects/:id/keys', async (request, reply) => {
        const principal = admin(request);
        const current = await project(request.params.id);
        return sendPage(
          reply,
          200,
          projectKeysPage(principal, current, await keysOf(current.id), {
            baseUrl: baseUrl(request),
          }),
        );
      });

      pages.post<{ Params: { id: string }; Body: Form | undefined }>(
        '/projects/:id/keys',
        async (request, reply) => {
          const principal = admin(request);
          const current = await project(request.params.id);
          const name = given(request.body ?? {}, 'name');
          if (name !== undefined && name.length > 200) {
            const error = '"name" must be a string of at most 200 characters';
            return sendPage(
              reply,
              400,
              projectKeysPage(principal, current, await keysOf(current.id), {
                baseUrl: baseUrl(request),
                error,
              }),
            );
          }
          const { key } = await createKey(ctx.db, { projectId: current.id, name: name ?? null });
          return sendPage(
            reply,
            201,
            projectKeysPage(principal, current, await keysOf(current.id), {
              baseUrl: baseUrl(request),
              created: { key },
            }),
          );
        },
      );

      pages.get('/keys', async (request, reply) => {
        const principal = admin(request);
        return sendPage(reply, 200, adminKeysPage(principal, await keysOf(null), {}));
      });

      pages.post<{ Body: Form | undefined }>('/keys', async (request, reply) => {
        const principal = admin(request);
        const name = given(request.body ?? {}, 'name');
        if (name !== undefined && name.length > 200) {
          const error = '"name" must be a string of at most 200 characters';
          return sendPage(reply, 400, adminKeysPage(principal, await keysOf(null), { error }));
        }
        const { key } = await createKey(ctx.db, { projectId: null, name: name ?? null });
        return sendPage(
          reply,
          201,
          adminKeysPage(principal, await keysOf(null), { created: { key } }),
        );
      });

      const keyRecord = async (id: string) => {
        const key = isId('key', id) ? (await listKeys(ctx)).find((k) => k.id === id) : undefined;
        if (!key) throw new AppError('not_found', `key ${id} not found`);
        return toKeyRecord(key);
      };
      const keysPageOf = (projectId: string | null) =>
        projectId === null ? '/keys' : `/projects/${projectId}/keys`;

      pages.get<{ Params: { id: string } }>('/keys/:id/revoke', async (request, reply) => {
        const principal = admin(request);
        const key = await keyRecord(request.params.id);
        return sendPage(reply, 200, revokePage(principal, key, keysPageOf(key.projectId)));
      });

      pages.post<{ Params: { id: string } }>('/keys/:id/revoke', async (request, reply) => {
        admin(request);
        const key = toKeyRecord(await revokeKey(ctx, request.params.id));
        // A project that no longer exists has no keys page to go back to.
        const back =
          key.projectId !== null && !(await findProject(ctx, key.projectId))
            ? '/keys'
            : keysPageOf(key.projectId);
        return reply.redirect(back, 303);
      });

      registerWebhookPages(pages, ctx, { admin, sendPage });
    });
  });
}
