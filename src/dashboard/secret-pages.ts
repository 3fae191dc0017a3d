// A project's secrets on its settings page: the names with their exposure and when each was
// set (never a value), the form that sets or replaces one (a password field, never filled in
// again), and the confirmation before one is deleted. Every value goes through `html`.
import type { Principal } from '../keys/service.ts';
import type { ProjectRecord } from '../records/project.ts';
import type { SecretRecord } from '../records/secret.ts';
import { html, type SafeHtml } from './html.ts';
import { notice, page, when } from './layout.ts';

/** What the secrets section shows besides the list: a notice, and the form's fields again. */
export interface SecretsForm {
  saved?: string | undefined;
  deleted?: string | undefined;
  error?: string | undefined;
  /** The name and exposure given to a refused form; its value is never shown again. */
  values?: { name?: string | undefined; exposure?: string | undefined };
}

const EXPOSURES: readonly (readonly [string, string])[] = [
  ['setup', 'The setup command only'],
  ['commands', "The setup command, the agent's commands and an engine's shell"],
];

function secretsTable(projectId: string, secrets: readonly SecretRecord[]): SafeHtml {
  if (secrets.length === 0) return html`<p>No secrets yet.</p>`;
  return html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Name</th><th scope="col">Given to</th><th scope="col">Set</th>
<th scope="col"><span class="sr">Actions</span></th></tr></thead>
<tbody>${secrets.map(
    (s) => html`<tr>
  <td class="mono wrap">${s.name}</td>
  <td data-label="Given to">${s.exposure === 'setup' ? 'setup' : 'setup and commands'}</td>
  <td data-label="Set">${when(s.updatedAt)}</td>
  <td class="actions"><a href="/projects/${projectId}/secrets/${s.name}/delete">Delete…</a></td>
</tr>`,
  )}</tbody></table></div>`;
}

/** The secrets section of a project's settings page. */
export function secretsSection(
  project: ProjectRecord,
  secrets: readonly SecretRecord[],
  form: SecretsForm,
): SafeHtml {
  const exposure = form.values?.exposure ?? 'setup';
  return html`<section aria-labelledby="secrets"><h2 id="secrets">Secrets</h2>
<p class="help">Values the setup command gets in its environment, as variables of their name
(a registry token, a licence key); with <em>commands</em> also the agent's commands and an
engine's shell. No model ever gets one. A value is never shown again, is scrubbed from every
output, and a commit that holds one is not pushed.</p>
${notice(form.saved ? `Secret ${form.saved} set.` : undefined, 'ok')}${notice(
  form.deleted ? `Secret ${form.deleted} deleted.` : undefined,
  'ok',
)}${notice(form.error)}
${secretsTable(project.id, secrets)}
<h3 id="set-secret">Set a secret</h3>
<form method="post" action="/projects/${project.id}/secrets" class="card narrow"
  aria-labelledby="set-secret">
  <label for="secret-name">Secret name</label>
  <input id="secret-name" name="name" required maxlength="100" autocomplete="off"
    spellcheck="false" placeholder="NPM_TOKEN" value="${form.values?.name ?? ''}"
    aria-describedby="secret-name-help">
  <p id="secret-name-help" class="help">Capital letters, digits and underscores. A name that
  exists is replaced.</p>
  <label for="secret-value">Secret value</label>
  <input id="secret-value" name="value" type="password" required minlength="8"
    autocomplete="new-password" value="" aria-describedby="secret-value-help">
  <p id="secret-value-help" class="help">One line, 8 characters or more. A value of several
  lines (a key file): <code>errand secret set NAME --project ${project.id} &lt; FILE</code>.</p>
  <label for="secret-exposure">Given to</label>
  <select id="secret-exposure" name="exposure">
    ${EXPOSURES.map(([value, label]) => html`<option value="${value}" ${exposure === value ? html`selected` : ''}>${label}</option>`)}
  </select>
  <button type="submit">Set secret</button>
</form></section>`;
}

export function deleteSecretPage(
  principal: Principal,
  project: ProjectRecord,
  secret: SecretRecord,
): string {
  const settings = `/projects/${project.id}/settings`;
  return page(
    { title: 'Delete a secret', principal },
    html`<div class="card narrow">
<p>Delete the secret <code>${secret.name}</code> of ${project.name}? Turns that start from now
on do not get it. Its value cannot be read back: to keep it, you need it from where it came
from. This cannot be undone.</p>
<form method="post" action="/projects/${project.id}/secrets/${secret.name}/delete" class="inline">
  <button type="submit" class="danger">Delete</button>
</form>
<a href="${settings}#secrets">Cancel</a>
</div>`,
  );
}
