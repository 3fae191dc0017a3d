// Eval runs (docs/eval.md): a suite's tasks × agents × repeats, each a real job of the job core,
// judged by the task's check; the admin API, the runner's worker and the dashboard's Evals
// pages. src/service.ts wires them in.
import type { DashboardPages } from '../../dashboard/plugin.ts';
import type { ApiRoutes } from '../../http/app.ts';
import { registerEvalPages } from './page-routes.ts';
import { registerEvalRoutes } from './routes.ts';

export { type EvalWorker, startEvalWorker } from './worker.ts';

/** The admin API's endpoints under /v2/admin/evals. */
export const evalRoutes: ApiRoutes = { admin: registerEvalRoutes };

/** The dashboard's pages under /evals. */
export const evalPages: DashboardPages = registerEvalPages;
