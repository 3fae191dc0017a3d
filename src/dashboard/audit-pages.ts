// The audit log's page (admin): the rows newest first, with the API's filters (actor, action,
// target, since, until) and its cursor for older rows. Every value goes through `html`.
import type { Principal } from '../keys/service.ts';
import { AUDIT_ACTIONS, type AuditRecord } from '../records/audit.ts';
import { html, type SafeHtml } from './html.ts';
import { notice, page, when } from './layout.ts';

/** The filters as the form holds them: the query's own text. */
export interface AuditFilters {
  actor?: string | undefined;
  action?: string | undefined;
  target?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
}

export interface AuditRow {
  entry: AuditRecord;
  /** The actor as the page shows it (src/dashboard/actors.ts). */
  actor: SafeHtml;
}

const FIELDS = ['actor', 'action', 'target', 'since', 'until'] as const;

function details(entry: AuditRecord): string {
  const text = Object.entries(entry.details)
    .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : String(v)}`)
    .join('; ');
  return text;
}

export function auditPage(
  principal: Principal,
  rows: readonly AuditRow[],
  filters: AuditFilters,
  nextCursor: string | null,
  error?: string,
): string {
  const input = (name: 'actor' | 'target' | 'since' | 'until', label: string, hint: string) =>
    html`<div><label for="audit-${name}">${label}</label>
    <input id="audit-${name}" name="${name}" value="${filters[name] ?? ''}" placeholder="${hint}"></div>`;
  const form = html`<form method="get" action="/audit" class="filter">
  ${input('actor', 'Actor', 'usr_…, key_… or github:login')}
  <div><label for="audit-action">Action</label>
  <select id="audit-action" name="action">
    <option value="" ${filters.action ? '' : html`selected`}>All</option>
    ${AUDIT_ACTIONS.map((a) => html`<option value="${a}" ${filters.action === a ? html`selected` : ''}>${a}</option>`)}
  </select></div>
  ${input('target', 'Target', 'job_…, prj_…, a secret name')}
  ${input('since', 'Since', '2026-11-01T00:00:00Z')}
  ${input('until', 'Until', '2026-12-01T00:00:00Z')}
  <button type="submit">Filter</button>
</form>`;
  const table = rows.length
    ? html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Outcome</th><th scope="col">Address</th><th scope="col">Details</th></tr></thead>
<tbody>${rows.map(
        ({ entry, actor }) => html`<tr>
  <td data-label="When">${when(entry.at)}</td>
  <td class="wrap" data-label="Who">${actor}</td>
  <td class="mono" data-label="Action">${entry.action}</td>
  <td class="wrap" data-label="Target">${entry.target ? html`${entry.target.kind} <span class="mono">${entry.target.id}</span>` : html`<span class="muted">—</span>`}</td>
  <td data-label="Outcome">${entry.outcome === 'success' ? html`<span class="badge completed">success</span>` : html`<span class="badge failed">refused</span> <span class="mono">${entry.errorCode}</span>`}</td>
  <td class="mono" data-label="Address">${entry.address ?? html`<span class="muted">—</span>`}</td>
  <td class="wrap" data-label="Details">${details(entry)}<div class="muted mono">${entry.requestId ?? ''}</div></td>
</tr>`,
      )}</tbody></table></div>`
    : html`<p>No rows${FIELDS.some((f) => filters[f]) ? ' match these filters' : ''}.</p>`;
  const kept = Object.fromEntries(FIELDS.flatMap((f) => (filters[f] ? [[f, filters[f]]] : [])));
  const next = nextCursor
    ? html`<p><a href="/audit?${new URLSearchParams({ ...kept, cursor: nextCursor }).toString()}">Older rows</a></p>`
    : '';
  return page(
    { title: 'Audit log', principal },
    html`<p class="muted">Every change of state, and every refused attempt at one: who, from where, what, on what. Never a secret.</p>
${form}${notice(error)}${table}${next}`,
  );
}
