// A project's environments on its settings page: the snapshots its workers keep (the key
// shortened, the worker, size, files, how long the build took, when it was made and last used),
// a button to drop each key or all of them, and one to rebuild in the background. Every value
// goes through `html`.
import type { EnvironmentRecord } from '../records/environment.ts';
import type { ProjectRecord } from '../records/project.ts';
import { formatBytes, formatMs } from '../words.ts';
import { html, type SafeHtml } from './html.ts';
import { notice, when } from './layout.ts';

/** What the section says besides the list: one notice, or the refusal of an action. */
export interface EnvironmentsNotice {
  rebuilt?: boolean;
  /** The key dropped, or `all`. */
  dropped?: string | undefined;
  error?: string | undefined;
}

/** A key as a reader tells keys apart: its first 12 characters (the whole one on hover). */
function shortKey(key: string): string {
  return key.length > 12 ? `${key.slice(0, 12)}…` : key;
}

function environmentsTable(projectId: string, environments: readonly EnvironmentRecord[]) {
  if (environments.length === 0)
    return html`<p>No environment kept yet: the next turn, or the background build, makes one.</p>`;
  return html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Key</th><th scope="col">Worker</th><th scope="col">Size</th>
<th scope="col">Files</th><th scope="col">Build</th><th scope="col">Created</th>
<th scope="col">Last used</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
<tbody>${environments.map(
    (e) => html`<tr>
  <td class="mono" title="${e.key}">${shortKey(e.key)}</td>
  <td class="mono wrap" data-label="Worker">${e.worker}</td>
  <td data-label="Size">${formatBytes(e.sizeBytes)}</td>
  <td data-label="Files">${e.files.toLocaleString('en-US')}</td>
  <td data-label="Build">${formatMs(e.buildMs)}</td>
  <td data-label="Created">${when(e.createdAt)}</td>
  <td data-label="Last used">${when(e.lastUsedAt)}</td>
  <td class="actions"><form method="post" class="inline"
    action="/projects/${projectId}/environments/${encodeURIComponent(e.key)}/delete">
    <button type="submit" class="link" aria-label="Delete environment ${shortKey(e.key)} (every worker)">Delete</button>
  </form></td>
</tr>`,
  )}</tbody></table></div>`;
}

/** The environments section of a project's settings page. */
export function environmentsSection(
  project: ProjectRecord,
  environments: readonly EnvironmentRecord[],
  shown: EnvironmentsNotice,
): SafeHtml {
  const base = `/projects/${project.id}/environments`;
  const dropped =
    shown.dropped === 'all'
      ? 'Every environment was deleted.'
      : shown.dropped
        ? `Environment ${shortKey(shown.dropped)} was deleted.`
        : undefined;
  const actions = project.setupCommand
    ? html`<p>
<form method="post" action="${base}/rebuild" class="inline">
  <button type="submit">Rebuild</button>
</form>
${
  environments.length > 0
    ? html`<form method="post" action="${base}/delete" class="inline">
  <button type="submit" class="danger">Delete all</button>
</form>`
    : ''
}</p>`
    : html`<p class="help">This project has no setup command, so it has no environment to
build: set one in the form above.</p>`;
  return html`<section aria-labelledby="environments"><h2 id="environments">Environments</h2>
<p class="help">What the setup command leaves in the checkout (<code>node_modules</code>,
<code>.venv</code>…), kept by each worker and restored by the next turns instead of running the
setup again, then the maintenance command if there is one. A change of the setup command, its
network, the secrets or the key files builds a new one in the background; deleting one only
makes the next turn build it again.</p>
${notice(shown.rebuilt ? 'A rebuild was requested: a worker builds it in the background.' : undefined, 'ok')}${notice(dropped, 'ok')}${notice(shown.error)}
${environmentsTable(project.id, environments)}
${actions}</section>`;
}
