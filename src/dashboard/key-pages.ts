// The API key pages as functions of their data: a project's keys (its projectId and a curl to
// paste), the admin keys, and the revoke confirmation. A new key appears only in the page that
// answers its create form.
import type { Principal } from '../keys/service.ts';
import type { KeyRecord } from '../records/key.ts';
import type { ProjectRecord } from '../records/project.ts';
import { html, type SafeHtml } from './html.ts';
import { notice, page, when } from './layout.ts';

function keysTable(keys: KeyRecord[]): SafeHtml {
  if (!keys.length) return html`<p>No keys yet.</p>`;
  return html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Name</th><th scope="col">Starts with</th><th scope="col">Created</th>
<th scope="col">Last used</th><th scope="col">Revoked</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
<tbody>${keys.map(
    (key) => html`<tr>
  <td>${key.name ?? html`<span class="muted">(no name)</span>`}</td>
  <td class="mono" data-label="Starts with">${key.start}…</td>
  <td data-label="Created">${when(key.createdAt)}</td>
  <td data-label="Last used">${key.lastUsedAt ? when(key.lastUsedAt) : html`<span class="muted">never</span>`}</td>
  <td data-label="Revoked">${key.revokedAt ? when(key.revokedAt) : html`<span class="muted">no</span>`}</td>
  <td>${key.revokedAt ? '' : html`<a href="/keys/${key.id}/revoke">Revoke…</a>`}</td>
</tr>`,
  )}</tbody></table></div>`;
}

function newKey(created: { key: string } | undefined): SafeHtml {
  if (!created) return html``;
  return html`<div class="card shown-once" role="status">
  <h2>Your new key</h2>
  <p>Copy it now: it is shown this once and cannot be read again. It is a server-side secret:
  keep it in your backend's secret store, never in a browser, an app or a repository.</p>
  <div class="copyable"><code id="new-key">${created.key}</code>
  <button type="button" data-copy="new-key">Copy</button></div>
</div>`;
}

function keyForm(action: string, error: string | undefined): SafeHtml {
  return html`<section aria-labelledby="create-key"><h2 id="create-key">Create a key</h2>
${notice(error)}
<form method="post" action="${action}" class="card narrow">
  <label for="key-name">Name</label>
  <input id="key-name" name="name" maxlength="200" placeholder="e.g. backend production">
  <button type="submit">Create key</button>
</form></section>`;
}

export function projectKeysPage(
  principal: Principal,
  project: ProjectRecord,
  keys: KeyRecord[],
  opts: { baseUrl: string; created?: { key: string }; error?: string | undefined },
): string {
  const curl = `curl -X POST ${opts.baseUrl}/v2/agent/${project.id}/job \\
  -H "Authorization: Bearer $ERRAND_API_KEY" \\
  -H "Content-Type: application/json" \\
  -d '{"prompt": "Fix the typo in README.md"}'`;
  return page(
    { title: `API keys of ${project.name}`, principal },
    html`${newKey(opts.created)}
<section class="card" aria-labelledby="project-id">
  <h2 id="project-id">Project ID</h2>
  <div class="copyable"><code id="project-id-value" class="big">${project.id}</code>
  <button type="button" data-copy="project-id-value">Copy</button></div>
  <p>Create a job with a key of this project:</p>
  <div class="copyable"><pre id="curl-example">${curl}</pre>
  <button type="button" data-copy="curl-example">Copy</button></div>
</section>
<h2>Keys</h2>
${keysTable(keys)}
${keyForm(`/projects/${project.id}/keys`, opts.error)}
<p><a href="/projects/${project.id}/settings">Settings of this project</a></p>`,
  );
}

export function adminKeysPage(
  principal: Principal,
  keys: KeyRecord[],
  opts: { created?: { key: string }; error?: string | undefined },
): string {
  return page(
    { title: 'Admin keys', principal },
    html`${newKey(opts.created)}
<p>Admin keys see every project and the admin API. Keys of one project are on that project's
API keys page.</p>
${keysTable(keys)}
${keyForm('/keys', opts.error)}`,
  );
}

export function revokePage(principal: Principal, key: KeyRecord, back: string): string {
  return page(
    { title: 'Revoke a key', principal },
    html`<div class="card narrow">
<p>Revoke the key <strong>${key.name ?? '(no name)'}</strong> (<code>${key.start}…</code>)?
Requests with it are refused at once, and the dashboard sessions signed in with it end.
This cannot be undone.</p>
<form method="post" action="/keys/${key.id}/revoke" class="inline">
  <button type="submit" class="danger">Revoke</button>
</form>
<a href="${back}">Cancel</a>
</div>`,
  );
}
