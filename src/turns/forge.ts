// The forge side of a turn (src/turns/pipeline.ts): the project's forge client and the header
// git pushes with, the review diff and the job's one pull request after a push, and upstream
// failures said as turn errors with the forge's credentials scrubbed out.
import type { Config } from '../config.ts';
import type { ProjectRow } from '../db/schema.ts';
import { ExternalError } from '../errors.ts';
import type { Emit } from '../events/catalog.ts';
import type { Forges } from '../forges/clients.ts';
import type { ForgeClient, ForgeProvider } from '../forges/types.ts';
import { bareReviewLink, reviewLink } from '../jobs/review-link.ts';
import { TurnFailedError, type TurnInput, type TurnOutput } from '../jobs/runner.ts';
import type { ForgeKind } from '../projects/forge.ts';
import type { GitAuth } from '../repository/auth.ts';
import { headerSecrets, type ScrubSecret } from '../secrets/scrub.ts';
import { GitError } from '../workspace/errors.ts';
import { type Checkout, diffAgainst, type WorkspaceConfig } from '../workspace/index.ts';

const REVIEW_DIFF_MAX_BYTES = 2 * 1024 * 1024;

export interface TurnForge {
  kind: ForgeKind;
  project: ProjectRow;
  provider: ForgeProvider | undefined;
  client: ForgeClient | undefined;
  auth: GitAuth | undefined;
}

/** Where Errand's own pages are; the service sets it before the agent runs (service.ts). */
function publicBaseUrl(config: Config): string {
  if (!config.publicUrl) throw new Error('the agent runs without a public URL');
  return config.publicUrl;
}

/** The project's forge client and the header git pushes with; none for plain git remotes. */
export async function turnForge(
  forges: Forges,
  input: TurnInput,
  secrets: ScrubSecret[],
): Promise<TurnForge> {
  // The job keeps the repository it was created with; the forge settings are the project's now.
  return repositoryForge(forges, input.project, input.job.repository, input.signal, secrets);
}

/**
 * The project's forge client and git's header for `repository`; the credentials' values are
 * added to `secrets`, to be scrubbed.
 */
export async function repositoryForge(
  forges: Forges,
  project: ProjectRow,
  repository: string,
  signal: AbortSignal,
  secrets: ScrubSecret[],
): Promise<TurnForge> {
  const forge = forges.client(project, repository);
  const { provider, client, credentials } = forge;
  if (!provider)
    return { kind: forge.kind, project, provider: undefined, client: undefined, auth: undefined };
  for (const value of [credentials.token, credentials.githubApp?.privateKey])
    if (value) secrets.push(value);
  const gitAuth = await client.gitAuth(signal);
  let auth: GitAuth | undefined;
  if (gitAuth && /^https?:\/\//.test(repository)) {
    // A GitHub App's installation token is in no other secret: only the header holds it.
    secrets.push(...headerSecrets(gitAuth.header));
    // Scoped to the repository's own origin, whatever prefix the provider suggests.
    auth = { urlPrefix: `${new URL(repository).origin}/`, header: gitAuth.header };
  }
  return { kind: forge.kind, project, provider, client, auth };
}

/**
 * After a push: keeps the job's review diff current and opens or updates the job's one
 * pull request, its title and body scrubbed of secrets (the prompts are in them). The pull
 * request is looked up by head branch before one is created, so a turn retried after a crash
 * finds the one it opened.
 */
