// The personal API tokens page as functions of its data: the signed-in user's own tokens, the
// form that makes one (the token appears only in the page that answers it), and the revoke
// confirmation.
import type { UserTokenRow } from '../db/schema.ts';
import type { Principal } from '../keys/service.ts';
import { TOKEN_DEFAULT_DAYS, TOKEN_MAX_DAYS, TOKEN_NAME_MAX } from '../users/tokens.ts';
import { html, type SafeHtml } from './html.ts';
import { notice, page, when } from './layout.ts';

/** A project the user may limit a token to: one they have a role on (every one for an admin). */
export interface TokenProject {
  id: string;
  name: string;
}

function state(token: UserTokenRow, now: Date): SafeHtml {
  if (token.revoked_at) return html`revoked ${when(token.revoked_at.toISOString())}`;
  if (token.expires_at <= now) return html`<span class="muted">expired</span>`;
  return html`active`;
}

function scope(token: UserTokenRow, names: ReadonlyMap<string, string>): SafeHtml {
  const projects = token.project_ids
    ? token.project_ids.map((id) => names.get(id) ?? id).join(', ')
    : 'all your projects';
  return html`${projects}${token.read_only ? html` · <strong>read-only</strong>` : ''}`;
}

function tokensTable(
  tokens: UserTokenRow[],
  names: ReadonlyMap<string, string>,
  now: Date,
): SafeHtml {
  if (!tokens.length) return html`<p>No tokens yet.</p>`;
  return html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Name</th><th scope="col">Starts with</th><th scope="col">Acts on</th>
<th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th>
<th scope="col">State</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
<tbody>${tokens.map(
    (token) => html`<tr>
  <td>${token.name}</td>
  <td class="mono" data-label="Starts with">${token.start}…</td>
  <td data-label="Acts on">${scope(token, names)}</td>
  <td data-label="Created">${when(token.created_at.toISOString())}</td>
  <td data-label="Last used">${token.last_used_at ? when(token.last_used_at.toISOString()) : html`<span class="muted">never</span>`}</td>
  <td data-label="Expires">${when(token.expires_at.toISOString())}</td>
  <td data-label="State">${state(token, now)}</td>
  <td>${token.revoked_at ? '' : html`<a href="/tokens/${token.id}/revoke">Revoke…</a>`}</td>
</tr>`,
  )}</tbody></table></div>`;
}

function newToken(created: string | undefined): SafeHtml {
  if (!created) return html``;
  return html`<div class="card shown-once" role="status">
  <h2>Your new token</h2>
  <p>Copy it now: it is shown this once and cannot be read again. Send it as
  <code>Authorization: Bearer &lt;token&gt;</code>; it acts as you, within the limits you chose.</p>
  <div class="copyable"><code id="new-token">${created}</code>
  <button type="button" data-copy="new-token">Copy</button></div>
</div>`;
}

function tokenForm(projects: TokenProject[], error: string | undefined): SafeHtml {
  return html`<section aria-labelledby="create-token"><h2 id="create-token">Create a token</h2>
${notice(error)}
<form method="post" action="/tokens" class="card narrow">
  <label for="token-name">Name</label>
  <input id="token-name" name="name" maxlength="${TOKEN_NAME_MAX}" required placeholder="e.g. laptop CLI">
  <label for="token-days">Expires in (days)</label>
  <input id="token-days" name="expiresInDays" type="number" min="1" max="${TOKEN_MAX_DAYS}" value="${TOKEN_DEFAULT_DAYS}" required aria-describedby="token-days-help">
  <p id="token-days-help" class="help">At most ${TOKEN_MAX_DAYS} days.</p>
  <fieldset>
    <legend>Projects</legend>
    <p class="help">None ticked: every project you have a role on, now and later.</p>
    ${
      projects.length
        ? projects.map(
            (project) =>
              html`<label class="check"><input type="checkbox" name="project_${project.id}" value="1"> ${project.name}</label>`,
          )
        : html`<p class="muted">You have no role on a project yet.</p>`
    }
  </fieldset>
  <label class="check"><input type="checkbox" name="readOnly" value="1"> Read-only (reads jobs and events; no changes)</label>
  <button type="submit">Create token</button>
</form></section>`;
}

export function tokensPage(
  principal: Principal,
  tokens: UserTokenRow[],
  projects: TokenProject[],
  opts: { created?: string; error?: string | undefined; now: Date },
): string {
  const names = new Map(projects.map((project) => [project.id, project.name]));
  return page(
    { title: 'Tokens', principal },
    html`${newToken(opts.created)}
<p>Personal API tokens let your scripts and the CLI call the API as you, with your roles. Only a
hash of each is kept.</p>
${tokensTable(tokens, names, opts.now)}
${tokenForm(projects, opts.error)}`,
  );
}

export function revokeTokenPage(principal: Principal, token: UserTokenRow): string {
  return page(
    { title: 'Revoke a token', principal },
    html`<div class="card narrow">
<p>Revoke the token <strong>${token.name}</strong> (<code>${token.start}…</code>)? Requests
with it are refused at once. This cannot be undone.</p>
<form method="post" action="/tokens/${token.id}/revoke" class="inline">
  <button type="submit" class="danger">Revoke</button>
</form>
<a href="/tokens">Cancel</a>
</div>`,
  );
}
