// The dashboard's Evals pages under /evals: the runs the signed-in principal may read, a run's
// page, and its cancel button (a maintainer of each of its projects, as the admin API).
// Registered inside the dashboard's signed-in scope, so its session, Origin check and headers
// apply.
import type { FastifyInstance } from 'fastify';
import { whoOf } from '../../audit/audit.ts';
import type { AppContext } from '../../context.ts';
import { sendPage, session } from '../../dashboard/requests.ts';
import { access } from '../../keys/route-access.ts';
import { evalRunPage, evalsPage } from './pages.ts';
import { cancelRun, getRun, listRuns } from './store.ts';

type RunParams = { Params: { id: string } };

export function registerEvalPages(pages: FastifyInstance, ctx: AppContext): void {
  pages.get('/evals', { config: access('signed-in') }, async (request, reply) => {
    const principal = session(request);
    return sendPage(reply, 200, evalsPage(principal, await listRuns(ctx, principal)));
  });

  pages.get<RunParams>('/evals/:id', { config: access('signed-in') }, async (request, reply) => {
    const principal = session(request);
    return sendPage(
      reply,
      200,
      evalRunPage(principal, await getRun(ctx, principal, request.params.id)),
    );
  });

  pages.post<RunParams>(
    '/evals/:id/cancel',
    { config: access('signed-in') },
    async (request, reply) => {
      const principal = session(request);
      await cancelRun(ctx, principal, whoOf(request, principal), request.params.id);
      return reply.redirect(`/evals/${request.params.id}`, 303);
    },
  );
}
