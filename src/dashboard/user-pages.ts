// The pages of people, for server admins: the users (deactivate, reactivate) and a project's
// roles (give, take). Functions of their data; every value goes through `html`.
import type { Principal } from '../keys/service.ts';
import type { ProjectRecord } from '../records/project.ts';
import type { RoleRecord, UserRecord } from '../records/user.ts';
import { html, type SafeHtml } from './html.ts';
import { notice, page, when } from './layout.ts';

function who(user: UserRecord): SafeHtml {
  return html`${user.name ?? user.email ?? user.id}${
    user.name && user.email ? html` <span class="muted">${user.email}</span>` : ''
  }`;
}

export function usersPage(principal: Principal, users: UserRecord[], error?: string): string {
  const table = users.length
    ? html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">User</th><th scope="col">Server role</th><th scope="col">Groups</th>
<th scope="col">Project roles</th><th scope="col">Last seen</th><th scope="col">Status</th>
<th scope="col"><span class="sr">Actions</span></th></tr></thead>
<tbody>${users.map(
        (user) => html`<tr>
  <td>${who(user)}</td>
  <td data-label="Server role">${user.admin ? 'admin' : 'member'}</td>
  <td data-label="Groups">${user.groups.length ? user.groups.join(', ') : html`<span class="muted">none</span>`}</td>
  <td data-label="Project roles">${
    user.roles.length
      ? user.roles.map(
          (role) =>
            html`<a href="/projects/${role.projectId}/roles">${role.projectId}</a>: ${role.role}<br>`,
        )
      : html`<span class="muted">none of their own</span>`
  }</td>
  <td data-label="Last seen">${user.lastSeenAt ? when(user.lastSeenAt) : html`<span class="muted">never</span>`}</td>
  <td data-label="Status">${user.deactivatedAt ? html`deactivated ${when(user.deactivatedAt)}` : 'active'}</td>
  <td><form method="post" action="/users/${user.id}/${user.deactivatedAt ? 'reactivate' : 'deactivate'}" class="inline">
    <button type="submit"${user.deactivatedAt ? '' : html` class="danger"`}>${
      user.deactivatedAt ? 'Reactivate' : 'Deactivate'
    }</button></form></td>
</tr>`,
      )}</tbody></table></div>`
    : html`<p>No one has signed in yet.</p>`;
  return page(
    { title: 'Users', principal },
    html`${notice(error)}
<p>Everyone who has signed in through the identity provider. A deactivated user's sessions end
at once, and they cannot sign in until reactivated. Roles are given on each project's Roles
page.</p>
${table}`,
  );
}

export function rolesPage(
  principal: Principal,
  project: ProjectRecord,
  roles: RoleRecord[],
  users: UserRecord[],
  error?: string,
): string {
  const names = new Map(users.map((user) => [user.id, user]));
  const table = roles.length
    ? html`<div class="scroll"><table class="list">
<thead><tr><th scope="col">Who</th><th scope="col">Role</th><th scope="col">Given</th>
<th scope="col"><span class="sr">Actions</span></th></tr></thead>
<tbody>${roles.map((role) => {
        const user = role.granteeKind === 'user' ? names.get(role.grantee) : undefined;
        return html`<tr>
  <td>${role.granteeKind === 'group' ? html`group <strong>${role.grantee}</strong>` : user ? who(user) : role.grantee}</td>
  <td data-label="Role">${role.role}</td>
  <td data-label="Given">${when(role.createdAt)}</td>
  <td><form method="post" action="/projects/${project.id}/roles/delete" class="inline">
    <input type="hidden" name="granteeKind" value="${role.granteeKind}">
    <input type="hidden" name="grantee" value="${role.grantee}">
    <button type="submit" class="danger">Take</button></form></td>
</tr>`;
      })}</tbody></table></div>`
    : html`<p>No roles on this project yet: only server admins see it.</p>`;
  return page(
    { title: `Roles on ${project.name}`, principal },
    html`${notice(error)}
<p>A <strong>viewer</strong> reads jobs, their events and review pages; a <strong>member</strong>
also creates jobs, sends messages and archives their own; a <strong>maintainer</strong> also
changes the project's settings, keys, webhooks, secrets and environments. A user's role is the
strongest of their own and their groups'.</p>
${table}
<section aria-labelledby="give-role"><h2 id="give-role">Give a role</h2>
<form method="post" action="/projects/${project.id}/roles" class="card narrow">
  <label for="grantee-kind">To</label>
  <select id="grantee-kind" name="granteeKind">
    <option value="user">a user</option>
    <option value="group">a group</option>
  </select>
  <label for="grantee">User or group</label>
  <input id="grantee" name="grantee" list="known-users" required maxlength="200"
    aria-describedby="grantee-help" placeholder="usr_… or a group name">
  <datalist id="known-users">${users.map(
    (user) => html`<option value="${user.id}">${user.name ?? user.email ?? ''}</option>`,
  )}</datalist>
  <p id="grantee-help" class="help">A user's id (from the Users page), or a group of the
  identity provider's groups claim.</p>
  <label for="role">Role</label>
  <select id="role" name="role">
    <option value="viewer">viewer</option>
    <option value="member">member</option>
    <option value="maintainer">maintainer</option>
  </select>
  <button type="submit">Give role</button>
</form></section>
<p><a href="/projects/${project.id}/settings">Settings of this project</a></p>`,
  );
}
