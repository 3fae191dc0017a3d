// ErrandClient: Errand's API as typed calls, for Node programs; the CLI and the MCP server use
// it too. createJob, sendMessage, getJob and waitForJob use only the published Agent Job
// Service operations, so they work against any service of that interface; the rest (listJobs,
// archiveJob, events, and the admin calls, which need an admin key) are Errand's. Global fetch
// only: no dependency, nothing outside src/client/ (the package's build of errand/client
// enforces it).

import { ErrandError } from './errors.ts';
import { pollJob, streamEvents } from './follow.ts';
import {
  type ApiKey,
  type Attachment,
  type CreateApiKeyInput,
  type CreatedApiKey,
  type CreateJobInput,
  type CreateProjectInput,
  type CreateScheduleInput,
  type CreateWebhookInput,
  checkEnvironment,
  checkEvalRun,
  checkEvent,
  checkForgeIssue,
  checkJob,
  checkList,
  checkRecord,
  checkSecret,
  type Delivery,
  type DeliveryPage,
  type Environment,
  type EvalRun,
  type EvalRunSummary,
  type EvalSuite,
  type ForgeIssue,
  type ForgeWebhookSecret,
  isRecord,
  type Job,
  type JobEvent,
  type JobMode,
  type JobStatus,
  notA,
  type OutputSchema,
  type Project,
  type Schedule,
  type Secret,
  type SendMessageInput,
  type SetSecretInput,
  type UpdateProjectInput,
  type UpdateScheduleInput,
  type UpdateWebhookInput,
  type Webhook,
  type WebhookWithSecret,
} from './records.ts';
import { type CallInit, type ClientOptions, Transport } from './transport.ts';

export type {
  ApiKey,
  Attachment,
  CreateApiKeyInput,
  CreatedApiKey,
  CreateJobInput,
  CreateProjectInput,
  CreateScheduleInput,
  CreateWebhookInput,
  Delivery,
  DeliveryPage,
  Environment,
  EvalAgentSpec,
  EvalAgentSummary,
  EvalResult,
  EvalResultState,
  EvalRun,
  EvalRunSummary,
  EvalSuite,
  EvalTask,
  ForgeIssue,
  ForgeWebhookSecret,
  Job,
  JobEvent,
  JobEventPage,
  JobMode,
  JobStatus,
  OutputSchema,
  Project,
  Schedule,
  Secret,
  SecretExposure,
  SendMessageInput,
  SetSecretInput,
  UpdateProjectInput,
  UpdateScheduleInput,
  UpdateWebhookInput,
  Webhook,
  WebhookEventType,
  WebhookWithSecret,
} from './records.ts';
export { TERMINAL_STATUSES } from './records.ts';
export type { ClientOptions, Clock } from './transport.ts';

export interface CallOptions {
  projectId?: string;
  signal?: AbortSignal;
}

export interface WaitOptions extends CallOptions {
  /** Give up (ErrandError code `timeout`) after this long; no limit by default. */
  timeoutMs?: number;
  /** Called with the job when first read and each time it changes. */
  onChange?: (job: Job) => void;
}

export interface EventsOptions extends CallOptions {
  /** Start after this seq (0: from the beginning). */
  after?: number;
}

export interface StreamOptions extends EventsOptions {
  /**
   * How long to wait before opening a dropped stream again: `firstMs`, doubled after each
   * attempt in a row that fails, up to `maxMs` (default 500 and 5000 ms); a Retry-After from
   * Errand wins.
   */
  retryDelay?: { firstMs: number; maxMs: number };
}

/** The most events one page of the log holds. */
const EVENT_PAGE = 500;

export class ErrandClient {
  readonly #http: Transport;
  readonly #projectId: string | undefined;

  constructor(options: ClientOptions) {
    this.#http = new Transport(options);
    this.#projectId = options.projectId;
  }

  // ---- Jobs (a project key, or an admin key) ------------------------------------------------

