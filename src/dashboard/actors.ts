// Who did something, as the pages show it: a job's creator, a turn's sender, an audit row's
// actor. Rows keep ids; the names of the keys and users they name are read when a page is made,
// so a key renamed since shows its name of now.
import type { Db } from '../db/database.ts';
import type { Actor } from '../db/schema.ts';
import { html, type SafeHtml } from './html.ts';

/** The names of the keys and users among `actors`, by their ids. */
export async function actorNames(
  db: Db,
  actors: readonly (Actor | null | undefined)[],
): Promise<Map<string, string>> {
  const ids = (kind: 'key' | 'user') => [
    ...new Set(actors.flatMap((a) => (a?.kind === kind ? [a.id] : []))),
  ];
  const keys = ids('key');
  const users = ids('user');
  const names = new Map<string, string>();
  if (keys.length > 0)
    for (const row of await db
      .selectFrom('api_keys')
      .select(['id', 'name'])
      .where('id', 'in', keys)
      .execute())
      if (row.name) names.set(row.id, row.name);
  if (users.length > 0)
    for (const row of await db
      .selectFrom('users')
      .select(['id', 'name', 'email'])
      .where('id', 'in', users)
      .execute()) {
      const name = row.name ?? row.email;
      if (name) names.set(row.id, name);
    }
  return names;
}

/** "key ci (key_…)", "Ada (usr_…)", "github @octocat", "schedule nightly (sch_…)"; "—" for no one. */
export function actorLabel(
  actor: Actor | null | undefined,
  names: ReadonlyMap<string, string>,
): SafeHtml {
  if (!actor) return html`<span class="muted">—</span>`;
  if (actor.kind === 'forge') return html`${actor.forge} @${actor.login}`;
  const name = names.get(actor.id) ?? actor.name ?? undefined;
  const kind = actor.kind === 'key' ? 'key ' : actor.kind === 'schedule' ? 'schedule ' : '';
  return name
    ? html`${kind}${name} <span class="muted mono">${actor.id}</span>`
    : html`${kind}<span class="mono">${actor.id}</span>`;
}
