// The one reader of repository URLs: what kind of address a string is, and its host, user and
// path as git will see them. Everything else that looks at a repository URL (a project's
// check, the job's record, the checkout's policy, the forge providers, the registry's guess of
// a forge) asks this module, because on a security path two parsers that disagree on an edge
// case are a bug. Pure functions that import nothing of Errand's, so every layer may use them;
// the git runner's protocol whitelist is the second line of defence.
//
// The address is read from its raw text, never from WHATWG `URL` alone: `URL` turns `\` into
// `/` and resolves `%2e%2e`, so it would name another host or path than the one git contacts.

import { pathToFileURL } from 'node:url';

export type RepositoryKind = 'https' | 'ssh' | 'scp' | 'local' | 'http';

interface RepositoryUrl {
  kind: RepositoryKind;
  /** Lower-cased host, IPv6 in brackets; '' for a local repository. */
  hostname: string;
  /** The port as written, for the URL kinds that have one. */
  port: string | undefined;
  /** The user name before `@`, as written. */
  user: string | undefined;
  /** Whether the URL carries a password (`user:password@`). */
  hasPassword: boolean;
  /** Whether the URL has a query string or a fragment. */
  hasQuery: boolean;
  /**
   * The path as written, without query: after the authority for URLs (leading `/` kept), after
   * the `:` for scp-like addresses, the whole text for a local path.
   */
  path: string;
}

export type ParsedUrl = { ok: true; url: RepositoryUrl } | { ok: false; reason: string };

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
// `.` and `..` segments, also percent-encoded: URL resolves them, curl only the plain ones, so
// the forge and git would disagree on which repository is meant.
const DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?:\/|$)/i;

function refuse(reason: string): { ok: false; reason: string } {
  return { ok: false, reason };
}

export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127(?:\.\d{1,3}){3}$/.test(host);
}

/** Reads any address git accepts that Errand allows at all, whatever the server's policy. */
export function parseRepositoryUrl(url: string): ParsedUrl {
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
  if (scheme !== undefined) return parseSchemeUrl(url, scheme);

  const scp = SCP.exec(url);
  if (scp) {
    const [, user, host, path] = scp;
    if (host === undefined || host.startsWith('-') || user?.startsWith('-')) {
      return refuse('ssh host and user must not start with "-"');
    }
    if (!path) return refuse('ssh address has no repository path after ":"');
    const remote = checkRemotePath(url);
    if (remote) return refuse(remote);
    return {
      ok: true,
      url: {
        kind: 'scp',
        hostname: host.toLowerCase(),
        port: undefined,
        user,
        hasPassword: false,
        hasQuery: false,
        path,
      },
    };
  }
  return { ok: true, url: localUrl(url) };
}

function localUrl(path: string): RepositoryUrl {
  return {
    kind: 'local',
    hostname: '',
    port: undefined,
    user: undefined,
    hasPassword: false,
    hasQuery: false,
    path,
  };
}

