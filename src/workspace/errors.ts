// Turns a failed git run into a GitError a person can act on: what failed, against which
// repository, whether retrying can help. Credentials are scrubbed before text leaves here.

import { ExternalError } from '../errors.ts';
import type { GitAuth } from '../repository/auth.ts';
import { headerSecrets, maskCredentials, secretScrubber } from '../secrets/scrub.ts';

export type GitErrorCode =
  | 'invalid_input'
  | 'auth'
  | 'not_found'
  | 'ref_not_found'
  | 'network'
  | 'server'
  | 'diverged'
  | 'failed';

export class GitError extends ExternalError {
  readonly code: GitErrorCode;
  /** git's stderr (tail), already scrubbed of credentials. */
  readonly stderr: string;
  readonly exitCode: number | null;
  constructor(
    code: GitErrorCode,
    message: string,
    opts: { transient: boolean; stderr?: string; exitCode?: number | null },
  ) {
    super('git', message, { transient: opts.transient });
    this.name = 'GitError';
    this.code = code;
    this.stderr = opts.stderr ?? '';
    this.exitCode = opts.exitCode ?? null;
  }
}

export function invalidInput(message: string): GitError {
  return new GitError('invalid_input', message, { transient: false });
}

/** The error a git call rejects with when its AbortSignal fires, shaped like fetch()'s. */
export function abortError(what: string, reason: unknown): Error {
  const err = new Error(`${what} was aborted`, { cause: reason });
  err.name = 'AbortError';
  return err;
}

interface Classification {
  code: GitErrorCode;
  transient: boolean;
  explanation: string;
}

// Order matters: the first match wins, and git often prints a generic line after the cause.
const RULES: ReadonlyArray<readonly [RegExp, Classification]> = [
  [
    /transport '[^']*' not allowed|unsupported protocol/i,
    { code: 'invalid_input', transient: false, explanation: 'transport not allowed' },
  ],
  [
    /\[(?:remote )?rejected\].*\((?:fetch first|non-fast-forward|stale info)\)|Updates were rejected because/i,
    {
      code: 'diverged',
      transient: false,
      explanation: 'the remote branch has commits that are not in this workspace',
    },
  ],
  [
    /returned error: 40[13]\b|Authentication failed|could not read (?:Username|Password)|terminal prompts disabled|Permission denied \(|Host key verification failed|invalid credentials|HTTP Basic: Access denied/i,
    {
      code: 'auth',
      transient: false,
      explanation: 'access was refused; check the credentials and their permissions',
    },
  ],
  [
    /returned error: 404\b|Repository not found|does not appear to be a git repository|not found\s*$|No such file or directory/im,
    { code: 'not_found', transient: false, explanation: 'repository not found' },
  ],
  [
    /returned error: 3\d\d\b|redirect/i,
    {
      code: 'failed',
      transient: false,
      explanation: 'the server answered with a redirect, which is not followed; use the final URL',
    },
  ],
  [
    /returned error: (?:5\d\d|429)\b|Internal Server Error|Service Unavailable|Bad Gateway|Gateway Time-?out|RPC failed|HTTP\/2 stream \d+ was not closed cleanly/i,
    {
      code: 'server',
      transient: true,
      explanation: 'the server failed or is overloaded; retry later',
    },
  ],
  [
    /Could not resolve (?:host|hostname|proxy)|Temporary failure in name resolution|Name or service not known|Connection refused|Connection timed out|Operation timed out|timed out|Connection reset|Connection closed|Network is unreachable|No route to host|Failed to connect|Empty reply from server|early EOF|unexpected disconnect|the remote end hung up|transfer closed|SSL_ERROR_SYSCALL|gnutls_handshake|TLS connection was non-properly terminated|lowSpeedTime|Operation too slow/i,
    {
      code: 'network',
      transient: true,
      explanation: 'the network connection failed; retry later',
    },
  ],
];

export function classifyGitFailure(stderr: string): Classification {
  for (const [pattern, result] of RULES) {
    if (pattern.test(stderr)) return result;
  }
  return { code: 'failed', transient: false, explanation: 'git failed' };
}

/** Returns a function that removes every form of the credentials in `auth` from a text. */
export function makeScrubber(auth: GitAuth | undefined): (text: string) => string {
  const known = secretScrubber(auth ? headerSecrets(auth.header) : [], {
    mask: '***',
    minLength: 4,
  });
  // Whatever else git might echo: user info in URLs and header lines.
  return (text) => maskCredentials(known(text), '***');
}

/** The useful end of git's stderr: its last error lines, without progress noise. */
export function stderrSummary(stderr: string, maxChars = 600): string {
  const lines = stderr
    .split(/\r?\n|\r/)
    .map((line) => line.trim())
    .filter(
      (line) => line !== '' && !/^(?:hint|remote: (?:Counting|Compressing|Total))\b/.test(line),
    );
  const important = lines.filter((line) => /^(?:fatal|error|remote|!|\s*\[)/i.test(line));
  const chosen = (important.length > 0 ? important : lines).slice(-4).join(' | ');
  return chosen.length > maxChars ? `…${chosen.slice(-maxChars)}` : chosen;
}
