// The words for people: what a job's status and each event of its progress log mean, said once
// and used by the CLI's event lines, the dashboard's progress log and the MCP server's answers.
// Part of errand/client, so it imports nothing outside src/client/ and no Node module.
import type { components } from './openapi.ts';

type Job = components['schemas']['AgentJob'];
type JobStatus = Job['status'];

/** Every status a job can have, in the order of its life. The one list. */
export const JOB_STATUSES = Object.freeze([
  'active',
  'completed',
  'failed',
  'archived',
] as const) satisfies readonly JobStatus[];

/** The fields of a job its words need: the API's record, or the server's own. */
export type StatusFacts = Pick<Job, 'status' | 'prLink' | 'error' | 'turns'>;

/**
 * A job's status as one line, for a log or a terminal: what it means for the reader, not the
 * record (`completed: <pull request>`, `failed: <why>`).
 */
export function statusLine(job: StatusFacts): string {
  switch (job.status) {
    case 'active':
      return `active, turn ${job.turns} queued`;
    case 'completed':
      return job.prLink
        ? `completed: ${job.prLink}`
        : 'completed; no pull request: nothing changed';
    case 'failed':
      return job.error ? `failed: ${job.error}` : 'failed';
    case 'archived':
      return 'archived';
  }
}

/** A job's status as a sentence for a reader who sees nothing else of it (the MCP's model). */
export function statusSentence(job: StatusFacts & Pick<Job, 'id'>): string {
  switch (job.status) {
    case 'active':
      return `Job ${job.id} is active: the agent is working on turn ${job.turns} (or it is queued).`;
    case 'completed':
      return job.prLink
        ? `Job ${job.id} is completed; its pull request is ${job.prLink}`
        : `Job ${job.id} is completed without a pull request (the agent changed no files).`;
    case 'failed':
      return `Job ${job.id} failed: ${job.error ?? 'no reason recorded'}.`;
    case 'archived':
      return `Job ${job.id} is archived: it is closed for good and takes no more messages.${job.prLink ? ` Its pull request was ${job.prLink}` : ''}`;
  }
}

