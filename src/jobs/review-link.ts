// The link to a job's review page (GET /review/{jobId}) and the capability in it: the job's
// review token (jobs.review_token, random, made by the database: migration 0019). The link with
// the token opens the page without a key until the job is archived; the bare link needs a
// signed-in dashboard session. Only the bare link may be shown where others read (a forge).
import { createHash, timingSafeEqual } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';

/** The query parameter that carries the token. */
export const REVIEW_TOKEN_PARAM = 'token';

/** The review page's link for people signed in to the dashboard: it opens nothing by itself. */
export function bareReviewLink(publicUrl: string, jobId: string): string {
  return `${publicUrl}/review/${encodeURIComponent(jobId)}`;
}

/** The job's review link that opens the page by itself: the job's `prLink` on a plain remote. */
export function reviewLink(publicUrl: string, jobId: string, token: string): string {
  return `${bareReviewLink(publicUrl, jobId)}?${REVIEW_TOKEN_PARAM}=${encodeURIComponent(token)}`;
}

/**
 * A link as it may be shown where people other than the job's own read it: without the review
 * token. Any other link (a pull request's URL) is returned as it is.
 */
export function withoutReviewToken(link: string): string {
  let url: URL;
  try {
    url = new URL(link);
  } catch {
    // Not a URL Errand made: whatever query it has goes, and a token with it.
    return link.split('?')[0] ?? link;
  }
  if (!url.searchParams.has(REVIEW_TOKEN_PARAM)) return link;
  url.searchParams.delete(REVIEW_TOKEN_PARAM);
  return url.toString();
}

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * Whether `given` is the job's token. Compared in constant time, as digests of one length, so
 * the time of a refusal tells nothing of how much of a guess was right.
 */
export function reviewTokenMatches(given: string | undefined, token: string): boolean {
  // Compared even without one, so a request without a token takes the time of a wrong one.
  const matches = timingSafeEqual(digest(given ?? ''), digest(token));
  return given !== undefined && given !== '' && matches;
}

/**
 * Gives the review links stored as `prLink` without their job's token (handed out before
 * migration 0019, or brought by an export made then) the token, as that migration did: a pull
 * request's URL (pr_number set) is left alone. Returns how many were given one.
 */
export async function tokenBareReviewLinks(db: Db): Promise<number> {
  const result = await sql`
    UPDATE jobs SET pr_link = pr_link || '?token=' || review_token
    WHERE pr_number IS NULL
      AND right(pr_link, char_length('/review/' || id)) = '/review/' || id`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
