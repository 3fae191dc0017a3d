// Reads owner and name out of a project's repository URL, the three spellings git accepts for
// a GitHub remote. Anything else is refused up front, so a typo fails the project's first job
// with a readable message instead of a 404 from an API path built from garbage.

import { isLoopbackHost } from '../../workspace/url.ts';
import { ForgeError } from '../types.ts';

export interface GitHubRepository {
  /** Host (with port, for https URLs) of the web and git side: github.com or a GHES host. */
  host: string;
  owner: string;
  repo: string;
}

// GitHub's own rules: owners are alphanumerics and single hyphens; repository names also allow
// dots and underscores. Being strict keeps `..` or `%2F` from ever reaching an API path.
const ownerPattern = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/;
const repoPattern = /^[A-Za-z0-9._-]{1,100}$/;
const scpPattern = /^git@([A-Za-z0-9.-]+):([^/]+)\/([^/]+?)\/?$/;

export function parseRepository(url: string): GitHubRepository {
  const parts = splitUrl(url.trim());
  if (parts) {
    const repo = parts.repo.replace(/\.git$/, '');
    if (ownerPattern.test(parts.owner) && repoPattern.test(repo) && repo !== '.' && repo !== '..') {
      return { host: parts.host, owner: parts.owner, repo };
    }
  }
  throw new ForgeError(
    'github',
    `The repository URL ${describe(url)} is not a GitHub repository URL: expected https://host/owner/repo(.git), ssh://git@host/owner/repo.git or git@host:owner/repo.git`,
    { transient: false },
  );
}

function splitUrl(url: string): { host: string; owner: string; repo: string } | undefined {
  const scp = scpPattern.exec(url);
  if (scp) {
    const [, host, owner, repo] = scp;
    return host && owner && repo ? { host: host.toLowerCase(), owner, repo } : undefined;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.search || parsed.hash) return undefined;
  if (parsed.protocol === 'https:') {
    // Credentials belong in the project's forge settings; one in the URL would end up in git's
    // remote config and in every log line that prints the repository.
    if (parsed.username || parsed.password) return undefined;
  } else if (parsed.protocol === 'http:' && isLoopbackHost(parsed.hostname)) {
    // Plain HTTP only to this machine (a development or test forge), never credentials in it.
    if (parsed.username || parsed.password) return undefined;
  } else if (parsed.protocol === 'ssh:') {
    if (parsed.username !== 'git' || parsed.password) return undefined;
  } else {
    return undefined;
  }
  const segments = parsed.pathname.replace(/\/$/, '').split('/').slice(1);
  const [owner, repo] = segments;
  if (segments.length !== 2 || !owner || !repo) return undefined;
  // An ssh port says nothing about where HTTPS lives, so only https URLs keep theirs.
  const host = parsed.protocol === 'ssh:' ? parsed.hostname : parsed.host;
  return { host: host.toLowerCase(), owner, repo };
}

/** The URL for an error message, without anything that could be a credential. */
function describe(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    parsed.search = '';
    parsed.hash = '';
    return `"${parsed.href}"`;
  } catch {
    return url.includes('@') && !url.startsWith('git@') ? '(not shown)' : `"${url.slice(0, 200)}"`;
  }
}
