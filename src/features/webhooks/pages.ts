// The dashboard's webhook pages as functions of their data: a project's endpoints with the form
// to add one, an endpoint with its settings, secret rotation and delivery log, and the delete
// confirmation. Every value goes through `html`; a signing secret appears only in the page
// that answers the create or rotate form.

import { html, type SafeHtml } from '../../dashboard/html.ts';
import { notice, page, when } from '../../dashboard/layout.ts';
import type { Principal } from '../../keys/service.ts';
import type { ProjectRecord } from '../../records/project.ts';
import {
  type DeliveryRecord,
  WEBHOOK_EVENT_TYPES,
  type WebhookRecord,
  type WebhookWithSecret,
} from './types.ts';

/** What an endpoint form shows: typed values again after a refusal. */
export interface WebhookForm {
  url: string;
  events: readonly string[];
  description: string;
  enabled: boolean;
}

/** The form field of one event type's checkbox: one name per type, since forms are flat. */
export const eventField = (type: string): string => `event:${type}`;

export const DEFAULT_OVERLAP_HOURS = 24;
export const MAX_OVERLAP_HOURS = 168;

export const emptyWebhookForm: WebhookForm = {
  url: '',
  events: WEBHOOK_EVENT_TYPES,
  description: '',
  enabled: true,
};

export function webhookValues(webhook: WebhookRecord): WebhookForm {
  return {
    url: webhook.url,
    events: webhook.events,
    description: webhook.description ?? '',
    enabled: webhook.enabled,
  };
}

function newSecret(secret: string | undefined, heading: string): SafeHtml {
  if (!secret) return html``;
  return html`<div class="card shown-once" role="status">
  <h2>${heading}</h2>
  <p>Copy it now into the receiver's configuration: it is shown this once and will not be shown
  again. The receiver checks each delivery's <code>webhook-signature</code> with it (Standard
  Webhooks).</p>
  <div class="copyable"><code id="new-secret">${secret}</code>
  <button type="button" data-copy="new-secret">Copy</button></div>
</div>`;
}

function webhookFields(values: WebhookForm, prefix: string, withEnabled: boolean): SafeHtml {
  return html`
  <label for="${prefix}url">URL</label>
  <input id="${prefix}url" name="url" required maxlength="2048" inputmode="url" autocomplete="off"
    value="${values.url}" aria-describedby="${prefix}url-help" placeholder="https://example.com/errand-events">
  <p id="${prefix}url-help" class="help">Deliveries are POSTed here. An https address on the public
  internet; private and loopback addresses are refused unless the server allows them.</p>
  <fieldset>
    <legend>Events</legend>
    ${WEBHOOK_EVENT_TYPES.map(
      (type) =>
        html`<label class="check"><input type="checkbox" name="${eventField(type)}" value="1" ${
          values.events.includes(type) ? html`checked` : ''
        }> <code>${type}</code></label>`,
    )}
  </fieldset>
  <label for="${prefix}description">Description</label>
  <input id="${prefix}description" name="description" maxlength="500" value="${values.description}"
    placeholder="e.g. deploy notifier">
  ${
    withEnabled
      ? html`<label class="check"><input type="checkbox" name="enabled" value="1" ${
          values.enabled ? html`checked` : ''
        }> Enabled (a disabled webhook gets no deliveries)</label>`
      : ''
  }`;
}

function previousSecret(webhook: WebhookRecord): SafeHtml {
  return webhook.previousSecretExpiresAt
    ? html`signs too until ${when(webhook.previousSecretExpiresAt)}`
    : html`<span class="muted">none</span>`;
}

function enabledBadge(webhook: WebhookRecord): SafeHtml {
  return html`<span class="badge ${webhook.enabled ? 'enabled' : 'disabled'}">${
    webhook.enabled ? 'enabled' : 'disabled'
  }</span>`;
}

