// Webhooks out: a project's endpoints, the outbox that turns a job's events into deliveries,
// the worker that sends them signed, and the admin API and dashboard pages over them. What the
// rest of Errand may use of it is here; src/service.ts wires it in (and the CLI's import
// requeues what an export left pending). The queue the deliveries ride on is src/queue/'s.
import type { DashboardPages } from '../../dashboard/plugin.ts';
import type { ApiRoutes } from '../../http/app.ts';
import { registerWebhookPages } from './page-routes.ts';
import { registerWebhookRoutes } from './routes.ts';

// The address rules: other features that reach a URL a user gave (MCP servers) follow them too.
export {
  bareHost,
  checkedLookup,
  type Resolve,
  resolveAll,
  resolveSafe,
  UnsafeTargetError,
} from './address.ts';
export { requeuePendingDeliveries, webhookOutbox } from './outbox.ts';
export { type DeliveryWorker, startDeliveryWorker } from './worker.ts';

/** The admin API's endpoints under /v2/admin/projects/{projectId}/webhooks. */
export const webhookRoutes: ApiRoutes = { admin: registerWebhookRoutes };

/** The dashboard's pages under /projects/:id/webhooks. */
export const webhookPages: DashboardPages = registerWebhookPages;
