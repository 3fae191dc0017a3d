// A job's progress events as the CLI prints them: one line each, time, type and a short text
// a person can follow in a terminal (the tool the agent called, the commit, the pull request),
// not the event's JSON, which `--json` prints instead.
import type { Job, JobEvent } from '../client/index.ts';

const MAX_TEXT = 200;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** What a status event (whose data is the job record) means for the reader. */
export function statusText(job: Pick<Job, 'status' | 'prLink' | 'error' | 'turns'>): string {
  if (job.status === 'failed') return job.error ? `failed: ${job.error}` : 'failed';
  if (job.status === 'completed')
    return job.prLink ? `completed: ${job.prLink}` : 'completed; no pull request: nothing changed';
  if (job.status === 'active') return `active, turn ${job.turns} queued`;
  return job.status;
}

function tokens(usage: unknown): string {
  if (!isRecord(usage)) return '';
  const input = usage.inputTokens;
  const output = usage.outputTokens;
  return typeof input === 'number' && typeof output === 'number'
    ? ` (${input} in, ${output} out)`
    : '';
}

/** The short text of one event: what happened, by type; the data's own words where it has them. */
export function eventText(event: Pick<JobEvent, 'type' | 'data'>): string {
  const d = isRecord(event.data) ? event.data : {};
  const job = isRecord(d.job) ? d.job : undefined;
  if (event.type.startsWith('job.') && job && typeof job.status === 'string')
    return statusText(job as unknown as Job);
  switch (event.type) {
    case 'turn.started':
      return typeof d.attempt === 'number' && d.attempt > 1 ? `attempt ${d.attempt}` : '';
    case 'tool.call':
      return str(d.summary) ?? str(d.name) ?? '';
    case 'tool.result':
      return `${d.ok === false ? 'error: ' : ''}${str(d.summary) ?? ''}`;
    case 'model.step':
      return `step ${typeof d.step === 'number' ? d.step : '?'}${tokens(d.usage)}`;
    case 'workspace.ready':
      return `${d.continued === true ? 'continuing' : 'new branch'} at ${String(d.head ?? d.base ?? '').slice(0, 12)}`;
    case 'files.changed': {
      // Each file is {path, change}.
      const files = (Array.isArray(d.files) ? d.files : [])
        .map((f: unknown) => (isRecord(f) ? str(f.path) : str(f)))
        .filter((f): f is string => f !== undefined);
      const count = typeof d.count === 'number' ? d.count : files.length;
      return `${count} file${count === 1 ? '' : 's'}: ${files.slice(0, 5).join(', ')}${count > 5 ? ', …' : ''}`;
    }
    case 'commit':
      return `${String(d.sha ?? '').slice(0, 12)} ${str(d.subject) ?? ''}`.trim();
    case 'push':
      return `${str(d.branch) ?? ''} at ${String(d.sha ?? '').slice(0, 12)}`;
    case 'turn.no_changes':
      return 'nothing changed';
    case 'turn.finished':
      return str(d.prLink) ?? str(d.summary)?.split('\n')[0] ?? '';
    case 'turn.failed':
      return str(d.error) ?? '';
    case 'command.started':
    case 'setup.started':
      return str(d.command) ?? '';
    case 'command.finished':
    case 'setup.finished':
      return [
        d.timedOut === true ? 'timed out' : undefined,
        typeof d.exitCode === 'number' ? `exit ${d.exitCode}` : str(d.signal),
        str(d.command),
      ]
        .filter((part) => part !== undefined)
        .join(': ');
  }
  const named = str(d.title) ?? str(d.url) ?? str(d.summary) ?? str(d.message) ?? str(d.error);
  if (named) return named;
  return Object.keys(d).length === 0 ? '' : JSON.stringify(d);
}

function oneLine(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > MAX_TEXT ? `${line.slice(0, MAX_TEXT - 1)}…` : line;
}

/** Local time of day, e.g. 14:03:27: the date is the terminal's own. */
function clock(at: string): string {
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) return at;
  return [date.getHours(), date.getMinutes(), date.getSeconds()]
    .map((n) => String(n).padStart(2, '0'))
    .join(':');
}

export function eventLine(event: Pick<JobEvent, 'type' | 'data' | 'at'>): string {
  const text = oneLine(eventText(event));
  return `${clock(event.at)}  ${event.type}${text ? `  ${text}` : ''}`;
}
