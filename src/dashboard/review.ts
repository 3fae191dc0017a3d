// GET /review/{jobId}: Errand's own review page for jobs on plain git remotes (and a link
// from every pull request): the prompts, the agent's summaries and the diff of the work
// branch against source.baseRef. It opens with the token of the job's review link (its prLink,
// jobs/review-link.ts) until the job is archived, or for a dashboard session that may see the
// job's project; to anyone else it is the 404 of a job that does not exist. Served with or
// without the dashboard's pages (without them, only the token opens it).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import helmet from '@fastify/helmet';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { findReviewJob, getReviewDiff, listTurns } from '../jobs/read.ts';
import type { JobView } from '../jobs/record.ts';
import { REVIEW_TOKEN_PARAM, reviewTokenMatches } from '../jobs/review-link.ts';
import { mayActOn } from '../keys/access.ts';
import { access } from '../keys/route-access.ts';
import { errorBody, errors } from '../responses.ts';
import { parseDiff, renderDiff } from './diff.ts';
import { securityHeaders } from './headers.ts';
import { html, SafeHtml } from './html.ts';
import { renderMarkdown } from './markdown.ts';
import { wantsHtml } from './requests.ts';
import { readSession, SESSION_COOKIE } from './sessions.ts';

/**
 * How the page names the repository. A local repository's path says where the server keeps
 * its files, which is none of a reader's business: only its last name is shown. A remote
 * URL is shown without anything that could be a credential (user, query, fragment).
 */
export function repositoryLabel(repository: string): string {
  const basename = (path: string) => path.replace(/\/+$/, '').split('/').at(-1) || '(repository)';
  let url: URL | null = null;
  try {
    url = new URL(repository);
  } catch {
    url = null;
  }
  if (!url || url.protocol === 'file:') {
    const path = url ? decodeURIComponent(url.pathname) : repository;
    return `file://…/${basename(path)}`;
  }
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/** A stylesheet of the assets, without the comment that opens it (which names its source). */
const asset = (name: string) =>
  readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8').replace(
    /^\/\*[\s\S]*?\*\/\n/,
    '',
  );

// The page's only style is this one block, allowed by its hash: no 'unsafe-inline'.
const STYLE = `${asset('review.css')}\n${asset('diff.css')}`;
const STYLE_HASH = `'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`;

/**
 * The one answer to every request that may not see a review page: a job that does not exist, a
 * link without the token or with a wrong one, an archived job's link. One text (per server: with
 * or without the dashboard), so that it tells nothing of the job, not even that it exists.
 */
const refusal = (dashboard: boolean) =>
  `no review page here for this link: open the review link Errand gave for the job (its prLink)${dashboard ? ', or sign in to the dashboard' : ''}`;

const schema = {
  summary: 'Review page',
  description:
    "Errand's review page of a job: its prompts, the agent's summaries and the diff of the work branch. No API key: it opens with the token of the job's review link (the job's prLink on a plain git remote) until the job is archived, or for a signed-in dashboard session that may see the job's project. Anything else (no token, a wrong one, an archived job's, a job that does not exist) is the same 404.",
  tags: ['review'],
  params: z.object({ jobId: z.string().describe('The job id.') }),
  querystring: z.object({
    [REVIEW_TOKEN_PARAM]: z
      .string()
      .optional()
      .describe("The job's review token, as its prLink carries it."),
  }),
  response: {
    200: { description: 'The page.', content: { 'text/html': { schema: z.string() } } },
    ...errors(400, 503),
    404: {
      description:
        'No job of this id that this request may see: the same for a job that does not exist. A browser (Accept: text/html) gets a page that says so.',
      content: {
        'application/json': { schema: errorBody },
        'text/html': { schema: z.string() },
      },
    },
  },
};

type ReviewRequest = FastifyRequest<{
  Params: { jobId: string };
  Querystring: { [REVIEW_TOKEN_PARAM]?: string | undefined };
}>;

