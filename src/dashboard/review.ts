// GET /review/{jobId}: Errand's own review page for jobs on plain git remotes (and a link
// from every pull request): the prompts, the agent's summaries and the diff of the work
// branch against source.baseRef. The job id (20 random characters) is the capability: the page
// needs no API key, so a person can open it in a browser. A person signed in to the dashboard
// who may see the job's project also gets a link to the job's page there. Served with or
// without the dashboard's pages.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import helmet from '@fastify/helmet';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { findJob, getReviewDiff, listTurns } from '../jobs/read.ts';
import { mayActOn } from '../keys/access.ts';
import { errors } from '../responses.ts';
import { parseDiff, renderDiff } from './diff.ts';
import { securityHeaders } from './headers.ts';
import { html, SafeHtml } from './html.ts';
import { renderMarkdown } from './markdown.ts';
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
        referrer: 'no-referrer',
        // What this page sent before helmet: no X-Content-Type-Options.
        nosniff: false,
      }),
    );
    const schema = {
      summary: 'Review page',
      description:
        "Errand's review page of a job: its prompts, the agent's summaries and the diff of the work branch. The job id is the capability: no key.",
      tags: ['review'],
      params: z.object({ jobId: z.string().describe('The job id.') }),
      response: {
        200: { description: 'The page.', content: { 'text/html': { schema: z.string() } } },
        ...errors(404, 503),
      },
    };
    scope
      .withTypeProvider<ZodTypeProvider>()
      .get('/review/:jobId', { schema }, async (request, reply) => {
        const { jobId } = request.params;
        const job = await findJob(ctx, jobId);
        if (!job) throw new AppError('not_found', `job ${jobId} not found`);
        const turns = await listTurns(ctx, job.id);
        const review = await getReviewDiff(ctx, job.id);
        const viewer = ctx.config.dashboard
          ? await readSession(ctx.db, request.cookies[SESSION_COOKIE])
          : undefined;
        const mayOpen = viewer !== undefined && mayActOn(viewer, job.project_id);
        const page = html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex"><title>Review: ${job.branch}</title><style>${new SafeHtml(STYLE)}</style></head>
<body><h1>Review of <code>${job.branch}</code></h1>
<p class="meta">Job <code>${job.id}</code> · ${job.status} · ${repositoryLabel(job.repository)} · against <code>${job.ref}</code> · model ${job.model}</p>
${
  mayOpen
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
        return reply
          .type('text/html; charset=utf-8')
          .header('X-Robots-Tag', 'noindex')
          .header('Cache-Control', 'no-store')
          .send(page.value);
      });
  });
}
