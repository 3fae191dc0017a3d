// The live stream of a job's events (Server-Sent Events): the hub that fans each job's new
// events out to the streams open on this process (hub.ts), the API's events route, whose list
// and stream share one path (route.ts), and the dashboard job page's live lines
// (page-routes.ts). What the rest of Errand may use of it is here; src/service.ts wires it in.
import type { AppContext } from '../../context.ts';
import type { DashboardPages } from '../../dashboard/plugin.ts';
import type { ApiRoutes } from '../../http/app.ts';
import { EventStreams } from './hub.ts';
import { registerLiveLines } from './page-routes.ts';
import { registerEventsRoute } from './route.ts';

/** The live stream's routes and pages, which share one hub. */
export interface LiveStream {
  /** GET /v2/agent/{projectId}/job/{id}/events; its streams end first when the server stops. */
  routes: ApiRoutes;
  /** The job page's live lines, GET /projects/:id/jobs/:jobId/events. */
  pages: DashboardPages;
}

/**
 * The live stream of an API process, on a hub of its own: the events route and the job page
 * share it, so that a key's limit of open streams counts both, and the metrics show what its
 * streams' sockets have not sent yet.
 */
export function liveStream(ctx: AppContext): LiveStream {
  const hub = new EventStreams(ctx);
  ctx.metrics.sample(async () => {
    ctx.metrics.eventStreamBuffered.set(hub.bufferedBytes());
  });
  return {
    routes: {
      project: (scope, routeCtx) => registerEventsRoute(scope, routeCtx, hub),
      close: () => hub.close(),
    },
    pages: (signedIn, pageCtx) => registerLiveLines(signedIn, pageCtx, hub),
  };
}
