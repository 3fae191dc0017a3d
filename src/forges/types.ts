// The one interface every code-hosting service implements. A turn that pushed commits asks
// the project's forge for the job's pull request: find it by head branch, else open it, and
// keep its description current. Providers live in ./github, ./gitlab and ./gitea, registered
// by id in ./registry.ts; a plain git remote (`git`) has no provider and is reviewed on
// Errand's own review page.
import { ExternalError } from '../errors.ts';
import type { ForgeCredentials, ForgeKind } from '../projects/forge.ts';
import type { GitAuth } from '../repository/auth.ts';

export interface PullRequest {
  /** The forge's number for it (GitHub/Gitea `number`, GitLab `iid`). */
  number: number;
  /** The page a person opens. */
  url: string;
  draft: boolean;
  state: 'open' | 'closed' | 'merged';
}

export interface PullRequestInput {
  /** The work branch, `errand/<job-id>`. */
  head: string;
  /** The branch the job started from (`source.ref`). */
  base: string;
  title: string;
  body: string;
  draft: boolean;
}

export interface CreatedPullRequest {
  pullRequest: PullRequest;
  /** Things the user should know, e.g. "drafts are not allowed here: opened a normal pull request". */
  notes: string[];
}

/** An issue or a pull request (GitLab: merge request) by its number (GitLab: iid). */
export interface ThreadRef {
  kind: 'issue' | 'pull-request';
  number: number;
}

/**
 * A comment Errand acknowledges and answers, as the forge's webhook named it: a comment in the
 * conversation of an issue or pull request, a comment on a line of the diff, or a review's body.
 */
export interface CommentRef {
  thread: ThreadRef;
  where: 'conversation' | 'line' | 'review';
  /** The forge's id of the comment (of the review, for a review's body). */
  commentId: string;
  /** GitLab: the discussion the note is in; null elsewhere. */
  discussionId: string | null;
}

/**
 * An issue as the forge tells it, by its number (GitLab: iid). GitHub's and Gitea's issues
 * endpoints answer a pull request's number too: then `pullRequest` is true and the body is the
 * pull request's description.
 */
export interface ForgeIssue {
  number: number;
  title: string;
  /** Its description; empty when it has none. */
  body: string;
  state: 'open' | 'closed';
  /** The page a person opens. */
  url: string;
  pullRequest: boolean;
}

/** A user of the forge, as a webhook names them. */
export interface ForgeUser {
  login: string;
  /** The numeric id, as a string (GitLab asks membership by id). */
  id: string;
}

export interface ForgeClient {
  readonly kind: ForgeKind;
  /** The job's pull request by head branch (open ones first), or null. */
  findPullRequest(head: string, signal?: AbortSignal): Promise<PullRequest | null>;
  createPullRequest(input: PullRequestInput, signal?: AbortSignal): Promise<CreatedPullRequest>;
  updatePullRequest(
    number: number,
    change: { title?: string; body: string },
    signal?: AbortSignal,
  ): Promise<PullRequest>;
  /** The header git sends when pushing over HTTPS to this forge (URL-scoped by the caller). */
  gitAuth(signal?: AbortSignal): Promise<GitAuth | undefined>;
  /**
   * Says at once that Errand took a comment up: an 👀 reaction on it, or the forge's nearest
   * equivalent (GitHub has no reactions on a review's body: the pull request gets it).
   */
  acknowledge(comment: CommentRef, signal?: AbortSignal): Promise<void>;
  /** Answers a comment in its thread: a line comment's thread, GitLab's discussion, else the conversation. */
  reply(comment: CommentRef, body: string, signal?: AbortSignal): Promise<void>;
  /** Comments in the conversation of an issue or pull request. */
  comment(thread: ThreadRef, body: string, signal?: AbortSignal): Promise<void>;
  /**
   * The issue numbered `number`, or undefined when the forge answers that there is none (404;
   * GitHub also 410, a deleted issue or issues turned off). The forge's 404 does not tell a
   * missing issue from a repository the token cannot see.
   */
  issue(number: number, signal?: AbortSignal): Promise<ForgeIssue | undefined>;
  /** Whether the user may write to the repository (GitHub write, maintain or admin; GitLab Developer or above). */
  canWrite(user: ForgeUser, signal?: AbortSignal): Promise<boolean>;
  /** What the forge says of the pull request now. */
  pullRequestStatus(number: number, signal?: AbortSignal): Promise<PullRequestStatus>;
  /**
   * The checks of one commit, every kind the forge has (GitHub: check runs and commit
   * statuses; GitLab: the jobs of the commit's latest pipeline; Gitea: commit statuses), each
   * name once at its latest run.
   */
  checks(sha: string, signal?: AbortSignal): Promise<CheckResult[]>;
  /**
   * The end of a check's log as text, at most `maxBytes` UTF-8 bytes of its tail (cut at a line
   * start): GitHub's check run output and its Actions job's log, GitLab's job trace, Gitea's
   * status description and target URL. Empty when the forge keeps none.
   */
  checkLog(check: CheckResult, maxBytes: number, signal?: AbortSignal): Promise<string>;
  /**
   * Merges the pull request with the forge's own merge API and `method`, only if its head is
   * still `sha`: branch protection and the forge's rules are the forge's to enforce, and a
   * refusal is an outcome, not an error (errors are the forge failing).
   */
  mergePullRequest(
    number: number,
    options: { method: MergeMethod; sha: string },
    signal?: AbortSignal,
  ): Promise<MergeOutcome>;
}

