// GET /review/{jobId}: Errand's own review page for jobs on plain git remotes (and a link
// from every pull request): the prompts, the agent's summaries and the diff of the work
// branch against source.ref. The job id (20 random characters) is the capability: the page
// needs no API key, so a person can open it in a browser.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { isId } from '../../ids.ts';
import { errors } from '../schemas.ts';

function html(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function diffHtml(diff: string): string {
  return diff
    .split('\n')
    .map((line) => {
      const cls =
        line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff ')
          ? 'file'
          : line.startsWith('+')
            ? 'add'
            : line.startsWith('-')
              ? 'del'
              : line.startsWith('@@')
                ? 'hunk'
                : '';
      return cls ? `<span class="${cls}">${html(line)}</span>` : html(line);
    })
    .join('\n');
}

const STYLE = `body{font:15px/1.5 system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#1f2328}
h1{font-size:1.4rem}code,pre{font:13px/1.45 ui-monospace,monospace}pre{background:#f6f8fa;padding:1rem;overflow:auto;border-radius:6px}
.add{color:#116329;background:#dafbe1}.del{color:#82071e;background:#ffebe9}.hunk{color:#8250df}.file{font-weight:bold}
.turn{border-left:3px solid #d0d7de;padding-left:1rem;margin:1rem 0}.meta{color:#59636e}blockquote{margin:0;padding-left:1rem;border-left:3px solid #eee;white-space:pre-wrap}`;

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
<blockquote>${html(t.prompt)}</blockquote>
${t.summary ? `<p><strong>Summary</strong></p><pre>${html(t.summary)}</pre>` : ''}${t.error ? `<p><strong>Error:</strong> ${html(t.error)}</p>` : ''}</section>`,
        )
        .join('\n');
      const diff = job.review_diff
        ? `<pre>${diffHtml(job.review_diff)}</pre>${job.review_diff_truncated ? '<p class="meta">The diff is cut off here: it is larger than the page shows.</p>' : ''}`
        : '<p class="meta">No changes have been pushed yet.</p>';
      const page = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex"><title>Review: ${html(job.branch)}</title><style>${STYLE}</style></head>
<body><h1>Review of <code>${html(job.branch)}</code></h1>
<p class="meta">Job <code>${html(job.id)}</code> · ${html(job.status)} · ${html(job.repository)} · against <code>${html(job.ref)}</code> · model ${html(job.model)}</p>
<h2>Prompts and summaries</h2>
${turnHtml}
<h2>Changes</h2>
${diff}
</body></html>`;
      return reply
        .type('text/html; charset=utf-8')
        .header('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'")
        .header('Cache-Control', 'no-store')
        .header('Referrer-Policy', 'no-referrer')
        .send(page);
    });
}