export async function review(
  config: Config,
  workspace: WorkspaceConfig,
  input: TurnInput,
  forge: TurnForge,
  checkout: Checkout,
  summary: string,
  emit: Emit,
  scrub: (text: string) => string,
): Promise<Pick<TurnOutput, 'prLink' | 'prNumber'>> {
  const { job, turn, signal } = input;
  const diff = await diffAgainst(workspace, {
    dir: checkout.dir,
    base: checkout.baseCommit,
    maxBytes: REVIEW_DIFF_MAX_BYTES,
    signal,
  });
  await input.saveReviewDiff(diff.diff, diff.truncated);
  if (!forge.client) {
    // The job's own link, for whoever holds the job: it opens the page by itself.
    const prLink = reviewLink(publicBaseUrl(config), job.id, job.review_token);
    await emit('review.updated', { url: prLink });
    return { prLink };
  }
  // Everyone who reads the pull request reads this link: it opens the page only to a reader
  // signed in to the dashboard who may see the job.
  const body = scrub(
    pullRequestBody(input, summary, bareReviewLink(publicBaseUrl(config), job.id)),
  );
  const existing = await forge.client.findPullRequest(job.branch, signal);
  if (existing) {
    const pr = await forge.client.updatePullRequest(existing.number, { body }, signal);
    await emit('pull_request.updated', { forge: forge.kind, number: pr.number, url: pr.url });
    return { prLink: pr.url, prNumber: pr.number };
  }
  const title = scrub(
    summary
      .split('\n')[0]
      ?.replace(/^#+\s*/, '')
      .trim()
      .slice(0, 200) || turn.prompt.slice(0, 72),
  );
  const created = await forge.client.createPullRequest(
    { head: job.branch, base: job.ref, title, body, draft: forge.project.draft_pull_requests },
    signal,
  );
  const pr = created.pullRequest;
  await emit('pull_request.opened', {
    forge: forge.kind,
    number: pr.number,
    url: pr.url,
    draft: pr.draft,
    notes: created.notes,
  });
  return { prLink: pr.url, prNumber: pr.number };
}

/**
 * A running summary: every turn's prompt and the agent's summary, and the bare link to the job's
 * review page (no token: the pull request's readers see no more through it than it shows).
 */
function pullRequestBody(input: TurnInput, summary: string, reviewUrl: string): string {
  const { job, turn } = input;
  const turns = [...input.earlier, { seq: turn.seq, prompt: turn.prompt, summary }];
  const quote = (text: string) =>
    (text.length > 2000 ? `${text.slice(0, 2000)}…` : text)
      .split('\n')
      .map((line) => `> ${line}`)
      .join('\n');
  const sections = turns.map(
    (t) =>
      `### Turn ${t.seq}\n\n**Prompt**\n\n${quote(t.prompt)}\n\n**Summary**\n\n${t.summary?.trim() || '(no summary)'}`,
  );
  // A job made from an issue closes it when merged: GitHub, GitLab and Gitea all read this form.
  const closes = job.origin ? `Closes #${job.origin.number}\n\n` : '';
  return `Opened by Errand for job \`${job.id}\` ([review page](${reviewUrl}), for those signed in to Errand).\n\n${closes}${sections.join('\n\n')}\n`;
}

/**
 * Upstream failures become retryable or final turn errors, with credentials scrubbed out. Git
 * refused with the forge's token (a revoked or under-privileged token) is said as a forge
 * failure: which forge, and what the token needs, as the forge's own API failures are. Any
 * other error's message is scrubbed too: it becomes the job's error and a log line.
 */
export function asTurnError(
  err: unknown,
  scrub: (text: string) => string,
  forge: TurnForge | undefined,
): unknown {
  if (!(err instanceof ExternalError)) return scrubbedError(err, scrub);
  if (err instanceof GitError && err.code === 'auth' && forge?.auth && forge.provider) {
    const { name, tokenPermissions } = forge.provider;
    return new TurnFailedError(
      scrub(
        `${name} refused git access with the project's token: ${err.message}. ${tokenPermissions.charAt(0).toUpperCase()}${tokenPermissions.slice(1)}; check also that it has not expired or been revoked.`,
      ),
    );
  }
  const message = scrub(err.message);
  if (!err.transient) return new TurnFailedError(message);
  return new ExternalError(err.service, message, {
    transient: true,
    ...(err.retryAfterSeconds !== undefined ? { retryAfterSeconds: err.retryAfterSeconds } : {}),
  });
}

/**
 * `err` as it is when its message holds no secret; otherwise the same kind of error with the
 * message scrubbed, and nothing else of it (its stack and cause repeat the message).
 */
function scrubbedError(err: unknown, scrub: (text: string) => string): unknown {
  if (typeof err === 'string') return scrub(err);
  if (!(err instanceof Error)) return err;
  const message = scrub(err.message);
  if (message === err.message) return err;
  if (err instanceof TurnFailedError) return new TurnFailedError(message);
  const clean = new Error(message);
  clean.name = err.name;
  return clean;
}
