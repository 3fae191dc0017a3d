// Which environment variables a project may name as its forge token. The project's admin picks
// both the variable and the URL the token is sent to, so an open choice would let them read any
// secret of the workers: only ERRAND_FORGE_TOKEN_* and the names the operator lists are
// allowed, and Errand's own settings never. The API checks on write, the worker before reading.
import { type Config, FORGE_TOKEN_ENV_PREFIX, isErrandSetting } from '../config.ts';

const EXAMPLE = `${FORGE_TOKEN_ENV_PREFIX}GITHUB`;

/** Why `name` may not hold a project's forge token on this process, or undefined if it may. */
export function forgeTokenEnvRefusal(
  name: string,
  config: Pick<Config, 'forgeTokenEnvAllow'>,
): string | undefined {
  if (isErrandSetting(name)) {
    return `${name} is one of Errand's own settings or secrets and can never hold a forge token; put the token in a variable named ${FORGE_TOKEN_ENV_PREFIX}<NAME>, e.g. ${EXAMPLE}`;
  }
  if (name.startsWith(FORGE_TOKEN_ENV_PREFIX) && name.length > FORGE_TOKEN_ENV_PREFIX.length) {
    return undefined;
  }
  if (config.forgeTokenEnvAllow.includes(name)) return undefined;
  const listed =
    config.forgeTokenEnvAllow.length > 0
      ? ` or one of ${config.forgeTokenEnvAllow.join(', ')}`
      : '';
  return `${name} is not an allowed forge token variable: use a name starting with ${FORGE_TOKEN_ENV_PREFIX} (e.g. ${EXAMPLE})${listed}; the operator can allow other names with ERRAND_FORGE_TOKEN_ENV_ALLOW (exact names, comma-separated) on the API and the workers`;
}
