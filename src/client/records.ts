// The records of Errand's API as the client hands them out, typed from the OpenAPI document
// (openapi.ts, generated), and the light checks an answer passes before it is returned as one:
// the shape that tells a record from an error page or another service's answer.
import { ErrandError } from './errors.ts';
import type { components, paths } from './openapi.ts';

type JsonBody<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type RequestJson<T> = T extends { requestBody?: infer R } ? JsonBody<NonNullable<R>> : never;

/** The agent job record. */
export type Job = components['schemas']['AgentJob'];
export type JobStatus = Job['status'];
/** What a turn may do: code (the default), ask (an answer, read-only), plan (awaits approval). */
export type JobMode = NonNullable<CreateJobInput['mode']>;
/** A page of a job's progress log. */
export type JobEventPage = JsonBody<
  paths['/v2/agent/{projectId}/job/{id}/events']['get']['responses'][200]
>;
/** One entry of a job's progress log. */
export type JobEvent = JobEventPage['events'][number];
/** A job's input at creation. */
export type CreateJobInput = RequestJson<paths['/v2/agent/{projectId}/job']['post']>;
/** A follow-up's input. */
export type SendMessageInput = RequestJson<paths['/v2/agent/{projectId}/job/{id}/message']['post']>;
/** A JSON Schema a turn's answer must satisfy (docs/structured-output.md). */
export type OutputSchema = NonNullable<CreateJobInput['outputSchema']>;
/** An image for a turn: `{ data: base64 }` or `{ url: 'https://…' }` (docs/images.md). */
export type Attachment = NonNullable<CreateJobInput['attachments']>[number];

/** A project, as the admin API shows it (never its credentials). */
export type Project = components['schemas']['Project'];
export type CreateProjectInput = RequestJson<paths['/v2/admin/projects']['post']>;
export type UpdateProjectInput = RequestJson<paths['/v2/admin/projects/{id}']['patch']>;
/** A project's new forge webhook secret (shown this once), the URL and events to give the forge. */
export type ForgeWebhookSecret = JsonBody<
  paths['/v2/admin/projects/{id}/forge-webhook-secret']['post']['responses'][200]
>;

/** An issue of a project's repository, as its forge tells it. */
export type ForgeIssue = components['schemas']['ForgeIssue'];

/** A forge issue: an object with a whole number, a string title and a string body. */
export function checkForgeIssue(value: unknown, what: string, status: number): ForgeIssue {
  if (
    !isRecord(value) ||
    typeof value.number !== 'number' ||
    typeof value.title !== 'string' ||
    typeof value.body !== 'string'
  )
    throw notA(what, 'a forge issue', status);
  return value as ForgeIssue;
}

/** An API key without its secret. */
export type ApiKey = components['schemas']['Key'];
/** A new key, with the key itself: in this answer only. */
export type CreatedApiKey = JsonBody<paths['/v2/admin/keys']['post']['responses'][201]>;
export type CreateApiKeyInput = RequestJson<paths['/v2/admin/keys']['post']>;

/** A project's recurring prompt, with its last firing. */
export type Schedule = components['schemas']['Schedule'];
export type CreateScheduleInput = RequestJson<
  paths['/v2/admin/projects/{projectId}/schedules']['post']
>;
export type UpdateScheduleInput = RequestJson<
  paths['/v2/admin/projects/{projectId}/schedules/{scheduleId}']['patch']
>;

type WebhookPath = paths['/v2/admin/projects/{projectId}/webhooks/{webhookId}'];
/** A webhook endpoint without its signing secret. */
export type Webhook = components['schemas']['Webhook'];
/** An endpoint with its signing secret: in the answers of create and rotate only. */
export type WebhookWithSecret = JsonBody<
  paths['/v2/admin/projects/{projectId}/webhooks']['post']['responses'][201]
>;
export type WebhookEventType = Webhook['events'][number];
/**
 * The event types are any strings here: the server checks the names (and says which one it
 * does not know), so a client built against an older document can name newer types.
 */
export type CreateWebhookInput = Omit<
  RequestJson<paths['/v2/admin/projects/{projectId}/webhooks']['post']>,
  'events'
> & { events?: readonly string[] };
export type UpdateWebhookInput = Omit<RequestJson<WebhookPath['patch']>, 'events'> & {
  events?: readonly string[];
};
/** A page of an endpoint's delivery log, newest first. */
export type DeliveryPage = JsonBody<
  paths['/v2/admin/projects/{projectId}/webhooks/{webhookId}/deliveries']['get']['responses'][200]
>;
/** One delivery of an event to an endpoint, with its attempts. */
export type Delivery = DeliveryPage['deliveries'][number];

