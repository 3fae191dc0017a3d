// GitHub's webhook requests (github.com and GitHub Enterprise Server alike): signed with
// X-Hub-Signature-256, named by X-GitHub-Event, identified by X-GitHub-Delivery. Errand reads
// four events: a comment on an issue or a pull request's conversation (`issue_comment`), a
// comment on a line of a pull request (`pull_request_review_comment`), a review's body
// (`pull_request_review`) and a label added to an issue (`issues` labeled); a `push`, for
// whether the project's base ref moved; and, for the pull request watch, what changed about a
// commit's checks (`check_run`, `check_suite`, `workflow_run`, `status`) or a pull request
// (`pull_request`, `pull_request_review`).
import { z } from 'zod';
import type { ForgeActor, ForgeEvent, ForgeSignal } from '../../../forges/events.ts';
import {
  deliveryIdOf,
  equalSecret,
  eventKey,
  header,
  hmacSha256Hex,
  MalformedPayloadError,
  type PayloadReader,
  parsePayload,
  type RequestHeaders,
  webPush,
  webThread,
  webThreadFields,
} from './shared.ts';

// Only the fields Errand reads; GitHub's payloads carry many more.
const userSchema = z.object({ login: z.string(), id: z.number(), type: z.string() });
const repositorySchema = z.object({ html_url: z.string() });
const issueSchema = z.object({
  ...webThreadFields,
  // Present, with the pull request's URLs, when the issue is a pull request.
  pull_request: z.object({}).passthrough().nullable().optional(),
});
const pullSchema = z.object(webThreadFields);

const issueCommentSchema = z.object({
  action: z.string(),
  issue: issueSchema,
  comment: z.object({ id: z.number(), body: z.string(), html_url: z.string(), user: userSchema }),
  repository: repositorySchema,
});
const reviewCommentSchema = z.object({
  action: z.string(),
  pull_request: pullSchema,
  comment: z.object({
    id: z.number(),
    body: z.string(),
    html_url: z.string(),
    user: userSchema,
    path: z.string(),
    // `line` is null when the comment is outdated; `original_line` is where it was written.
    line: z.number().int().nullable().optional(),
    original_line: z.number().int().nullable().optional(),
    diff_hunk: z.string().nullable().optional(),
  }),
  repository: repositorySchema,
});
const reviewSchema = z.object({
  action: z.string(),
  pull_request: pullSchema,
  review: z.object({
    id: z.number(),
    body: z.string().nullable(),
    html_url: z.string(),
    user: userSchema,
  }),
  repository: repositorySchema,
});
const issuesSchema = z.object({
  action: z.string(),
  // The issue's id and its time of change name a labelling: adding the label again later is
  // another event, the same request sent again is not.
  issue: issueSchema.extend({ id: z.number(), updated_at: z.string() }),
  label: z.object({ name: z.string() }).optional(),
  sender: userSchema,
  repository: repositorySchema,
});

// What the pull request watch reads: which commit, branches and pull requests a check or a
// change names. The states are the API's to say, so none is read here.
const pullRefSchema = z.object({ number: z.number().int().positive() });
const checkTarget = {
  head_sha: z.string(),
  // Null when the commit is on no branch of the repository (a fork's).
  head_branch: z.string().nullable().optional(),
  // The repository's own open pull requests with this head; empty for a fork's.
  pull_requests: z.array(pullRefSchema),
};
const checkRunSchema = z.object({
  action: z.string(),
  check_run: z.object({
    head_sha: z.string(),
    check_suite: z.object({ head_branch: z.string().nullable().optional() }).optional(),
    pull_requests: z.array(pullRefSchema),
  }),
  repository: repositorySchema,
});
const checkSuiteSchema = z.object({
  action: z.string(),
  check_suite: z.object(checkTarget),
  repository: repositorySchema,
});
const workflowRunSchema = z.object({
  action: z.string(),
  workflow_run: z.object(checkTarget),
  repository: repositorySchema,
});
const statusSchema = z.object({
  sha: z.string(),
  // Up to ten branches that contain the commit, not necessarily at their head.
  branches: z.array(z.object({ name: z.string() })),
  repository: repositorySchema,
});
const pullChangeSchema = z.object({
  action: z.string(),
  pull_request: z.object({
    number: z.number().int().positive(),
    head: z.object({ ref: z.string(), sha: z.string() }),
  }),
  repository: repositorySchema,
});
/** The pull request actions that can change what the watch decides. */
const PULL_ACTIONS: ReadonlySet<string> = new Set([
  'closed',
  'reopened',
  'synchronize',
  'labeled',
  'unlabeled',
]);
/** A review submitted, or dismissed (which withdraws an approval or a change request). */
const REVIEW_ACTIONS: ReadonlySet<string> = new Set(['submitted', 'dismissed']);

function actor(user: z.infer<typeof userSchema>): ForgeActor {
  return { login: user.login, id: String(user.id), bot: user.type === 'Bot' };
}