/** What a person reads of one event. */
export interface EventWords {
  /** One line: what happened (the tool call, the commit, the pull request). May be empty. */
  text: string;
  /** Longer text that belongs to it (a command's output), for a view that can fold it away. */
  detail?: { label: string; text: string };
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

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function sha(value: unknown): string {
  return String(value ?? '').slice(0, 12);
}

function tokens(usage: unknown): string {
  if (!isRecord(usage)) return '';
  const input = num(usage.inputTokens);
  const output = num(usage.outputTokens);
  if (input === undefined || output === undefined) return '';
  const cached = num(usage.cacheReadTokens);
  const cost = num(usage.costUsd);
  const parts = [
    `${input} in`,
    `${output} out`,
    ...(cached ? [`${cached} cached`] : []),
    ...(cost !== undefined ? [formatUsd(cost)] : []),
  ];
  return ` (${parts.join(', ')})`;
}

/**
 * US dollars for a reader: cents from a dollar up, four decimals below one (a step costs
 * fractions of a cent), `unknown` when the price is.
 */
export function formatUsd(usd: number | null | undefined): string {
  if (usd === null || usd === undefined || !Number.isFinite(usd)) return 'unknown';
  if (usd === 0) return '$0.00';
  if (Math.abs(usd) < 1) return `$${usd.toFixed(4)}`;
  return `$${usd.toFixed(2)}`;
}

/** A size for a reader, in powers of 1024: `812 B`, `1.4 MB`, `312 MB`, `2.1 GB`. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const shown = unit === 0 || value >= 100 ? Math.round(value) : Number(value.toFixed(1));
  return `${shown} ${units[unit]}`;
}

/** An environment event's snapshot: `38,412 files, 393 MB`. */
function environmentSize(d: Record<string, unknown>): string {
  const files = num(d.files);
  const bytes = num(d.bytes);
  const parts = [
    files === undefined ? undefined : `${files.toLocaleString('en-US')} files`,
    bytes === undefined ? undefined : formatBytes(bytes),
  ].filter((part): part is string => part !== undefined);
  return parts.length > 0 ? `environment (${parts.join(', ')})` : 'environment';
}

/** A duration for a reader: `850 ms`, `4.2 s`, `1 min 5 s`. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${Number((ms / 1000).toFixed(1))} s`;
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

/** A job's or a turn's usage (the API's Usage) in one line: `12,345 tokens in (…) · $0.0421`. */
export function usageLine(usage: Job['usage']): string {
  const n = (x: number) => x.toLocaleString('en-US');
  const cached = usage.cacheReadTokens > 0 ? ` (${n(usage.cacheReadTokens)} cached)` : '';
  const cost =
    usage.costUsd === null ? 'cost unknown (no price for the model)' : formatUsd(usage.costUsd);
  return `${n(usage.inputTokens)} tokens in${cached}, ${n(usage.outputTokens)} out; ${cost}`;
}

/** A job's usage as a sentence for the MCP's model; empty before the model was called. */
export function usageSentence(usage: Job['usage']): string {
  if (usage.inputTokens + usage.outputTokens === 0) return '';
  const cost =
    usage.costUsd === null
      ? 'its cost is unknown (the model has no known price)'
      : `about ${formatUsd(usage.costUsd)} at list prices`;
  return `It has used ${usage.inputTokens} input tokens (${usage.cacheReadTokens} from the cache) and ${usage.outputTokens} output tokens, ${cost}.`;
}

function isStatusFacts(value: unknown): value is StatusFacts {
  return (
    isRecord(value) &&
    typeof value.status === 'string' &&
    (JOB_STATUSES as readonly string[]).includes(value.status)
  );
}

/** A command's end: `timed out: exit 137: npm test`; its output as the detail. */
function commandEnd(d: Record<string, unknown>): EventWords {
  const text = [
    d.timedOut === true ? 'timed out' : undefined,
    num(d.exitCode) !== undefined ? `exit ${num(d.exitCode)}` : str(d.signal),
    str(d.command),
  ]
    .filter((part) => part !== undefined)
    .join(': ');
  const output = str(d.outputTail);
  return output ? { text, detail: { label: 'Output', text: output } } : { text };
}

/** A setup's network as setup.started names it ("open", "allowlist"; true in older events). */
function setupNetworkWords(network: unknown): string {
  if (network === true || network === 'open') return ' (with network)';
  if (network === 'allowlist') return ' (network: allowlist)';
  return '';
}

/** The event's words: by its type, in the data's own words where it has them. */
export function eventWords(event: EventFacts): EventWords {
  const d = isRecord(event.data) ? event.data : {};
  if (event.type.startsWith('job.') && isStatusFacts(d.job)) return { text: statusLine(d.job) };
  const turn = num(event.turn);
  switch (event.type) {
    case 'turn.started': {
      const attempt = num(d.attempt);
      const again = attempt !== undefined && attempt > 1 ? `attempt ${attempt}` : undefined;
      // A turn a forge comment or label asked for says whose, and where.
      const trigger = isRecord(d.trigger) ? d.trigger : {};
      const author = str(trigger.author);
      const kind = str(trigger.kind) ?? 'comment';
      const how = kind === 'label' ? 'with a label' : `in a ${kind}`;
      const asked = author
        ? `asked by @${author} ${how} on ${str(trigger.forge) ?? 'the forge'}`
        : undefined;
      const parts = [turn !== undefined ? `turn ${turn}` : undefined, again, asked];
      return { text: parts.filter((part) => part !== undefined).join(', ') };
    }
    case 'turn.retrying': {
      const wait = num(d.retryInSeconds);
      return {
        text: `${str(d.error) ?? 'failed'}; trying again${wait !== undefined ? ` in ${wait} s` : ''}`,
      };
    }
    case 'turn.resumed':
      return { text: `already pushed as ${sha(d.commit)}; finishing the pull request` };
    case 'turn.no_changes':
      return { text: 'nothing changed' };
    case 'turn.finished':
      return { text: str(d.prLink) ?? str(d.summary)?.split('\n')[0] ?? '' };
    case 'turn.failed':
      return { text: str(d.error) ?? '' };
    case 'workspace.ready':
      return {
        text: `${d.continued === true ? 'continuing' : 'new branch'} at ${sha(d.head ?? d.base)}`,
      };
    case 'engine.started': {
      const resumed = str(d.resumed);
      return {
        text:
          `${str(d.engine) ?? 'engine'} ${str(d.version) ?? ''}`.trim() +
          (resumed ? `, resuming session ${resumed}` : ', new session'),
      };
    }
    case 'sandbox.unavailable':
      return {
        text: `commands are off: ${[str(d.reason), str(d.howToFix)].filter(Boolean).join('; ')}`,
      };
    case 'setup.started':
      return { text: `${str(d.command) ?? ''}${setupNetworkWords(d.network)}` };
    case 'network.denied': {
      const host = str(d.host) ?? '?';
      const where = `${host.includes(':') ? `[${host}]` : host}:${num(d.port) ?? '?'}`;
      return {
        text:
          d.reason === 'private address'
            ? `${where} refused: it resolves to a private address`
            : `${where} refused: not in the project's network allowlist`,
      };
    }
    case 'maintenance.started':
      return { text: `${str(d.command) ?? ''}${setupNetworkWords(d.network)}` };
    case 'environment.restored':
      return {
        text: `${environmentSize(d)} restored in ${formatMs(num(d.ms) ?? 0)}${d.from === 'copy' ? ' (copied: no spare was ready)' : ''}`,
      };
    case 'environment.built':
      return { text: `${environmentSize(d)} kept after the setup` };
    case 'environment.not_kept':
      return { text: `not kept: ${str(d.reason) ?? 'unknown reason'}` };
    case 'command.started':
      return { text: str(d.command) ?? '' };
    case 'command.finished':
    case 'setup.finished':
    case 'maintenance.finished':
      return commandEnd(d);
    case 'tool.call':
      return { text: str(d.summary) ?? str(d.title) ?? str(d.name) ?? '' };
    case 'tool.result':
      return { text: `${d.ok === false ? 'error: ' : ''}${str(d.summary) ?? str(d.title) ?? ''}` };
    case 'model.step':
      return { text: `step ${num(d.step) ?? '?'}${tokens(d.usage)}` };
    case 'context.compacted':
      return { text: str(d.summary) ?? 'summarised the older conversation' };
    case 'files.changed': {
      // Each file is {path, change}.
      const files = (Array.isArray(d.files) ? d.files : [])
        .map((f: unknown) => (isRecord(f) ? str(f.path) : str(f)))
        .filter((f): f is string => f !== undefined);
      const count = num(d.count) ?? files.length;
      return {
        text: `${count} file${count === 1 ? '' : 's'}: ${files.slice(0, 5).join(', ')}${count > 5 ? ', …' : ''}`,
      };
    }
    case 'commit':
      return { text: `${sha(d.sha)} ${str(d.subject) ?? ''}`.trim() };
    case 'push':
      return { text: `${str(d.branch) ?? ''} at ${sha(d.sha)}` };
    case 'review.updated':
    case 'pull_request.updated':
      return { text: str(d.url) ?? '' };
    case 'pull_request.opened': {
      const notes = (Array.isArray(d.notes) ? d.notes : []).filter(
        (note): note is string => typeof note === 'string' && note !== '',
      );
      return {
        text: [`${str(d.url) ?? ''}${d.draft === true ? ' (draft)' : ''}`, ...notes].join('; '),
      };
    }
  }
  // A type this version does not know: its data's own words, else the data itself.
  const named = str(d.title) ?? str(d.url) ?? str(d.summary) ?? str(d.message) ?? str(d.error);
  if (named) return { text: named };
  return { text: Object.keys(d).length === 0 ? '' : JSON.stringify(d) };
}
