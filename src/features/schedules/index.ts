// Schedules: a project's recurring prompts, each firing a job through the job core's createJob,
// at most one per occurrence across every process (pg-boss's scheduler, and a claim per firing).
// The admin API, the worker and the dashboard's pages; src/service.ts wires them in.
import type { DashboardPages } from '../../dashboard/plugin.ts';
import type { ApiRoutes } from '../../http/app.ts';
import { registerSchedulePages } from './page-routes.ts';
import { registerScheduleRoutes } from './routes.ts';

export { type ScheduleWorker, startScheduleWorker } from './worker.ts';

/** The admin API's endpoints under /v2/admin/projects/{projectId}/schedules. */
export const scheduleRoutes: ApiRoutes = { admin: registerScheduleRoutes };

/** The dashboard's page under /projects/:id/schedules. */
export const schedulePages: DashboardPages = registerSchedulePages;
