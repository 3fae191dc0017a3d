// The job pages as functions of their data: a project's jobs with the new-job form, a job with
// its turns, progress log and diff, and the archive confirmation. Every value goes through
// `html`; the summaries and the diff arrive already rendered by their escaping renderers.
import { type EventFacts, eventWords } from '../events/catalog.ts';
import type { MonthUsage } from '../jobs/spend.ts';
import type { Usage } from '../jobs/usage.ts';
import type { Principal } from '../keys/service.ts';
import { actorRef } from '../records/actor.ts';
import { JOB_MODES, JOB_STATUSES, type JobMode, type JobRecord } from '../records/job.ts';
import { ENGINE_NAMES, type ProjectRecord } from '../records/project.ts';
import { formatBytes, formatUsd, prLine, usageLine } from '../words.ts';
import { html, SafeHtml } from './html.ts';
import { attemptsSection } from './job-attempts.ts';
import { externalLink, notice, page, when } from './layout.ts';

export interface JobListItem {
  job: JobRecord;
  /** Who created it, as the page shows it. */
  createdBy: SafeHtml;
  /** The first prompt, cut to an excerpt. */
  prompt: string;
}

/** "3 min ago": the age of a job at the time the page was made. */
function age(iso: string, now: number): SafeHtml {
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  const text =
    seconds < 60
      ? `${seconds} s ago`
      : seconds < 3600
        ? `${Math.floor(seconds / 60)} min ago`
        : seconds < 86_400
          ? `${Math.floor(seconds / 3600)} h ago`
          : `${Math.floor(seconds / 86_400)} d ago`;
  return html`<time datetime="${iso}" title="${iso}">${text}</time>`;
}

/**
 * What the project spent this month (UTC), against its monthly budget when it has one; the
 * cost of usage whose price is unknown is left out, and said so.
 */
export function monthSpend(project: ProjectRecord, month: MonthUsage): SafeHtml {
  const budget = project.monthlyBudgetUsd;
  const unpriced =
    month.unpriced > 0
      ? html` (and ${month.unpriced} turn${month.unpriced === 1 ? '' : 's'} of a model without a known price)`
      : '';
  return html`<p class="muted" id="month-spend">Spent in ${month.month} (UTC): ${formatUsd(month.costUsd)}${
    budget !== null ? html` of the monthly budget of ${formatUsd(budget)}` : ''
  }${unpriced}, estimated at list prices.</p>`;
}

export function jobsPage(
  principal: Principal,
  project: ProjectRecord,
  month: MonthUsage,
  list: {
    items: JobListItem[];
    status: string | undefined;
    /** The creator the list is filtered by (an actor's ref), if any. */
    createdBy: string | undefined;
    nextCursor: string | null;
    now: number;
  },
  form: {
    prompt?: string | undefined;
    mode?: string | undefined;
    attempts?: string | undefined;
    /** Each attempt's agent as typed, by attempt (from 0). */
    agents?: FormAgent[] | undefined;
    error?: string | undefined;
    created?: string | undefined;
  },
): string {
  const filter = html`<form method="get" action="/projects/${project.id}/jobs" class="filter">
  <label for="status">Status</label>
  <select id="status" name="status">
    <option value="" ${list.status ? '' : html`selected`}>All</option>
    ${JOB_STATUSES.map((s) => html`<option value="${s}" ${list.status === s ? html`selected` : ''}>${s}</option>`)}
  </select>
  ${list.createdBy ? html`<input type="hidden" name="createdBy" value="${list.createdBy}">` : ''}
  <button type="submit">Filter</button>
</form>${list.createdBy ? html`<p>Created by <span class="mono">${list.createdBy}</span> only. <a href="/projects/${project.id}/jobs">All jobs</a></p>` : ''}`;
  const table = list.items.length
    ? html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Prompt</th><th scope="col">Status</th><th scope="col">Created by</th><th scope="col">Pull request</th><th scope="col">Age</th></tr></thead>
<tbody>${list.items.map(
        ({ job, prompt, createdBy }) => html`<tr>
  <td class="wrap"><a href="/projects/${project.id}/jobs/${job.id}">${prompt || job.id}</a><div class="muted mono">${job.id}</div></td>
  <td data-label="Status"><span class="badge ${job.status}">${job.status}</span></td>
  <td class="wrap" data-label="Created by">${createdBy}</td>
  <td class="wrap" data-label="Pull request">${externalLink(job.prLink)}</td>
  <td data-label="Age">${age(job.createdAt, list.now)}</td>
</tr>`,
      )}</tbody></table></div>`
    : html`<p>No jobs${list.status ? html` with status ${list.status}` : ''}.</p>`;
  const next = list.nextCursor
    ? html`<p><a href="/projects/${project.id}/jobs?${new URLSearchParams({
        ...(list.status ? { status: list.status } : {}),
        ...(list.createdBy ? { createdBy: list.createdBy } : {}),
        cursor: list.nextCursor,
      }).toString()}">Older jobs</a></p>`
    : '';
  return page(
    { title: `Jobs of ${project.name}`, principal },
    html`${notice(form.created ? `Job ${form.created} created.` : undefined, 'ok')}
${monthSpend(project, month)}
${filter}${table}${next}
<section aria-labelledby="new-job"><h2 id="new-job">New job</h2>
${notice(form.error)}
<form method="post" action="/projects/${project.id}/jobs" class="card">
  <label for="prompt">Prompt</label>
  <textarea id="prompt" name="prompt" rows="5" required>${form.prompt ?? ''}</textarea>
  ${modeField(form.mode)}
  ${attemptsField(form.attempts, project)}
  ${agentsField(form.agents ?? [], project)}
  <button type="submit">Create job</button>
</form></section>`,
  );
}

