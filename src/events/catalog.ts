// The one catalog of the events a job's log holds: each type declared once, with the schema of
// its data and its words for people. From it come the types an emit must match, the check every
// write of the log runs (jobs/transaction.ts, jobs/lifecycle.ts), the webhook event list, the
// OpenAPI description of the events endpoint and of webhook payloads (http/), and the lines the
// CLI, the dashboard and the MCP server show. Words are composed when an event is read, from its
// facts: what is stored is data, so the words of old events change with the catalog's.
import { z } from 'zod';
import { formatBytes, formatMs, formatUsd, JOB_STATUSES, statusLine } from '../words.ts';

/** What a person reads of one event. */
export interface EventWords {
  /** One line: what happened (the tool call, the commit, the pull request). May be empty. */
  text: string;
  /** Longer text that belongs to it (a command's output), for a view that can fold it away. */
  detail?: { label: string; text: string };
}

/** The phase of a turn an event ends (queue/turn-report.ts times them). */
type Phase = 'workspace' | 'agent' | 'commit' | 'push' | 'pullRequest';

type Kind = 'transition' | 'progress';

interface Declaration<S extends z.ZodType, K extends Kind = Kind, W extends boolean = boolean> {
  /** A transition of the lifecycle (jobs/), announced to subscribers; else a turn's progress. */
  kind: K;
  /** What the event says, for the OpenAPI document. */
  description: string;
  data: S;
  words: (data: z.output<S>, turn: number | undefined) => EventWords;
  /** Whether a webhook endpoint may subscribe to it. */
  webhook?: W;
  /** False for a transition announced but never written to the log (its record says it). */
  logged?: false;
  phase?: Phase;
}

/** One event type; its kind and whether webhooks may have it stay in its type. */
function declare<S extends z.ZodType, K extends Kind, W extends boolean = false>(
  declaration: Declaration<S, K, W>,
): Declaration<S, K, W> {
  return declaration;
}

// The data of each type: its fields, as the log stores them. Loose objects: an event of an
// older version may carry a field this one no longer writes, and a reader skips what it does
// not know.
const payload = z.looseObject;

const usage = z
  .object({
    inputTokens: z.number().int().min(0),
    outputTokens: z.number().int().min(0),
    cacheReadTokens: z.number().int().min(0),
    cacheWriteTokens: z.number().int().min(0),
    costUsd: z.number().nullable().describe('An estimate in US dollars; null when unknown.'),
  })
  .describe('Tokens used by model calls, and their estimated cost.');

/** The fields of the job record a status event's words need; the event carries all of it. */
const jobRecord = z
  .looseObject({
    id: z.string(),
    status: z.enum(JOB_STATUSES),
    prLink: z.string().nullable(),
    error: z.string().nullable(),
    turns: z.number().int(),
  })
  .describe('The job record as the job API returns it (AgentJob), as the change left it.');

const trigger = z
  .object({
    forge: z.string(),
    kind: z.string().describe('comment, line comment, review or label.'),
    url: z.string(),
    author: z.string().describe('The forge login of who asked.'),
  })
  .describe('The forge comment or label that asked for the turn.');

/** What the job's events say of the forge event that asked for a turn (jobs/accept.ts). */
export type ShownTrigger = z.output<typeof trigger>;

const sha = (value: string) => value.slice(0, 12);

const jobStatusEvent = (what: string) =>
  declare({
    kind: 'transition',
    description: `${what}; data.job is the job's record as the change left it.`,
    data: payload({ job: jobRecord }),
    words: (d) => ({ text: statusLine(d.job) }),
    webhook: true,
  });

/** A setup's network as setup.started names it ("open", "allowlist"; true in older events). */
const network = z
  .union([z.enum(['none', 'allowlist', 'open']), z.boolean()])
  .describe('none, allowlist or open (true or false in events of older versions).');

function networkWords(value: z.output<typeof network>): string {
  if (value === true || value === 'open') return ' (with network)';
  if (value === 'allowlist') return ' (network: allowlist)';
  return '';
}

const commandStart = (what: string) =>
  declare({
    kind: 'progress',
    description: `${what} started.`,
    data: payload({ command: z.string(), network }),
    words: (d) => ({ text: `${d.command}${networkWords(d.network)}` }),
  });