// What git and curl read differently from URL: they must not reach a remote address at all.
function checkRemotePath(url: string): string | undefined {
  if (url.includes('\\')) return 'repository URL must not contain a backslash';
  const path = url.split(/[?#]/)[0] ?? '';
  if (DOT_SEGMENT.test(path)) return 'repository URL must not contain "." or ".." path segments';
  return undefined;
}

function parseSchemeUrl(url: string, scheme: string): ParsedUrl {
  let kind: RepositoryKind;
  switch (scheme) {
    case 'https':
    case 'http':
      kind = scheme;
      break;
    case 'ssh':
    case 'git+ssh':
    case 'ssh+git':
      kind = 'ssh';
      break;
    case 'file':
      kind = 'local';
      break;
    case 'git':
      return refuse('the unauthenticated git:// protocol is not allowed; use https:// or ssh://');
    default:
      return refuse(`unsupported URL scheme "${scheme}"; use https:// or ssh://`);
  }
  if (kind === 'local') {
    try {
      new URL(url);
    } catch {
      return refuse('repository URL is not a valid URL');
    }
    return { ok: true, url: localUrl(url) };
  }

  const rest = url.slice(url.indexOf('//') + 2);
  const authorityEnd = rest.search(/[/?#]/);
  const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd);
  const afterAuthority = authorityEnd === -1 ? '' : rest.slice(authorityEnd);
  const at = authority.lastIndexOf('@');
  const userInfo = at === -1 ? undefined : authority.slice(0, at);
  const hostPort = authority.slice(at + 1);
  const colon = userInfo?.indexOf(':') ?? -1;
  const user =
    userInfo === undefined ? undefined : colon === -1 ? userInfo : userInfo.slice(0, colon);
  const hasPassword = userInfo !== undefined && colon !== -1;
  const portMatch = /:(\d*)$/.exec(
    hostPort.startsWith('[') ? hostPort.slice(hostPort.indexOf(']')) : hostPort,
  );
  const rawHost = portMatch ? hostPort.slice(0, hostPort.length - portMatch[0].length) : hostPort;
  const port = portMatch?.[1] || undefined;

  if (kind === 'ssh') {
    // ssh reads the raw authority: a host or user that starts with "-" is an option to it.
    if (rawHost === '' || rawHost.startsWith('-') || authority.startsWith('-')) {
      return refuse('ssh host and user must not be empty or start with "-"');
    }
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return refuse('repository URL is not a valid URL');
  }
  const remote = checkRemotePath(url);
  if (remote) return refuse(remote);
  const hostname = rawHost.toLowerCase();
  // A host URL would rewrite (percent-encoded, non-ASCII) is a host curl may resolve otherwise.
  if (kind !== 'ssh' && hostname !== '' && hostname !== parsed.hostname) {
    return refuse(
      'repository URL host must be written as git will use it: plain ASCII (the punycode form of an international name), a full IPv4 address, no percent-encoding',
    );
  }
  const queryAt = afterAuthority.search(/[?#]/);
  return {
    ok: true,
    url: {
      kind,
      hostname,
      port,
      user,
      hasPassword,
      hasQuery: queryAt !== -1,
      path: queryAt === -1 ? afterAuthority : afterAuthority.slice(0, queryAt),
    },
  };
}

/** Applies the server's policy to a parsed address: which kinds, and no credentials in it. */
export function validateRepositoryUrl(url: string, allowLocal: boolean): UrlCheck {
  const parsed = parseRepositoryUrl(url);
  if (!parsed.ok) return parsed;
  const { kind, hostname, user, hasPassword } = parsed.url;
  switch (kind) {
    case 'local':
      if (!allowLocal) return refuse(LOCAL_DISABLED);
      return { ok: true, kind };
    case 'scp':
      return { ok: true, kind };
    case 'ssh':
      if (hasPassword) return refuse('repository URL must not contain a password; use an ssh key');
      return { ok: true, kind };
    case 'https':
    case 'http': {
      if (user !== undefined || hasPassword) {
        return refuse('repository URL must not contain credentials; configure them separately');
      }
      if (hostname === '') return refuse('repository URL has no host');
      if (kind === 'https') return { ok: true, kind };
      // A server on this machine's loopback is no less trusted than a local path, and nothing
      // crosses the network: allowed exactly where local repositories are.
      if (isLoopbackHost(hostname)) {
        if (allowLocal) return { ok: true, kind };
        return refuse(
          'plain http:// is unencrypted: it is allowed only to a loopback host where local repositories are (ERRAND_ALLOW_LOCAL_REPOS=true); use https://',
        );
      }
      return refuse('plain http:// sends code and credentials unencrypted; use https://');
    }
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

/**
 * The repository as a URL, for records: a local path becomes `file://…`, and an scp-like
 * address `user@host:path` becomes `ssh://user@host/path`, as the forges write their ssh
 * URLs. A URL is returned as written. Stored repositories were checked when they were saved;
 * one an older, looser check let through is shown as it was written.
 */
export function repositoryAsUrl(repository: string): string {
  const parsed = parseRepositoryUrl(repository);
  if (!parsed.ok) return repository;
  const { url } = parsed;
  if (url.kind === 'local')
    return /^file:/i.test(repository) ? repository : pathToFileURL(repository).href;
  if (url.kind === 'scp') {
    const user = url.user === undefined ? '' : `${url.user}@`;
    const path = url.path.startsWith('/') ? url.path : `/${url.path}`;
    return `ssh://${user}${url.hostname}${path}`;
  }
  return repository;
}
