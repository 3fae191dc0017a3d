// A turn's images on the dashboard (docs/images.md): the job page shows them, and this route
// serves their bytes to whoever may read the job, as their stored type (read from the bytes when
// they arrived, never as a client said), under a policy that lets a browser only show them.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.ts';
import { AppError } from '../errors.ts';
import { readAttachment } from '../jobs/attachments.ts';
import { getJob } from '../jobs/service.ts';
import { access } from '../keys/route-access.ts';
import { visibleProject } from './requests.ts';

/** Where the dashboard serves image `n` of turn `seq` of a job. */
export function imagePath(projectId: string, jobId: string, seq: number, n: number): string {
  return `/projects/${projectId}/jobs/${jobId}/turns/${seq}/images/${n}`;
}

const POSITIVE = /^[1-9][0-9]{0,5}$/;

export function registerJobImages(pages: FastifyInstance, ctx: AppContext): void {
  pages.get<{ Params: { id: string; jobId: string; seq: string; n: string } }>(
    '/projects/:id/jobs/:jobId/turns/:seq/images/:n',
    { config: access('viewer') },
    async (request, reply) => {
      const { id, jobId, seq, n } = request.params;
      const { row } = await visibleProject(ctx, request, id);
      // The job's own check: another project's job is not found here.
      const job = await getJob(ctx, row.id, jobId);
      const image =
        POSITIVE.test(seq) && POSITIVE.test(n)
          ? await readAttachment(ctx, job.id, Number(seq), Number(n))
          : undefined;
      if (!image) throw new AppError('not_found', `job ${job.id} has no image ${n} in turn ${seq}`);
      return reply
        .header('content-type', image.mediaType)
        .header('content-length', image.data.length)
        .header('content-security-policy', "default-src 'none'; sandbox")
        .header('x-content-type-options', 'nosniff')
        .header('content-disposition', `inline; filename="turn-${seq}-image-${n}"`)
        .header('cache-control', 'private, no-store')
        .send(image.data);
    },
  );
}
