// A snapshot's key: what decides whether an earlier setup's result fits this checkout. The
// setup command, the network it ran with, the names and exposures of the secrets it was given
// (never their values: a rotated token needs no rebuild) and the content of the project's key
// files (lock files). Their content comes from git's index as blob ids, a hash git already
// has: no file is read.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { ProjectRow } from '../db/schema.ts';
import type { TurnSecret } from '../projects/secrets.ts';
import { DEFAULT_ENVIRONMENT_KEY_FILES } from '../records/project.ts';
import { runGit } from '../workspace/git.ts';
import type { WorkspaceConfig } from '../workspace/index.ts';

/** What of a project goes into its environment's key. */
export type KeyedProject = Pick<
  ProjectRow,
  'setup_command' | 'environment_key_files' | 'network_setup' | 'network_allow'
>;

/** Bumped when what goes into a key changes, so that no old snapshot matches a new key. */
const KEY_VERSION = 1;

/**
 * git pathspecs for the globs, each from the top of the tree (the API refuses a leading / and
 * ..): glob magic, where `*` stops at a slash and a `**` segment crosses any number of
 * directories.
 */
export function keyFilePathspecs(globs: readonly string[]): string[] {
  return globs.map((glob) => `:(glob,top)${glob}`);
}

/** The key of the environment the project's setup makes in the checkout `dir` (its HEAD). */
export async function environmentKey(
  workspace: WorkspaceConfig,
  input: {
    dir: string;
    project: KeyedProject;
    secrets: readonly TurnSecret[];
    signal?: AbortSignal;
  },
): Promise<string> {
  const { project } = input;
  const globs = project.environment_key_files ?? DEFAULT_ENVIRONMENT_KEY_FILES;
  let files = '';
  if (globs.length > 0) {
    // `-s`: mode, blob id and path of each tracked file that matches, from the index (which
    // the checkout's reset made HEAD's): the sandbox's edits to the files do not count.
    const listed = await runGit(
      workspace,
      ['ls-files', '-s', '-z', '--', ...keyFilePathspecs(globs)],
      {
        gitDir: join(input.dir, '.git'),
        workTree: input.dir,
        cwd: input.dir,
        ...(input.signal ? { signal: input.signal } : {}),
        action: "listing the environment's key files",
      },
    );
    files = listed.stdout;
  }
  const secrets = input.secrets
    .map((s) => `${s.name}=${s.exposure}`)
    .sort()
    .join('\n');
  const hash = createHash('sha256');
  for (const part of [
    `errand environment v${KEY_VERSION}`,
    project.setup_command ?? '',
    project.network_setup,
    project.network_setup === 'allowlist' ? [...project.network_allow].sort().join('\n') : '',
    secrets,
    files,
  ]) {
    // Each part's length first: no two different lists of parts hash the same bytes.
    hash.update(`${Buffer.byteLength(part)}:`).update(part);
  }
  return hash.digest('hex');
}