export async function registerReviewPage(app: FastifyInstance, ctx: AppContext): Promise<void> {
  await app.register(async (scope) => {
    await scope.register(
      helmet,
      securityHeaders({
        directives: {
          'default-src': ["'none'"],
          'style-src': [STYLE_HASH],
          'base-uri': ["'none'"],
          'form-action': ["'none'"],
          'frame-ancestors': ["'none'"],
        },
        // The page's address holds the token: no link on it may send that address on.
        referrer: 'no-referrer',
        // What this page sent before helmet: no X-Content-Type-Options.
        nosniff: false,
      }),
    );
    scope
      .withTypeProvider<ZodTypeProvider>()
      .get('/review/:jobId', { config: access('open'), schema }, async (request, reply) => {
        const opened = await openedJob(ctx, request);
        if (!opened) return refuse(ctx, request, reply);
        const { job, signedIn } = opened;
        const turns = await listTurns(ctx, job.id);
        const review = await getReviewDiff(ctx, job.id);
        return sendReview(reply, 200, reviewPage(job, turns, review, signedIn));
      });
  });
}

/**
 * The job, when this request may see its review page: by the token of the job's review link
 * while the job is not archived, or by a dashboard session that may see the job's project
 * (`signedIn`: that reader also gets a link to the job's page).
 */
async function openedJob(
  ctx: AppContext,
  request: ReviewRequest,
): Promise<{ job: JobView; signedIn: boolean } | undefined> {
  const job = await findReviewJob(ctx, request.params.jobId);
  // Read whether or not the job exists, so that a refusal takes the same work either way.
  const viewer = ctx.config.dashboard
    ? await readSession(ctx.db, request.cookies[SESSION_COOKIE])
    : undefined;
  const byToken = reviewTokenMatches(request.query[REVIEW_TOKEN_PARAM], job?.review_token ?? '');
  if (!job) return undefined;
  const signedIn = viewer !== undefined && mayActOn(viewer, job.project_id);
  if (signedIn || (byToken && job.archived_at === null)) return { job, signedIn };
  return undefined;
}

function refuse(ctx: AppContext, request: FastifyRequest, reply: FastifyReply) {
  if (!wantsHtml(request)) throw new AppError('not_found', refusal(ctx.config.dashboard));
  const signIn = ctx.config.dashboard
    ? html`<p><a href="/">Sign in to the dashboard</a>, then open the link again.</p>\n`
    : '';
  return sendReview(
    reply,
    404,
    html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex"><title>No review page</title><style>${new SafeHtml(STYLE)}</style></head>
<body><h1>No review page here</h1>
<p class="meta">A review page opens with the link Errand gave for its job (the job's <code>prLink</code>), or for a person signed in to the dashboard who may see the job.</p>
${signIn}</body></html>`,
  );
}

function sendReview(reply: FastifyReply, status: number, page: SafeHtml) {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .header('X-Robots-Tag', 'noindex')
    .header('Cache-Control', 'no-store')
    .send(page.value);
}

function reviewPage(
  job: JobView,
  turns: Awaited<ReturnType<typeof listTurns>>,
  review: Awaited<ReturnType<typeof getReviewDiff>>,
  signedIn: boolean,
): SafeHtml {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex"><title>Review: ${job.branch}</title><style>${new SafeHtml(STYLE)}</style></head>
<body><h1>Review of <code>${job.branch}</code></h1>
<p class="meta">Job <code>${job.id}</code> · ${job.status} · ${repositoryLabel(job.repository)} · against <code>${job.ref}</code> · model ${job.model}</p>
${
  signedIn
    ? html`<p><a href="/projects/${encodeURIComponent(job.project_id)}/jobs/${encodeURIComponent(job.id)}">Open this job in the dashboard</a></p>\n`
    : ''
}<h2>Prompts and summaries</h2>
${turns.map(
  (t) => html`<section class="turn"><h3>Turn ${t.seq} <span class="meta">(${t.state})</span></h3>
<p class="prompt">${t.prompt}</p>
${t.summary ? html`<p><strong>Summary</strong></p><div class="summary">${new SafeHtml(renderMarkdown(t.summary))}</div>` : ''}${t.error ? html`<p class="error"><strong>Error:</strong> ${t.error}</p>` : ''}</section>\n`,
)}
<h2>Changes</h2>
${
  review
    ? html`${review.truncated ? html`<p class="meta">The diff is larger than the page shows: it is cut off at the end.</p>` : ''}${new SafeHtml(renderDiff(parseDiff(review.diff)))}`
    : html`<p class="meta">No changes have been pushed yet.</p>`
}
</body></html>`;
}