export interface TurnView {
  seq: number;
  state: string;
  prompt: string;
  /** The agent's summary as safe HTML (src/dashboard/markdown.ts), or undefined. */
  summaryHtml: string | undefined;
  error: string | null;
  usage: Usage | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  /** Who sent the prompt, as the page shows it. */
  sentBy: SafeHtml;
  /** What the turn could do (docs/modes.md). */
  mode: JobMode;
  /** Its structured output as indented JSON, for a turn given an output schema that finished. */
  outputJson?: string | undefined;
  /** The images sent with its prompt, each with where the dashboard serves it (docs/images.md). */
  images: { n: number; mediaType: string; size: number; src: string }[];
}

/** A turn's images, each linked to itself at full size. */
function turnImages(turn: TurnView): SafeHtml {
  return html`<div class="turn-images">${turn.images.map(
    (image) =>
      html`<figure><a href="${image.src}"><img src="${image.src}" alt="Image ${image.n} of turn ${turn.seq}" loading="lazy"></a><figcaption class="muted">Image ${image.n}: ${image.mediaType}, ${formatBytes(image.size)}</figcaption></figure>`,
  )}</div>`;
}

/** The most attempts a job makes at once (src/jobs/best-of.ts). */
const MAX_ATTEMPTS = 4;

/** Best-of-N on the create form: how many attempts, each judged by the project's check command. */
function attemptsField(chosen: string | undefined, project: ProjectRecord): SafeHtml {
  const counts = Array.from({ length: MAX_ATTEMPTS }, (_, i) => String(i + 1));
  return html`<label for="attempts">Attempts</label>
  <select id="attempts" name="attempts" aria-describedby="attempts-help">
    ${counts.map((n) => html`<option value="${n}" ${(chosen ?? '1') === n ? html`selected` : ''}>${n}</option>`)}
  </select>
  <p class="muted" id="attempts-help">More than one: the agent makes that many attempts at once (code mode), each on a branch of its own; ${
    project.checkCommand
      ? html`the check command <code>${project.checkCommand}</code> judges them`
      : 'the project has no check command, so none is judged'
  }, and the first to pass (then the cheapest, then the smallest diff) becomes the pull request. Each costs as much as a job.</p>`;
}

/** An attempt's agent as the new-job form has it: its engine and model fields, as typed. */
export interface FormAgent {
  engine: string;
  model: string;
}

/**
 * Each attempt's agent on the create form (best-of-N across engines and models): an engine and
 * a model per attempt, each empty for the project's engine and the job's model.
 */