const commandEnd = (what: string) =>
  declare({
    kind: 'progress',
    description: `${what} ended.`,
    data: payload({
      command: z.string(),
      exitCode: z.number().int().nullable(),
      signal: z.string().optional(),
      durationMs: z.number().optional(),
      timedOut: z.boolean(),
      outputTail: z.string().optional().describe('The last 500 characters of its output.'),
    }),
    words: (d) => {
      const text = [
        d.timedOut ? 'timed out' : undefined,
        d.exitCode !== null ? `exit ${d.exitCode}` : d.signal,
        d.command,
      ]
        .filter((part) => part !== undefined && part !== '')
        .join(': ');
      return d.outputTail ? { text, detail: { label: 'Output', text: d.outputTail } } : { text };
    },
  });

/** An environment's snapshot: `38,412 files, 393 MB`. */
function environmentSize(d: { files: number; bytes: number }): string {
  return `environment (${d.files.toLocaleString('en-US')} files, ${formatBytes(d.bytes)})`;
}

function tokens(u: z.output<typeof usage>): string {
  const parts = [
    `${u.inputTokens} in`,
    `${u.outputTokens} out`,
    ...(u.cacheReadTokens ? [`${u.cacheReadTokens} cached`] : []),
    ...(u.costUsd !== null ? [formatUsd(u.costUsd)] : []),
  ];
  return ` (${parts.join(', ')})`;
}

const compaction = {
  reason: z.enum(['threshold', 'overflow']),
  tokensBefore: z.number().int().min(0),
  tokensAfter: z.number().int().min(0),
};

/** What a compaction did, in words: composed when read, and stored as `summary` for the API. */
export function compactionSummary(d: {
  reason: 'threshold' | 'overflow';
  tokensBefore: number;
  tokensAfter: number;
}): string {
  const why = d.reason === 'overflow' ? ' after the model refused a request as too long' : '';
  const n = (x: number) => x.toLocaleString('en-US');
  return `summarised the older conversation${why}: about ${n(d.tokensBefore)} → ${n(d.tokensAfter)} tokens`;
}

const pullRequest = { forge: z.string(), number: z.number().int(), url: z.string() };

/**
 * Every event type, in the order of a job's life; the webhook list keeps this order (its
 * newest type, network.denied, last).
 */
