// Validation of the names Errand passes to git: refs and branches (git's own rules for ref
// names, plus a stricter pre-check so nothing can look like an option), and the ids that
// become folder names. Checked in-process: a spawn of `git check-ref-format` per name cost
// a fork of this whole process; the tests compare every verdict with git's.

import { invalidInput } from './errors.ts';

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

// Characters git never allows in a ref name (refs.c, refname_disposition) besides ASCII
// control characters and space: * is a pattern, only in a refspec.
const REF_BAD_PUNCTUATION = new Set(['~', '^', ':', '?', '[', '\\', '*']);

function hasBadRefChar(ref: string): boolean {
  for (const c of ref) {
    const code = c.charCodeAt(0);
    if (code <= 0x20 || code === 0x7f || REF_BAD_PUNCTUATION.has(c)) return true;
  }
  return false;
}

/**
 * What `git check-ref-format <ref>` accepts (refs.c check_refname_format, no options): at
 * least two components, none empty, starting with "." or ending in ".lock"; no "..", "@{",
 * control character, space or any of ~ ^ : ? [ \ *; not ending in "."; not "@". Any other
 * character, non-ASCII included, is allowed.
 */
export function isValidRefName(ref: string): boolean {
  if (ref === '@' || ref.endsWith('.') || hasBadRefChar(ref)) return false;
  if (ref.includes('..') || ref.includes('@{')) return false;
  const parts = ref.split('/');
  return (
    parts.length >= 2 &&
    parts.every((part) => part !== '' && !part.startsWith('.') && !part.endsWith('.lock'))
  );
}

function checkRefFormat(what: string, shown: string, fullRef: string): void {
  if (!isValidRefName(fullRef)) {
    throw invalidInput(`${what} "${shown}" is not a valid git ref name`);
  }
}

/** The work branch: a short branch name such as `errand/<jobId>`. */
export function checkBranchName(branch: string): void {
  precheck('branch', branch);
  if (branch.startsWith('refs/') || branch === 'HEAD') {
    throw invalidInput(`branch "${branch}" must be a short branch name, not a full ref`);
  }
  checkRefFormat('branch', branch, `refs/heads/${branch}`);
}

/** The start point: a branch, tag, full ref or commit id. */
export function checkSourceRef(ref: string): void {
  precheck('ref', ref);
  if (ABBREVIATED_COMMIT_ID.test(ref)) return;
  if (ref === 'HEAD') throw invalidInput('ref must name a branch, tag or commit, not HEAD');
  checkRefFormat('ref', ref, ref.startsWith('refs/') ? ref : `refs/heads/${ref}`);
}

/** Full ref names a short `ref` may mean; branches first, as a job's ref nearly always is one. */
export function refCandidates(ref: string): string[] {
  if (ref.startsWith('refs/')) return [ref];
  const names = [`refs/heads/${ref}`, `refs/tags/${ref}`];
  if (ABBREVIATED_COMMIT_ID.test(ref)) names.push(ref);
  return names;
}