function agentsField(agents: readonly FormAgent[], project: ProjectRecord): SafeHtml {
  const rows = Array.from({ length: MAX_ATTEMPTS }, (_, i) => {
    const n = i + 1;
    const chosen = agents[i] ?? { engine: '', model: '' };
    return html`<fieldset class="attempt-agent"><legend>Attempt ${n}</legend>
    <label for="engine${n}">Engine</label>
    <select id="engine${n}" name="engine${n}">
      <option value="" ${chosen.engine === '' ? html`selected` : ''}>the project's (${project.engine})</option>
      ${ENGINE_NAMES.map((name) => html`<option value="${name}" ${chosen.engine === name ? html`selected` : ''}>${name}</option>`)}
    </select>
    <label for="model${n}">Model</label>
    <input id="model${n}" name="model${n}" value="${chosen.model}" placeholder="the job's model (provider:model)">
  </fieldset>`;
  });
  return html`<details class="attempt-agents"${agents.some((a) => a.engine || a.model) ? html` open` : ''}><summary>Agents of the attempts</summary>
  <p class="muted">Which agent makes each attempt, to compare engines and models on the same task; empty: the project's engine and the job's model. Give agents only to the attempts the job makes.</p>
  ${rows}
</details>`;
}

/** The mode picker of the create and follow-up forms; code first, the default. */
function modeField(chosen: string | undefined): SafeHtml {
  return html`<label for="mode">Mode</label>
  <select id="mode" name="mode" aria-describedby="mode-help">
    ${JOB_MODES.map((m) => html`<option value="${m}" ${(chosen ?? 'code') === m ? html`selected` : ''}>${m}</option>`)}
  </select>
  <p class="muted" id="mode-help">code: change the repository and open a pull request; ask: an answer, nothing changed; plan: a plan that waits for your approval.</p>`;
}

export interface EventView {
  seq: number;
  at: string;
  type: string;
  text: string;
  /** Longer text that belongs to the line (a command's output), shown folded. */
  detail?: { label: string; text: string } | undefined;
}

const MAX_TEXT = 500;
const MAX_DETAIL = 20_000;

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** A progress event as the page shows it: the catalog's words for it (src/events/catalog.ts). */
export function eventView(event: EventFacts & { seq: number; at: string }): EventView {
  const words = eventWords(event);
  return {
    seq: event.seq,
    at: event.at,
    type: event.type,
    text: cut(words.text, MAX_TEXT),
    detail: words.detail && { label: words.detail.label, text: cut(words.detail.text, MAX_DETAIL) },
  };
}

/** One line of the progress log; also sent to the page's script as it arrives. */
export function eventItem(event: EventView): string {
  const detail = event.detail
    ? html`<details><summary>${event.detail.label}</summary><pre class="output">${event.detail.text}</pre></details>`
    : '';
  return html`<li><span class="muted">${when(event.at)}</span> <span class="badge">${event.type}</span> <span class="text">${event.text}</span>${detail}</li>`
    .value;
}

/**
 * What the forge last said of the pull request, in the CLI's words (src/words.ts), with a link
 * to each failed check: where a reader goes next.
 */
function prFacts(pr: NonNullable<JobRecord['pr']>): SafeHtml {
  const failed = pr.checks.filter((check) => check.state === 'failure');
  return html`${prLine(pr)}${
    failed.length > 0
      ? html`<br>Failed: ${failed.map(
          (check, i) =>
            html`${i > 0 ? ', ' : ''}${check.url ? externalLink(check.url, check.name) : check.name}`,
        )}`
      : ''
  } <span class="muted">(as of ${when(pr.observedAt)})</span>`;
}

