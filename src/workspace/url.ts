// Which repository URLs Errand will hand to git, and how they are shown in messages.
// Pure functions: the git runner's protocol whitelist is the second line of defence.

import type { GitAuth } from './types.ts';

export type RepositoryKind = 'https' | 'ssh' | 'scp' | 'local' | 'http';

export type UrlCheck = { ok: true; kind: RepositoryKind } | { ok: false; reason: string };

const MAX_URL_LENGTH = 2048;
const LOCAL_DISABLED =
  'local repositories are disabled on this server (set ERRAND_ALLOW_LOCAL_REPOS=true to allow them)';

// Git hands `<transport>::<address>` to a remote helper (`ext::` runs a command).
const REMOTE_HELPER = /^[A-Za-z0-9+.-]*::/;
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//;
// git's own rule: a colon before any slash makes `[user@]host:path` an ssh address.
const SCP = /^(?:([^@/:]+)@)?(\[[^\]/]+\]|[^@/:[\]]+):(.*)$/;
// Whitespace and control characters: git and ssh split or reinterpret them.
const UNSAFE_CHAR = /[\s\p{Cc}\p{Cf}]/u;

function refuse(reason: string): UrlCheck {
  return { ok: false, reason };
}

export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127(?:\.\d{1,3}){3}$/.test(host);
}

export function validateRepositoryUrl(url: string, allowLocal: boolean): UrlCheck {
  if (url.length === 0) return refuse('repository URL is empty');
  if (url.length > MAX_URL_LENGTH) return refuse('repository URL is too long');
  if (UNSAFE_CHAR.test(url)) {
    return refuse('repository URL contains whitespace or control characters');
  }
  if (url.startsWith('-')) return refuse('repository URL must not start with "-"');
  if (REMOTE_HELPER.test(url)) {
    return refuse('remote helper URLs ("<transport>::<address>") are not allowed');
  }

  const scheme = SCHEME.exec(url)?.[1]?.toLowerCase();
  if (scheme !== undefined) return checkSchemeUrl(url, scheme, allowLocal);

  const scp = SCP.exec(url);
  if (scp) {
    const [, user, host, path] = scp;
    if (host === undefined || host.startsWith('-') || user?.startsWith('-')) {
      return refuse('ssh host and user must not start with "-"');
    }
    if (!path) return refuse('ssh address has no repository path after ":"');
    return { ok: true, kind: 'scp' };
  }

  if (!allowLocal) return refuse(LOCAL_DISABLED);
  return { ok: true, kind: 'local' };
}

function checkSchemeUrl(url: string, scheme: string, allowLocal: boolean): UrlCheck {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return refuse('repository URL is not a valid URL');
  }
  switch (scheme) {
    case 'https':
    case 'http': {
      if (parsed.username !== '' || parsed.password !== '') {
        return refuse('repository URL must not contain credentials; configure them separately');
      }
      if (parsed.hostname === '') return refuse('repository URL has no host');
      if (scheme === 'https') return { ok: true, kind: 'https' };
      // A server on this machine's loopback is no less trusted than a local path, and nothing
      // crosses the network: allowed exactly where local repositories are.
      if (isLoopbackHost(parsed.hostname)) {
        if (allowLocal) return { ok: true, kind: 'http' };
        return refuse(
          'plain http:// is unencrypted: it is allowed only to a loopback host where local repositories are (ERRAND_ALLOW_LOCAL_REPOS=true); use https://',
        );
      }
      return refuse('plain http:// sends code and credentials unencrypted; use https://');
    }
    case 'ssh':
    case 'git+ssh':
    case 'ssh+git': {
      if (parsed.password !== '') {
        return refuse('repository URL must not contain a password; use an ssh key');
      }
      // URL lowercases and may percent-encode; check the raw authority as ssh will see it.
      const authority = url.slice(url.indexOf('//') + 2).split('/')[0] ?? '';
      const host = authority.slice(authority.lastIndexOf('@') + 1);
      if (host === '' || host.startsWith('-') || authority.startsWith('-')) {
        return refuse('ssh host and user must not be empty or start with "-"');
      }
      return { ok: true, kind: 'ssh' };
    }
    case 'file':
      if (!allowLocal) return refuse(LOCAL_DISABLED);
      return { ok: true, kind: 'local' };
    case 'git':
      return refuse('the unauthenticated git:// protocol is not allowed; use https:// or ssh://');
    default:
      return refuse(`unsupported URL scheme "${scheme}"; use https:// or ssh://`);
  }
}

/** The repository as it may appear in messages: no user info, no query string. */
export function displayUrl(url: string): string {
  if (SCHEME.test(url)) {
    try {
      const parsed = new URL(url);
      parsed.username = '';
      parsed.password = '';
      parsed.search = '';
      parsed.hash = '';
      return parsed.toString();
    } catch {
      return url.replace(/\/\/[^/]*@/, '//');
    }
  }
  return url;
}

const HEADER = /^[A-Za-z0-9-]+:[ \t]*\S[^\r\n\0]*$/;

/** Returns why `auth` cannot be used, or null. */
export function checkAuth(auth: GitAuth, allowLocal: boolean): string | null {
  if (!HEADER.test(auth.header)) return 'auth header must be one "Name: value" line';
  const prefix = validateRepositoryUrl(auth.urlPrefix, allowLocal);
  if (!prefix.ok || (prefix.kind !== 'https' && prefix.kind !== 'http')) {
    return 'auth urlPrefix must be an https:// URL without credentials';
  }
  return null;
}
