// Reads owner and name out of a project's repository URL, the three spellings git accepts for
// a GitHub remote, through the one repository URL parser. Anything else is refused up front, so a typo fails the project's first job
// with a readable message instead of a 404 from an API path built from garbage.

import { isLoopbackHost, parseRepositoryUrl } from '../../repository/url.ts';
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

export function parseRepository(url: string): GitHubRepository {
  const parts = splitUrl(url);
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
  const parsed = parseRepositoryUrl(url);
  if (!parsed.ok) return undefined;
  const { kind, hostname, port, user, hasPassword, hasQuery, path } = parsed.url;
  if (hasQuery || hasPassword || hostname === '') return undefined;
  let host = hostname;
  switch (kind) {
    case 'scp':
    case 'ssh':
      // GitHub's ssh side knows one user; any other is a typo that fails at push time. An ssh
      // port says nothing about where HTTPS lives, so the host drops it.
      if (user !== 'git') return undefined;
      break;
    case 'http':
    case 'https':
      // Plain HTTP only to this machine (a development or test forge).
      if (kind === 'http' && !isLoopbackHost(hostname)) return undefined;
      // Credentials belong in the project's forge settings; one in the URL would end up in
      // git's remote config and in every log line that prints the repository.
      if (user !== undefined) return undefined;
      if (port !== undefined && port !== (kind === 'https' ? '443' : '80')) {
        host = `${host}:${port}`;
      }
      break;
    case 'local':
      return undefined;
  }
  const segments = path.replace(/^\//, '').replace(/\/$/, '').split('/');
  const [owner, repo] = segments;
  if (segments.length !== 2 || !owner || !repo) return undefined;
  return { host, owner, repo };
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
