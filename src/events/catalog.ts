// The one catalog of the events a job's log holds: each type declared once, with the schema of
// its data and its words for people. From it come the types an emit must match, the check every
// write of the log runs (jobs/transaction.ts, jobs/lifecycle.ts), the webhook event list, the
// OpenAPI description of the events endpoint and of webhook payloads (openapi.ts), and the lines
// the CLI, the dashboard and the MCP server show. Words are composed when an event is read, from
// its facts: what is stored is data, so the words of old events change with the catalog's.
// How a type is declared, and the pieces declarations share, are in declare.ts.
import { z } from 'zod';
import { ATTEMPT_OUTCOMES } from '../records/attempt.ts';
import { JOB_MODES } from '../records/job.ts';
import { ENGINE_NAMES } from '../records/project.ts';
import { formatMs } from '../words.ts';
import {
  commandEnd,
  commandStart,
  compaction,
  compactionSummary,
  type Declaration,
  declare,
  type EventWords,
  environmentSize,
  jobStatusEvent,
  notKept,
  notKeptReason,
  type Phase,
  payload,
  pullRequest,
  sha,
  tokens,
  trigger,
  usage,
} from './declare.ts';

/**
 * Every event type, in the order of a job's life; the webhook list keeps this order (the
 * pull request watch's, then network.denied, last).
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
      "A worker started the turn; `attempt` counts from 1, `mode` is what the turn may do (absent on turns before modes: code), and `trigger` names a forge's request.",
    data: payload({
      attempt: z.number().int().min(1),
      mode: z.enum(JOB_MODES).optional(),
      trigger: trigger.optional(),
    }),
    words: (d, turn) => {
      const t = d.trigger;
      const how = t?.kind === 'label' ? 'with a label' : `in a ${t?.kind || 'comment'}`;
      const parts = [
        turn !== undefined ? `turn ${turn}` : undefined,
        d.mode && d.mode !== 'code' ? `${d.mode} mode` : undefined,
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
    description:
      'The turn finished: its summary, what it used, its pull request, and `output`, the value valid against its outputSchema when it was given one (docs/structured-output.md).',
    data: payload({
      summary: z.string().nullable(),
      usage: usage.nullable(),
      prLink: z.string().nullable(),
      output: z.unknown().optional(),
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
  'attempt.started': declare({
    kind: 'progress',
    description:
      "An attempt of a best-of-N turn started (docs/eval.md): its number, agent and branch. The attempts' own progress events carry its number as `attemptN`.",
    data: payload({
      n: z.number().int().min(1),
      engine: z.enum(ENGINE_NAMES),
      model: z.string(),
      branch: z.string(),
    }),
    words: (d) => ({ text: `attempt ${d.n}: ${d.engine} on ${d.model}, branch ${d.branch}` }),
  }),
  'attempt.finished': declare({
    kind: 'progress',
    description:
      "An attempt of a best-of-N turn finished: its outcome (passed, failed, unchecked, no_changes, error), its check's exit code, its cost and what it changed.",
    data: payload({
      n: z.number().int().min(1),
      outcome: z.enum(ATTEMPT_OUTCOMES),
      exitCode: z.number().int().nullable(),
      costUsd: z.number().nullable(),
      diff: z.object({ files: z.number().int().min(0), lines: z.number().int().min(0) }),
      error: z.string().optional(),
    }),
    words: (d) => {
      const parts = [
        `attempt ${d.n} ${d.outcome.replace('_', ' ')}`,
        d.exitCode !== null && d.outcome !== 'error' ? `check exit ${d.exitCode}` : undefined,
        `${d.diff.files} file${d.diff.files === 1 ? '' : 's'}, ${d.diff.lines} line${d.diff.lines === 1 ? '' : 's'}`,
        d.costUsd !== null ? `$${d.costUsd.toFixed(4)}` : 'cost unknown',
        d.error,
      ];
      return { text: parts.filter((part) => part !== undefined).join(', ') };
    },
  }),
  'base.integrated': declare({
    kind: 'progress',
    description:
      'A turn the pull request watch queued for a conflict brought the base in: merged or rebased cleanly, already up to date, or stopped on conflicts the agent resolves (`paths`).',
    data: payload({
      base: z.string(),
      strategy: z.enum(['merge', 'rebase']),
      outcome: z.enum(['up-to-date', 'merged', 'rebased', 'conflicted']),
      paths: z.array(z.string()),
      note: z.string().nullable(),
    }),
    words: (d) => {
      const what =
        d.outcome === 'conflicted'
          ? `${d.base} merged with conflicts in ${d.paths.join(', ')}: the agent resolves them`
          : d.outcome === 'up-to-date'
            ? `the branch has ${d.base} already`
            : d.outcome === 'rebased'
              ? `rebased onto ${d.base} without conflicts`
              : `${d.base} merged without conflicts`;
      return { text: d.note ? `${what} (${d.note})` : what };
    },
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
    description:
      "The setup's result was not kept as a snapshot: `cause` and its facts, and `reason` in words.",
    data: payload({ key: z.string(), ...notKept, reason: z.string() }),
    words: (d) => ({ text: `not kept: ${d.cause ? notKeptReason(d) : d.reason}` }),
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
  'checks.failed': declare({
    kind: 'transition',
    description:
      "Checks of the pull request's head commit failed (once per head): their names and pages.",
    data: payload({
      ...pullRequest,
      sha: z.string(),
      checks: z.array(z.object({ name: z.string(), url: z.string().nullable() })),
    }),
    words: (d) => ({
      text: `${d.checks.map((c) => c.name).join(', ')} failed on ${sha(d.sha)}`,
    }),
    webhook: true,
  }),
  'autofix.queued': declare({
    kind: 'transition',
    description:
      'Errand queued a turn to fix the failing checks: the turn, and which attempt of how many in a row.',
    data: payload({
      ...pullRequest,
      sha: z.string(),
      attempt: z.number().int().min(1),
      attempts: z.number().int().min(1),
    }),
    words: (d, turn) => ({
      text: `turn ${turn ?? '?'} queued to fix the checks (attempt ${d.attempt} of ${d.attempts})`,
    }),
    webhook: true,
  }),
  'pr.conflicted': declare({
    kind: 'transition',
    description:
      'The pull request no longer merges into its base: Errand queued a turn that brings the base in.',
    data: payload({
      ...pullRequest,
      sha: z.string(),
      base: z.string(),
      strategy: z.enum(['merge', 'rebase']),
    }),
    words: (d, turn) => ({
      text: `conflicts with ${d.base}; turn ${turn ?? '?'} queued to ${d.strategy === 'rebase' ? 'rebase onto' : 'merge'} it`,
    }),
    webhook: true,
  }),
  'pr.merged': declare({
    kind: 'transition',
    description:
      "The pull request was merged: by Errand (`byErrand`, with the project's merge method) or on the forge.",
    data: payload({
      ...pullRequest,
      sha: z.string().nullable(),
      mergedAt: z.string().nullable(),
      byErrand: z.boolean(),
      method: z.enum(['merge', 'squash', 'rebase']).nullable(),
    }),
    words: (d) => ({
      text: `${d.url} merged${d.byErrand ? ` by Errand (${d.method ?? 'merge'})` : ''}`,
    }),
    webhook: true,
  }),
  'pr.closed': declare({
    kind: 'transition',
    description: 'The pull request was closed without being merged.',
    data: payload(pullRequest),
    words: (d) => ({ text: `${d.url} closed` }),
    webhook: true,
  }),
  'pr.watch_paused': declare({
    kind: 'transition',
    description:
      "Errand stopped acting on the pull request (it keeps following it): the attempts or the budget ran out, a conflict it could not resolve, a person's push, the no-errand label.",
    data: payload({ ...pullRequest, reason: z.string() }),
    words: (d) => ({ text: d.reason }),
    webhook: true,
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
  'mcp.unavailable': declare({
    kind: 'progress',
    description:
      "An MCP server of the job's (docs/mcp-servers.md) that could not be started, reached or listed for this turn: the turn goes on without its tools, and the model is told.",
    data: payload({
      server: z.string().describe("The server's name in the setting."),
      reason: z.string().describe('Why, in a sentence (no secret value; bounded).'),
    }),
    words: (d) => ({ text: `MCP server ${d.server} unavailable: ${d.reason}` }),
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
export const WEBHOOK_EVENT_TYPES: readonly WebhookEventType[] = Object.freeze(
  TYPES.filter((type): type is WebhookEventType => EVENTS[type].webhook === true),
);

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
