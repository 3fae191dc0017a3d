// Forge intake: webhooks in from GitHub, GitLab and Gitea/Forgejo. The route takes a signed
// request (route.ts, receive.ts), each forge's payloads are read into ForgeEvents (payloads/),
// recorded and queued; the worker turns them into jobs and follow-ups and answers on the forge
// (worker.ts, intake.ts); the admin sets it up through the secret route and the dashboard's
// page. What the rest of Errand may use of it is here; src/service.ts wires it in.
import type { DashboardPages } from '../../dashboard/plugin.ts';
import type { ApiRoutes } from '../../http/app.ts';
import { registerForgeWebhookPages } from './page-routes.ts';
import { registerForgeWebhook } from './route.ts';
import { registerForgeWebhookSecret } from './secret-route.ts';

export { forgetForgeEvents } from './records.ts';
export { forgetRefusals } from './refusals.ts';
export { type ForgeWorker, startForgeWorker } from './worker.ts';

/**
 * POST /v2/forges/{projectId}/webhook, which no API key opens (the forge's signature does), and
 * the admin's POST /v2/admin/projects/{id}/forge-webhook-secret.
 */
export const forgeIntakeRoutes: ApiRoutes = {
  open: registerForgeWebhook,
  admin: registerForgeWebhookSecret,
};

/** The dashboard's page of a project's forge webhook (its events, its secret). */
export const forgeIntakePages: DashboardPages = registerForgeWebhookPages;