export function webhooksPage(
  principal: Principal,
  project: ProjectRecord,
  webhooks: WebhookRecord[],
  opts: {
    values: WebhookForm;
    created?: WebhookWithSecret | undefined;
    error?: string | undefined;
    notice?: string | undefined;
  },
): string {
  const base = `/projects/${project.id}/webhooks`;
  const table = webhooks.length
    ? html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Status</th>
<th scope="col">Previous secret</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
<tbody>${webhooks.map(
        (webhook) => html`<tr>
  <td class="wrap"><a class="mono" href="${base}/${webhook.id}">${webhook.url}</a>${
    webhook.description ? html`<div>${webhook.description}</div>` : ''
  }<div class="muted mono">${webhook.id}</div></td>
  <td class="wrap" data-label="Events">${webhook.events.join(', ')}</td>
  <td data-label="Status">${enabledBadge(webhook)}</td>
  <td data-label="Previous secret">${previousSecret(webhook)}</td>
  <td class="actions"><a href="${base}/${webhook.id}">Deliveries and settings</a>
    <form method="post" action="${base}/${webhook.id}/enabled" class="inline">
      <input type="hidden" name="enabled" value="${webhook.enabled ? 'false' : 'true'}">
      <button type="submit" class="link">${webhook.enabled ? 'Disable' : 'Enable'}</button>
    </form></td>
</tr>`,
      )}</tbody></table></div>`
    : html`<p>No webhooks yet.</p>`;
  return page(
    { title: `Webhooks of ${project.name}`, principal },
    html`<p><a href="/projects/${project.id}/settings">← Settings of ${project.name}</a></p>
${newSecret(opts.created?.secret, 'Signing secret of the new webhook')}
${notice(opts.notice, 'ok')}
<p>Errand POSTs the events of this project's jobs to each enabled webhook, signed as the
Standard Webhooks specification says.</p>
${table}
<section aria-labelledby="new-webhook"><h2 id="new-webhook">Add a webhook</h2>
${notice(opts.error)}
<form method="post" action="${base}" class="card">
${webhookFields(opts.values, 'new-', false)}
<button type="submit">Create webhook</button>
</form></section>`,
  );
}

function attemptsTable(delivery: DeliveryRecord): SafeHtml {
  if (!delivery.attempts.length) return html`<p class="muted">Not attempted yet.</p>`;
  return html`<table class="list attempts">
<thead><tr><th scope="col">Attempt</th><th scope="col">Time</th><th scope="col">Status</th>
<th scope="col">Latency</th><th scope="col">Error</th></tr></thead>
<tbody>${delivery.attempts.map(
    (attempt) => html`<tr>
  <td>${attempt.attempt}</td>
  <td data-label="Time">${when(attempt.at)}</td>
  <td data-label="Status">${attempt.status ?? html`<span class="muted">no answer</span>`}</td>
  <td data-label="Latency">${attempt.latencyMs} ms</td>
  <td class="wrap" data-label="Error">${attempt.error ?? ''}</td>
</tr>`,
  )}</tbody></table>`;
}

function deliveryItem(base: string, projectId: string, delivery: DeliveryRecord): SafeHtml {
  return html`<section class="card delivery" aria-label="Delivery ${delivery.id}">
  <h3><span class="badge">${delivery.type}</span> <span class="badge ${delivery.state}">${delivery.state}</span>
  <span class="mono">${delivery.id}</span></h3>
  <p class="muted">Job <a class="mono" href="/projects/${projectId}/jobs/${delivery.jobId}">${delivery.jobId}</a>,
  event ${delivery.eventSeq}, written ${when(delivery.createdAt)}${
    delivery.deliveredAt ? html`, delivered ${when(delivery.deliveredAt)}` : ''
  }${delivery.failedAt ? html`, given up ${when(delivery.failedAt)}` : ''}</p>
  ${attemptsTable(delivery)}
  ${
    delivery.state === 'pending'
      ? html`<p class="muted">Queued: it will be attempted.</p>`
      : html`<form method="post" action="${base}/deliveries/${delivery.id}/redeliver" class="inline">
    <button type="submit">Redeliver</button>
  </form>`
  }
</section>`;
}

export function webhookPage(
  principal: Principal,
  project: ProjectRecord,
  webhook: WebhookRecord,
  opts: {
    values: WebhookForm;
    deliveries: DeliveryRecord[];
    nextCursor: string | null;
    rotated?: WebhookWithSecret | undefined;
    error?: string | undefined;
    rotateError?: string | undefined;
    deliveryError?: string | undefined;
    notice?: string | undefined;
    overlapHours?: string | undefined;
  },
): string {
  const base = `/projects/${project.id}/webhooks/${webhook.id}`;
  const log = opts.deliveries.length
    ? html`${opts.deliveries.map((delivery) => deliveryItem(base, project.id, delivery))}`
    : html`<p>No deliveries${opts.nextCursor === null ? ' yet' : ''}.</p>`;
  return page(
    { title: `Webhook ${webhook.url}`, principal },
    html`<p><a href="/projects/${project.id}/webhooks">← Webhooks of ${project.name}</a></p>
${newSecret(opts.rotated?.secret, 'The new signing secret')}
${notice(opts.notice, 'ok')}
<dl class="facts card">
  <dt>ID</dt><dd class="mono">${webhook.id}</dd>
  <dt>URL</dt><dd class="mono">${webhook.url}</dd>
  <dt>Events</dt><dd>${webhook.events.join(', ')}</dd>
  <dt>Status</dt><dd>${enabledBadge(webhook)}</dd>
  <dt>Description</dt><dd>${webhook.description ?? html`<span class="muted">none</span>`}</dd>
  <dt>Previous secret</dt><dd>${previousSecret(webhook)}</dd>
  <dt>Created</dt><dd>${when(webhook.createdAt)}</dd>
</dl>
<h2 id="deliveries">Deliveries</h2>
${notice(opts.deliveryError)}
${log}
${
  opts.nextCursor
    ? html`<p><a href="${base}?${new URLSearchParams({ cursor: opts.nextCursor }).toString()}#deliveries">Older deliveries</a></p>`
    : ''
}
<section aria-labelledby="edit-webhook"><h2 id="edit-webhook">Settings</h2>
${notice(opts.error)}
<form method="post" action="${base}" class="card">
${webhookFields(opts.values, '', true)}
<button type="submit">Save</button>
</form></section>
<section aria-labelledby="rotate-secret"><h2 id="rotate-secret">Rotate the signing secret</h2>
${notice(opts.rotateError)}
<form method="post" action="${base}/rotate" class="card narrow">
  <p class="help">A new secret is made and shown once. During the overlap the current secret
  signs too, so the receiver can switch without refusing a delivery.</p>
  <label for="overlapHours">Overlap in hours (0 to ${MAX_OVERLAP_HOURS})</label>
  <input id="overlapHours" name="overlapHours" inputmode="numeric" required
    value="${opts.overlapHours ?? String(DEFAULT_OVERLAP_HOURS)}">
  <button type="submit">Rotate secret</button>
</form></section>
<p><a href="${base}/delete">Delete this webhook…</a></p>`,
  );
}

export function deleteWebhookPage(
  principal: Principal,
  project: ProjectRecord,
  webhook: WebhookRecord,
): string {
  const base = `/projects/${project.id}/webhooks/${webhook.id}`;
  return page(
    { title: 'Delete a webhook', principal },
    html`<div class="card narrow">
<p>Delete the webhook to <code>${webhook.url}</code>? It gets no more deliveries, the pending
ones are not sent, and its delivery log is deleted with it. This cannot be undone.</p>
<form method="post" action="${base}/delete" class="inline">
  <button type="submit" class="danger">Delete</button>
</form>
<a href="${base}">Cancel</a>
</div>`,
  );
}