export function jobPage(
  principal: Principal,
  project: ProjectRecord,
  job: JobRecord,
  detail: {
    turns: TurnView[];
    events: EventView[];
    /** The rendered diff (src/dashboard/diff.ts), or undefined when there is none. */
    diffHtml: string | undefined;
    /** Who created the job, as the page shows it. */
    createdBy: SafeHtml;
    prompt?: string | undefined;
    mode?: string | undefined;
    error?: string | undefined;
  },
): string {
  const base = `/projects/${project.id}/jobs/${job.id}`;
  const last = detail.events.at(-1)?.seq ?? 0;
  const live = job.status === 'active';
  return page(
    { title: `Job ${job.id}`, principal },
    html`<p><a href="/projects/${project.id}/jobs">← Jobs of ${project.name}</a></p>
<dl class="facts card">
  <dt>Status</dt><dd><span class="badge ${job.status}" id="job-status">${job.status}</span></dd>
  <dt>Created by</dt><dd class="wrap" id="job-created-by">${job.createdBy ? html`<a href="/projects/${project.id}/jobs?${new URLSearchParams({ createdBy: actorRef(job.createdBy) }).toString()}">${detail.createdBy}</a>` : detail.createdBy}</dd>
  <dt>Repository</dt><dd class="mono wrap">${job.source.repository}</dd>
  <dt>Base ref</dt><dd class="mono">${job.source.baseRef}</dd>
  <dt>Branch</dt><dd class="mono">${job.branch}</dd>
  <dt>Model</dt><dd class="mono">${job.model}</dd>
  <dt>Mode</dt><dd><span class="badge" id="job-mode">${job.mode ?? 'code'}</span>${job.awaitingApproval ? html` <strong id="job-awaiting">awaiting approval</strong>` : ''}</dd>
  <dt>Pull request</dt><dd class="wrap">${externalLink(job.prLink)}</dd>
  ${job.pr ? html`<dt>Pull request status</dt><dd class="wrap" id="job-pr">${prFacts(job.pr)}</dd>` : ''}
  ${job.origin ? html`<dt>Issue</dt><dd class="wrap">#${job.origin.number} ${job.origin.title} ${externalLink(job.origin.url)}</dd>` : ''}
  <dt>Usage</dt><dd id="job-usage">${usageLine(job.usage)}${
    job.usage.costUsd !== null ? html` <span class="muted">(estimated at list prices)</span>` : ''
  }</dd>
  ${job.error ? html`<dt>Error</dt><dd class="wrap">${job.error}</dd>` : ''}
</dl>
${attemptsSection(job)}
<h2>Turns</h2>
${detail.turns.map(
  (turn) => html`<section class="card turn" aria-label="Turn ${turn.seq}">
  <h3>Turn ${turn.seq} <span class="badge">${turn.state}</span>${turn.mode !== 'code' ? html` <span class="badge">${turn.mode}</span>` : ''}</h3>
  <pre class="prompt">${turn.prompt}</pre>
  ${turn.images.length > 0 ? turnImages(turn) : ''}
  ${turn.summaryHtml !== undefined ? html`<div class="summary">${new SafeHtml(turn.summaryHtml)}</div>` : ''}
  ${turn.outputJson !== undefined ? html`<details open class="turn-output"><summary>Output</summary><pre class="output">${turn.outputJson}</pre></details>` : ''}
  ${turn.error ? notice(turn.error) : ''}
  <p class="muted">Sent by ${turn.sentBy}. Queued ${when(turn.createdAt)}${turn.startedAt ? html`, started ${when(turn.startedAt)}` : ''}${
    turn.finishedAt ? html`, finished ${when(turn.finishedAt)}` : ''
  }${turn.usage ? html`; ${usageLine(turn.usage)}` : ''}</p>
</section>`,
)}
<h2>Progress</h2>
<ol id="events" class="events card" data-events-url="${base}/events" data-after="${last}" data-live="${live ? 'true' : 'false'}" aria-live="polite">
${detail.events.map((event) => new SafeHtml(eventItem(event)))}
</ol>
${live ? html`<p class="muted">Updates as the job runs.</p>` : ''}
<h2>Changes</h2>
${detail.diffHtml !== undefined ? new SafeHtml(detail.diffHtml) : html`<p>No diff yet.</p>`}
${
  job.status === 'archived'
    ? ''
    : html`<section aria-labelledby="follow-up"><h2 id="follow-up">Follow-up</h2>
${notice(detail.error)}
${
  job.awaitingApproval && job.status === 'completed'
    ? html`<form method="post" action="${base}/message" class="card" id="approve-plan">
  <p>The last turn wrote a plan. Approving it runs a turn that carries it out on this branch.</p>
  <input type="hidden" name="prompt" value="approve">
  <button type="submit">Approve the plan</button>
</form>`
    : ''
}
<form method="post" action="${base}/message" class="card">
  <label for="prompt">Prompt</label>
  <textarea id="prompt" name="prompt" rows="4" required>${detail.prompt ?? ''}</textarea>
  ${modeField(detail.mode)}
  <button type="submit">Send follow-up</button>
</form>
<p><a href="${base}/archive">Archive this job…</a></p></section>`
}`,
  );
}

export function archivePage(principal: Principal, projectId: string, job: JobRecord): string {
  const base = `/projects/${projectId}/jobs/${job.id}`;
  return page(
    { title: 'Archive a job', principal },
    html`<div class="card narrow">
<p>Archive the job <code>${job.id}</code>? A running turn is stopped, queued ones are cancelled,
and no follow-up can be sent to it afterwards. This cannot be undone.</p>
<form method="post" action="${base}/archive" class="inline">
  <button type="submit" class="danger">Archive</button>
</form>
<a href="${base}">Cancel</a>
</div>`,
  );
}