function read(headers: RequestHeaders, body: unknown): ForgeEvent[] {
  const event = header(headers, 'x-github-event');
  const base = {
    forge: 'github' as const,
    deliveryId: deliveryIdOf(headers, ['x-github-delivery'], body),
  };
  switch (event) {
    case 'issue_comment': {
      const p = parsePayload(issueCommentSchema, body, event);
      if (p.action !== 'created') return [];
      const kind = p.issue.pull_request ? 'pull-request' : 'issue';
      return [
        {
          ...base,
          key: eventKey('github', 'issue-comment', p.comment.id),
          type: 'comment',
          where: 'conversation',
          repositoryUrl: p.repository.html_url,
          author: actor(p.comment.user),
          thread: webThread(kind, p.issue),
          commentId: String(p.comment.id),
          discussionId: null,
          body: p.comment.body,
          url: p.comment.html_url,
          anchor: null,
        },
      ];
    }
    case 'pull_request_review_comment': {
      const p = parsePayload(reviewCommentSchema, body, event);
      if (p.action !== 'created') return [];
      const c = p.comment;
      return [
        {
          ...base,
          key: eventKey('github', 'review-comment', c.id),
          type: 'comment',
          where: 'line',
          repositoryUrl: p.repository.html_url,
          author: actor(c.user),
          thread: webThread('pull-request', p.pull_request),
          commentId: String(c.id),
          discussionId: null,
          body: c.body,
          url: c.html_url,
          anchor: {
            path: c.path,
            line: c.line ?? c.original_line ?? null,
            diffHunk: c.diff_hunk ?? '',
          },
        },
      ];
    }
    case 'pull_request_review': {
      const p = parsePayload(reviewSchema, body, event);
      // A review without a body (an approval, or line comments only) says nothing to read here:
      // its line comments come as requests of their own.
      if (p.action !== 'submitted' || !p.review.body) return [];
      return [
        {
          ...base,
          key: eventKey('github', 'review', p.review.id),
          type: 'comment',
          where: 'review',
          repositoryUrl: p.repository.html_url,
          author: actor(p.review.user),
          thread: webThread('pull-request', p.pull_request),
          commentId: String(p.review.id),
          discussionId: null,
          body: p.review.body,
          url: p.review.html_url,
          anchor: null,
        },
      ];
    }
    case 'issues': {
      const p = parsePayload(issuesSchema, body, event);
      if (p.action !== 'labeled') return [];
      if (!p.label)
        throw new MalformedPayloadError(
          'the issues delivery is not what the forge sends: label: an issue labeled names its label',
        );
      return [
        {
          ...base,
          key: eventKey('github', 'label', p.issue.id, p.label.name, p.issue.updated_at),
          type: 'labeled',
          repositoryUrl: p.repository.html_url,
          author: actor(p.sender),
          thread: webThread(p.issue.pull_request ? 'pull-request' : 'issue', p.issue),
          label: p.label.name,
          added: true,
        },
      ];
    }
    default:
      // `ping` when the webhook is made, and every event Errand does not read.
      return [];
  }
}

function readSignal(headers: RequestHeaders, body: unknown): ForgeSignal | null {
  const event = header(headers, 'x-github-event');
  const base = {
    forge: 'github' as const,
    deliveryId: deliveryIdOf(headers, ['x-github-delivery'], body),
  };
  const checks = (
    repositoryUrl: string,
    sha: string,
    branches: (string | null | undefined)[],
    pulls: { number: number }[],
  ): ForgeSignal => ({
    ...base,
    repositoryUrl,
    kind: 'checks',
    numbers: [...new Set(pulls.map((pull) => pull.number))],
    branches: [...new Set(branches.filter((branch): branch is string => Boolean(branch)))],
    sha,
  });
  switch (event) {
    // Every action: a check created, requested or completed is for the watch to look at; it
    // asks the API what holds.
    case 'check_run': {
      const p = parsePayload(checkRunSchema, body, event);
      const run = p.check_run;
      return checks(
        p.repository.html_url,
        run.head_sha,
        [run.check_suite?.head_branch],
        run.pull_requests,
      );
    }
    case 'check_suite': {
      const p = parsePayload(checkSuiteSchema, body, event);
      const suite = p.check_suite;
      return checks(
        p.repository.html_url,
        suite.head_sha,
        [suite.head_branch],
        suite.pull_requests,
      );
    }
    case 'workflow_run': {
      const p = parsePayload(workflowRunSchema, body, event);
      const run = p.workflow_run;
      return checks(p.repository.html_url, run.head_sha, [run.head_branch], run.pull_requests);
    }
    case 'status': {
      const p = parsePayload(statusSchema, body, event);
      return checks(
        p.repository.html_url,
        p.sha,
        p.branches.map((branch) => branch.name),
        [],
      );
    }
    case 'pull_request':
    case 'pull_request_review': {
      const p = parsePayload(pullChangeSchema, body, event);
      const actions = event === 'pull_request' ? PULL_ACTIONS : REVIEW_ACTIONS;
      if (!actions.has(p.action)) return null;
      return {
        ...base,
        repositoryUrl: p.repository.html_url,
        kind: 'pull-request',
        numbers: [p.pull_request.number],
        branches: [p.pull_request.head.ref],
        sha: p.pull_request.head.sha,
      };
    }
    default:
      return null;
  }
}

export const githubPayloads: PayloadReader = {
  webhookEvents: [
    'Check runs',
    'Check suites',
    'Issue comments',
    'Issues',
    'Pull request review comments',
    'Pull request reviews',
    'Pull requests',
    'Pushes',
    'Statuses',
    'Workflow runs',
  ],
  verifySignature(headers, body, secret) {
    const signature = header(headers, 'x-hub-signature-256');
    if (!signature.startsWith('sha256=')) return false;
    return equalSecret(
      signature.slice('sha256='.length).toLowerCase(),
      hmacSha256Hex(secret, body),
    );
  },
  readEvents: read,
  readSignal,
  readPush(headers, body) {
    if (header(headers, 'x-github-event') !== 'push') return null;
    return webPush(
      { forge: 'github', deliveryId: deliveryIdOf(headers, ['x-github-delivery'], body) },
      body,
    );
  },
};