export const EVENTS = {
  'job.created': jobStatusEvent('The job was created'),
  'job.reactivated': jobStatusEvent('A follow-up made a completed or failed job active again'),
  'job.completed': jobStatusEvent('The job completed: its last turn finished'),
  'job.failed': jobStatusEvent('The job failed: its last turn failed'),
  'job.archived': jobStatusEvent('The job was archived'),
  'turn.accepted': declare({
    kind: 'transition',
    logged: false,
    description: 'A turn was queued (announced only: the job record says it).',
    data: payload({ trigger: trigger.optional() }),
    words: () => ({ text: 'queued' }),
  }),
  'turn.started': declare({
    kind: 'transition',
    description:
      "A worker started the turn; `attempt` counts from 1, and `trigger` names a forge's request.",
    data: payload({ attempt: z.number().int().min(1), trigger: trigger.optional() }),
    words: (d, turn) => {
      const t = d.trigger;
      const how = t?.kind === 'label' ? 'with a label' : `in a ${t?.kind || 'comment'}`;
      const parts = [
        turn !== undefined ? `turn ${turn}` : undefined,
        d.attempt > 1 ? `attempt ${d.attempt}` : undefined,
        t?.author ? `asked by @${t.author} ${how} on ${t.forge || 'the forge'}` : undefined,
      ];
      return { text: parts.filter((part) => part !== undefined).join(', ') };
    },
    webhook: true,
  }),
  'turn.retrying': declare({
    kind: 'transition',
    description: 'The attempt failed and the turn will be tried again; with what it used.',
    data: payload({
      error: z.string(),
      attempt: z.number().int().min(1),
      retryInSeconds: z.number().min(0),
      retryAfterSeconds: z.number().min(0).optional(),
      usage: usage.optional(),
    }),
    words: (d) => ({ text: `${d.error || 'failed'}; trying again in ${d.retryInSeconds} s` }),
  }),
  'turn.finished': declare({
    kind: 'transition',
    description: 'The turn finished: its summary, what it used, and its pull request.',
    data: payload({
      summary: z.string().nullable(),
      usage: usage.nullable(),
      prLink: z.string().nullable(),
    }),
    words: (d) => ({ text: d.prLink ?? d.summary?.split('\n')[0] ?? '' }),
    webhook: true,
  }),
  'turn.failed': declare({
    kind: 'transition',
    description: 'The turn failed for good: why, and what it used when it called the model.',
    data: payload({ error: z.string(), usage: usage.optional() }),
    words: (d) => ({ text: d.error }),
    webhook: true,
  }),

  'turn.resumed': declare({
    kind: 'progress',
    description: 'A retried turn found its commit already pushed and only finishes the review.',
    data: payload({ commit: z.string(), note: z.string().optional() }),
    words: (d) => ({ text: `already pushed as ${sha(d.commit)}; finishing the pull request` }),
  }),
  'workspace.ready': declare({
    kind: 'progress',
    description: "The job's checkout is ready: its base, its head, and whether the branch existed.",
    data: payload({ base: z.string(), head: z.string(), continued: z.boolean() }),
    words: (d) => ({ text: `${d.continued ? 'continuing' : 'new branch'} at ${sha(d.head)}` }),
    phase: 'workspace',
  }),
  'sandbox.unavailable': declare({
    kind: 'progress',
    description: 'Commands are off for the turn: the sandbox does not work on this worker.',
    data: payload({ reason: z.string(), howToFix: z.string() }),
    words: (d) => ({
      text: `commands are off: ${[d.reason, d.howToFix].filter(Boolean).join('; ')}`,
    }),
  }),
  'setup.started': commandStart("The project's setup command"),
  'setup.finished': commandEnd("The project's setup command"),
  'environment.restored': declare({
    kind: 'progress',
    description: "The project's environment snapshot was restored into the checkout.",
    data: payload({
      key: z.string(),
      ms: z.number().min(0),
      from: z.enum(['spare', 'copy']),
      files: z.number().int().min(0),
      bytes: z.number().min(0),
      builtAt: z.string().optional().describe('The commit the snapshot was built at.'),
      skipped: z.number().int().min(0).optional(),
    }),
    words: (d) => ({
      text: `${environmentSize(d)} restored in ${formatMs(d.ms)}${d.from === 'copy' ? ' (copied: no spare was ready)' : ''}`,
    }),
  }),
  'environment.built': declare({
    kind: 'progress',
    description: "The setup's result was kept as the project's environment snapshot.",
    data: payload({
      key: z.string(),
      ms: z.number().min(0),
      setupMs: z.number().min(0),
      files: z.number().int().min(0),
      bytes: z.number().min(0),
    }),
    words: (d) => ({ text: `${environmentSize(d)} kept after the setup` }),
  }),
  'environment.not_kept': declare({
    kind: 'progress',
    description: "The setup's result was not kept as a snapshot, and why.",
    data: payload({ key: z.string(), reason: z.string(), secret: z.string().optional() }),
    words: (d) => ({ text: `not kept: ${d.reason || 'unknown reason'}` }),
  }),
  'maintenance.started': commandStart("The project's maintenance command"),
  'maintenance.finished': commandEnd("The project's maintenance command"),
  'engine.started': declare({
    kind: 'progress',
    description:
      'A coding CLI (an engine) started the turn; `resumed` is the session it continues.',
    data: payload({
      engine: z.string(),
      version: z.string(),
      model: z.string(),
      resumed: z.string().optional(),
    }),
    words: (d) => ({
      text:
        `${d.engine} ${d.version}`.trim() +
        (d.resumed ? `, resuming session ${d.resumed}` : ', new session'),
    }),
  }),
  'tool.call': declare({
    kind: 'progress',
    description: 'The agent called a tool; `summary` is the call in one line.',
    data: payload({ id: z.string(), name: z.string(), summary: z.string() }),
    words: (d) => ({ text: d.summary || d.name }),
  }),
  'tool.result': declare({
    kind: 'progress',
    description: "A tool's result: whether it succeeded, in one line.",
    data: payload({ id: z.string(), name: z.string(), ok: z.boolean(), summary: z.string() }),
    words: (d) => ({ text: `${d.ok ? '' : 'error: '}${d.summary}` }),
  }),
  'command.started': declare({
    kind: 'progress',
    description: 'A command the agent runs in the sandbox started.',
    data: payload({ command: z.string(), cwd: z.string() }),
    words: (d) => ({ text: d.command }),
  }),
  'command.finished': commandEnd('A command the agent ran in the sandbox'),
  'model.step': declare({
    kind: 'progress',
    description: 'A model call ended: its step number and what it used.',
    data: payload({
      step: z.number().int().min(1),
      usage,
      estimated: z.literal(true).optional().describe('The usage is the most the call could use.'),
      status: z.number().int().optional().describe("The vendor's error status: it used nothing."),
      removed: z.array(z.string()).optional().describe('What the model proxy removed.'),
    }),
    words: (d) => ({ text: `step ${d.step}${tokens(d.usage)}` }),
  }),
  'context.compacted': declare({
    kind: 'progress',
    description:
      'The older conversation was summarised to fit the model; `summary` says it in words.',
    data: payload({ ...compaction, usage, summary: z.string().optional() }),
    words: (d) => ({ text: compactionSummary(d) }),
  }),
  'turn.no_changes': declare({
    kind: 'progress',
    description: 'The agent changed no file: nothing to commit.',
    data: payload({}),
    words: () => ({ text: 'nothing changed' }),
    phase: 'agent',
  }),
  'files.changed': declare({
    kind: 'progress',
    description: 'The files the agent changed (at most 200 listed) and how many.',
    data: payload({
      files: z.array(
        z.object({ path: z.string(), change: z.enum(['added', 'modified', 'deleted']) }),
      ),
      count: z.number().int().min(0),
    }),
    words: (d) => ({
      text: `${d.count} file${d.count === 1 ? '' : 's'}: ${d.files
        .slice(0, 5)
        .map((f) => f.path)
        .join(', ')}${d.count > 5 ? ', …' : ''}`,
    }),
    phase: 'agent',
  }),
  commit: declare({
    kind: 'progress',
    description: "The turn's commit.",
    data: payload({ sha: z.string(), subject: z.string() }),
    words: (d) => ({ text: `${sha(d.sha)} ${d.subject}`.trim() }),
    phase: 'commit',
  }),
  push: declare({
    kind: 'progress',
    description: 'The work branch was pushed.',
    data: payload({ branch: z.string(), sha: z.string() }),
    words: (d) => ({ text: `${d.branch} at ${sha(d.sha)}` }),
    phase: 'push',
  }),
  'review.updated': declare({
    kind: 'progress',
    description: "Errand's review page shows the work (a project on plain git).",
    data: payload({ url: z.string() }),
    words: (d) => ({ text: d.url }),
    phase: 'pullRequest',
  }),
  'pull_request.opened': declare({
    kind: 'progress',
    description: 'A pull request was opened; `notes` say what the forge did otherwise than asked.',
    data: payload({ ...pullRequest, draft: z.boolean(), notes: z.array(z.string()) }),
    words: (d) => ({
      text: [`${d.url}${d.draft ? ' (draft)' : ''}`, ...d.notes.filter(Boolean)].join('; '),
    }),
    webhook: true,
    phase: 'pullRequest',
  }),
  'pull_request.updated': declare({
    kind: 'progress',
    description: "The job's pull request was updated.",
    data: payload(pullRequest),
    words: (d) => ({ text: d.url }),
    phase: 'pullRequest',
  }),
  'network.denied': declare({
    kind: 'progress',
    description:
      "A host the project's network allowlist refused (once for each host and port of a run).",
    data: payload({
      host: z.string(),
      port: z.number().int(),
      reason: z.enum(['not allowed', 'private address']),
    }),
    words: (d) => {
      const where = `${d.host.includes(':') ? `[${d.host}]` : d.host}:${d.port}`;
      return {
        text:
          d.reason === 'private address'
            ? `${where} refused: it resolves to a private address`
            : `${where} refused: not in the project's network allowlist`,
      };
    },
    // What a user may want to add to the allowlist (issue 30).
    webhook: true,
  }),
} as const;

