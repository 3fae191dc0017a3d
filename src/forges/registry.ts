// The forge providers by id, and a project's credentials for its forge. Which forge a project
// names, or its repository's host implies, is the project's to say (src/projects/forge.ts); a
// plain git remote has no provider and is reviewed on Errand's own review page.
import type { Config } from '../config.ts';
import type { ProjectRow } from '../db/schema.ts';
import type { ForgeCredentials, ForgeKind } from '../projects/forge.ts';
import { forgeTokenEnvRefusal } from '../projects/token-env.ts';
import { open } from '../secrets/box.ts';
import * as gitea from './gitea/index.ts';
import * as github from './github/index.ts';
import * as gitlab from './gitlab/index.ts';
import { ForgeError, type ForgeProvider } from './types.ts';

export const forgeProviders: ReadonlyMap<ForgeKind, ForgeProvider> = new Map<
  ForgeKind,
  ForgeProvider
>([
  [github.id, github.provider],
  [gitlab.id, gitlab.provider],
  [gitea.id, gitea.provider],
]);

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
