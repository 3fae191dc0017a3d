// A project's settings page as it is now: the form, then its secrets and its environments, each
// section read afresh. The routes of the form, the secrets and the environments all answer
// with it, a refusal shown in the part it belongs to; the notices a page's address asks for are
// shown only when the data bears them out, so a link cannot make one up.
import type { AppContext } from '../context.ts';
import { monthUsage } from '../jobs/spend.ts';
import type { Principal } from '../keys/service.ts';
import { listEnvironments } from '../projects/environments.ts';
import { listSecrets } from '../projects/secrets.ts';
import type { ProjectRecord } from '../records/project.ts';
import { type EnvironmentsNotice, environmentsSection } from './environment-pages.ts';
import type { SafeHtml } from './html.ts';
import { type ProjectForm, projectValues, settingsPage } from './project-pages.ts';
import { type SecretsForm, secretsSection } from './secret-pages.ts';

async function projectSecretsSection(
  ctx: AppContext,
  project: ProjectRecord,
  form: SecretsForm,
): Promise<SafeHtml> {
  const secrets = await listSecrets(ctx, project.id);
  const listed = (name: string | undefined) => secrets.some((s) => s.name === name);
  return secretsSection(project, secrets, {
    ...form,
    saved: listed(form.saved) ? form.saved : undefined,
    deleted:
      form.deleted && /^[A-Z_][A-Z0-9_]*$/.test(form.deleted) && !listed(form.deleted)
        ? form.deleted
        : undefined,
  });
}

async function projectEnvironmentsSection(
  ctx: AppContext,
  project: ProjectRecord,
  shown: EnvironmentsNotice,
): Promise<SafeHtml> {
  const environments = await listEnvironments(ctx, project.id);
  // A key is a digest (hex): anything else in the address is no key that was dropped.
  const dropped =
    shown.dropped === 'all'
      ? environments.length === 0
      : shown.dropped !== undefined &&
        /^[0-9a-f]{16,128}$/.test(shown.dropped) &&
        !environments.some((e) => e.key === shown.dropped);
  return environmentsSection(project, environments, {
    ...shown,
    rebuilt: shown.rebuilt === true && project.setupCommand !== null,
    dropped: dropped ? shown.dropped : undefined,
  });
}

/** What a settings page shows besides the stored project: a refused form, notices. */
export interface SettingsState {
  /** The form's values (a refused form's, as given); the stored project's when not given. */
  values?: ProjectForm;
  error?: string | undefined;
  saved?: boolean;
  secrets?: SecretsForm;
  environments?: EnvironmentsNotice;
}

/** The settings page of `project`, with its secrets and environments as they are now. */
export async function projectSettingsPage(
  ctx: AppContext,
  principal: Principal,
  project: ProjectRecord,
  state: SettingsState = {},
): Promise<string> {
  const month = (await monthUsage(ctx, [project.id])).get(project.id);
  if (!month) throw new Error(`no month's usage for ${project.id}`);
  return settingsPage(principal, project, month, {
    values: state.values ?? projectValues(project),
    error: state.error,
    saved: state.saved ?? false,
    secrets: await projectSecretsSection(ctx, project, state.secrets ?? {}),
    environments: await projectEnvironmentsSection(ctx, project, state.environments ?? {}),
  });
}