type Events = typeof EVENTS;
export type EventType = keyof Events;
/**
 * The declared fields of a schema's input, without the loose objects' index signature: what a
 * writer gives must have them, and a record typed by an interface has no index signature.
 */
type Known<T> = T extends readonly (infer U)[]
  ? readonly Known<U>[]
  : T extends object
    ? { [K in keyof T as string extends K ? never : K]: Known<T[K]> }
    : T;

/** The data an emit of `T` gives (what the schema accepts). */
export type EventData<T extends EventType> = Known<z.input<Events[T]['data']>>;

type TypesWhere<D> = { [T in EventType]: Events[T] extends D ? T : never }[EventType];

/** The types the lifecycle's transitions record (jobs/transitions.ts). */
export type TransitionType = TypesWhere<{ kind: 'transition' }>;
/** The types a running turn records as its progress. */
export type ProgressType = TypesWhere<{ kind: 'progress' }>;
export type WebhookEventType = TypesWhere<{ webhook?: true }>;

/** How a turn records its progress: a declared type with its data, or it does not compile. */
export type Emit = <T extends ProgressType>(type: T, data: EventData<T>) => Promise<void>;

/** An event as a producer hands it on before it is recorded (the agent loop, an engine). */
export type Emitted<T extends ProgressType> = { type: T } & EventData<T>;

const TYPES = Object.keys(EVENTS) as EventType[];

