// How an event type is declared in the catalog (catalog.ts), and the pieces of data and words
// that several declarations share: the usage of model calls, the job record, a command's start
// and end, and the sentences that API readers also get stored (a compaction's, why an
// environment was not kept), composed by the same functions as the words.
import { z } from 'zod';
import { jobRecord, usageRecord } from '../records/job.ts';
import { formatBytes, formatUsd, statusLine } from '../words.ts';

/** What a person reads of one event. */
export interface EventWords {
  /** One line: what happened (the tool call, the commit, the pull request). May be empty. */
  text: string;
  /** Longer text that belongs to it (a command's output), for a view that can fold it away. */
  detail?: { label: string; text: string };
}

/** The phase of a turn an event ends (queue/turn-report.ts times them). */
export type Phase = 'workspace' | 'agent' | 'commit' | 'push' | 'pullRequest';

type Kind = 'transition' | 'progress';

export interface Declaration<
  S extends z.ZodType,
  K extends Kind = Kind,
  W extends boolean = boolean,
> {
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
export function declare<S extends z.ZodType, K extends Kind, W extends boolean = false>(
  declaration: Declaration<S, K, W>,
): Declaration<S, K, W> {
  return declaration;
}

// The data of each type: its fields, as the log stores them. Loose objects: an event of an
// older version may carry a field this one no longer writes, and a reader skips what it does
// not know.
export const payload = z.looseObject;

/** What model calls used and cost: the job record's usage (src/records/job.ts). */
export const usage = usageRecord;

export const trigger = z
  .object({
    forge: z.string(),
    kind: z.string().describe('comment, line comment, review or label.'),
    url: z.string(),
    author: z.string().describe('The forge login of who asked.'),
  })
  .describe('The forge comment or label that asked for the turn.');

/** What the job's events say of the forge event that asked for a turn (jobs/accept.ts). */
export type ShownTrigger = z.output<typeof trigger>;

export const sha = (value: string) => value.slice(0, 12);

export const jobStatusEvent = (what: string) =>
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

export const commandStart = (what: string) =>
  declare({
    kind: 'progress',
    description: `${what} started.`,
    data: payload({ command: z.string(), network }),
    words: (d) => ({ text: `${d.command}${networkWords(d.network)}` }),
  });

export const commandEnd = (what: string) =>
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
export function environmentSize(d: { files: number; bytes: number }): string {
  return `environment (${d.files.toLocaleString('en-US')} files, ${formatBytes(d.bytes)})`;
}

export function tokens(u: z.output<typeof usage>): string {
  const parts = [
    `${u.inputTokens} in`,
    `${u.outputTokens} out`,
    ...(u.cacheReadTokens ? [`${u.cacheReadTokens} cached`] : []),
    ...(u.costUsd !== null ? [formatUsd(u.costUsd)] : []),
  ];
  return ` (${parts.join(', ')})`;
}

export const compaction = {
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

/** Why a setup's result was not kept (events of older versions have only `reason`). */
export const notKept = {
  cause: z.enum(['setup_failed', 'secret', 'too_large']).optional(),
  secret: z.string().optional().describe('The setup-only secret whose value it holds.'),
  bytes: z.number().min(0).optional(),
  limitBytes: z.number().min(0).optional().describe("The environment cache's size."),
};

/** Why a setup's result was not kept, in words: composed when read, and stored for the API. */
export function notKeptReason(d: {
  cause?: 'setup_failed' | 'secret' | 'too_large' | undefined;
  secret?: string | undefined;
  bytes?: number | undefined;
  limitBytes?: number | undefined;
}): string {
  switch (d.cause) {
    case 'secret':
      return `it holds the value of secret ${d.secret}, which only the setup may see`;
    case 'too_large':
      return `it is larger (${d.bytes} bytes) than the environment cache (${d.limitBytes} bytes)`;
    default:
      return 'the setup command did not succeed';
  }
}

export const pullRequest = { forge: z.string(), number: z.number().int(), url: z.string() };
