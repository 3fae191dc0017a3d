// The project pages as functions of their data: the list with the new-project form, and a
// project's settings. Every value goes through `html`; a stored token is never shown.

import type { MonthUsage } from '../jobs/spend.ts';
import { hasRole } from '../keys/access.ts';
import { isServerAdmin, type Principal } from '../keys/service.ts';
import type { EngineName } from '../projects/engine.ts';
import { NETWORK_PRESETS } from '../projects/network.ts';
import {
  DEFAULT_AUTOFIX_ATTEMPTS,
  MAX_AUTOFIX_ATTEMPTS,
  type ProjectRecord,
} from '../records/project.ts';
import { formatUsd } from '../words.ts';
import { html, type SafeHtml } from './html.ts';
import { monthSpend } from './job-pages.ts';
import { notice, page } from './layout.ts';

export interface ProjectRow {
  project: ProjectRecord;
  activeJobs: number;
  totalJobs: number;
  /** What it spent this month (UTC). */
  month: MonthUsage;
}

/** The values a project form shows again after a refusal (never a token). */
export type ProjectForm = Partial<Record<string, string>>;

const FORGES = ['github', 'gitlab', 'gitea', 'git'] as const;

/** Each engine with the models it runs (src/projects/engine.ts says which). */
const ENGINES: readonly (readonly [EngineName, string])[] = [
  ['errand', "Errand's own agent (any model)"],
  ['claude-code', 'Claude Code (anthropic: models)'],
  ['codex', 'Codex (openai: models)'],
  ['opencode', 'OpenCode (anthropic:, openai: or openai-compatible: models)'],
];

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
  <label for="engine">Engine</label>
  <select id="engine" name="engine" aria-describedby="engine-help">
    ${ENGINES.map(([name, label]) => html`<option value="${name}" ${(v('engine') || 'errand') === name ? html`selected` : ''}>${label}</option>`)}
  </select>
  <p id="engine-help" class="help">The agent that works on the jobs. Another than Errand's own must be
  installed on the server (<code>errand engine install NAME</code>) and fit the model.</p>
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
  ${commandFields(values)}
  ${prWatchFields(values)}
  ${budgetFields(values)}`;
}

/** Each choice of the pull request watch with its words, for the selects. */
const AUTO_MERGES = [
  ['off', 'Never: a person merges'],
  ['green', 'When every check passed'],
  ['green-and-approved', "When every check passed and the forge's approval rules are met"],
] as const;
const MERGE_METHOD_CHOICES = [
  ['merge', 'A merge commit'],
  ['squash', 'Squash'],
  ['rebase', 'Rebase'],
] as const;
const CONFLICT_CHOICES = [
  ['merge', 'Merge the base into the branch'],
  ['rebase', 'Rebase the branch onto the base'],
] as const;

/** What Errand does with a job's pull request once a turn opened it. */
function prWatchFields(values: ProjectForm): SafeHtml {
  const v = (name: string) => values[name] ?? '';
  const select = (name: string, choices: readonly (readonly [string, string])[]) =>
    choices.map(
      ([value, label], i) =>
        html`<option value="${value}" ${(v(name) || (i === 0 ? value : '')) === value ? html`selected` : ''}>${label}</option>`,
    );
  return html`<fieldset>
    <legend>Pull request watch</legend>
    <p class="help">On GitHub, GitLab and Gitea, Errand follows the pull request a job opened: it
    sends failing checks back to the agent, brings the branch up to a base it conflicts with,
    and merges it when you allow it here.</p>
    <label for="autofixAttempts">Turns in a row that may fix failing checks</label>
    <input id="autofixAttempts" name="autofixAttempts" inputmode="numeric"
      value="${v('autofixAttempts')}" placeholder="${DEFAULT_AUTOFIX_ATTEMPTS}"
      aria-describedby="autofix-help">
    <p id="autofix-help" class="help">0 to ${MAX_AUTOFIX_ATTEMPTS}; 0: none; empty: the default,
    ${DEFAULT_AUTOFIX_ATTEMPTS}. A green run starts the count again, and the job's budget applies.</p>
    <label for="autofixChecks">Checks that count</label>
    <textarea id="autofixChecks" name="autofixChecks" rows="3" aria-describedby="checks-help"
      placeholder="empty: every check">${v('autofixChecks')}</textarea>
    <p id="checks-help" class="help">One glob of check names a line (<code>ci/*</code>,
    <code>lint</code>); only these checks' failures are sent to the agent. Empty: every check.</p>
    <label for="autoMerge">Merge the pull request</label>
    <select id="autoMerge" name="autoMerge" aria-describedby="merge-help">${select('autoMerge', AUTO_MERGES)}</select>
    <p id="merge-help" class="help">With the forge's own merge API; branch protection still
    applies. A pull request a person pushed to, or labelled <code>no-errand</code>, is left
    alone.</p>
    <label for="mergeMethod">Merge method</label>
    <select id="mergeMethod" name="mergeMethod">${select('mergeMethod', MERGE_METHOD_CHOICES)}</select>
    <label for="conflictStrategy">When it conflicts with its base</label>
    <select id="conflictStrategy" name="conflictStrategy">${select('conflictStrategy', CONFLICT_CHOICES)}</select>
  </fieldset>`;
}

/** The budgets, in US dollars at the model's list prices. */
function budgetFields(values: ProjectForm): SafeHtml {
  const v = (name: string) => values[name] ?? '';
  return html`<fieldset>
    <legend>Budgets</legend>
    <p id="budget-help" class="help">In US dollars, estimated from the model's list prices; empty:
    no budget. A budget needs a model whose prices are known.</p>
    <label for="jobBudgetUsd">Per job (all its turns)</label>
    <input id="jobBudgetUsd" name="jobBudgetUsd" inputmode="decimal" value="${v('jobBudgetUsd')}"
      placeholder="empty: none" aria-describedby="budget-help">
    <label for="monthlyBudgetUsd">Per calendar month (UTC)</label>
    <input id="monthlyBudgetUsd" name="monthlyBudgetUsd" inputmode="decimal"
      value="${v('monthlyBudgetUsd')}" placeholder="empty: none" aria-describedby="budget-help">
  </fieldset>`;
}

/** The fields of a command limit: the form field, its label and its unit. */
const COMMAND_LIMITS = [
  ['commandTimeoutSeconds', 'Time per command', 'seconds'],
  ['commandCpuSeconds', 'CPU time per command', 'seconds'],
  ['commandMemoryMb', 'Memory per command', 'MB'],
  ['commandProcesses', 'Processes per command', 'processes and threads'],
  ['commandFileSizeMb', 'Largest file a command writes', 'MB'],
  ['commandDiskMb', 'Checkout growth per command', 'MB'],
] as const;

/** Each network mode with its words, for the selects. */
const SETUP_NETWORKS = [
  ['none', 'None'],
  ['allowlist', 'Only the hosts of the allowlist (HTTP and HTTPS)'],
  ['open', 'Any public address (never the worker or its network)'],
] as const;
const COMMANDS_NETWORKS = SETUP_NETWORKS.slice(0, 2);

/** The network policy: a select for the setup command, one for commands, the patterns. */
function networkFields(values: ProjectForm): SafeHtml {
  const v = (name: string) => values[name] ?? '';
  const select = (name: string, modes: readonly (readonly [string, string])[]) =>
    modes.map(
      ([mode, label]) =>
        html`<option value="${mode}" ${(v(name) || 'none') === mode ? html`selected` : ''}>${label}</option>`,
    );
  return html`<label for="networkSetup">Network of the setup command</label>
    <select id="networkSetup" name="networkSetup">${select('networkSetup', SETUP_NETWORKS)}</select>
    <label for="networkCommands">Network of the agent's commands (and of an engine)</label>
    <select id="networkCommands" name="networkCommands">${select('networkCommands', COMMANDS_NETWORKS)}</select>
    <label for="networkAllow">Allowlist</label>
    <textarea id="networkAllow" name="networkAllow" rows="4" aria-describedby="allow-help"
      placeholder="@npm&#10;npm.example.com">${v('networkAllow')}</textarea>
    <p id="allow-help" class="help">One pattern a line: <code>registry.example.com</code> (HTTPS on
    443, HTTP on 80), <code>*.example.com</code> (the names below it), <code>host:port</code>, or a
    preset: ${Object.keys(NETWORK_PRESETS).join(', ')}. Reached through Errand's proxy, never a
    private address or the worker's own; each refusal is a <code>network.denied</code> event of
    the job.</p>`;
}

function commandFields(values: ProjectForm): SafeHtml {
  const v = (name: string) => values[name] ?? '';
  return html`<fieldset>
    <legend>Commands</legend>
    <label class="check"><input type="checkbox" name="commandsEnabled" value="1" ${
      v('commandsEnabled') === '1' ? html`checked` : ''
    } aria-describedby="commands-help"> Let the agent run commands (tests, linters, builds)</label>
    <p id="commands-help" class="help">In a sandbox with the network below, where the server has
    bubblewrap; elsewhere the agent works with the file tools only.</p>
    <label for="setupCommand">Setup command</label>
    <input id="setupCommand" name="setupCommand" maxlength="2000" value="${v('setupCommand')}"
      placeholder="e.g. npm ci (empty: none)" aria-describedby="setup-help">
    <p id="setup-help" class="help">Run in the sandbox to prepare the checkout, with the secrets;
    what it leaves there (<code>node_modules</code>, <code>.venv</code>…) is kept as the
    project's environment and restored by later turns instead of running it again. Its result
    is shown to the agent.</p>
    <label for="maintenanceCommand">Maintenance command</label>
    <input id="maintenanceCommand" name="maintenanceCommand" maxlength="2000"
      value="${v('maintenanceCommand')}" placeholder="e.g. npm run build (empty: none)"
      aria-describedby="maintenance-help">
    <p id="maintenance-help" class="help">Run after the environment is restored, instead of the
    setup command: what must follow the job's own changes. Changing it rebuilds nothing.</p>
    <label for="checkCommand">Check command</label>
    <input id="checkCommand" name="checkCommand" maxlength="4000" value="${v('checkCommand')}"
      placeholder="e.g. npm test (empty: none)" aria-describedby="check-help">
    <p id="check-help" class="help">Judges the attempts of a job created with several
    (best-of-N): run in the sandbox, with the environment, on each attempt's finished checkout;
    exit 0 passes. The first attempt to pass wins, then the cheapest, then the smallest diff.
    A job may give its own instead.</p>
    <label for="environmentKeyFiles">Key files of the environment</label>
    <textarea id="environmentKeyFiles" name="environmentKeyFiles" rows="3"
      aria-describedby="key-files-help"
      placeholder="empty: the common lock files">${v('environmentKeyFiles')}</textarea>
    <p id="key-files-help" class="help">One glob a line, from the repository's root
    (<code>package-lock.json</code>, <code>services/*/go.sum</code>): a change to one of these
    files builds the environment again. Empty: the lock files of npm, pnpm, yarn, bun, pip,
    uv, poetry, pipenv, cargo, go, bundler and composer, anywhere in the tree.</p>
    ${networkFields(values)}
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
  const admin = isServerAdmin(principal);
  const table = rows.length
    ? html`<div class="scroll"><table class="list">
  <thead><tr><th scope="col">Name</th><th scope="col">Repository</th><th scope="col">Forge</th>
  <th scope="col">Active jobs</th><th scope="col">Jobs</th><th scope="col">Spent this month</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
  <tbody>${rows.map(
    ({ project, activeJobs, totalJobs, month }) => html`<tr>
    <td><strong>${project.name}</strong><div class="muted mono">${project.id}</div></td>
    <td class="mono wrap" data-label="Repository">${project.repository}</td>
    <td data-label="Forge">${project.forge.kind}</td>
    <td data-label="Active jobs">${activeJobs}</td>
    <td data-label="Jobs">${totalJobs}</td>
    <td data-label="Spent this month" title="${month.month} (UTC), estimated at list prices">${formatUsd(month.costUsd)}${
      project.monthlyBudgetUsd !== null ? html` of ${formatUsd(project.monthlyBudgetUsd)}` : ''
    }${month.unpriced > 0 ? ' + unpriced' : ''}</td>
    <td class="actions"><a href="/projects/${project.id}/jobs">Jobs</a>
    ${
      hasRole(principal, project.id, 'maintainer')
        ? html`<a href="/projects/${project.id}/keys">API keys</a>
      <a href="/projects/${project.id}/webhooks">Webhooks</a>
      <a href="/projects/${project.id}/schedules">Schedules</a>
      <a href="/projects/${project.id}/settings">Settings</a>`
        : ''
    }${admin ? html`<a href="/projects/${project.id}/roles">Roles</a>` : ''}</td>  </tr>`,
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
  month: MonthUsage,
  form: {
    values: ProjectForm;
    error?: string | undefined;
    saved?: boolean;
    /** The project's secrets (secret-pages.ts), below its settings. */
    secrets: SafeHtml;
    /** The project's environments (environment-pages.ts), below its secrets. */
    environments: SafeHtml;
  },
): string {
  return page(
    { title: `Settings of ${project.name}`, principal },
    html`${notice(form.saved ? 'Saved.' : undefined, 'ok')}${notice(form.error)}
${monthSpend(project, month)}
<form method="post" action="/projects/${project.id}/settings" class="card">
${projectFields(form.values, project)}
<button type="submit">Save</button>
</form>
${mcpServersSection(project)}
${form.secrets}
${form.environments}
<p><a href="/projects/${project.id}/keys">API keys of this project</a></p>
<p><a href="/projects/${project.id}/roles">Roles on this project</a> (server admins)</p>
<p><a href="/projects/${project.id}/webhooks">Webhooks of this project</a></p>
<p><a href="/projects/${project.id}/schedules">Schedules of this project</a></p>
<p><a href="/projects/${project.id}/forge-webhook">Comments and labels on the forge (its webhook)</a></p>`,
  );
}

/**
 * The project's MCP servers, read-only (set through the API or `errand project update
 * --mcp-servers`): commands, arguments and URLs, and only the names of env variables and headers.
 */
function mcpServersSection(project: ProjectRecord): SafeHtml {
  const servers = Object.entries(project.mcpServers ?? {});
  const names = (list: string[], what: string) =>
    list.length === 0 ? '' : `; ${what} ${list.join(', ')}`;
  const rows = servers.map(
    ([name, s]) =>
      html`<li><code>${name}</code>: ${
        'command' in s
          ? html`stdio, <code>${[s.command, ...s.args].join(' ')}</code>${names(s.envNames, 'env')}`
          : html`remote, <code>${s.url}</code>${names(s.headerNames, 'headers')}`
      }</li>`,
  );
  return html`<section class="card" aria-labelledby="mcp-servers"><h2 id="mcp-servers">MCP servers</h2>
${
  servers.length === 0
    ? html`<p>None. Set them with <code>errand project update ${project.id} --mcp-servers FILE</code> or the admin API (docs/mcp-servers.md).</p>`
    : html`<ul>${rows}</ul><p>Values of env variables and headers are not shown. Change them with <code>errand project update ${project.id} --mcp-servers FILE</code> or the admin API.</p>`
}
</section>`;
}

/** The form values of a stored project. */
export function projectValues(project: ProjectRecord): ProjectForm {
  return {
    name: project.name,
    repository: project.repository,
    ref: project.ref,
    model: project.model ?? '',
    engine: project.engine,
    forge: project.forge.inferred ? '' : project.forge.kind,
    forgeUrl: project.forge.inferred ? '' : (project.forge.apiUrl ?? ''),
    forgeTokenEnv: project.forge.tokenEnv ?? '',
    draftPullRequests: project.draftPullRequests ? '1' : '',
    commandsEnabled: project.commandsEnabled ? '1' : '',
    setupCommand: project.setupCommand ?? '',
    maintenanceCommand: project.maintenanceCommand ?? '',
    checkCommand: project.checkCommand ?? '',
    environmentKeyFiles: (project.environmentKeyFiles ?? []).join('\n'),
    networkSetup: project.network.setup,
    networkCommands: project.network.commands,
    networkAllow: project.network.allow.join('\n'),
    ...Object.fromEntries(COMMAND_LIMITS.map(([name]) => [name, String(project[name])])),
    jobBudgetUsd: project.jobBudgetUsd === null ? '' : String(project.jobBudgetUsd),
    monthlyBudgetUsd: project.monthlyBudgetUsd === null ? '' : String(project.monthlyBudgetUsd),
    autofixAttempts: String(project.autofixAttempts),
    autofixChecks: (project.autofixChecks ?? []).join('\n'),
    autoMerge: project.autoMerge,
    mergeMethod: project.mergeMethod,
    conflictStrategy: project.conflictStrategy,
  };
}