function isEventType(type: string): type is EventType {
  return Object.hasOwn(EVENTS, type);
}

/** The job events a webhook endpoint can ask for; an endpoint created without a list gets all. */
export const WEBHOOK_EVENT_TYPES = Object.freeze(
  TYPES.filter((type): type is WebhookEventType => EVENTS[type].webhook === true),
) as readonly WebhookEventType[] as readonly [WebhookEventType, ...WebhookEventType[]];

/** The types a job's log holds (every type but the announced-only). */
export const LOGGED_EVENT_TYPES: readonly EventType[] = Object.freeze(
  TYPES.filter((type) => EVENTS[type].logged !== false),
);

/** Whether a transition of this type is written to the job's log (turn.accepted is not). */
export function isLogged(type: EventType): boolean {
  return EVENTS[type].logged !== false;
}

/** The phase of a turn an event of this type ends, if it ends one. */
export function phaseEnded(type: EventType): Phase | undefined {
  return EVENTS[type].phase;
}

/** An event the catalog does not declare, or data its schema refuses: a defect of the writer. */
export class UndeclaredEventError extends Error {
  override name = 'UndeclaredEventError';
}

/**
 * Checks an event against the catalog before it is written; every write of the log runs it.
 * The data is stored as given: the check adds and drops nothing.
 */
export function checkEvent(type: string, data: unknown): void {
  if (!isEventType(type)) throw new UndeclaredEventError(`event type ${type} is not declared`);
  const result = EVENTS[type].data.safeParse(data);
  if (!result.success) {
    const issues = result.error.issues
      .map((issue) => `${issue.path.join('.') || '(data)'}: ${issue.message}`)
      .join('; ');
    throw new UndeclaredEventError(`event ${type} has data its schema refuses: ${issues}`);
  }
}

/** One event of a job's progress log, as the API, the stream and the server give it. */
export interface EventFacts {
  type: string;
  data: unknown;
  /** The turn it belongs to; null or absent for the job itself. */
  turn?: number | null;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The words of an event its type's words cannot read (a newer type, or older data). */
function dataWords(data: unknown): EventWords {
  const d = isRecord(data) ? data : {};
  for (const key of ['title', 'url', 'summary', 'message', 'error']) {
    const value = d[key];
    if (typeof value === 'string' && value !== '') return { text: value };
  }
  return { text: Object.keys(d).length === 0 ? '' : JSON.stringify(d) };
}

/** The event's words: its type's, from its data's facts; else the data's own words. */
export function eventWords(event: EventFacts): EventWords {
  if (!isEventType(event.type)) return dataWords(event.data);
  const declared: Declaration<z.ZodType> = EVENTS[event.type];
  const data = declared.data.safeParse(event.data);
  if (!data.success) return dataWords(event.data);
  return declared.words(data.data, event.turn ?? undefined);
}

/** The schema of one logged event as the events endpoint and the stream give it. */
function eventRecord<T extends EventType>(type: T) {
  return z
    .object({
      seq: z.number().int().describe('Increases with every event of the job.'),
      turn: z
        .number()
        .int()
        .nullable()
        .describe('The turn it belongs to; null for the job itself.'),
      type: z.literal(type),
      data: EVENTS[type].data,
      at: z.iso.datetime(),
    })
    .describe(EVENTS[type].description);
}

/** An event of the job's log, one schema per type: the events endpoint's OpenAPI. */
export function eventRecordSchema() {
  const [first, ...rest] = LOGGED_EVENT_TYPES.map((type) => eventRecord(type));
  if (!first) throw new Error('the event catalog declares no logged type');
  return z.discriminatedUnion('type', [first, ...rest]);
}

/** An event of the job's log as the catalog types it. */
export type LoggedEvent = z.output<ReturnType<typeof eventRecordSchema>>;

/**
 * The body of a webhook delivery of each type an endpoint can ask for (events/webhooks/
 * outbox.ts writes it): the event as the events endpoint gives it, with the job's record.
 */
export function webhookPayloadSchemas(job: z.ZodType): Record<WebhookEventType, z.ZodType> {
  const entries = WEBHOOK_EVENT_TYPES.map((type) => [
    type,
    z
      .object({
        type: z.literal(type),
        timestamp: z.iso.datetime().describe('When the event was recorded.'),
        data: z.object({
          projectId: z.string(),
          jobId: z.string(),
          event: eventRecord(type),
          job: job.describe('The job record when the event was recorded.'),
        }),
      })
      .describe(EVENTS[type].description),
  ]);
  return Object.fromEntries(entries) as Record<WebhookEventType, z.ZodType>;
}
