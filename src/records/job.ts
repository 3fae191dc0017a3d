// The job record as the API returns it, declared once: the server's type (JobRecord), the
// OpenAPI component AgentJob and, through the document, the typed client's Job all come from
// this schema. Every field of the seed interface first, Errand's own after them.
import { z } from 'zod';
import type { JobRow, TurnMode } from '../db/schema.ts';
import { actorRecord } from './actor.ts';
import { attemptRecord } from './attempt.ts';
import { prRecord } from './pr.ts';

/** Every status a job can have, in the order of its life. The one list. */
export const JOB_STATUSES = Object.freeze(['active', 'completed', 'failed', 'archived'] as const);

// The database's column holds the same four (src/db/schema.ts); a status the column has and
// the list has not fails to compile where a row becomes a record (src/jobs/record.ts).
JOB_STATUSES satisfies readonly JobRow['status'][];

/**
 * What a turn may do, the one list (docs/modes.md): `code` changes the repository and opens the
 * pull request; `ask` answers without changing anything; `plan` writes a plan and waits for
 * its approval.
 */
export const JOB_MODES = Object.freeze(['code', 'ask', 'plan'] as const);

JOB_MODES satisfies readonly TurnMode[];

export type JobMode = (typeof JOB_MODES)[number];

const isoTime = z.iso.datetime();

const tokenCount = (what: string) => z.number().int().min(0).describe(what);

/**
 * What model calls used and cost (src/jobs/usage.ts). Inline in the job record: the document
 * keeps to the published one's components.
 */
export const usageRecord = z
  .object({
    inputTokens: tokenCount('Input tokens, cached ones included.'),
    outputTokens: tokenCount('Output tokens.'),
    cacheReadTokens: tokenCount(
      "Of the input tokens, those read from the provider's prompt cache.",
    ),
    cacheWriteTokens: tokenCount(
      "Of the input tokens, those written to the provider's prompt cache.",
    ),
    costUsd: z
      .number()
      .nullable()
      .describe(
        "An estimate in US dollars from the model's list prices (cache reads and writes at their own prices); null when a price of the model is unknown, never a guess.",
      ),
  })
  .describe('Tokens used by model calls, and their estimated cost.');

export const jobRecord = z
  .object({
    id: z.string().describe('The job id (job_ and 20 characters).'),
    status: z
      .enum(JOB_STATUSES)
      .describe(
        'active: a turn is queued or running; completed: the last turn finished; failed: it failed (see error); archived: terminal.',
      ),
    /**
     * The published interface's source: `ref` is the branch the agent works on (the job's work
     * branch); `baseRef`, Errand's own, the ref the job started from.
     */
    source: z.object({
      repository: z
        .string()
        .describe(
          "The project's repository when the job was created, as a URL (file:// for a local repository, ssh:// for an scp-like address).",
        ),
      ref: z.string().describe('Git branch the agent is working on (the work branch, as branch).'),
      baseRef: z.string().describe('The branch, tag or commit the job started from.'),
    }),
    model: z.string().describe('The model the job runs on (provider:model).'),
    prLink: z
      .string()
      .nullable()
      .describe(
        "The pull request once one exists; it stays set afterwards. On a plain git remote, Errand's review page: its link carries the token that opens the page without a key (until the job is archived), so share it only with the job's readers.",
      ),
    createdAt: isoTime,
    archivedAt: isoTime.nullable(),
    projectId: z.string(),
    branch: z.string().describe('The work branch the agent commits to.'),
    error: z.string().nullable().describe('Why the last turn failed, when it did.'),
    turns: z.number().int().describe('How many prompts the job has received.'),
    usage: usageRecord.describe(
      "What the job's turns used of the model, summed; costUsd is null when any turn's is.",
    ),
    origin: z
      .object({
        forge: z.enum(['github', 'gitlab', 'gitea']),
        number: z.number().int().describe('The issue number (GitLab: its iid).'),
        url: z.string().describe("The issue's page."),
        title: z.string().describe("The issue's title when the job was made."),
      })
      .nullable()
      .optional()
      .describe(
        'The forge issue the job was made from (a labelled issue, or a mention in one); null for jobs made otherwise.',
      ),
    createdBy: actorRecord
      .nullable()
      .optional()
      .describe(
        'Who created the job: a user, an API key, or a forge user through the forge webhook; null for jobs made before Errand recorded it.',
      ),
    updatedAt: isoTime,
    pr: prRecord
      .nullable()
      .optional()
      .describe(
        "What the forge last said of the job's pull request (state, head, checks) and what Errand's pull request watch does with it; null before Errand first looked, and on a plain git remote.",
      ),
    mode: z
      .enum(JOB_MODES)
      .optional()
      .describe(
        'The mode of the last turn: code (changes the repository and opens the pull request), ask (answers, read-only) or plan (writes a plan, read-only, and waits for approval).',
      ),
    summary: z
      .string()
      .nullable()
      .optional()
      .describe(
        "The last finished turn's summary: what a code turn did, an ask turn's answer, a plan turn's plan; null before a turn finished.",
      ),
    awaitingApproval: z
      .boolean()
      .optional()
      .describe(
        'The last turn was a plan and it finished: a message "approve", or any follow-up in code mode, carries it out on the same branch.',
      ),
    output: z
      .unknown()
      .optional()
      .describe(
        'The value the last finished turn that was given an outputSchema produced, valid against that schema; null before one finished.',
      ),
    attempts: z
      .array(attemptRecord)
      .nullable()
      .optional()
      .describe(
        "Every attempt of the job's last best-of-N turn (create's `attempts`, docs/eval.md), the winner marked; null for a job that made none.",
      ),
    evalRunId: z
      .string()
      .nullable()
      .optional()
      .describe(
        "The eval run this job is a task of (docs/eval.md); null for the project's own work.",
      ),
  })
  .meta({ id: 'AgentJob', description: 'An agent job.' });

/** The job as the API returns it: null where there is no value, dates in ISO 8601 UTC. */
export type JobRecord = z.infer<typeof jobRecord>;
