// The words between Errand and the people on a forge: whether a comment calls Errand, the
// prompt a comment or an issue becomes, and what Errand answers. Every answer carries a hidden
// marker, so that Errand's own comments (posted with a person's token, they look like that
// person's) never call it again.
import type { AppError } from '../../errors.ts';
import { ERRAND_MARKER, type ForgeCommentEvent, type ForgeEvent } from '../../forges/events.ts';
import { readForgeRepository } from '../../forges/http.ts';
import { withoutReviewToken } from '../../jobs/review-link.ts';
import { RateLimitedError } from '../../ratelimit/ratelimit.ts';

export { ERRAND_MARKER };

/** How many lines of a turn's summary its answer quotes. */
const SUMMARY_LINES = 6;
/** The most of a comment, an issue's body or a hunk a prompt quotes. */
const MAX_QUOTED = 20_000;

export function writtenByErrand(body: string): boolean {
  return body.includes(ERRAND_MARKER);
}

/**
 * Whether `body` mentions `@handle`: a whole word, in any case, outside quoted lines (a reply
 * quoting an earlier request is not a new one) and not inside an address (`me@handle.dev`).
 */
export function mentions(body: string, handle: string): boolean {
  const escaped = handle.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp(`(?<![\\w@/.-])@${escaped}(?![\\w-])`, 'i');
  return body
    .split('\n')
    .filter((line) => !/^\s*>/.test(line))
    .some((line) => pattern.test(line));
}

/**
 * A repository URL as the web and git sides both write it: the host without its port (an ssh
 * remote's port says nothing of the web side) and the path, in lower case, without `.git`.
 */
function repositoryKey(url: string): string | undefined {
  const repo = readForgeRepository(url);
  if (!repo) return undefined;
  return `${repo.host.split(':')[0]}/${repo.path}`.toLowerCase();
}

export function sameRepository(a: string, b: string): boolean {
  const left = repositoryKey(a);
  return left !== undefined && left === repositoryKey(b);
}

function clip(text: string, max = MAX_QUOTED): string {
  return text.length > max ? `${text.slice(0, max)}\n… (shortened)` : text;
}

function fenced(text: string, lang = ''): string {
  // A fence longer than any run of backticks inside, so the quoted text cannot close it.
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = '`'.repeat(longest + 1);
  return `${fence}${lang}\n${text}\n${fence}`;
}

function whatComment(event: ForgeCommentEvent): string {
  const on = event.thread.kind === 'pull-request' ? 'the pull request' : 'the issue';
  if (event.where === 'line') return `A review comment on ${on}`;
  if (event.where === 'review') return `A review of ${on}`;
  return `A comment on ${on}`;
}

/** The prompt of a follow-up asked for in a comment on a job's pull request or issue. */
export function followUpPrompt(event: ForgeCommentEvent): string {
  const parts = [
    `${whatComment(event)} by @${event.author.login} (${event.url}) asks for changes:`,
    clip(event.body.trim()),
  ];
  if (event.anchor) {
    const line = event.anchor.line === null ? '' : `, line ${event.anchor.line}`;
    parts.push(`It is on \`${event.anchor.path}\`${line}.`);
    if (event.anchor.diffHunk.trim() !== '')
      parts.push(`The diff it comments on:\n\n${fenced(clip(event.anchor.diffHunk), 'diff')}`);
  }
  return parts.join('\n\n');
}

/** The prompt of a job made from an issue: its title and body, and the comment that asked. */
export function issuePrompt(event: ForgeEvent): string {
  const { thread } = event;
  const parts = [
    `Work on issue #${thread.number} (${thread.url}): ${thread.title}`,
    thread.body.trim() === '' ? '(The issue has no description.)' : clip(thread.body.trim()),
  ];
  if (event.type === 'comment') {
    parts.push(
      `@${event.author.login} asked in a comment (${event.url}):`,
      clip(event.body.trim()),
    );
  } else {
    parts.push(`@${event.author.login} labelled the issue \`${event.label}\` to ask for this.`);
  }
  return parts.join('\n\n');
}

export function acceptedOnIssue(jobUrl: string, jobId: string): string {
  return `${ERRAND_MARKER}\nOn it: job [\`${jobId}\`](${jobUrl}) works on this issue; its pull request will close it.`;
}

export function noAccess(login: string, handle: string): string {
  return `${ERRAND_MARKER}\nSorry @${login}, @${handle} takes requests only from people with write access to this repository.`;
}

/** `3 days`, `1 hour`: a span as people say it, rounded up to its largest unit. */
function span(seconds: number): string {
  const units: [name: string, seconds: number][] = [
    ['day', 86_400],
    ['hour', 3_600],
    ['minute', 60],
  ];
  // A unit once the span is at least one and a half of it, so that 80 minutes is not `2 hours`.
  const [name, size] = units.find(([, size]) => seconds >= size * 1.5) ?? ['second', 1];
  const n = Math.max(1, Math.ceil(seconds / size));
  return `${n} ${name}${n === 1 ? '' : 's'}`;
}

/** `hour`, `10 minutes`: a rate limit's window, in its largest whole unit. */
function perWindow(seconds: number): string {
  const units: [name: string, seconds: number][] = [
    ['day', 86_400],
    ['hour', 3_600],
    ['minute', 60],
    ['second', 1],
  ];
  const [name, size] = units.find(([, size]) => seconds % size === 0) ?? ['second', 1];
  const n = seconds / size;
  return n === 1 ? name : `${n} ${name}s`;
}

/**
 * Why the service refused what a forge event asked for, for the people on the forge: a rate
 * limit in words and the time to wait; any other refusal (a budget, an archived job, a model)
 * in the service's own message, which names the setting an admin would change.
 */
export function refused(err: AppError): string {
  let why = err.message;
  if (err instanceof RateLimitedError) {
    const { limit, windowSeconds, resetSeconds } = err.state;
    const what =
      err.operation === 'create'
        ? `${limit} new ${limit === 1 ? 'job' : 'jobs'}`
        : `${limit} ${limit === 1 ? 'follow-up' : 'follow-ups'}`;
    why = `the project's limit of ${what} per ${perWindow(windowSeconds)} is reached; ask again in ${span(resetSeconds)}`;
  }
  return `${ERRAND_MARKER}\nErrand cannot take this up: ${why}${/[.!?]$/.test(why) ? '' : '.'}`;
}

/**
 * The answer when a turn has ended: the summary's first lines, the commit, and the job's link. A
 * review link goes without its token: the thread's readers are not all the job's.
 */
export function turnEnded(turn: {
  state: 'done' | 'failed';
  summary: string | null;
  commitSha: string | null;
  error: string | null;
  jobId: string;
  jobUrl: string;
  prLink: string | null;
}): string {
  const job = `[job \`${turn.jobId}\`](${turn.jobUrl})`;
  if (turn.state === 'failed') {
    return `${ERRAND_MARKER}\nThis did not work out: ${turn.error ?? 'the turn failed'}\n\nSee ${job}.`;
  }
  const summary = (turn.summary ?? '')
    .trim()
    .split('\n')
    .filter((line) => line.trim() !== '')
    .slice(0, SUMMARY_LINES)
    .join('\n');
  const done = turn.commitSha
    ? `Pushed commit ${turn.commitSha.slice(0, 12)}${turn.prLink ? ` to ${withoutReviewToken(turn.prLink)}` : ''}.`
    : 'No files changed.';
  return `${ERRAND_MARKER}\n${summary || 'Done.'}\n\n${done} See ${job}.`;
}
