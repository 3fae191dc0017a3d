// A turn's project secrets (projects/secrets.ts): the forms the turn's scrubber removes, the
// environment each kind of command gets by exposure, and the refusal to push commits that hold
// a value. The model never gets one: its requests are scrubbed (agent/scrubbed-model.ts, and
// the model proxy for engines).
import { TurnFailedError } from '../jobs/runner.ts';
import type { SecretExposure, TurnSecret } from '../projects/secrets.ts';
import { namedSecretForms, type ScrubSecret, secretForms } from '../secrets/scrub.ts';
import { secretInNewObjects, type WorkspaceConfig } from '../workspace/index.ts';

/** Every form of every value, masked with its secret's name: `[secret NPM_TOKEN]`. */
export function secretScrubForms(secrets: readonly TurnSecret[]): ScrubSecret[] {
  return secrets.flatMap((s) => namedSecretForms(s.name, s.value));
}

/** Which exposures each kind of command gets. */
const GIVEN: Readonly<Record<'setup' | 'commands', readonly SecretExposure[]>> = {
  // The project's setup and maintenance commands.
  setup: ['setup', 'commands'],
  // The agent's run_command and an engine's process (its shell tool inherits them).
  commands: ['commands'],
};

/** The environment of secrets `who` runs with. */
export function secretEnv(
  secrets: readonly TurnSecret[],
  who: 'setup' | 'commands',
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const s of secrets) if (GIVEN[who].includes(s.exposure)) env[s.name] = s.value;
  return env;
}

/**
 * Refuses, before anything is pushed, commits that would publish a secret: any object they add
 * (file contents, binary ones too, file names, the message) holding one of a value's forms.
 * The error names the secret, never the value; the branch stays as it was on the remote.
 */
export async function refuseSecretsInPush(
  workspace: WorkspaceConfig,
  input: {
    dir: string;
    base: string;
    head: string;
    secrets: readonly TurnSecret[];
    signal: AbortSignal;
  },
): Promise<void> {
  const name = await secretInNewObjects(workspace, {
    dir: input.dir,
    base: input.base,
    head: input.head,
    secrets: input.secrets.map((s) => ({
      name: s.name,
      forms: secretForms(s.value).map((form) => Buffer.from(form, 'utf8')),
    })),
    signal: input.signal,
  });
  if (name !== undefined)
    throw new TurnFailedError(`the commit contains the value of secret ${name}; it was not pushed`);
}
