// A job's progress events as the CLI prints them: one line each, time, type and a short text
// a person can follow in a terminal (the tool the agent called, the commit, the pull request),
// not the event's JSON, which `--json` prints instead. The words are the event catalog's
// (src/events/catalog.ts), shared with the dashboard and the MCP server.
import type { Job, JobEvent } from '../client/index.ts';
import { eventWords } from '../events/catalog.ts';
import { oneLine } from '../text.ts';
import { statusLine } from '../words.ts';

const MAX_TEXT = 200;

/** What a job's status means for the reader: `completed: <pull request>`, `failed: <why>`. */
export function statusText(job: Pick<Job, 'status' | 'prLink' | 'error' | 'turns'>): string {
  return statusLine(job);
}

/** Local time of day, e.g. 14:03:27: the date is the terminal's own. */
function clock(at: string): string {
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) return at;
  return [date.getHours(), date.getMinutes(), date.getSeconds()]
    .map((n) => String(n).padStart(2, '0'))
    .join(':');
}

export function eventLine(event: Pick<JobEvent, 'type' | 'data' | 'at' | 'turn'>): string {
  const text = oneLine(eventWords(event).text, MAX_TEXT);
  return `${clock(event.at)}  ${event.type}${text ? `  ${text}` : ''}`;
}
