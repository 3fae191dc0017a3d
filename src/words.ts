// The words for people that are not an event's: what a job's status and usage mean, and sums,
// sizes and durations as a reader wants them. Said once and used by the CLI, the dashboard, the
// MCP server and the event catalog's words (events/catalog.ts). It imports nothing but a type of
// the database's, so every layer of the server above it may use it; the client package
// (src/client/) keeps to its own.

import type { JobStatus } from './db/schema.ts';

/** The fields of a job its words need: the API's record, or the server's own. */
export interface StatusFacts {
  status: JobStatus;
  prLink: string | null;
  error: string | null;
  turns: number;
}

/** What model calls used and cost, as the API's Usage says it. */
export interface UsageFacts {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  costUsd: number | null;
}

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
export function statusSentence(job: StatusFacts & { id: string }): string {
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

/** A duration for a reader: `850 ms`, `4.2 s`, `1 min 5 s`. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${Number((ms / 1000).toFixed(1))} s`;
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

/** A job's or a turn's usage (the API's Usage) in one line: `12,345 tokens in (…) · $0.0421`. */
export function usageLine(usage: UsageFacts): string {
  const n = (x: number) => x.toLocaleString('en-US');
  const cached = usage.cacheReadTokens > 0 ? ` (${n(usage.cacheReadTokens)} cached)` : '';
  const cost =
    usage.costUsd === null ? 'cost unknown (no price for the model)' : formatUsd(usage.costUsd);
  return `${n(usage.inputTokens)} tokens in${cached}, ${n(usage.outputTokens)} out; ${cost}`;
}

/** A job's usage as a sentence for the MCP's model; empty before the model was called. */
export function usageSentence(usage: UsageFacts): string {
  if (usage.inputTokens + usage.outputTokens === 0) return '';
  const cost =
    usage.costUsd === null
      ? 'its cost is unknown (the model has no known price)'
      : `about ${formatUsd(usage.costUsd)} at list prices`;
  return `It has used ${usage.inputTokens} input tokens (${usage.cacheReadTokens} from the cache) and ${usage.outputTokens} output tokens, ${cost}.`;
}

/** The facts of a job's pull request its line needs: the API's `pr`, or the server's own. */
export interface PrFacts {
  state: 'open' | 'closed' | 'merged';
  mergedAt: string | null;
  mergeable: boolean | null;
  approved: boolean;
  checks: readonly { state: 'pending' | 'success' | 'failure' }[];
  watch: { state: 'watching' | 'paused' | 'ended'; reason: string | null; autofixes: number };
}

/**
 * What the forge last said of a job's pull request, and what Errand does with it, as one line:
 * `open, approved; checks: 3 passed, 1 failed, 0 pending; watch: paused (…)`.
 */
export function prLine(pr: PrFacts): string {
  const state =
    pr.state === 'merged'
      ? pr.mergedAt
        ? `merged at ${pr.mergedAt}`
        : 'merged'
      : pr.state === 'open'
        ? [
            'open',
            ...(pr.approved ? ['approved'] : []),
            ...(pr.mergeable === false ? ['conflicts with its base'] : []),
          ].join(', ')
        : 'closed';
  const count = (state: PrFacts['checks'][number]['state']) =>
    pr.checks.filter((check) => check.state === state).length;
  const checks =
    pr.checks.length === 0
      ? 'no checks'
      : `checks: ${count('success')} passed, ${count('failure')} failed, ${count('pending')} pending`;
  const fixes =
    pr.watch.autofixes > 0
      ? `${pr.watch.autofixes} fix${pr.watch.autofixes === 1 ? '' : 'es'} tried in a row`
      : '';
  const why = [pr.watch.reason ?? '', fixes].filter(Boolean).join('; ');
  return `${state}; ${checks}; watch: ${pr.watch.state}${why ? ` (${why})` : ''}`;
}
