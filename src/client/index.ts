// errand/client: the typed client of Errand's API (jobs, and projects, keys, webhooks, secrets
// and environments with an admin key), for other Node projects (built to dist/client/ by `npm
// run build:client`) and for Errand's own CLI and MCP server.
export {
  type ApiKey,
  type CallOptions,
  type ClientOptions,
  type Clock,
  type CreateApiKeyInput,
  type CreatedApiKey,
  type CreateJobInput,
  type CreateProjectInput,
  type CreateWebhookInput,
  type Delivery,
  type DeliveryPage,
  type Environment,
  ErrandClient,
  type EventsOptions,
  type ForgeWebhookSecret,
  type Job,
  type JobEvent,
  type JobEventPage,
  type JobMode,
  type JobStatus,
  type Project,
  type Secret,
  type SecretExposure,
  type SetSecretInput,
  type StreamOptions,
  TERMINAL_STATUSES,
  type UpdateProjectInput,
  type UpdateWebhookInput,
  type WaitOptions,
  type Webhook,
  type WebhookEventType,
  type WebhookWithSecret,
} from './client.ts';
export { ErrandError } from './errors.ts';
export type { components, paths } from './openapi.ts';
