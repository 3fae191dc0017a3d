// Turns whatever Octokit threw into a ForgeError whose message tells the user what to fix and
// whose `transient` flag tells the queue whether waiting helps. Octokit's own error is never
// kept as the cause: it carries the request (headers, body) and is not ours to vet.

import { z } from 'zod';
import { parseRetryAfter } from '../../retry-after.ts';
import { ForgeError } from '../types.ts';

/** What a call was attempting, for the message and for the 404/403 wording. */
export interface CallAttempt {
  /** e.g. "open a pull request", in "GitHub refused to open a pull request". */
  action: string;
  method: string;
  /** The API path with placeholders filled, never with a query string. */
  path: string;
  repository: string;
  auth: 'token' | 'app';
  /** Set for the GitHub App token exchange, whose 401/404 mean something else. */
  appTokenExchange?: { installationId: string };
  /** Set for calls about one pull request, whose 404 can mean that pull request. */
  pullRequest?: number;
  /**
   * The fine-grained permission the call needs, when it is not what Errand's turns need (pull
   * requests and contents, written): e.g. 'Issues: read', named by a 403.
   */
  permission?: string;
}

const octokitError = z.object({
  status: z.number(),
  response: z.object({ headers: z.record(z.string(), z.unknown()), data: z.unknown() }).optional(),
});

const githubErrorBody = z.object({
  message: z.string().optional(),
  errors: z
    .array(z.union([z.string(), z.object({ message: z.string().optional() }).loose()]))
    .optional(),
});

interface GitHubFailure {
  status: number;
  headers: Record<string, string>;
  /** GitHub's `message` plus the `errors[].message` details, shortened. */
  detail: string;
}

/** The HTTP failure inside an Octokit error, or undefined for anything else. */
function httpFailure(err: unknown): GitHubFailure | undefined {
  const parsed = octokitError.safeParse(err);
  if (!parsed.success || !parsed.data.response) return undefined;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(parsed.data.response.headers)) {
    if (typeof value === 'string' || typeof value === 'number') {
      headers[name.toLowerCase()] = String(value);
    }
  }
  return {
    status: parsed.data.status,
    headers,
    detail: errorDetail(parsed.data.response.data),
  };
}

/**
 * GitHub's answer inside an Octokit error when its status is one of `statuses`: what a caller
 * reads as GitHub refusing (a merge blocked by branch protection) rather than failing.
 */
export function refusalOf(
  err: unknown,
  statuses: readonly number[],
): { status: number; detail: string } | undefined {
  const failure = httpFailure(err);
  if (!failure || !statuses.includes(failure.status)) return undefined;
  return { status: failure.status, detail: failure.detail };
}

function errorDetail(data: unknown): string {
  const body = githubErrorBody.safeParse(data);
  if (!body.success) return '';
  const parts: string[] = [];
  if (body.data.message) parts.push(body.data.message);
  for (const item of body.data.errors ?? []) {
    const text = typeof item === 'string' ? item : item.message;
    if (text) parts.push(text);
  }
  const joined = parts.join(': ').replace(/\s+/g, ' ').trim();
  return joined.length > 300 ? `${joined.slice(0, 300)}…` : joined;
}

const TURN_PERMISSIONS = "the 'Pull requests: write' and 'Contents: write' permissions";

/** What a 403 says the credentials need: the call's own permission, else what turns need. */
function neededPermissions(attempted: CallAttempt): string {
  const needs = attempted.permission
    ? `the '${attempted.permission}' permission`
    : TURN_PERMISSIONS;
  return attempted.auth === 'app'
    ? `the GitHub App needs ${needs} on the repository and must be installed on it`
    : `the token needs ${needs} (fine-grained) or the 'repo' scope (classic)`;
}

