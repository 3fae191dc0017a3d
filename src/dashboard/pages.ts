// The dashboard's pages as functions of their data. Every value goes through `html`, which
// escapes it; nothing here reads the database or the request.
import type { JobRecord } from '../jobs/record.ts';
import type { KeyRecord, Principal } from '../keys/service.ts';
import type { ProjectRecord } from '../projects/service.ts';
import { html, SafeHtml } from './html.ts';

export interface Layout {
  title: string;
  /** undefined when signed out: no navigation. */
  principal?: Principal | undefined;
}

export function page(layout: Layout, body: SafeHtml): string {
  const admin = layout.principal?.projectId === null;
  const nav = layout.principal
    ? html`<nav aria-label="Main">
        <a href="/projects">Projects</a>
        ${admin ? html`<a href="/keys">Admin keys</a>` : ''}
        <form method="post" action="/sign-out" class="inline">
          <button type="submit" class="link">Sign out</button>
        </form>
      </nav>`
    : '';
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>${layout.title} · Errand</title>
<link rel="stylesheet" href="/assets/dashboard.css">
<link rel="stylesheet" href="/assets/diff.css">
<script src="/assets/dashboard.js" defer></script>
</head>
<body>
<header><a class="brand" href="/">Errand</a>${nav}</header>
<main id="main">
<h1>${layout.title}</h1>
${body}
</main>
</body>
</html>`.value;
}

export function notice(message: string | undefined, kind: 'error' | 'ok' = 'error'): SafeHtml {
  if (!message) return html``;
  return html`<p class="notice ${kind}" role="${kind === 'error' ? 'alert' : 'status'}">${message}</p>`;
}

export function signInPage(error?: string): string {
  return page(
    { title: 'Sign in' },
    html`${notice(error)}
<form method="post" action="/sign-in" class="card narrow">
  <label for="key">API key</label>
  <input id="key" name="key" type="password" autocomplete="off" required autofocus
    aria-describedby="key-help">
  <p id="key-help" class="help">An admin key (from the data directory's <code>admin.key</code>)
  sees every project; a project key sees only its project. The key is exchanged for a session
  and is not kept in this browser.</p>
  <button type="submit">Sign in</button>
</form>`,
  );
}

export function errorPage(
  principal: Principal | undefined,
  status: number,
  message: string,
): string {
  return page(
    { title: status === 404 ? 'Not found' : status === 403 ? 'Not allowed' : 'Refused', principal },
    html`${notice(message)}<p><a href="/projects">Back to projects</a></p>`,
  );
}

export interface ProjectRow {
  project: ProjectRecord;
  activeJobs: number;
  totalJobs: number;
}

/** The values a project form shows again after a refusal (never a token). */
export type ProjectForm = Partial<Record<string, string>>;

const FORGES = ['github', 'gitlab', 'gitea', 'git'] as const;

function projectFields(values: ProjectForm, editing: ProjectRecord | undefined): SafeHtml {
  const v = (name: string) => values[name] ?? '';
  const forge = v('forge');
  const stored = editing?.forge.credentials;
  return html`
  <label for="name">Name</label>
  <input id="name" name="name" required maxlength="200" value="${v('name')}">
  <label for="repository">Repository</label>
  <input id="repository" name="repository" required value="${v('repository')}"
    aria-describedby="repository-help">
  <p id="repository-help" class="help">A git URL (https or ssh), or a local path where the server allows it.</p>
  <label for="ref">Ref</label>
  <input id="ref" name="ref" value="${v('ref')}" placeholder="main">
  <label for="model">Default model</label>
  <input id="model" name="model" value="${v('model')}" placeholder="provider:model (empty: the server's default)">
  <label for="forge">Forge</label>
  <select id="forge" name="forge">
    <option value="" ${forge === '' ? html`selected` : ''}>Inferred from the repository</option>
    ${FORGES.map((kind) => html`<option value="${kind}" ${forge === kind ? html`selected` : ''}>${kind}</option>`)}
  </select>
  <label for="forgeUrl">Forge API URL</label>
  <input id="forgeUrl" name="forgeUrl" value="${v('forgeUrl')}" placeholder="for a self-hosted forge">
  <fieldset>
    <legend>Forge credentials</legend>
    ${
      editing
        ? html`<p class="help">Now: ${
            stored === 'token-env'
              ? html`the server's variable <code>${editing.forge.tokenEnv ?? ''}</code>`
              : stored === 'stored-token'
                ? 'a stored token (never shown again)'
                : stored === 'github-app'
                  ? 'stored GitHub App credentials (never shown again)'
                  : 'none'
          }. Leave both fields empty to keep them.</p>`
        : ''
    }
    <label for="forgeTokenEnv">Token variable on the server</label>
    <input id="forgeTokenEnv" name="forgeTokenEnv" value="${v('forgeTokenEnv')}" placeholder="ERRAND_FORGE_TOKEN_…">
    <label for="forgeToken">Or a token to store (encrypted)</label>
    <input id="forgeToken" name="forgeToken" type="password" autocomplete="off" value="">
    ${
      editing && stored !== 'none'
        ? html`<label class="check"><input type="checkbox" name="clearCredentials" value="1"> Remove the credentials</label>`
        : ''
    }
  </fieldset>
  <label class="check"><input type="checkbox" name="draftPullRequests" value="1" ${
    v('draftPullRequests') === '1' ? html`checked` : ''
  }> Open pull requests as drafts</label>
  ${commandFields(values)}`;
}

/** The fields of a command limit: the form field, its label and its unit. */
const COMMAND_LIMITS = [
  ['commandTimeoutSeconds', 'Time per command', 'seconds'],
  ['commandCpuSeconds', 'CPU time per command', 'seconds'],
  ['commandMemoryMb', 'Memory per command', 'MB'],
  ['commandProcesses', 'Processes per command', 'processes and threads'],
  ['commandFileSizeMb', 'Largest file a command writes', 'MB'],
] as const;

function commandFields(values: ProjectForm): SafeHtml {
  const v = (name: string) => values[name] ?? '';
  return html`<fieldset>
    <legend>Commands</legend>
    <label class="check"><input type="checkbox" name="commandsEnabled" value="1" ${
      v('commandsEnabled') === '1' ? html`checked` : ''
    } aria-describedby="commands-help"> Let the agent run commands (tests, linters, builds)</label>
    <p id="commands-help" class="help">In a sandbox without network, where the server has
    bubblewrap; elsewhere the agent works with the file tools only.</p>
    <label for="setupCommand">Setup command</label>
    <input id="setupCommand" name="setupCommand" maxlength="2000" value="${v('setupCommand')}"
      placeholder="e.g. npm ci (empty: none)" aria-describedby="setup-help">
    <p id="setup-help" class="help">Run in the sandbox before the agent each time a turn prepares
    the workspace; its result is shown to the agent.</p>
    <label class="check"><input type="checkbox" name="setupNetwork" value="1" ${
      v('setupNetwork') === '1' ? html`checked` : ''
    } aria-describedby="network-help"> Give the setup command network access</label>
    <p id="network-help" class="help">The worker's own network, its loopback included (services
    on the worker's 127.0.0.1 are reachable): only for setup commands you trust.</p>
    ${COMMAND_LIMITS.map(
      ([name, label, unit]) => html`<label for="${name}">${label} (${unit})</label>
    <input id="${name}" name="${name}" inputmode="numeric" value="${v(name)}" placeholder="empty: the default">`,
    )}
  </fieldset>`;
}

export function projectsPage(
  principal: Principal,
  rows: ProjectRow[],
  form: { values: ProjectForm; error?: string | undefined },
): string {
  const admin = principal.projectId === null;
  const table = rows.length
    ? html`<div class="scroll"><table class="list">
  <thead><tr><th scope="col">Name</th><th scope="col">Repository</th><th scope="col">Forge</th>
  <th scope="col">Active jobs</th><th scope="col">Jobs</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
  <tbody>${rows.map(
    ({ project, activeJobs, totalJobs }) => html`<tr>
    <td><strong>${project.name}</strong><div class="muted mono">${project.id}</div></td>
    <td class="mono wrap" data-label="Repository">${project.repository}</td>
    <td data-label="Forge">${project.forge.kind}</td>
    <td data-label="Active jobs">${activeJobs}</td>
    <td data-label="Jobs">${totalJobs}</td>
    <td class="actions"><a href="/projects/${project.id}/jobs">Jobs</a>
    ${
      admin
        ? html`<a href="/projects/${project.id}/keys">API keys</a>
      <a href="/projects/${project.id}/webhooks">Webhooks</a>
      <a href="/projects/${project.id}/settings">Settings</a>`
        : ''
    }</td>  </tr>`,
  )}</tbody></table></div>`
    : html`<p>No projects yet.</p>`;
  const create = admin
    ? html`<section aria-labelledby="new-project"><h2 id="new-project">New project</h2>
${notice(form.error)}
<form method="post" action="/projects" class="card">
${projectFields(form.values, undefined)}
<button type="submit">Create project</button>
</form></section>`
    : '';
  return page({ title: 'Projects', principal }, html`${table}${create}`);
}

export function settingsPage(
  principal: Principal,
  project: ProjectRecord,
  form: { values: ProjectForm; error?: string | undefined; saved?: boolean },
): string {
  return page(
    { title: `Settings of ${project.name}`, principal },
    html`${notice(form.saved ? 'Saved.' : undefined, 'ok')}${notice(form.error)}
<form method="post" action="/projects/${project.id}/settings" class="card">
${projectFields(form.values, project)}
<button type="submit">Save</button>
</form>
<p><a href="/projects/${project.id}/keys">API keys of this project</a></p>
<p><a href="/projects/${project.id}/webhooks">Webhooks of this project</a></p>`,
  );
}

/** The form values of a stored project. */
export function projectValues(project: ProjectRecord): ProjectForm {
  return {
    name: project.name,
    repository: project.repository,
    ref: project.ref,
    model: project.model ?? '',
    forge: project.forge.inferred ? '' : project.forge.kind,
    forgeUrl: project.forge.inferred ? '' : (project.forge.apiUrl ?? ''),
    forgeTokenEnv: project.forge.tokenEnv ?? '',
    draftPullRequests: project.draftPullRequests ? '1' : '',
    commandsEnabled: project.commandsEnabled ? '1' : '',
    setupCommand: project.setupCommand ?? '',
    setupNetwork: project.setupNetwork ? '1' : '',
    ...Object.fromEntries(COMMAND_LIMITS.map(([name]) => [name, String(project[name])])),
  };
}

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

export function when(iso: string): SafeHtml {
  return html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`;
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

export interface JobListItem {
  job: JobRecord;
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

/** Only http(s) links become links: a forge's URL, never a `javascript:` one. */
function externalLink(url: string | null): SafeHtml {
  if (!url) return html`<span class="muted">none yet</span>`;
  return /^https?:\/\//i.test(url)
    ? html`<a href="${url}" rel="noreferrer">${url}</a>`
    : html`<span class="mono">${url}</span>`;
}

export function jobsPage(
  principal: Principal,
  project: ProjectRecord,
  list: {
    items: JobListItem[];
    status: string | undefined;
    nextCursor: string | null;
    statuses: readonly string[];
    now: number;
  },
  form: { prompt?: string | undefined; error?: string | undefined; created?: string | undefined },
): string {
  const filter = html`<form method="get" action="/projects/${project.id}/jobs" class="filter">
  <label for="status">Status</label>
  <select id="status" name="status">
    <option value="" ${list.status ? '' : html`selected`}>All</option>
    ${list.statuses.map((s) => html`<option value="${s}" ${list.status === s ? html`selected` : ''}>${s}</option>`)}
  </select>
  <button type="submit">Filter</button>
</form>`;
  const table = list.items.length
    ? html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Prompt</th><th scope="col">Status</th><th scope="col">Pull request</th><th scope="col">Age</th></tr></thead>
<tbody>${list.items.map(
        ({ job, prompt }) => html`<tr>
  <td class="wrap"><a href="/projects/${project.id}/jobs/${job.id}">${prompt || job.id}</a><div class="muted mono">${job.id}</div></td>
  <td data-label="Status"><span class="badge ${job.status}">${job.status}</span></td>
  <td class="wrap" data-label="Pull request">${externalLink(job.prLink)}</td>
  <td data-label="Age">${age(job.createdAt, list.now)}</td>
</tr>`,
      )}</tbody></table></div>`
    : html`<p>No jobs${list.status ? html` with status ${list.status}` : ''}.</p>`;
  const next = list.nextCursor
    ? html`<p><a href="/projects/${project.id}/jobs?${new URLSearchParams({
        ...(list.status ? { status: list.status } : {}),
        cursor: list.nextCursor,
      }).toString()}">Older jobs</a></p>`
    : '';
  return page(
    { title: `Jobs of ${project.name}`, principal },
    html`${notice(form.created ? `Job ${form.created} created.` : undefined, 'ok')}
${filter}${table}${next}
<section aria-labelledby="new-job"><h2 id="new-job">New job</h2>
${notice(form.error)}
<form method="post" action="/projects/${project.id}/jobs" class="card">
  <label for="prompt">Prompt</label>
  <textarea id="prompt" name="prompt" rows="5" required>${form.prompt ?? ''}</textarea>
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
  usage: { inputTokens?: number; outputTokens?: number } | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface EventView {
  seq: number;
  at: string;
  type: string;
  text: string;
}

/** One line of the progress log; also sent to the page's script as it arrives. */
export function eventItem(event: EventView): string {
  return html`<li><span class="muted">${when(event.at)}</span> <span class="badge">${event.type}</span> <span class="wrap">${event.text}</span></li>`
    .value;
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
    prompt?: string | undefined;
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
  <dt>Repository</dt><dd class="mono wrap">${job.source.repository}</dd>
  <dt>Base ref</dt><dd class="mono">${job.source.baseRef}</dd>
  <dt>Branch</dt><dd class="mono">${job.branch}</dd>
  <dt>Model</dt><dd class="mono">${job.model}</dd>
  <dt>Pull request</dt><dd class="wrap">${externalLink(job.prLink)}</dd>
  ${job.error ? html`<dt>Error</dt><dd class="wrap">${job.error}</dd>` : ''}
</dl>
<h2>Turns</h2>
${detail.turns.map(
  (turn) => html`<section class="card turn" aria-label="Turn ${turn.seq}">
  <h3>Turn ${turn.seq} <span class="badge">${turn.state}</span></h3>
  <pre class="prompt">${turn.prompt}</pre>
  ${turn.summaryHtml !== undefined ? html`<div class="summary">${new SafeHtml(turn.summaryHtml)}</div>` : ''}
  ${turn.error ? notice(turn.error) : ''}
  <p class="muted">Queued ${when(turn.createdAt)}${turn.startedAt ? html`, started ${when(turn.startedAt)}` : ''}${
    turn.finishedAt ? html`, finished ${when(turn.finishedAt)}` : ''
  }${
    turn.usage
      ? html`; tokens: ${turn.usage.inputTokens ?? 0} in, ${turn.usage.outputTokens ?? 0} out`
      : ''
  }</p>
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
<form method="post" action="${base}/message" class="card">
  <label for="prompt">Prompt</label>
  <textarea id="prompt" name="prompt" rows="4" required>${detail.prompt ?? ''}</textarea>
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