/** A project secret: its name, exposure and times, never its value. */
export type Secret = components['schemas']['Secret'];
export type SecretExposure = Secret['exposure'];
export type SetSecretInput = RequestJson<paths['/v2/admin/projects/{id}/secrets/{name}']['put']>;

/** A secret record: an object with a string name, the mark of a secret the admin API answers. */
export function checkSecret(value: unknown, what: string, status: number): Secret {
  if (!isRecord(value) || typeof value.name !== 'string' || typeof value.exposure !== 'string')
    throw notA(what, 'a secret', status);
  return value as Secret;
}

/** A snapshot of a project's environment, kept by one worker. */
export type Environment = components['schemas']['Environment'];

/** An environment record: an object with a string key and worker. */
export function checkEnvironment(value: unknown, what: string, status: number): Environment {
  if (!isRecord(value) || typeof value.key !== 'string' || typeof value.worker !== 'string')
    throw notA(what, 'an environment', status);
  return value as Environment;
}

/** Where polling stops: the job will not change without a new prompt. */
export const TERMINAL_STATUSES: readonly JobStatus[] = Object.freeze([
  'completed',
  'failed',
  'archived',
]);

/**
 * The statuses a job can have, by the document's type: a status the server adds fails the
 * client's build here until it is listed (the client imports nothing of the server).
 */
const JOB_STATUS_NAMES: Readonly<Record<JobStatus, true>> = {
  active: true,
  completed: true,
  failed: true,
  archived: true,
};
const STATUSES: readonly string[] = Object.keys(JOB_STATUS_NAMES);

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function notA(what: string, noun: string, status: number): ErrandError {
  return new ErrandError(`${what}: the answer is not ${noun}`, {
    code: 'invalid_response',
    status,
  });
}

export function checkJob(value: unknown, what: string, status: number): Job {
  if (
    !isRecord(value) ||
    typeof value.id !== 'string' ||
    typeof value.status !== 'string' ||
    !STATUSES.includes(value.status)
  )
    throw notA(what, 'a job record', status);
  return value as Job;
}

/** `which` names the event in the message: "events: a streamed event". */
export function checkEvent(
  value: unknown,
  status: number,
  which = 'events: a streamed event',
): JobEvent {
  if (!isRecord(value) || typeof value.seq !== 'number' || typeof value.type !== 'string')
    throw new ErrandError(`${which} is not an event record`, {
      code: 'invalid_response',
      status,
    });
  return value as JobEvent;
}

/**
 * An admin record (project, key, webhook, delivery): an object with a string id, the mark of
 * every record the admin API answers with. `noun` names it in the message: "a project".
 */
export function checkRecord<T>(value: unknown, what: string, status: number, noun: string): T {
  if (!isRecord(value) || typeof value.id !== 'string') throw notA(what, noun, status);
  return value as T;
}

/** A list answer, `{[field]: [record…]}`, each record checked as checkRecord does. */
export function checkList<T>(
  value: unknown,
  field: string,
  what: string,
  status: number,
  noun: string,
): T[] {
  const list = isRecord(value) ? value[field] : undefined;
  if (!Array.isArray(list)) throw notA(what, `a list of ${field}`, status);
  return list.map((item: unknown) => checkRecord<T>(item, what, status, noun));
}

// The eval API's records (docs/eval.md).

/** A suite as POST /v2/admin/evals takes it: tasks, the agents' matrix, repeats, concurrency. */
export type EvalSuite = RequestJson<paths['/v2/admin/evals']['post']>;
/** One task of a suite: a prompt on a project's (or repository's) ref, and its check command. */
export type EvalTask = EvalSuite['tasks'][number];
/** An agent of a suite's matrix: an engine and a model, each the project's when left out. */
export type EvalAgentSpec = NonNullable<EvalSuite['agents']>[number];
/** An eval run: its suite, its per-agent numbers and every result. */
export type EvalRun = components['schemas']['EvalRun'];
/** An eval run as the list shows it: without its results. */
export type EvalRunSummary = components['schemas']['EvalRunSummary'];
/** One agent's numbers over a run's finished results. */
export type EvalAgentSummary = EvalRun['agents'][number];
/** One task × agent × repeat: its job and how its check came out. */
export type EvalResult = EvalRun['results'][number];
export type EvalResultState = EvalResult['state'];

/** An eval run record: an object with a string id, a state and a list of agents. */
export function checkEvalRun<T extends EvalRunSummary>(
  value: unknown,
  what: string,
  status: number,
  withResults: boolean,
): T {
  if (
    !isRecord(value) ||
    typeof value.id !== 'string' ||
    typeof value.state !== 'string' ||
    !Array.isArray(value.agents) ||
    (withResults && !Array.isArray(value.results))
  )
    throw notA(what, 'an eval run', status);
  return value as T;
}
