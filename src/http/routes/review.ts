// GET /review/{jobId}: Errand's own review page for jobs on plain git remotes (and a link
// from every pull request): the prompts, the agent's summaries and the diff of the work
// branch against source.baseRef. The job id (20 random characters) is the capability: the page
// needs no API key, so a person can open it in a browser. A person signed in to the dashboard
// who may see the job's project also gets a link to the job's page there.
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { DIFF_STYLE, parseDiff, renderDiff } from '../../dashboard/diff.ts';
import { escapeHtml as html } from '../../dashboard/html.ts';
import { renderMarkdown } from '../../dashboard/markdown.ts';
import { readSession, sessionIdFrom } from '../../dashboard/sessions.ts';
import { AppError } from '../../errors.ts';
import { isId } from '../../ids.ts';
import { errors } from '../schemas.ts';

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

const STYLE = `body{font:15px/1.5 system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#1f2328;background:#fff}
h1{font-size:1.4rem;overflow-wrap:anywhere}h2{font-size:1.15rem;margin-top:2rem}code,pre{font:13px/1.45 ui-monospace,monospace}
pre{background:#f6f8fa;padding:1rem;overflow:auto;border-radius:6px}a{color:#0969da}
.turn{border-left:3px solid #d0d7de;padding-left:1rem;margin:1rem 0}.turn h3{font-size:1rem;margin:.5rem 0}
.meta{color:#59636e;overflow-wrap:anywhere}.prompt{margin:0;padding-left:1rem;border-left:3px solid #eee;white-space:pre-wrap;overflow-wrap:anywhere}
.summary{overflow-wrap:anywhere}.summary h1,.summary h2,.summary h3{font-size:1rem}.error{color:#82071e}
@media (prefers-color-scheme:dark){body{color:#e6edf3;background:#0d1117}pre{background:#151b23}a{color:#4493f8}
.meta{color:#9198a1}.turn{border-color:#3d444d}.prompt{border-color:#3d444d}.error{color:#f85149}}
${DIFF_STYLE}`;

// The page's only style is this one block, allowed by its hash: no 'unsafe-inline'.
const CSP = `default-src 'none'; style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;

export function registerReview(app: FastifyInstance, ctx: AppContext): void {
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
  app
    .withTypeProvider<ZodTypeProvider>()
    .get('/review/:jobId', { schema }, async (request, reply) => {
      const { jobId } = request.params;
      const job = isId('job', jobId)
        ? await ctx.db.selectFrom('jobs').selectAll().where('id', '=', jobId).executeTakeFirst()
        : undefined;
      if (!job) throw new AppError('not_found', `job ${jobId} not found`);
      const turns = await ctx.db
        .selectFrom('turns')
        .select(['seq', 'prompt', 'summary', 'state', 'error'])
        .where('job_id', '=', jobId)
        .orderBy('seq')
        .execute();
      const turnHtml = turns
        .map(
          (
            t,
          ) => `<section class="turn"><h3>Turn ${t.seq} <span class="meta">(${html(t.state)})</span></h3>
<p class="prompt">${html(t.prompt)}</p>
${t.summary ? `<p><strong>Summary</strong></p><div class="summary">${renderMarkdown(t.summary)}</div>` : ''}${t.error ? `<p class="error"><strong>Error:</strong> ${html(t.error)}</p>` : ''}</section>`,
        )
        .join('\n');
      const diff = job.review_diff
        ? `${job.review_diff_truncated ? '<p class="meta">The diff is larger than the page shows: it is cut off at the end.</p>' : ''}${renderDiff(parseDiff(job.review_diff))}`
        : '<p class="meta">No changes have been pushed yet.</p>';
      const viewer = ctx.config.dashboard
        ? await readSession(ctx.db, sessionIdFrom(request.headers.cookie))
        : undefined;
      const mayOpen =
        viewer !== undefined && (viewer.projectId === null || viewer.projectId === job.project_id);
      const dashboardLink = mayOpen
        ? `<p><a href="/projects/${encodeURIComponent(job.project_id)}/jobs/${encodeURIComponent(job.id)}">Open this job in the dashboard</a></p>\n`
        : '';
      const page = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex"><title>Review: ${html(job.branch)}</title><style>${STYLE}</style></head>
<body><h1>Review of <code>${html(job.branch)}</code></h1>
<p class="meta">Job <code>${html(job.id)}</code> · ${html(job.status)} · ${html(repositoryLabel(job.repository))} · against <code>${html(job.ref)}</code> · model ${html(job.model)}</p>
${dashboardLink}<h2>Prompts and summaries</h2>
${turnHtml}
<h2>Changes</h2>
${diff}
</body></html>`;
      return reply
        .type('text/html; charset=utf-8')
        .header('Content-Security-Policy', CSP)
        .header('X-Robots-Tag', 'noindex')
        .header('Cache-Control', 'no-store')
        .header('Referrer-Policy', 'no-referrer')
        .send(page);
    });
}
