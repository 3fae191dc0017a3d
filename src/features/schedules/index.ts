// Schedules: a project's recurring prompts, each firing a job through the job core's createJob,
// at most one per occurrence across every process (pg-boss's scheduler, and a claim per firing).
// The admin API, the worker and the dashboard's pages; src/service.ts wires them in.
import type { ApiRoutes } from '../../http/app.ts';
import { registerScheduleRoutes } from './routes.ts';

export { type ScheduleWorker, startScheduleWorker } from './worker.ts';

/** The admin API's endpoints under /v2/admin/projects/{projectId}/schedules. */
export const scheduleRoutes: ApiRoutes = { admin: registerScheduleRoutes };
