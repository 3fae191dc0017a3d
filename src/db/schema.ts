// Row types of Errand's tables, as Kysely sees them (no code generation: kept by hand,
// next to the numbered migrations that define them).
import type { ColumnType, Generated, Selectable } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json = ColumnType<unknown, string | undefined, string>;

/** A job's status: the column of the job record's list (src/records/job.ts, which checks it). */
export type JobStatus = 'active' | 'completed' | 'failed' | 'archived';
type TurnState = 'queued' | 'running' | 'done' | 'failed' | 'cancelled';

export interface ProjectsTable {
  id: string;
  name: string;
  repository: string;
  ref: string;
  model: string | null;
  forge_kind: 'github' | 'gitlab' | 'gitea' | 'git' | null;
  forge_api_url: string | null;
  forge_token_env: string | null;
  forge_secret: string | null;
  draft_pull_requests: Generated<boolean>;
  commands_enabled: Generated<boolean>;
  setup_command: string | null;
  /** Run after an environment is restored instead of the setup (migration 0023); null: none. */
  maintenance_command: string | null;
  /** Globs of the files whose content keys an environment; null: the common lock files. */
  environment_key_files: string[] | null;
  /** The network policy (src/projects/network.ts, migration 0022). */
  network_setup: Generated<'none' | 'allowlist' | 'open'>;
  network_commands: Generated<'none' | 'allowlist'>;
  /** The allowlist's patterns as given (a preset's hosts are read when a run starts). */
  network_allow: Generated<string[]>;
  /** The command limits; null: DEFAULT_LIMITS (projects/limits.ts). */
  command_timeout_seconds: number | null;
  command_cpu_seconds: number | null;
  command_memory_mb: number | null;
  command_processes: number | null;
  command_file_size_mb: number | null;
  command_disk_mb: number | null;
  /** What all turns of one job may cost, in US dollars; null: no budget. */
  job_budget_usd: number | null;
  /** What the project's jobs may cost in a calendar month (UTC), in US dollars; null: none. */
  monthly_budget_usd: number | null;
  /** The secret the forge signs webhook deliveries with, sealed (secrets/box.ts); null: none. */
  forge_webhook_secret: string | null;
  /** The handle a forge comment mentions to reach Errand, without the @. */
  forge_handle: Generated<string>;
  /** The label that makes a forge issue a job. */
  forge_label: Generated<string>;
  /** The agent that runs the project's turns (src/projects/engine.ts's ENGINE_NAMES). */
  engine: Generated<EngineColumn>;
  /** Turns in a row that may try to fix a pull request's failing checks (migration 0029); 0: none. */
  autofix_attempts: Generated<number>;
  /** Globs of the check names the pull request watch acts on; null: every check. */
  autofix_checks: string[] | null;
  auto_merge: Generated<'off' | 'green' | 'green-and-approved'>;
  merge_method: Generated<'merge' | 'squash' | 'rebase'>;
  /** How a turn brings a pull request that conflicts with its base up to it. */
  conflict_strategy: Generated<'merge' | 'rebase'>;
  /** The MCP servers its turns get (migration 0032, docs/mcp-servers.md); null: none. */
  mcp_servers: ColumnType<McpServers | null, string | null | undefined, string | null>;
  /** The command that judges best-of-N attempts (migration 0033, docs/eval.md); null: none. */
  check_command: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

interface ApiKeysTable {
  id: string;
  project_id: string | null;
  name: string | null;
  start: string;
  hash: string;
  created_at: Timestamp;
  last_used_at: Timestamp | null;
  revoked_at: Timestamp | null;
}

interface JobsTable {
  id: string;
  project_id: string;
  status: JobStatus;
  repository: string;
  ref: string;
  branch: string;
  model: string;
  pr_link: string | null;
  pr_number: number | null;
  error: string | null;
  turn_count: number;
  review_diff: string | null;
  review_diff_truncated: Generated<boolean>;
  /** The capability in the job's review link (jobs/review-link.ts); random, made by the database. */
  review_token: Generated<string>;
  /** The sum of its turns' usage (a Usage of jobs/usage.ts), kept by the lifecycle. */
  usage: Json;
  /** The forge issue the job came from (a JobOrigin); null for jobs made otherwise. */
  origin: ColumnType<JobOrigin | null, string | null | undefined, string | null>;
  /** Who created the job (an Actor, src/records/actor.ts); null for jobs older than 0027. */
  created_by: ColumnType<Actor | null, string | null | undefined, string | null>;
  /** What the forge last said of its pull request (a PrRecord, src/records/pr.ts); null before. */
  pr: ColumnType<StoredPr | null, string | null | undefined, string | null>;
  /** The mode of its last turn (migration 0030). */
  mode: ColumnType<TurnMode, TurnMode | undefined, TurnMode>;
  /** The summary of its last finished turn: an ask turn's answer, a plan turn's plan. */
  summary: string | null;
  /** Its last turn was a plan that finished and no turn came after it. */
  awaiting_approval: Generated<boolean>;
  /** The structured output of its last finished turn that was asked for one (migration 0032). */
  output: ColumnType<unknown, string | null | undefined, string | null>;
  /** The MCP servers its create added to the project's (migration 0032); null: none. */
  mcp_servers: ColumnType<McpServers | null, string | null | undefined, string | null>;
  /** The check command its create gave instead of the project's (migration 0033); null: none. */
  check_command: string | null;
  /** What its last best-of-N turn's attempts did (AttemptResult[]); null: it made none. */
  attempts: ColumnType<AttemptResult[] | null, string | null | undefined, string | null>;
  /** The eval run the job is a task of (src/features/eval/); null: the project's own work. */
  eval_run_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  archived_at: Timestamp | null;
}

/**
 * Who did something (jobs.created_by, turns.sent_by, audit_log.actor): a user, an API key, or
 * a forge's user through the forge webhook. The record's schema is src/records/actor.ts's.
 */
export type Actor =
  | { kind: 'user'; id: string; name?: string | null | undefined }
  | { kind: 'key'; id: string; name?: string | null | undefined }
  | { kind: 'forge'; forge: 'github' | 'gitlab' | 'gitea'; login: string }
  | { kind: 'schedule'; id: string; name?: string | null | undefined };

/**
 * The attempts a turn makes at once (turns.best_of, docs/eval.md): `count` of them, attempt i
 * taking `agents[(i - 1) % agents.length]`; an agent's missing engine or model is the job's.
 */
export interface BestOf {
  count: number;
  agents: { engine?: EngineColumn | undefined; model?: string | undefined }[];
}

type EngineColumn = 'errand' | 'claude-code' | 'codex' | 'opencode';

/**
 * What one attempt of a best-of-N turn did (jobs.attempts): the job record's `attempts`, whose
 * schema (src/records/attempt.ts) checks that it has this shape.
 */
export interface AttemptResult {
  /** Its number, from 1. */
  n: number;
  engine: EngineColumn;
  model: string;
  /** The branch it worked on (pushed when it committed). */
  branch: string;
  /** passed/failed: its check's verdict; unchecked: no check command; error: it did not finish. */
  outcome: 'passed' | 'failed' | 'unchecked' | 'no_changes' | 'error';
  /** Its check's exit code and last lines of output; null when no check ran. */
  check: { exitCode: number | null; outputTail: string; durationMs: number } | null;
  costUsd: number | null;
  /** What its commit changed against the turn's start. */
  diff: { files: number; lines: number };
  commitSha: string | null;
  /** Why it did not finish, for an error. */
  error: string | null;
  /** Its changes became the job's branch and pull request. */
  winner: boolean;
}

/** The forge issue a job was made from (jobs.origin). */
export interface JobOrigin {
  forge: 'github' | 'gitlab' | 'gitea';
  /** GitHub/Gitea issue number, GitLab issue iid. */
  number: number;
  url: string;
  title: string;
}

interface TurnsTable {
  job_id: string;
  seq: number;
  prompt: string;
  state: TurnState;
  queue_id: string | null;
  attempts: Generated<number>;
  summary: string | null;
  error: string | null;
  usage: Json | null;
  messages: Json | null;
  commit_sha: string | null;
  /** The forge event that asked for the turn (a TurnTrigger); null for the API's and the CLI's. */
  trigger: ColumnType<TurnTrigger | null, string | null | undefined, string | null>;
  /** Who sent the turn's prompt (an Actor); null for turns older than migration 0027. */
  sent_by: ColumnType<Actor | null, string | null | undefined, string | null>;
  /** Why Errand queued the turn itself (the pull request watch); null for a turn someone asked. */
  purpose: ColumnType<TurnPurpose | null, TurnPurpose | null | undefined, TurnPurpose | null>;
  /** What the turn may do (migration 0030): change the repository, answer, or plan. */
  mode: ColumnType<TurnMode, TurnMode | undefined, TurnMode>;
  /** The JSON Schema its answer must satisfy (migration 0032); null: a free-text summary only. */
  output_schema: ColumnType<unknown, string | null | undefined, string | null>;
  /** The value it produced against output_schema, once it finished. */
  output: ColumnType<unknown, string | null | undefined, string | null>;
  /** The attempts it was asked to make (migration 0033); null: one, the usual way. */
  best_of: ColumnType<BestOf | null, string | null | undefined, string | null>;
  created_at: Timestamp;
  started_at: Timestamp | null;
  finished_at: Timestamp | null;
}

/**
 * The forge event that asked for a turn (turns.trigger): what the job's events show of it
 * (forge, kind, url, author), its delivery id and its event's key (the event delivered again
 * accepts its turn once), and where Errand answers when the turn ends, which only the forge intake reads.
 */
export interface TurnTrigger {
  forge: 'github' | 'gitlab' | 'gitea';
  delivery: string;
  /**
   * The event's signed identity (ForgeEvent.key): the event coming again, under any delivery
   * id, finds this turn. Absent on turns accepted before Errand recorded it.
   */
  event?: string;
  /** `comment`, `line comment`, `review` or `label`. */
  kind: string;
  /** The comment's page, or the for a label. */
  url: string;
  /** The forge login of who wrote the comment or added the label. */
  author: string;
  replyTo: Record<string, unknown>;
}

/**
 * What the forge last said of a job's pull request (jobs.pr): the job record's `pr`, whose
 * schema (src/records/pr.ts) checks that it has this shape.
 */
export interface StoredPr {
  number: number;
  url: string;
  state: 'open' | 'closed' | 'merged';
  mergedAt: string | null;
  headSha: string;
  mergeable: boolean | null;
  approved: boolean;
  checks: { name: string; state: 'pending' | 'success' | 'failure'; url: string | null }[];
  watch: { state: 'watching' | 'paused' | 'ended'; reason: string | null; autofixes: number };
  observedAt: string;
}

/** Why the pull request watch queued a turn: its checks failed, or it conflicts with its base. */
export type TurnPurpose = 'autofix' | 'conflict';

/** A turn's mode (src/records/job.ts's JOB_MODES, docs/modes.md). */
export type TurnMode = 'code' | 'ask' | 'plan';

/** The pull request watch's own state of a job (migration 0029, src/features/pr-watch/). */
interface PrWatchesTable {
  job_id: string;
  state: Generated<'watching' | 'paused' | 'ended'>;
  reason: string | null;
  autofixes: Generated<number>;
  failed_sha: string | null;
  unmergeable_sha: string | null;
  conflict_sha: string | null;
  merge_sha: string | null;
  next_at: Generated<Date>;
  nudged_at: Generated<Date>;
  claimed_at: Date | null;
  claimed_until: Date | null;
  observed_at: Date | null;
  created_at: Generated<Date>;
}

/** Forge replies already made for a turn (src/features/forge-intake/intake.ts). */
interface ForgeRepliesTable {
  job_id: string;
  seq: number;
  kind: 'accepted' | 'ended';
  at: Generated<Date>;
}

/** Threads where someone without write access was told so, once (src/features/forge-intake/). */
interface ForgeRefusalsTable {
  project_id: string;
  thread: string;
  at: Generated<Date>;
}

interface EventsTable {
  seq: ColumnType<string, never, never>;
  job_id: string;
  turn: number | null;
  type: string;
  data: Json;
  at: Timestamp;
}

/** A bigint with a default: PostgreSQL's driver gives it as a string. */
type Count = ColumnType<string, string | number | undefined, string | number>;

/** A project's usage in one calendar month (UTC), kept by the lifecycle (jobs/spend.ts). */
interface ProjectSpendTable {
  project_id: string;
  /** The month's first day. */
  month: ColumnType<Date, string, string>;
  input_tokens: Count;
  output_tokens: Count;
  cache_read_tokens: Count;
  cache_write_tokens: Count;
  /** The cost of the usage whose price was known. */
  cost_usd: Generated<number>;
  /** How many turn attempts' usage had no known cost. */
  unpriced: Generated<number>;
}

interface RateLimitsTable {
  project_id: string;
  operation: string;
  window_start: Timestamp;
  count: number;
}

interface DashboardSessionsTable {
  /** SHA-256 of the cookie's random id; the id itself is never stored. */
  hash: string;
  /** The key signed in with, or null for a user's session (exactly one of the two is set). */
  key_id: string | null;
  user_id: string | null;
  created_at: Timestamp;
  last_seen_at: Timestamp;
  /** The session's hard end (7 days after sign-in); idle expiry is read from last_seen_at. */
  expires_at: Timestamp;
}

interface UsersTable {
  id: string;
  /** The OpenID provider's issuer and the user's subject there: who the user is. */
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
  /** The provider's groups claim at the last sign-in. */
  groups: ColumnType<string[], string[] | undefined, string[]>;
  admin: Generated<boolean>;
  created_at: Timestamp;
  last_seen_at: Timestamp | null;
  deactivated_at: Timestamp | null;
}

/** A project's role, given to a user or to a group of the provider's groups claim. */
export type ProjectRole = 'maintainer' | 'member' | 'viewer';

interface ProjectRolesTable {
  project_id: string;
  grantee_kind: 'user' | 'group';
  /** A user's id or a group's name. */
  grantee: string;
  role: ProjectRole;
  created_at: Timestamp;
}

/** A user's personal API token (src/users/tokens.ts): only its hash is kept. */
interface UserTokensTable {
  id: string;
  user_id: string;
  name: string;
  start: string;
  hash: string;
  /** null: every project the user has a role on. */
  project_ids: string[] | null;
  read_only: boolean;
  created_at: Timestamp;
  expires_at: Timestamp;
  last_used_at: Timestamp | null;
  revoked_at: Timestamp | null;
}

/** One row of the append-only audit log (src/audit/audit.ts, migration 0027). */
interface AuditLogTable {
  seq: Generated<string>;
  at: Generated<Date>;
  actor: ColumnType<Actor | null, string | null, never>;
  address: string | null;
  action: string;
  target_kind: string | null;
  target_id: string | null;
  outcome: 'success' | 'refused';
  error_code: string | null;
  request_id: string | null;
  details: ColumnType<Record<string, unknown>, string, never>;
}

interface WebhooksTable {
  id: string;
  project_id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: Generated<boolean>;
  /** Sealed with ERRAND_SECRET_KEY (secrets/box.ts). */
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: Timestamp | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type DeliveryState = 'pending' | 'delivered' | 'failed';

interface WebhookDeliveriesTable {
  id: string;
  webhook_id: string;
  job_id: string;
  event_seq: ColumnType<string, string | number, string | number>;
  type: string;
  payload: Json;
  state: DeliveryState;
  attempts: Generated<number>;
  created_at: Timestamp;
  delivered_at: Timestamp | null;
  failed_at: Timestamp | null;
}

interface WebhookAttemptsTable {
  delivery_id: string;
  attempt: number;
  at: Timestamp;
  status: number | null;
  error: string | null;
  latency_ms: number;
}

/** What became of a forge event Errand was sent, by the event's signed identity (src/features/forge-intake/records.ts). */
export type ForgeEventOutcome = 'queued' | 'accepted' | 'ignored' | 'refused' | 'failed';

/**
 * A forge event taken from a webhook delivery, once per signed identity (`key`): a delivery of
 * it again is counted in `repeats`, not queued.
 */
interface ForgeEventsTable {
  project_id: string;
  key: string;
  delivery_id: string;
  last_delivery_id: string | null;
  forge: 'github' | 'gitlab' | 'gitea';
  kind: string;
  thread_kind: 'issue' | 'pull-request';
  thread_number: number;
  author: string;
  url: string;
  received_at: Generated<Date>;
  repeats: Generated<number>;
  outcome: ColumnType<ForgeEventOutcome, ForgeEventOutcome | undefined, ForgeEventOutcome>;
  reason: string | null;
  job_id: string | null;
  turn: number | null;
  decided_at: Date | null;
}

interface IdempotencyKeysTable {
  project_id: string;
  key: string;
  /** SHA-256 (hex) of the method, the path and the canonical JSON body of the first request. */
  fingerprint: string;
  status: number;
  /** The JSON text of the first response, as sent. */
  body: string;
  created_at: Timestamp;
}

/** A project's secret (projects/secrets.ts): its value sealed with the secret key. */
interface ProjectSecretsTable {
  project_id: string;
  name: string;
  sealed_value: string;
  exposure: Generated<'setup' | 'commands'>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** A snapshot of a project's environment kept by one worker (src/environments/, 0023). */
interface EnvironmentsTable {
  project_id: string;
  /** The snapshot's key: the setup, its network and secrets' names, and the key files' content. */
  key: string;
  /** The worker that keeps it (config.environments.worker). */
  worker: string;
  /** bigint: PostgreSQL's driver gives it as a string. */
  size_bytes: ColumnType<string, string | number, string | number>;
  files: number;
  build_ms: number;
  /** The commit the setup ran on. */
  base_commit: string;
  created_at: Timestamp;
  last_used_at: Timestamp;
}

/** A project's recurring prompt (migration 0031, src/features/schedules/). */
/**
 * An MCP server a job's turns may use (projects.mcp_servers, jobs.mcp_servers): a command run in
 * the job's sandbox (stdio), or a remote server the service calls. Values may name project
 * secrets as ${secret:NAME}; they are opened only when a turn runs.
 */
export type McpServerConfig =
  | { command: string; args?: string[] | undefined; env?: Record<string, string> | undefined }
  | { url: string; headers?: Record<string, string> | undefined };

/** MCP servers by name (the name prefixes their tools: `name__tool`). */
export type McpServers = Record<string, McpServerConfig>;

/** An image given with a turn (migration 0032): up to five per turn. */
interface AttachmentsTable {
  job_id: string;
  seq: number;
  /** Its place among the turn's images, from 1. */
  n: number;
  media_type: AttachmentMediaType;
  size: number;
  data: Buffer;
  /** The https URL it was fetched from; null for one sent inline. */
  source: string | null;
}

/** The image types a turn may carry. */
export type AttachmentMediaType = 'image/png' | 'image/jpeg' | 'image/webp' | 'image/gif';

interface SchedulesTable {
  id: string;
  project_id: string;
  name: string;
  cron: string;
  timezone: string;
  prompt: string;
  mode: 'code' | 'ask' | 'plan';
  model: string | null;
  paused: Generated<boolean>;
  created_by: ColumnType<Actor | null, string | null | undefined, string | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
  last_fired_at: Timestamp | null;
  last_job_id: string | null;
  last_error: string | null;
}

/** One firing of a schedule, claimed by the queue entry that carried it. */
interface ScheduleFiringsTable {
  entry_id: string;
  schedule_id: string;
  fired_at: Timestamp;
  job_id: string | null;
  error: string | null;
}

/** An eval run (migration 0033, src/features/eval/). */
interface EvalRunsTable {
  id: string;
  name: string;
  /** The suite as accepted, its defaults filled in (src/features/eval/suite.ts). */
  suite: Json;
  state: Generated<'running' | 'finished' | 'cancelled'>;
  created_by: ColumnType<Actor | null, string | null | undefined, string | null>;
  created_at: Generated<Date>;
  finished_at: Date | null;
}

/** One task × agent × repeat of an eval run: its job and its check's verdict. */
interface EvalResultsTable {
  run_id: string;
  /** Its place in the run: the suite's order of tasks, agents and repeats. */
  n: number;
  task: string;
  agent: string;
  repeat: number;
  project_id: string;
  job_id: string | null;
  state: Generated<'pending' | 'running' | 'passed' | 'failed' | 'error' | 'cancelled'>;
  check_exit: number | null;
  tail: string | null;
  cost_usd: number | null;
  duration_ms: number | null;
  steps: number | null;
  input_tokens: ColumnType<string | null, number | null | undefined, number | null>;
  output_tokens: ColumnType<string | null, number | null | undefined, number | null>;
  started_at: Date | null;
  finished_at: Date | null;
}

export interface Database {
  projects: ProjectsTable;
  api_keys: ApiKeysTable;
  jobs: JobsTable;
  turns: TurnsTable;
  events: EventsTable;
  rate_limits: RateLimitsTable;
  dashboard_sessions: DashboardSessionsTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  idempotency_keys: IdempotencyKeysTable;
  project_spend: ProjectSpendTable;
  forge_events: ForgeEventsTable;
  forge_replies: ForgeRepliesTable;
  pr_watches: PrWatchesTable;
  forge_refusals: ForgeRefusalsTable;
  project_secrets: ProjectSecretsTable;
  environments: EnvironmentsTable;
  users: UsersTable;
  project_roles: ProjectRolesTable;
  user_tokens: UserTokensTable;
  audit_log: AuditLogTable;
  schedules: SchedulesTable;
  attachments: AttachmentsTable;
  schedule_firings: ScheduleFiringsTable;
  eval_runs: EvalRunsTable;
  eval_results: EvalResultsTable;
}

export type ProjectRow = Selectable<ProjectsTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type JobRow = Selectable<JobsTable>;
export type TurnRow = Selectable<TurnsTable>;
export type EventRow = Selectable<EventsTable>;
export type WebhookRow = Selectable<WebhooksTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;
export type ProjectSecretRow = Selectable<ProjectSecretsTable>;
export type EnvironmentRow = Selectable<EnvironmentsTable>;
export type UserRow = Selectable<UsersTable>;
export type ProjectRoleRow = Selectable<ProjectRolesTable>;
export type UserTokenRow = Selectable<UserTokensTable>;
export type AuditLogRow = Selectable<AuditLogTable>;
export type ScheduleRow = Selectable<SchedulesTable>;
export type EvalRunRow = Selectable<EvalRunsTable>;
export type EvalResultRow = Selectable<EvalResultsTable>;
