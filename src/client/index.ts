// errand/client: the typed client of Errand's job API, for other Node projects (built to
// dist/client/ by `npm run build:client`) and for Errand's own CLI and MCP server.
export {
  type CallOptions,
  type ClientOptions,
  type CreateJobInput,
  ErrandClient,
  type EventsOptions,
  type Job,
  type JobEvent,
  type JobStatus,
  TERMINAL_STATUSES,
  type WaitOptions,
} from './client.ts';
export { ErrandError } from './errors.ts';
export type { components, paths } from './openapi.ts';
