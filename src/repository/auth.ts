// A repository's credentials as git is given them: one HTTP header line, sent only to URLs
// under an https:// prefix (never in a URL, argv or .git/config). The forges make them, the
// workspace hands them to git; both check them here.
import { validateRepositoryUrl } from './url.ts';

/** Credentials for one remote: an HTTP header git sends only to URLs under `urlPrefix`. */
export interface GitAuth {
  urlPrefix: string;
  /** A whole header line, e.g. `Authorization: Bearer xyz`. */
  header: string;
}

const HEADER = /^[A-Za-z0-9-]+:[ \t]*\S[^\r\n\0]*$/;

/** Returns why `auth` cannot be used, or null: one header line, scoped to an https:// prefix. */
export function checkAuth(auth: GitAuth, allowLocal: boolean): string | null {
  if (!HEADER.test(auth.header)) return 'auth header must be one "Name: value" line';
  const prefix = validateRepositoryUrl(auth.urlPrefix, allowLocal);
  if (!prefix.ok || (prefix.kind !== 'https' && prefix.kind !== 'http')) {
    return 'auth urlPrefix must be an https:// URL without credentials';
  }
  return null;
}