export function toForgeError(
  err: unknown,
  attempted: CallAttempt,
  now: number = Date.now(),
): ForgeError {
  if (err instanceof ForgeError) return err;
  const failure = httpFailure(err);
  if (!failure) {
    // No response: a refused connection, DNS, TLS or a reset. Octokit reports these as status
    // 500 without a response and puts fetch's reason in its message.
    const reason = err instanceof Error ? err.message : 'unknown error';
    return new ForgeError(
      'github',
      `GitHub could not be reached to ${attempted.action}: ${reason}`,
      {
        transient: true,
        cause: new Error(`${attempted.method} ${attempted.path}: ${reason}`),
      },
    );
  }
  const { status, headers, detail } = failure;
  const said = detail ? ` GitHub said: "${detail}"` : '';
  const cause = new Error(`${attempted.method} ${attempted.path} answered ${status}`);
  const fail = (message: string, transient: boolean, retryAfterSeconds?: number) =>
    new ForgeError('github', message, {
      transient,
      status,
      cause,
      ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    });

  const rateLimit = rateLimitWait(status, headers, detail, now);
  if (rateLimit !== undefined) {
    return fail(
      `GitHub rate limit reached (${status}) while trying to ${attempted.action}: retry in ${rateLimit} s.${said}`,
      true,
      rateLimit,
    );
  }
  if (status === 401) {
    if (attempted.appTokenExchange) {
      return fail(
        `GitHub refused the GitHub App's credentials (401): check the app id and private key, and that the server's clock is right.${said}`,
        false,
      );
    }
    return fail(
      attempted.auth === 'app'
        ? `GitHub refused the credentials (401): check the GitHub App's installation.${said}`
        : `GitHub refused the credentials (401): check the token.${said}`,
      false,
    );
  }
  if (status === 403) {
    const accepted = headers['x-accepted-github-permissions'];
    const hint = accepted ? ` (GitHub accepts: ${accepted})` : '';
    return fail(
      `GitHub refused to ${attempted.action} in ${attempted.repository} (403): ${neededPermissions(attempted)}${hint}.${said}`,
      false,
    );
  }
  if (status === 404) {
    if (attempted.appTokenExchange) {
      return fail(
        `GitHub App installation ${attempted.appTokenExchange.installationId} not found (404): check the installation id and that the app is still installed.`,
        false,
      );
    }
    if (attempted.pullRequest !== undefined) {
      return fail(
        `GitHub pull request ${attempted.repository}#${attempted.pullRequest} not found, or the ${credentialName(attempted)} cannot see the repository (404).`,
        false,
      );
    }
    return fail(
      `GitHub repository ${attempted.repository} not found, or the ${credentialName(attempted)} cannot see it (404).`,
      false,
    );
  }
  const retryAfter = seconds(headers['retry-after'], now);
  if (status >= 500 || status === 429) {
    return fail(`GitHub failed to ${attempted.action} (${status}).${said}`, true, retryAfter);
  }
  return fail(`GitHub refused to ${attempted.action} (${status}).${said}`, false);
}

function credentialName(attempted: CallAttempt): string {
  return attempted.auth === 'app' ? 'GitHub App installation' : 'token';
}

/**
 * Seconds to wait when a response is one of GitHub's rate limits, else undefined. Primary
 * limits say `x-ratelimit-remaining: 0` and when the window resets; secondary limits send
 * `retry-after`, or only a message, in which case GitHub asks for at least a minute.
 */
export function rateLimitWait(
  status: number,
  headers: Record<string, string>,
  detail: string,
  now: number,
): number | undefined {
  if (status !== 403 && status !== 429) return undefined;
  const retryAfter = seconds(headers['retry-after'], now);
  if (retryAfter !== undefined) return retryAfter;
  if (headers['x-ratelimit-remaining'] === '0') {
    const reset = Number(headers['x-ratelimit-reset']);
    if (Number.isFinite(reset)) return Math.max(1, Math.ceil(reset - now / 1000));
    return 60;
  }
  if (status === 429 || /rate limit/i.test(detail)) return 60;
  return undefined;
}

/** `Retry-After` in seconds, at least one. */
function seconds(value: string | undefined, now: number): number | undefined {
  const wait = parseRetryAfter(value, now);
  return wait === undefined ? undefined : Math.max(1, wait);
}
