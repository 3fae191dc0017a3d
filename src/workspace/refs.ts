// Validation of the names Errand passes to git: refs and branches (git's own rules via
// `git check-ref-format`, plus a stricter pre-check so nothing can look like an option),
// and the ids that become folder names.

import { invalidInput } from './errors.ts';
import { runGit } from './git.ts';
import type { WorkspaceConfig } from './types.ts';

const MAX_REF_LENGTH = 255;
const UNSAFE_CHAR = /[\s\p{Cc}\p{Cf}\\]/u;
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const COMMIT_ID = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;
const ABBREVIATED_COMMIT_ID = /^[0-9a-f]{7,64}$/;

export function checkId(what: string, id: string): void {
  if (!ID.test(id)) {
    throw invalidInput(
      `${what} must be 1-128 letters, digits, ".", "_" or "-", starting with a letter or digit`,
    );
  }
}

function precheck(what: string, name: string): void {
  if (name.length === 0 || name.length > MAX_REF_LENGTH) {
    throw invalidInput(`${what} must be 1-${MAX_REF_LENGTH} characters`);
  }
  if (UNSAFE_CHAR.test(name)) {
    throw invalidInput(`${what} "${name}" contains whitespace, a backslash or control characters`);
  }
  if (name.split('/').some((part) => part.startsWith('-'))) {
    throw invalidInput(`${what} "${name}" must not start with "-" (nor any of its parts)`);
  }
}

async function checkRefFormat(
  cfg: WorkspaceConfig,
  what: string,
  shown: string,
  fullRef: string,
): Promise<void> {
  // check-ref-format takes no `--`; the pre-check guarantees fullRef starts with "refs/".
  const { code } = await runGit(cfg, ['check-ref-format', fullRef], {
    cwd: cfg.rootDir,
    okCodes: [1],
  });
  if (code !== 0) throw invalidInput(`${what} "${shown}" is not a valid git ref name`);
}

/** The work branch: a short branch name such as `errand/<jobId>`. */
export async function checkBranchName(cfg: WorkspaceConfig, branch: string): Promise<void> {
  precheck('branch', branch);
  if (branch.startsWith('refs/') || branch === 'HEAD') {
    throw invalidInput(`branch "${branch}" must be a short branch name, not a full ref`);
  }
  await checkRefFormat(cfg, 'branch', branch, `refs/heads/${branch}`);
}

/** The start point: a branch, tag, full ref or commit id. */
export async function checkSourceRef(cfg: WorkspaceConfig, ref: string): Promise<void> {
  precheck('ref', ref);
  if (ABBREVIATED_COMMIT_ID.test(ref)) return;
  if (ref === 'HEAD') throw invalidInput('ref must name a branch, tag or commit, not HEAD');
  await checkRefFormat(cfg, 'ref', ref, ref.startsWith('refs/') ? ref : `refs/heads/${ref}`);
}

/** Full ref names a short `ref` may mean; branches first, as a job's ref nearly always is one. */
export function refCandidates(ref: string): string[] {
  if (ref.startsWith('refs/')) return [ref];
  const names = [`refs/heads/${ref}`, `refs/tags/${ref}`];
  if (ABBREVIATED_COMMIT_ID.test(ref)) names.push(ref);
  return names;
}
