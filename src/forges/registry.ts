// The forge providers by id, and how a project's settings pick one: the project names its
// forge, or it is inferred from the repository's host (github.com, gitlab.com); anything
// else is a plain git remote, reviewed on Errand's own review page.
import type { Config } from '../config.ts';
import type { ProjectRow } from '../db/schema.ts';
import { parseRepositoryUrl } from '../repository/url.ts';
import { open } from '../secrets/box.ts';
import * as gitea from './gitea/index.ts';
import * as github from './github/index.ts';
import * as gitlab from './gitlab/index.ts';
import { forgeTokenEnvRefusal } from './token-env.ts';
import { type ForgeCredentials, ForgeError, type ForgeKind, type ForgeProvider } from './types.ts';

export const forgeProviders: ReadonlyMap<ForgeKind, ForgeProvider> = new Map<
  ForgeKind,
  ForgeProvider
>([
  [github.id, github.provider],
  [gitlab.id, gitlab.provider],
  [gitea.id, gitea.provider],
]);

export const FORGE_KINDS: readonly ForgeKind[] = ['github', 'gitlab', 'gitea', 'git'];

function hostOf(repository: string): string | undefined {
  const parsed = parseRepositoryUrl(repository);
  return parsed.ok && parsed.url.hostname !== '' ? parsed.url.hostname : undefined;
}

export function inferForgeKind(repository: string): ForgeKind {
  const host = hostOf(repository);
  if (host === 'github.com') return 'github';
  if (host === 'gitlab.com') return 'gitlab';
  return 'git';
}

export interface ProjectForge {
  kind: ForgeKind;
  /** Set for github, gitlab and gitea (explicit, or the public instance's). */
  apiUrl: string | undefined;
  inferred: boolean;
}

export function projectForge(
  project: Pick<ProjectRow, 'repository' | 'forge_kind' | 'forge_api_url'>,
): ProjectForge {
  const kind = project.forge_kind ?? inferForgeKind(project.repository);
  const apiUrl =
    kind === 'git'
      ? undefined
      : (project.forge_api_url ?? forgeProviders.get(kind)?.defaultApiUrl(project.repository));
  return { kind, apiUrl, inferred: project.forge_kind === null };
}

/** The project's forge credentials, from the worker's environment or the encrypted store. */
export function forgeCredentials(
  config: Config,
  project: ProjectRow,
  kind: ForgeKind,
): ForgeCredentials {
  if (project.forge_token_env) {
    // A row written before this check existed, or by an API allowing other names, must not
    // make this worker send one of its own secrets to a forge URL the project's admin chose.
    const refusal = forgeTokenEnvRefusal(project.forge_token_env, config);
    if (refusal) {
      throw new ForgeError(
        kind,
        `this worker does not read the project's ${kind} token from ${project.forge_token_env}: ${refusal}. Change it with 'errand project update ID --forge-token-env NAME'`,
        { transient: false },
      );
    }
    const token = config.workerEnv[project.forge_token_env];
    if (!token) {
      throw new ForgeError(
        kind,
        `the project's ${kind} token is read from ${project.forge_token_env}, which is not set in this worker's environment`,
        { transient: false },
      );
    }
    return { token };
  }
  if (project.forge_secret) {
    if (!config.secretKey) {
      throw new ForgeError(
        kind,
        'the project has stored forge credentials, but ERRAND_SECRET_KEY is not set on this worker',
        {
          transient: false,
        },
      );
    }
    const sealed = project.forge_secret.slice(project.forge_secret.indexOf(':') + 1);
    try {
      return JSON.parse(open(config.secretKey, sealed)) as ForgeCredentials;
    } catch (err) {
      throw new ForgeError(kind, err instanceof Error ? err.message : String(err), {
        transient: false,
      });
    }
  }
  throw new ForgeError(
    kind,
    `the project has no ${kind} credentials: set them with 'errand project update ID --forge-token-env NAME' (or --forge-token, or a GitHub App)`,
    { transient: false },
  );
}