/**
 * What the forge says of a pull request now, as the pull request watch reads it
 * (src/features/pr-watch/): its state, its head commit, whether it merges into its base, its
 * labels and whether its approval rules are met.
 */
export interface PullRequestStatus {
  number: number;
  url: string;
  state: 'open' | 'closed' | 'merged';
  /** When it was merged (ISO 8601), or null. */
  mergedAt: string | null;
  /** The commit its head branch points at. */
  headSha: string;
  /** The branch it merges into. */
  base: string;
  /**
   * Whether it merges into its base without conflicts: null while the forge has not worked it
   * out (GitHub computes it lazily, GitLab and Gitea in the background).
   */
  mergeable: boolean | null;
  /** Its labels' names. */
  labels: string[];
  /** A draft, which the forge merges only once someone marks it ready. */
  draft: boolean;
  /**
   * Whether the forge's approval rules are met: GitLab's approval rules (`approved`); on GitHub
   * and Gitea, at least one approving review and no review asking for changes that is still
   * standing (each reviewer's latest review counts).
   */
  approved: boolean;
}

/** How a check ended, or that it has not. */
export type CheckState = 'pending' | 'success' | 'failure';

/**
 * One check of a commit, as its forge reports it: a GitHub check run or commit status, a
 * GitLab pipeline's job, a Gitea/Forgejo commit status.
 */
export interface CheckResult {
  /**
   * The forge's id of the check, what `checkLog` reads its log by: a GitHub check run's id
   * (`status:<context>` for a commit status), a GitLab job's id, a Gitea status's context.
   */
  id: string;
  /** Its name as people see it: the check run's name, `pipeline / job`, the status context. */
  name: string;
  /**
   * `success` also for what does not fail a merge (neutral, skipped); `failure` for failed,
   * cancelled, timed out, errored, action required; `pending` while it runs or waits.
   */
  state: CheckState;
  /** The check's page, or null. */
  url: string | null;
  /** The forge's one-line account of it (a check run's title, a status description), or null. */
  summary: string | null;
}

/** How a pull request is merged (the project's `mergeMethod`). */
export type MergeMethod = 'merge' | 'squash' | 'rebase';

/** What the forge did when asked to merge. */
export type MergeOutcome =
  /** Merged, into this commit on the base. */
  | { merged: true; sha: string | null }
  /**
   * Not merged, and said why in the forge's words: branch protection, a required check or
   * review missing, the head moved since `sha`, a conflict. Never retried by itself.
   */
  | { merged: false; reason: string };

export interface ForgeClientOptions {
  /** API base URL, e.g. https://api.github.com, https://ghe.example.com/api/v3, https://gitlab.com/api/v4. */
  apiUrl: string;
  /** The project's repository URL (https://host/owner/repo(.git)). */
  repository: string;
  credentials: ForgeCredentials;
  /** For tests and proxies; defaults to the global fetch. */
  fetch?: typeof globalThis.fetch;
  /**
   * The clock, in milliseconds like `Date.now` (the default), that short-lived credentials (a
   * GitHub App's installation tokens) are judged stale by; tests move it instead of waiting.
   */
  now?: () => number;
}

/**
 * A forge: its clients. What its webhooks send Errand is read by the forge intake
 * (src/features/forge-intake/payloads/), one file per forge there.
 */
export interface ForgeProvider {
  readonly id: ForgeKind;
  /** How people write its name, e.g. "GitHub". */
  readonly name: string;
  /**
   * What the token must be allowed to do for Errand to fetch, push and open pull requests,
   * e.g. "the token needs the api scope …": said when git is refused with the token.
   */
  readonly tokenPermissions: string;
  /** The API base URL for a repository on this forge's public instance, when known (github.com → api.github.com). */
  defaultApiUrl(repository: string): string | undefined;
  /**
   * Throws a ForgeError, without needing credentials, when this forge cannot work with the
   * repository at this API URL; `create` checks the same.
   */
  checkTarget(apiUrl: string, repository: string): void;
  create(options: ForgeClientOptions): ForgeClient;
}

/**
 * A forge refused or failed. `transient` failures (5xx, network, secondary rate limits) are
 * retried with backoff; the others fail the job with this message, which names the forge and,
 * for 401/403, the permission that is missing. Never contains a credential.
 */
export class ForgeError extends ExternalError {
  readonly status: number | undefined;
  constructor(
    forge: ForgeKind,
    message: string,
    opts: { transient: boolean; status?: number; retryAfterSeconds?: number; cause?: unknown },
  ) {
    super(forge, message, opts);
    this.name = 'ForgeError';
    this.status = opts.status;
  }
}
