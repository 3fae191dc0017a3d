// The forge webhook page of a project: the URL to paste into the forge, the content type and
// the events to select there, whether a secret is set (never the secret), the handle and the
// label; the forms to make a new secret (shown once on the answer's page), to set one the
// admin chose, or to remove it; and the events the forge sent lately, with what each became and
// why. Every value goes through `html`.

import { html, type SafeHtml } from '../../dashboard/html.ts';
import { externalLink, notice, page, when } from '../../dashboard/layout.ts';
import type { ForgeEventOutcome } from '../../db/schema.ts';
import type { Principal } from '../../keys/service.ts';
import type { ProjectRecord } from '../../records/project.ts';
import type { ForgeEventRecord } from './records.ts';

export interface ForgeWebhookView {
  project: ProjectRecord;
  /** Where the forge sends deliveries. */
  url: string;
  /** The events to select in the forge's form; empty for a plain git project. */
  events: readonly string[];
  /** The forge's name as people write it, e.g. GitHub. */
  forgeName: string | undefined;
  /** The events the forge sent lately, newest first, of `outcome` when one is chosen. */
  received: readonly ForgeEventRecord[];
  outcome: ForgeEventOutcome | undefined;
}

/** The most recent events the page lists. */
export const RECENT_EVENTS = 100;

/** The badge of each outcome, in the colours the other pages give alike states. */
const OUTCOME_BADGE: Record<ForgeEventOutcome, string> = {
  queued: 'pending',
  accepted: 'delivered',
  ignored: 'archived',
  refused: 'failed',
  failed: 'failed',
};

/** Every outcome, for the filter (the badges' keys: one list). */
export const OUTCOMES = Object.keys(OUTCOME_BADGE) as ForgeEventOutcome[];

function receivedEvent(projectId: string, event: ForgeEventRecord): SafeHtml {
  const where = event.thread.kind === 'issue' ? 'issue' : 'pull request';
  const turn =
    event.jobId === null
      ? ''
      : html`: <a class="mono" href="/projects/${projectId}/jobs/${event.jobId}">${event.jobId}</a>${
          event.turn === null ? '' : html`, turn ${event.turn}`
        }`;
  return html`<tr>
  <td data-label="Received">${when(event.receivedAt)}</td>
  <td class="wrap" data-label="Event">${event.kind} on ${where} ${externalLink(event.url, `#${event.thread.number}`)} by @${event.author}${
    event.repeats > 0
      ? html` <span class="muted">(delivered ${event.repeats + 1} times)</span>`
      : ''
  }</td>
  <td data-label="Outcome"><span class="badge ${OUTCOME_BADGE[event.outcome]}">${event.outcome}</span></td>
  <td class="wrap" data-label="Why">${event.reason ?? ''}${turn}</td>
</tr>`;
}

function receivedEvents(
  projectId: string,
  events: readonly ForgeEventRecord[],
  outcome: ForgeEventOutcome | undefined,
): SafeHtml {
  const filter = html`<form method="get" action="/projects/${projectId}/forge-webhook#received" class="filter">
  <label for="outcome">Outcome</label>
  <select id="outcome" name="outcome">
    <option value="" ${outcome ? '' : html`selected`}>All</option>
    ${OUTCOMES.map((o) => html`<option value="${o}" ${outcome === o ? html`selected` : ''}>${o}</option>`)}
  </select>
  <button type="submit">Filter</button>
</form>`;
  const list = events.length
    ? html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Received</th><th scope="col">Event</th><th scope="col">Outcome</th>
<th scope="col">Why</th></tr></thead>
<tbody>${events.map((event) => receivedEvent(projectId, event))}</tbody></table></div>`
    : html`<p>None${outcome ? html` ${outcome}` : ''} in the last 30 days.</p>`;
  return html`<section aria-labelledby="received"><h2 id="received">Events received</h2>
<p class="help">The last ${RECENT_EVENTS} comments and labels the forge sent, newest first, and
what each became. Each is taken once, by the ids the forge signed: sent again, under its delivery
id or another, it is only counted.</p>
${filter}${list}</section>`;
}

