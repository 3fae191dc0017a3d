// The repository's client as the parts of the GitHub forge share it (index.ts builds it): one
// authenticated, parsed API call, the Octokit it goes through, the repository it is for, and
// the plain fetch for what lies outside the API (an Actions log's storage URL).

import type { Octokit } from '@octokit/rest';
import type { z } from 'zod';
import type { CallAttempt } from './errors.ts';
import type { GitHubRepository } from './repository.ts';

/** One API call of the repository's client: with the current token, its answer parsed. */
type Call = <T>(
  attempted: Omit<CallAttempt, 'repository' | 'auth'>,
  schema: z.ZodType<T>,
  run: (headers: { authorization: string }, request: { signal?: AbortSignal }) => Promise<unknown>,
  signal: AbortSignal | undefined,
) => Promise<T>;

export interface GitHubApi {
  call: Call;
  octokit: Octokit;
  target: GitHubRepository;
  /** `owner/repo`. */
  repository: string;
  /** The client's fetch, for URLs GitHub hands out that take no token (log storage). */
  fetch: typeof globalThis.fetch;
}