  /** Creates a job; the agent works in the background (poll it, or waitForJob). */
  async createJob(
    input: {
      prompt: string;
      model?: string;
      baseRef?: string;
      mode?: JobMode;
      /** A JSON Schema the turn's answer must satisfy: the job's `output` (docs/structured-output.md). */
      outputSchema?: OutputSchema;
      /** Up to 5 images for the model: `{ data: base64 }` or `{ url }` (docs/images.md). */
      attachments?: Attachment[];
      /** MCP servers for this job besides the project's (docs/mcp-servers.md). */
      mcpServers?: CreateJobInput['mcpServers'];
      /**
       * Best-of-N (docs/eval.md): `{ count: 1..4, agents?: [{ engine?, model? }] }` attempts at
       * once, the winner judged by the check command; the job's `attempts` lists them.
       */
      attempts?: CreateJobInput['attempts'];
      /** The command that judges the attempts instead of the project's `checkCommand`. */
      checkCommand?: string;
    },
    options: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<Job> {
    const body: CreateJobInput = { prompt: input.prompt };
    if (input.model !== undefined) body.model = input.model;
    if (input.baseRef !== undefined) body.baseRef = input.baseRef;
    if (input.mode !== undefined) body.mode = input.mode;
    if (input.outputSchema !== undefined) body.outputSchema = input.outputSchema;
    if (input.attachments !== undefined) body.attachments = input.attachments;
    if (input.mcpServers !== undefined) body.mcpServers = input.mcpServers;
    if (input.attempts !== undefined) body.attempts = input.attempts;
    if (input.checkCommand !== undefined) body.checkCommand = input.checkCommand;
    return this.#job(this.#projectPath(options), 'createJob', {
      method: 'POST',
      body,
      headers: idempotency(options.idempotencyKey),
      signal: options.signal,
    });
  }

  /**
   * Sends a follow-up prompt; the job becomes active again. `mode`: what the turn may do (else
   * code, which after a plan carries it out). `outputSchema`: the JSON Schema this turn's
   * answer must satisfy (docs/structured-output.md); `attachments`: its images (docs/images.md).
   */
  async sendMessage(
    jobId: string,
    prompt: string,
    options: CallOptions & {
      idempotencyKey?: string;
      mode?: JobMode;
      outputSchema?: OutputSchema;
      attachments?: Attachment[];
    } = {},
  ): Promise<Job> {
    const body: SendMessageInput = { prompt };
    if (options.mode !== undefined) body.mode = options.mode;
    if (options.outputSchema !== undefined) body.outputSchema = options.outputSchema;
    if (options.attachments !== undefined) body.attachments = options.attachments;
    return this.#job(`${this.#jobPath(jobId, options)}/message`, 'sendMessage', {
      method: 'POST',
      body,
      headers: idempotency(options.idempotencyKey),
      signal: options.signal,
    });
  }

  async getJob(jobId: string, options: CallOptions = {}): Promise<Job> {
    return this.#job(this.#jobPath(jobId, options), 'getJob', {
      method: 'GET',
      signal: options.signal,
    });
  }

  /** Approves a job's plan (its last turn, in plan mode): a turn carries it out. */
  approvePlan(
    jobId: string,
    options: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<Job> {
    return this.sendMessage(jobId, 'approve', options);
  }

  /** The project's jobs, newest first, read a page at a time as the loop asks for more. */
  async *listJobs(
    options: CallOptions & { status?: JobStatus; pageSize?: number } = {},
  ): AsyncGenerator<Job, void, undefined> {
    const base = `/v2/agent/${encodeURIComponent(this.#project(options))}/jobs`;
    let cursor: string | null = null;
    do {
      const query = new URLSearchParams();
      if (options.pageSize !== undefined) query.set('limit', String(options.pageSize));
      if (options.status !== undefined) query.set('status', options.status);
      if (cursor !== null) query.set('cursor', cursor);
      const { value, status } = await this.#http.call(`${base}?${query}`, {
        method: 'GET',
        signal: options.signal,
        what: 'listJobs',
      });
      if (!isRecord(value) || !Array.isArray(value.jobs))
        throw new ErrandError('listJobs: the answer is not a page of jobs', {
          code: 'invalid_response',
          status,
        });
      for (const job of value.jobs) yield checkJob(job, 'listJobs', status);
      cursor = typeof value.nextCursor === 'string' ? value.nextCursor : null;
    } while (cursor !== null);
  }

  /** Archives the job (terminal): queued turns are cancelled, a running one stopped. */
  async archiveJob(jobId: string, options: CallOptions = {}): Promise<Job> {
    return this.#job(`${this.#jobPath(jobId, options)}/archive`, 'archiveJob', {
      method: 'POST',
      signal: options.signal,
    });
  }

  /**
   * The job's progress log as it is now, in order, read a page at a time as the loop asks for
   * more; it ends at the last event written (`events` follows on as new ones come).
   */
  async *listEvents(
    jobId: string,
    options: EventsOptions = {},
  ): AsyncGenerator<JobEvent, void, undefined> {
    const path = `${this.#jobPath(jobId, options)}/events`;
    let after = options.after ?? 0;
    for (;;) {
      const { value, status } = await this.#http.call(
        `${path}?after=${after}&limit=${EVENT_PAGE}`,
        { method: 'GET', signal: options.signal, what: 'listEvents' },
      );
      if (!isRecord(value) || !Array.isArray(value.events))
        throw new ErrandError('listEvents: the answer is not a page of events', {
          code: 'invalid_response',
          status,
        });
      const events = value.events.map((e: unknown) =>
        checkEvent(e, status, 'listEvents: an event of the page'),
      );
      const last = events.at(-1);
      if (last === undefined) return;
      yield* events;
      after = typeof value.nextAfter === 'number' ? value.nextAfter : last.seq;
    }
  }

  /**
   * The live stream; resumes after a dropped connection (Last-Event-ID), ends when the server
   * ends it (terminal) or the signal aborts.
   *
   * Each event is yielded once, in seq order: a reconnection asks for the events after the
   * last one seen. A stream that ends without a terminal event (a server restarting, say) is
   * opened again; a 204 (nothing left of a terminal job) ends the loop. Aborting ends the loop
   * without an error; an answer that is not a stream (404, 401…) throws.
   */
  async *events(
    jobId: string,
    options: StreamOptions = {},
  ): AsyncGenerator<JobEvent, void, undefined> {
    yield* streamEvents(this.#http, `${this.#jobPath(jobId, options)}/events`, jobId, options);
  }

  /**
   * Polls GET with If-None-Match, backs off, honours Retry-After; resolves on
   * completed/failed/archived.
   *
   * Waits 0.5 s after a change, doubling to 5 s while nothing changes (a 304, or the same
   * record from a server that ignores If-None-Match). A 429 or 503 waits as long as its
   * Retry-After says; a lost connection is retried once the job has been read. Rejects with
   * code `timeout` after timeoutMs, and with the signal's reason when it aborts.
   */
  async waitForJob(jobId: string, options: WaitOptions = {}): Promise<Job> {
    return pollJob(this.#http, this.#jobPath(jobId, options), jobId, options);
  }

  // ---- Projects and keys (an admin key) ----------------------------------------------------

  async listProjects(options: CallOptions = {}): Promise<Project[]> {
    const { value, status } = await this.#http.call('/v2/admin/projects', {
      method: 'GET',
      signal: options.signal,
      what: 'listProjects',
    });
    return checkList<Project>(value, 'projects', 'listProjects', status, 'a project');
  }

  async getProject(projectId: string, options: CallOptions = {}): Promise<Project> {
    return this.#record(`/v2/admin/projects/${segment(projectId, 'projectId')}`, 'a project', {
      method: 'GET',
      signal: options.signal,
      what: 'getProject',
    });
  }

  async createProject(input: CreateProjectInput, options: CallOptions = {}): Promise<Project> {
    return this.#record('/v2/admin/projects', 'a project', {
      method: 'POST',
      body: input,
      signal: options.signal,
      what: 'createProject',
    });
  }

  /** Changes the given fields; a field given as null returns to its default. */
  async updateProject(
    projectId: string,
    input: UpdateProjectInput,
    options: CallOptions = {},
  ): Promise<Project> {
    return this.#record(`/v2/admin/projects/${segment(projectId, 'projectId')}`, 'a project', {
      method: 'PATCH',
      body: input,
      signal: options.signal,
      what: 'updateProject',
    });
  }

  /**
   * Makes the project a new random secret for its forge's webhook deliveries, replacing any:
   * the secret is in this answer only, with the URL and the events to give the forge.
   */
  async createForgeWebhookSecret(
    projectId: string,
    options: CallOptions = {},
  ): Promise<ForgeWebhookSecret> {
    const what = 'createForgeWebhookSecret';
    const { value, status } = await this.#http.call(
      `/v2/admin/projects/${segment(projectId, 'projectId')}/forge-webhook-secret`,
      { method: 'POST', signal: options.signal, what },
    );
    if (!isRecord(value) || typeof value.secret !== 'string')
      throw notA(what, 'a forge webhook secret', status);
    checkRecord<Project>(value.project, what, status, 'a project');
    return value as ForgeWebhookSecret;
  }

  /**
   * An issue of the project's repository as its forge (GitHub, GitLab, Gitea) tells it now,
   * read with the project's forge credentials; GitHub and Gitea answer a pull request's number
   * too. Errors: `not_found` when the forge has no such issue (or there is no such project),
   * `bad_request` for a project on a plain git remote, `forge_failed` when the forge refuses or
   * fails.
   */
  async getForgeIssue(
    projectId: string,
    number: number,
    options: CallOptions = {},
  ): Promise<ForgeIssue> {
    if (!Number.isSafeInteger(number) || number < 1)
      throw new TypeError(`the issue number must be a whole number from 1, not ${number}`);
    const what = 'getForgeIssue';
    const { value, status } = await this.#http.call(
      `/v2/admin/projects/${segment(projectId, 'projectId')}/forge-issues/${number}`,
      { method: 'GET', signal: options.signal, what },
    );
    return checkForgeIssue(value, what, status);
  }

  /** Every key, without secrets. */
  async listKeys(options: CallOptions = {}): Promise<ApiKey[]> {
    const { value, status } = await this.#http.call('/v2/admin/keys', {
      method: 'GET',
      signal: options.signal,
      what: 'listKeys',
    });
    return checkList<ApiKey>(value, 'keys', 'listKeys', status, 'a key');
  }

  /** Mints a project key ({projectId}) or an admin key ({admin: true}); `key` is shown once. */
  async createKey(input: CreateApiKeyInput, options: CallOptions = {}): Promise<CreatedApiKey> {
    return this.#record('/v2/admin/keys', 'a key', {
      method: 'POST',
      body: input,
      signal: options.signal,
      what: 'createKey',
    });
  }

  async revokeKey(keyId: string, options: CallOptions = {}): Promise<ApiKey> {
    return this.#record(`/v2/admin/keys/${segment(keyId, 'keyId')}/revoke`, 'a key', {
      method: 'POST',
      signal: options.signal,
      what: 'revokeKey',
    });
  }

  // ---- Webhooks of a project (an admin key) ------------------------------------------------

  /** The project's endpoints, oldest first, without secrets. */
  async listWebhooks(options: CallOptions = {}): Promise<Webhook[]> {
    const { value, status } = await this.#http.call(this.#webhooksPath(options), {
      method: 'GET',
      signal: options.signal,
      what: 'listWebhooks',
    });
    return checkList<Webhook>(value, 'webhooks', 'listWebhooks', status, 'a webhook');
  }

  async getWebhook(webhookId: string, options: CallOptions = {}): Promise<Webhook> {
    return this.#record(this.#webhookPath(webhookId, options), 'a webhook', {
      method: 'GET',
      signal: options.signal,
      what: 'getWebhook',
    });
  }

  /** Adds an endpoint; its signing secret is in this answer only. */
  async createWebhook(
    input: CreateWebhookInput,
    options: CallOptions = {},
  ): Promise<WebhookWithSecret> {
    return this.#record(this.#webhooksPath(options), 'a webhook', {
      method: 'POST',
      body: input,
      signal: options.signal,
      what: 'createWebhook',
    });
  }

  async updateWebhook(
    webhookId: string,
    input: UpdateWebhookInput,
    options: CallOptions = {},
  ): Promise<Webhook> {
    return this.#record(this.#webhookPath(webhookId, options), 'a webhook', {
      method: 'PATCH',
      body: input,
      signal: options.signal,
      what: 'updateWebhook',
    });
  }

  /** Deletes the endpoint and its delivery log. */
  async deleteWebhook(webhookId: string, options: CallOptions = {}): Promise<void> {
    const response = await this.#http.request(this.#webhookPath(webhookId, options), {
      method: 'DELETE',
      signal: options.signal,
      what: 'deleteWebhook',
    });
    await response.body?.cancel();
  }

  /**
   * A new signing secret (in this answer only); the previous one keeps signing beside it for
   * `overlapSeconds` (the server's default, a day, when not given).
   */
  async rotateWebhookSecret(
    webhookId: string,
    input: { overlapSeconds?: number } = {},
    options: CallOptions = {},
  ): Promise<WebhookWithSecret> {
    return this.#record(`${this.#webhookPath(webhookId, options)}/rotate-secret`, 'a webhook', {
      method: 'POST',
      ...(input.overlapSeconds === undefined
        ? {}
        : { body: { overlapSeconds: input.overlapSeconds } }),
      signal: options.signal,
      what: 'rotateWebhookSecret',
    });
  }

  /** One page of the endpoint's delivery log, newest first; pass nextCursor for the next. */
  async listDeliveries(
    webhookId: string,
    options: CallOptions & { limit?: number; cursor?: string } = {},
  ): Promise<DeliveryPage> {
    const query = new URLSearchParams();
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.cursor !== undefined) query.set('cursor', options.cursor);
    const { value, status } = await this.#http.call(
      `${this.#webhookPath(webhookId, options)}/deliveries${query.size ? `?${query}` : ''}`,
      { method: 'GET', signal: options.signal, what: 'listDeliveries' },
    );
    const deliveries = checkList<Delivery>(
      value,
      'deliveries',
      'listDeliveries',
      status,
      'a delivery',
    );
    const cursor = isRecord(value) ? value.nextCursor : null;
    return { deliveries, nextCursor: typeof cursor === 'string' ? cursor : null };
  }

  /** Sends a delivered or failed delivery again; it is pending until its next attempt. */
  async redeliver(
    webhookId: string,
    deliveryId: string,
    options: CallOptions = {},
  ): Promise<Delivery> {
    const path = `${this.#webhookPath(webhookId, options)}/deliveries/${segment(deliveryId, 'deliveryId')}/redeliver`;
    return this.#record(path, 'a delivery', {
      method: 'POST',
      signal: options.signal,
      what: 'redeliver',
    });
  }

  // ---- Secrets of a project (an admin key) -------------------------------------------------

  /** The project's secrets by name, with their exposure and times; never a value. */
  async listSecrets(options: CallOptions = {}): Promise<Secret[]> {
    const what = 'listSecrets';
    const { value, status } = await this.#http.call(this.#secretsPath(options), {
      method: 'GET',
      signal: options.signal,
      what,
    });
    const list = isRecord(value) ? value.secrets : undefined;
    if (!Array.isArray(list)) throw notA(what, 'a list of secrets', status);
    return list.map((item: unknown) => checkSecret(item, what, status));
  }

  /**
   * Creates the secret or replaces its value and exposure ("setup" when not given); `created`
   * says which. The value is never returned by any call.
   */
  async setSecret(
    name: string,
    input: SetSecretInput,
    options: CallOptions = {},
  ): Promise<{ secret: Secret; created: boolean }> {
    const what = 'setSecret';
    const { value, status } = await this.#http.call(
      `${this.#secretsPath(options)}/${segment(name, 'name')}`,
      { method: 'PUT', body: input, signal: options.signal, what },
    );
    return { secret: checkSecret(value, what, status), created: status === 201 };
  }

  /** Removes the secret: turns that start from now on do not get it. */
  async deleteSecret(name: string, options: CallOptions = {}): Promise<void> {
    const response = await this.#http.request(
      `${this.#secretsPath(options)}/${segment(name, 'name')}`,
      { method: 'DELETE', signal: options.signal, what: 'deleteSecret' },
    );
    await response.body?.cancel();
  }

  // ---- Schedules of a project (an admin key) ------------------------------------------------

  /** The project's schedules, oldest first, each with its last firing. */
  async listSchedules(options: CallOptions = {}): Promise<Schedule[]> {
    const what = 'listSchedules';
    const { value, status } = await this.#http.call(this.#schedulePath(undefined, options), {
      method: 'GET',
      signal: options.signal,
      what,
    });
    return checkList<Schedule>(value, 'schedules', what, status, 'a schedule');
  }

  async getSchedule(scheduleId: string, options: CallOptions = {}): Promise<Schedule> {
    const path = this.#schedulePath(scheduleId, options);
    return this.#record(path, 'a schedule', {
      method: 'GET',
      signal: options.signal,
      what: 'getSchedule',
    });
  }

  /** Adds a recurring prompt: a job at each occurrence of its cron expression. */
  async createSchedule(input: CreateScheduleInput, options: CallOptions = {}): Promise<Schedule> {
    return this.#record(this.#schedulePath(undefined, options), 'a schedule', {
      method: 'POST',
      body: input,
      signal: options.signal,
      what: 'createSchedule',
    });
  }

  /** Changes the given fields; `{ paused: true }` pauses it, `{ paused: false }` resumes it. */
  async updateSchedule(
    scheduleId: string,
    input: UpdateScheduleInput,
    options: CallOptions = {},
  ): Promise<Schedule> {
    return this.#record(this.#schedulePath(scheduleId, options), 'a schedule', {
      method: 'PATCH',
      body: input,
      signal: options.signal,
      what: 'updateSchedule',
    });
  }

  /** Deletes the schedule; the jobs it created stay. */
  async deleteSchedule(scheduleId: string, options: CallOptions = {}): Promise<void> {
    const response = await this.#http.request(this.#schedulePath(scheduleId, options), {
      method: 'DELETE',
      signal: options.signal,
      what: 'deleteSchedule',
    });
    await response.body?.cancel();
  }

  // ---- Environments of a project (an admin key) --------------------------------------------

  /** The snapshots of the project's environment its workers keep, the one used last first. */
  async listEnvironments(options: CallOptions = {}): Promise<Environment[]> {
    const what = 'listEnvironments';
    const { value, status } = await this.#http.call(this.#environmentsPath(options), {
      method: 'GET',
      signal: options.signal,
      what,
    });
    const list = isRecord(value) ? value.environments : undefined;
    if (!Array.isArray(list)) throw notA(what, 'a list of environments', status);
    return list.map((item: unknown) => checkEnvironment(item, what, status));
  }

  /**
   * Drops the project's environments on every worker: all of them, or those of `key` (a
   * `not_found` error when there are none). Returns how many were dropped.
   */
  async deleteEnvironments(key?: string, options: CallOptions = {}): Promise<number> {
    const what = 'deleteEnvironments';
    const path = this.#environmentsPath(options);
    const { value, status } = await this.#http.call(
      key === undefined ? path : `${path}/${segment(key, 'key')}`,
      { method: 'DELETE', signal: options.signal, what },
    );
    if (!isRecord(value) || typeof value.deleted !== 'number')
      throw notA(what, 'a count of dropped environments', status);
    return value.deleted;
  }

  /** Asks for the project's environment to be built again in the background. */
  async rebuildEnvironment(options: CallOptions = {}): Promise<void> {
    const response = await this.#http.request(`${this.#environmentsPath(options)}/rebuild`, {
      method: 'POST',
      signal: options.signal,
      what: 'rebuildEnvironment',
    });
    await response.body?.cancel();
  }

  // ---- Eval runs (an admin key, or a maintainer of every project the suite names) ------------

  /** Starts an eval run of `suite`: a job per task × agent × repeat, then each one's check. */
  async createEval(
    suite: EvalSuite,
    options: Omit<CallOptions, 'projectId'> = {},
  ): Promise<EvalRun> {
    const what = 'createEval';
    const { value, status } = await this.#http.call('/v2/admin/evals', {
      method: 'POST',
      body: suite,
      signal: options.signal,
      what,
    });
    return checkEvalRun<EvalRun>(value, what, status, true);
  }

  /** The eval runs on projects the key can read, newest first, without their results. */
  async listEvals(options: Omit<CallOptions, 'projectId'> = {}): Promise<EvalRunSummary[]> {
    const what = 'listEvals';
    const { value, status } = await this.#http.call('/v2/admin/evals', {
      method: 'GET',
      signal: options.signal,
      what,
    });
    const list = isRecord(value) ? value.runs : undefined;
    if (!Array.isArray(list)) throw notA(what, 'a list of eval runs', status);
    return list.map((item: unknown) => checkEvalRun<EvalRunSummary>(item, what, status, false));
  }

  /** An eval run with every result so far. */
  async getEval(runId: string, options: Omit<CallOptions, 'projectId'> = {}): Promise<EvalRun> {
    const what = 'getEval';
    const { value, status } = await this.#http.call(`/v2/admin/evals/${segment(runId, 'runId')}`, {
      method: 'GET',
      signal: options.signal,
      what,
    });
    return checkEvalRun<EvalRun>(value, what, status, true);
  }

  /** Cancels the run: its pending results are cancelled, its running jobs archived. */
  async cancelEval(runId: string, options: Omit<CallOptions, 'projectId'> = {}): Promise<EvalRun> {
    const what = 'cancelEval';
    const path = `/v2/admin/evals/${segment(runId, 'runId')}/cancel`;
    const { value, status } = await this.#http.call(path, {
      method: 'POST',
      signal: options.signal,
      what,
    });
    return checkEvalRun<EvalRun>(value, what, status, true);
  }

  // ---- Paths and answers ---------------------------------------------------------------------

  #project(options: CallOptions): string {
    const project = options.projectId ?? this.#projectId;
    if (!project)
      throw new TypeError('no projectId: pass projectId to the ErrandClient or to the call');
    return project;
  }

  #projectPath(options: CallOptions): string {
    return `/v2/agent/${encodeURIComponent(this.#project(options))}/job`;
  }

  #jobPath(jobId: string, options: CallOptions): string {
    return `${this.#projectPath(options)}/${segment(jobId, 'jobId')}`;
  }

  #webhooksPath(options: CallOptions): string {
    return `/v2/admin/projects/${encodeURIComponent(this.#project(options))}/webhooks`;
  }

  #secretsPath(options: CallOptions): string {
    return `/v2/admin/projects/${encodeURIComponent(this.#project(options))}/secrets`;
  }

  #environmentsPath(options: CallOptions): string {
    return `/v2/admin/projects/${encodeURIComponent(this.#project(options))}/environments`;
  }

  #schedulePath(scheduleId: string | undefined, options: CallOptions): string {
    const base = `/v2/admin/projects/${encodeURIComponent(this.#project(options))}/schedules`;
    return scheduleId === undefined ? base : `${base}/${segment(scheduleId, 'scheduleId')}`;
  }

  #webhookPath(webhookId: string, options: CallOptions): string {
    return `${this.#webhooksPath(options)}/${segment(webhookId, 'webhookId')}`;
  }

  async #job(path: string, what: string, init: Omit<CallInit, 'what'>): Promise<Job> {
    const { value, status } = await this.#http.call(path, { ...init, what });
    return checkJob(value, what, status);
  }

  async #record<T>(path: string, noun: string, init: CallInit): Promise<T> {
    const { value, status } = await this.#http.call(path, init);
    return checkRecord<T>(value, init.what, status, noun);
  }
}

function idempotency(key: string | undefined): Record<string, string> {
  return key === undefined ? {} : { 'idempotency-key': key };
}

/** An id as one path segment; an empty one is the caller's mistake, not a request. */
function segment(id: string, name: string): string {
  if (typeof id !== 'string' || id === '') throw new TypeError(`${name} is required`);
  return encodeURIComponent(id);
}