/** Where each forge's form is, and what it calls the secret. */
const WHERE: Record<string, SafeHtml> = {
  github: html`Repository → <em>Settings</em> → <em>Webhooks</em> → <em>Add webhook</em>: the
    URL as <em>Payload URL</em>, content type <code>application/json</code>, the secret as
    <em>Secret</em>, and <em>Let me select individual events</em>.`,
  gitlab: html`Project → <em>Settings</em> → <em>Webhooks</em> → <em>Add new webhook</em>: the
    URL, the secret as <em>Secret token</em>, and the triggers below.`,
  gitea: html`Repository → <em>Settings</em> → <em>Webhooks</em> → <em>Add webhook</em> →
    <em>Gitea</em> (or <em>Forgejo</em>): the URL as <em>Target URL</em>, content type
    <code>application/json</code>, the secret as <em>Secret</em>, and <em>Custom events</em>.`,
};

function shownOnce(secret: string | undefined): SafeHtml {
  if (!secret) return html``;
  return html`<div class="card shown-once" role="status">
  <h2>The new forge webhook secret</h2>
  <p>Paste it into the forge's webhook form now: it is shown this once and will not be shown
  again. Deliveries signed with the previous secret, if there was one, are refused from now on.</p>
  <div class="copyable"><code id="new-secret">${secret}</code>
  <button type="button" data-copy="new-secret">Copy</button></div>
</div>`;
}

export function forgeWebhookPage(
  principal: Principal,
  view: ForgeWebhookView,
  opts: {
    secret?: string | undefined;
    error?: string | undefined;
    saved?: boolean;
    values?: { forgeHandle?: string | undefined; forgeLabel?: string | undefined };
  } = {},
): string {
  const { project } = view;
  const base = `/projects/${project.id}/forge-webhook`;
  const handle = opts.values?.forgeHandle ?? project.forgeHandle;
  const label = opts.values?.forgeLabel ?? project.forgeLabel;
  const body =
    view.forgeName === undefined
      ? html`<p class="card">This project's forge is plain git, which sends no webhooks: set its
  forge on the <a href="/projects/${project.id}/settings">settings</a> page first.</p>`
      : html`<dl class="facts card">
  <dt>Payload URL</dt><dd><div class="copyable"><code id="webhook-url">${view.url}</code>
    <button type="button" data-copy="webhook-url">Copy</button></div></dd>
  <dt>Content type</dt><dd><code>application/json</code></dd>
  <dt>Events to select</dt><dd><ul>${view.events.map((e) => html`<li>${e}</li>`)}</ul></dd>
  <dt>Secret</dt><dd>${project.forgeWebhookSecretSet ? 'set (never shown again)' : html`<strong>none</strong>: every delivery is refused until one is set`}</dd>
</dl>
<p class="help">On ${view.forgeName}: ${WHERE[project.forge.kind] ?? ''}</p>
<section aria-labelledby="make-secret"><h2 id="make-secret">Secret</h2>
<form method="post" action="${base}/secret" class="card narrow">
  <p class="help">Errand makes a random secret and shows it once${project.forgeWebhookSecretSet ? '; it replaces the one set now' : ''}.</p>
  <button type="submit">Make a new secret</button>
</form>
<form method="post" action="${base}" class="card narrow">
  <label for="forgeWebhookSecret">Or a secret you chose (16 to 256 characters, no spaces)</label>
  <input id="forgeWebhookSecret" name="forgeWebhookSecret" type="password" autocomplete="off" value="">
  ${
    project.forgeWebhookSecretSet
      ? html`<label class="check"><input type="checkbox" name="clearSecret" value="1"> Remove the secret (deliveries are refused)</label>`
      : ''
  }
  <label for="forgeHandle">Handle comments mention (without the @)</label>
  <input id="forgeHandle" name="forgeHandle" required maxlength="100" value="${handle}">
  <label for="forgeLabel">Label that makes an issue a job</label>
  <input id="forgeLabel" name="forgeLabel" required maxlength="100" value="${label}">
  <button type="submit">Save</button>
</form></section>
${receivedEvents(project.id, view.received, view.outcome)}`;
  return page(
    { title: `Forge webhook of ${project.name}`, principal },
    html`<p><a href="/projects/${project.id}/settings">← Settings of ${project.name}</a></p>
${shownOnce(opts.secret)}${notice(opts.saved ? 'Saved.' : undefined, 'ok')}${notice(opts.error)}
<p>Comments that mention <code>@${project.forgeHandle}</code> on a job's pull request become
follow-ups; issues labelled <code>${project.forgeLabel}</code>, or mentioning the handle, become
jobs. The forge tells Errand through a webhook signed with the project's secret.</p>
${body}`,
  );
}
