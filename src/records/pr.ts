// What Errand last heard from the forge about a job's pull request, declared once: the job
// record's `pr` (src/records/job.ts), the jobs.pr column (migration 0029) and the typed client's
// type come from this schema. The pull request watch (src/features/pr-watch/) writes it each time
// it looks; GET of a job answers it without calling the forge.
import { z } from 'zod';
import type { StoredPr } from '../db/schema.ts';

const isoTime = z.iso.datetime({ offset: true });

/** How a check ended, or that it has not (src/forges/types.ts's CheckState). */
const CHECK_STATES = Object.freeze(['pending', 'success', 'failure'] as const);

/** What the watch does with the pull request (pr_watches.state). */
const WATCH_STATES = Object.freeze(['watching', 'paused', 'ended'] as const);

export const prRecord = z
  .object({
    number: z.number().int().describe('The pull request number (GitLab: merge request iid).'),
    url: z.string().describe('The pull request page.'),
    state: z.enum(['open', 'closed', 'merged']),
    mergedAt: isoTime.nullable().describe('When it was merged; null when it is not.'),
    headSha: z.string().describe('The commit its head branch was at.'),
    mergeable: z
      .boolean()
      .nullable()
      .describe(
        'Whether it merges into its base without conflicts; null while the forge works it out.',
      ),
    approved: z.boolean().describe("Whether the forge's approval rules were met."),
    checks: z
      .array(
        z.object({
          name: z.string(),
          state: z.enum(CHECK_STATES),
          url: z.string().nullable(),
        }),
      )
      .describe(
        "The checks of its head commit that the project's autofixChecks select, at their latest run.",
      ),
    watch: z
      .object({
        state: z
          .enum(WATCH_STATES)
          .describe(
            'watching: Errand fixes failing checks and conflicts and merges when the project allows; paused: it only follows the pull request (see reason); ended: merged, closed or archived.',
          ),
        reason: z.string().nullable().describe('Why the watch is paused or ended; null otherwise.'),
        autofixes: z
          .number()
          .int()
          .min(0)
          .describe('Turns queued in a row to fix failing checks; a green run resets it.'),
      })
      .describe("What Errand's pull request watch does with it."),
    observedAt: isoTime.describe('When Errand last asked the forge.'),
  })
  .describe("The job's pull request as its forge last described it to Errand.");

export type PrRecord = z.infer<typeof prRecord>;

// The column's type (src/db/schema.ts) is this schema's shape, both ways: a row's pr is sent as
// it is (src/jobs/record.ts), and a record is stored as it is (the watch).
prRecord satisfies z.ZodType<StoredPr>;
